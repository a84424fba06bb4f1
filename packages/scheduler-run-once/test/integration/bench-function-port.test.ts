/**
 * The bench's function processes answer their deliveries themselves. The bench's cold starts once
 * failed now and then with "hello world: first delivery got 404": the port was picked free in the
 * bench's process and closed, another process's server bound it before the function did, the
 * function died of EADDRINUSE, and polling the port found the other server, whose 404 answered the
 * first delivery. Here that race is forced: while the bench starts a function, a port any server
 * of this process gives up is bound at once by a server that answers 404.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { deliver, startFunction } from '../../bench/over-http.ts';

/** What the other process's server answers, whatever is asked. */
const NOT_FOUND = 404;
const START_TIMEOUT_MS = 30_000;

/** A server on 127.0.0.1:`port` that answers every request 404; resolves once it listens. */
function holdPort(port: number): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(NOT_FOUND).end('not the function');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/**
 * Until the returned function is called, each server of this process that closes hands its port
 * to a {@link holdPort} server before its `close` callback runs: the worst timing of another
 * process taking a freed port.
 */
function takeEveryFreedPort(thieves: Server[]): () => void {
  const close = net.Server.prototype.close;
  net.Server.prototype.close = function closeAndTake(
    this: net.Server,
    callback?: (err?: Error) => void,
  ) {
    const address = this.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const taken = (err?: Error) => {
      holdPort(port).then(
        (thief) => {
          thieves.push(thief);
          callback?.(err);
        },
        () => callback?.(err),
      );
    };
    return close.call(this, port === 0 ? callback : taken);
  } as typeof close;
  return () => {
    net.Server.prototype.close = close;
  };
}

describe("the bench's function processes", () => {
  const thieves: Server[] = [];
  after(() => {
    for (const thief of thieves) {
      thief.close();
    }
  });

  it('answer their first delivery themselves when a freed port is taken at once by another server', async () => {
    const restore = takeEveryFreedPort(thieves);
    let fn: Awaited<ReturnType<typeof startFunction>> | undefined;
    try {
      fn = await startFunction(
        'hello',
        'bench/fixtures/hello.js',
        {},
        START_TIMEOUT_MS,
      );
    } finally {
      restore();
    }
    try {
      const answer = await deliver(fn.url);

      assert.deepEqual(
        [answer.status, answer.outcome],
        [200, 'hello'],
        `${fn.url}: ${fn.output()}`,
      );
    } finally {
      await fn.stop();
    }
  });
});
