/**
 * Trace correlation (`logger.ts`): reading W3C and Cloud Trace headers. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { traceFields } from '../../src/function/logger.ts';

describe('traceFields', () => {
  it('reads W3C traceparent', () => {
    assert.deepEqual(
      traceFields({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
      {
        trace_id: '0af7651916cd43dd8448eb211c80319c',
        span_id: 'b7ad6b7169203331',
        trace_flags: '01',
      },
    );
  });

  it('reads X-Cloud-Trace-Context, converting the decimal span id to hex', () => {
    assert.deepEqual(
      traceFields({ 'x-cloud-trace-context': '105445aa7843bc8bf206b12000100000/1;o=1' }),
      {
        trace_id: '105445aa7843bc8bf206b12000100000',
        span_id: '0000000000000001',
        trace_flags: '01',
      },
    );
  });

  it('ignores malformed trace headers', () => {
    assert.deepEqual(traceFields({ traceparent: 'garbage', 'x-cloud-trace-context': 'nope' }), {});
  });
});
