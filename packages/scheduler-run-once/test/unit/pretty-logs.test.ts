/**
 * `npm run dev`'s readable log lines (`src/dev/pretty-logs.ts`): the function's production JSON,
 * as `src/logger.ts` writes it, in and one readable line out. In-process, no emulator.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { colorWanted, prettyLogLines } from '../../src/dev/pretty-logs.ts';
import { createLogger } from '../../src/function/logger.ts';

/** The JSON line the function's logger writes for `log(logger)`. */
function productionLine(
  log: (logger: ReturnType<typeof createLogger>) => void,
): string {
  let text = '';
  const sink = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  log(
    createLogger(
      { logLevel: 'info', projectId: 'demo', serviceName: 'scheduled-job' },
      sink,
    ),
  );
  return text.trim();
}

describe('prettyLogLines', () => {
  it("turns a production line into time, level, message and the line's own fields", () => {
    const line = productionLine((logger) =>
      logger.info(
        { outcome: 'processed', runId: 'r1' },
        'scheduled run: processed',
      ),
    );
    const pretty = prettyLogLines({ colorize: false });

    const shown = pretty(line);

    assert.match(
      shown,
      /^\d\d:\d\d:\d\d\.\d{3}Z INFO: scheduled run: processed \{"outcome":"processed","runId":"r1"\}\n$/,
    );
    assert.doesNotMatch(shown, /insertId|serviceContext|severity|hostname/);
  });

  it('shortens run, attempt and trigger ids to 8 characters, at any depth; the JSON keeps them', () => {
    const runId = 'a'.repeat(64);
    const attemptId = '0f8fad5b-d9cb-469f-a165-70867728950e';
    const line = productionLine((logger) =>
      logger.info(
        {
          runId,
          attemptId,
          lease: { heldBy: attemptId },
          jobName: 'a-long-job-name-kept',
        },
        'scheduled run: processed',
      ),
    );

    const shown = prettyLogLines({ colorize: false })(line);

    assert.ok(line.includes(runId) && line.includes(attemptId));
    assert.match(
      shown,
      /\{"runId":"aaaaaaaa…","attemptId":"0f8fad5b…","lease":\{"heldBy":"0f8fad5b…"\},"jobName":"a-long-job-name-kept"\}/,
    );
  });

  it('shows an error with its stack on lines of their own', () => {
    const line = productionLine((logger) =>
      logger.error({ err: new Error('boom') }, 'failed'),
    );

    const shown = prettyLogLines({ colorize: false })(line);

    assert.match(shown, /ERROR: failed/);
    assert.match(shown, /\n\s+Error: boom\n\s+at /);
  });

  it('passes other output through unchanged', () => {
    const shown = prettyLogLines({ colorize: false })('Serving function...');

    assert.equal(shown, 'Serving function...\n');
  });
});

describe('colorWanted', () => {
  it('colours a terminal, not a pipe, unless NO_COLOR or FORCE_COLOR says otherwise', () => {
    assert.equal(colorWanted(true, {}), true);
    assert.equal(colorWanted(false, {}), false);
    assert.equal(colorWanted(true, { NO_COLOR: '1' }), false);
    assert.equal(colorWanted(true, { NO_COLOR: '' }), true);
    assert.equal(colorWanted(false, { FORCE_COLOR: '1' }), true);
    assert.equal(colorWanted(false, { FORCE_COLOR: '0' }), false);
    assert.equal(colorWanted(true, { FORCE_COLOR: '1', NO_COLOR: '1' }), true);
  });
});
