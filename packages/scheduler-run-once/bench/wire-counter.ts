/**
 * Counts Firestore round trips on the wire: an HTTP/2 (h2c) proxy in front of the emulator that
 * forwards and counts every gRPC call, so the counts come from real calls, retries included. gRPC
 * only (the client's default transport), not `preferRest`. Forwarding adds well under 1 ms per call
 * to the figures measured through it (storms); the latency figures use the emulator directly.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

/** A running proxy. */
export interface WireCounter {
  /** `host:port`, to use as `FIRESTORE_EMULATOR_HOST`. */
  readonly host: string;
  /** Calls forwarded since the last reset. */
  calls(): number;
  reset(): void;
  close(): void;
}

/** Starts the proxy in front of `upstream` (the emulator's `host:port`) on 127.0.0.1. */
export async function startWireCounter(upstream: string): Promise<WireCounter> {
  const { NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR, NGHTTP2_FLAG_END_STREAM } =
    http2.constants;
  let calls = 0;
  const upstreams = new WeakMap<http2.Http2Session, http2.ClientHttp2Session>();
  const server = http2.createServer();
  server.on('session', (down) => {
    const up = http2.connect(`http://${upstream}`);
    up.on('error', () => down.destroy());
    down.on('close', () => up.close());
    down.on('error', () => up.destroy());
    upstreams.set(down, up);
  });
  server.on('stream', (down, headers) => {
    calls++;
    const session = upstreams.get(down.session as http2.Http2Session);
    if (session === undefined) {
      return down.close(NGHTTP2_INTERNAL_ERROR);
    }
    const { ':authority': _a, ':scheme': _s, ...forward } = headers;
    const up = session.request(forward);
    let trailers: http2.IncomingHttpHeaders | undefined;
    up.on('response', (responseHeaders, flags) => {
      if (down.closed) {
        return;
      }
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
    down.on('wantTrailers', () =>
      trailers ? down.sendTrailers(trailers) : down.close(),
    );
    up.on('error', () => down.closed || down.close(NGHTTP2_INTERNAL_ERROR));
    down.on('error', () => undefined);
    down.on('close', () => up.closed || up.close(NGHTTP2_CANCEL));
    down.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls: () => calls,
    reset: () => {
      calls = 0;
    },
    close: () => {
      server.close();
    },
  };
}
