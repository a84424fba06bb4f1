/**
 * `freePort` (src/dev/local-processes.ts) picks below the range Linux gives outgoing connections,
 * where no outgoing connection can take the port between the pick and the listen.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { freePort } from '../../src/dev/local-processes.ts';

const RANGE_FILE = '/proc/sys/net/ipv4/ip_local_port_range';

/** Resolves once a server listens on `port` of 127.0.0.1, and closes it. */
function listens(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });
}

describe('freePort', () => {
  it('answers ports outside the range of outgoing connections, each one that can be listened on', {
    skip: !existsSync(RANGE_FILE) && 'no ip_local_port_range (not Linux)',
  }, async () => {
    const rangeStart = Number(readFileSync(RANGE_FILE, 'utf8').split(/\s+/)[0]);
    const ports = await Promise.all(
      Array.from({ length: 10 }, () => freePort()),
    );

    for (const port of ports) {
      assert.ok(port >= 10_000 && port < rangeStart, `${port}`);
      await listens(port);
    }
  });
});
