/**
 * A stand-in for Google's token service, for development only: an RSA key made at start, ID tokens
 * signed with it, shaped like the ones Cloud Scheduler attaches to an HTTP target's request
 * (`--oidc-service-account-email`, `--oidc-token-audience`), and its public certificate served on
 * 127.0.0.1 in the format of Google's certificate endpoint (`{ "<kid>": "<PEM>" }`). A function
 * started with `AUTH_MODE=verify-oidc` and `OIDC_CERTS_URL` set to {@link OidcIssuer.certsUrl}
 * verifies these tokens with google-auth-library, exactly as it verifies Google's.
 *
 * The certificates are served without `Cache-Control`: google-auth-library then keeps no copy
 * (`getFederatedSignonCertsAsync` caches only for a `max-age`), so a function started before a
 * restarted Scheduler with a new key still verifies its tokens.
 */
import {
  generateKeyPairSync,
  type KeyObject,
  randomUUID,
  sign,
} from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TOKEN_PATH } from '../function/catch-up-delivery.ts';

/** Google's issuer, the one google-auth-library accepts by default. */
export const GOOGLE_ISSUER = 'https://accounts.google.com';
/** How long a token is valid, s: Google's ID tokens last an hour. */
const TOKEN_LIFETIME_S = 3600;

/** A running local issuer. */
export interface OidcIssuer {
  /** `http://127.0.0.1:PORT/certs`: the value of the function's `OIDC_CERTS_URL`. */
  readonly certsUrl: string;
  /**
   * Signs an ID token for `audience` as the service account `email`, issued at `nowMs` (ms since the
   * epoch) and valid for an hour.
   */
  token(audience: string, email: string, nowMs?: number): string;
  /** Stops serving the certificates. */
  close(): Promise<void>;
}

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** An RS256 JWT with the claims of a Google-signed service-account ID token. */
function signToken(
  key: KeyObject,
  kid: string,
  claims: { audience: string; email: string; nowMs: number },
): string {
  const iat = Math.floor(claims.nowMs / 1000);
  const header = base64url({ alg: 'RS256', kid, typ: 'JWT' });
  const payload = base64url({
    iss: GOOGLE_ISSUER,
    aud: claims.audience,
    azp: claims.email,
    sub: claims.email,
    email: claims.email,
    email_verified: true,
    iat,
    exp: iat + TOKEN_LIFETIME_S,
  });
  const signature = sign(
    'RSA-SHA256',
    Buffer.from(`${header}.${payload}`),
    key,
  );
  return `${header}.${payload}.${signature.toString('base64url')}`;
}

/**
 * Answers `GET /token?audience=A&email=E` ({@link TOKEN_PATH}) with an ID token (text), as the metadata server's
 * identity endpoint gives a deployed function one: the run audit's catch-up delivery under
 * `npm run dev` with `AUTH_MODE=verify-oidc` (`function/catch-up-delivery.ts`). 400 without both.
 */
function answerTokenRequest(
  url: URL,
  res: ServerResponse,
  mint: (audience: string, email: string) => string,
): void {
  const audience = url.searchParams.get('audience') ?? '';
  const email = url.searchParams.get('email') ?? '';
  if (audience === '' || email === '') {
    res.statusCode = 400;
    res.end('GET /token needs ?audience=…&email=…');
    return;
  }
  res.setHeader('Content-Type', 'text/plain');
  res.end(mint(audience, email));
}

/**
 * Makes a key and serves its certificate on 127.0.0.1 (and, at {@link TOKEN_PATH}, tokens signed
 * with it: whoever serves the certificates can mint tokens anyway, and it listens on loopback only).
 *
 * @param port - the port to listen on; 0 (the default) picks a free one.
 * @throws if the port cannot be listened on (e.g. `EADDRINUSE`).
 * @example
 * const issuer = await startOidcIssuer();
 * // the function: AUTH_MODE=verify-oidc OIDC_CERTS_URL=${issuer.certsUrl} …
 * fetch(url, { headers: { Authorization: `Bearer ${issuer.token(audience, invoker)}` } });
 */
export async function startOidcIssuer(port = 0): Promise<OidcIssuer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
  });
  const kid = randomUUID();
  const certificates = JSON.stringify({
    [kid]: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  });
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname === TOKEN_PATH) {
      answerTokenRequest(url, res, (audience, email) =>
        signToken(privateKey, kid, { audience, email, nowMs: Date.now() }),
      );
      return;
    }
    if (url.pathname !== '/certs') {
      res.statusCode = 404;
      res.end();
      return;
    }
    res.setHeader('Content-Type', 'application/json');
    res.end(certificates);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const { port: listening } = server.address() as AddressInfo;
  return {
    certsUrl: `http://127.0.0.1:${listening}/certs`,
    token: (audience, email, nowMs = Date.now()) =>
      signToken(privateKey, kid, { audience, email, nowMs }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
