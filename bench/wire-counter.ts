/**
 * Counts Firestore round trips on the wire: a tiny HTTP/2 (h2c) proxy in front of the emulator that
 * forwards every gRPC call and counts it by method (`:path`). A client pointed at the proxy makes
 * exactly the calls it would make to the emulator, so the counts come from real calls, not from
 * reading the code.
 *
 * The proxy runs in a worker thread, so forwarding does not compete with the measured client for
 * its event loop. It speaks gRPC's transport only (HTTP/2 with prior knowledge), which is the
 * Firestore client's default; the REST transport (`preferRest`) is not counted here.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

/** Calls seen since the last reset, by gRPC method (`Commit`, `BatchGetDocuments`, …). */
export type WireCounts = Readonly<Record<string, number>>;

/** A running proxy. */
export interface WireCounter {
  /** `host:port` to use as `FIRESTORE_EMULATOR_HOST`. */
  readonly host: string;
  /** Calls since the last reset, by method, and their total. */
  counts(): Promise<{ total: number; byMethod: WireCounts }>;
  /** Zeroes the counts. */
  reset(): Promise<void>;
  /** Stops the proxy and its worker. */
  close(): Promise<void>;
}

type Request = { id: number; op: 'counts' | 'reset' };
type Reply = { id: number; byMethod?: WireCounts };

/**
 * Starts the proxy in front of `upstream` (`host:port` of the emulator) on 127.0.0.1.
 */
export async function startWireCounter(upstream: string): Promise<WireCounter> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { wireCounter: upstream } });
  const host = await new Promise<string>((resolve, reject) => {
    worker.once('message', (m: { host: string }) => resolve(m.host));
    worker.once('error', reject);
  });
  let nextId = 0;
  const pending = new Map<number, (reply: Reply) => void>();
  worker.on('message', (reply: Reply) => {
    pending.get(reply.id)?.(reply);
    pending.delete(reply.id);
  });
  const ask = (op: Request['op']) =>
    new Promise<Reply>((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      worker.postMessage({ id, op } satisfies Request);
    });
  return {
    host,
    async counts() {
      const byMethod = (await ask('counts')).byMethod ?? {};
      return { total: Object.values(byMethod).reduce((a, b) => a + b, 0), byMethod };
    },
    async reset() {
      await ask('reset');
    },
    async close() {
      await worker.terminate();
    },
  };
}

/** The proxy itself, in the worker: one upstream HTTP/2 session per downstream session. */
function serveProxy(upstream: string): void {
  const { NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR, NGHTTP2_FLAG_END_STREAM } = http2.constants;
  let counts: Record<string, number> = {};
  const upstreams = new WeakMap<http2.ServerHttp2Session, http2.ClientHttp2Session>();
  const server = http2.createServer();
  server.on('session', (down) => {
    const up = http2.connect(`http://${upstream}`);
    up.on('error', () => down.destroy());
    down.on('close', () => up.close());
    down.on('error', () => up.destroy());
    upstreams.set(down, up);
  });
  server.on('stream', (down, headers) => {
    const path = String(headers[':path'] ?? '?');
    const method = path.slice(path.lastIndexOf('/') + 1);
    counts[method] = (counts[method] ?? 0) + 1;
    const session = upstreams.get(down.session as http2.ServerHttp2Session);
    if (session === undefined) return down.close(NGHTTP2_INTERNAL_ERROR);
    const { ':authority': _a, ':scheme': _s, ...forward } = headers;
    const up = session.request(forward);
    let trailers: http2.IncomingHttpHeaders | undefined;
    up.on('response', (responseHeaders, flags) => {
      if (down.closed) return;
      // gRPC "trailers-only" answers (most errors) end the stream in their first HEADERS frame.
      if ((flags & NGHTTP2_FLAG_END_STREAM) !== 0) {
        down.respond(responseHeaders, { endStream: true });
        return;
      }
      down.respond(responseHeaders, { waitForTrailers: true });
      up.pipe(down);
    });
    up.on('trailers', (t) => {
      trailers = t;
    });
    down.on('wantTrailers', () => {
      if (trailers === undefined) down.close();
      else down.sendTrailers(trailers);
    });
    up.on('error', () => {
      if (!down.closed) down.close(NGHTTP2_INTERNAL_ERROR);
    });
    down.on('error', () => undefined);
    down.on('close', () => {
      if (!up.closed) up.close(NGHTTP2_CANCEL);
    });
    down.pipe(up);
  });
  parentPort?.on('message', (request: Request) => {
    if (request.op === 'reset') counts = {};
    parentPort?.postMessage({ id: request.id, byMethod: { ...counts } } satisfies Reply);
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    parentPort?.postMessage({ host: `127.0.0.1:${port}` });
  });
}

if (!isMainThread && typeof workerData?.wireCounter === 'string')
  serveProxy(workerData.wireCounter);
