/**
 * In-app OIDC verification with locally generated RSA keys and a local certificate endpoint (never
 * the network): forged, expired, wrong-audience and wrong-caller tokens are refused before any
 * Firestore write.
 */

import assert from 'node:assert/strict';
import {
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  randomUUID,
  sign,
} from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createOidcAuthenticator } from '../src/function/auth.ts';
import { countingJob, documents, schedulerHeaders, serve } from './helpers.ts';

const AUDIENCE = 'https://scheduled-job-abc-uc.a.run.app';
const INVOKER = 'scheduled-job-invoker@demo-project.iam.gserviceaccount.com';
const googleKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const forgerKey = generateKeyPairSync('rsa', { modulusLength: 2048 });

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** A signed ID token shaped like the ones Cloud Scheduler sends. */
function idToken(
  claims: Record<string, unknown> = {},
  key: KeyObject = googleKey.privateKey,
): string {
  const now = Math.floor(Date.now() / 1000);
  const header = base64url({ alg: 'RS256', kid: 'local-key', typ: 'JWT' });
  const payload = base64url({
    iss: 'https://accounts.google.com',
    aud: AUDIENCE,
    sub: '1234567890',
    email: INVOKER,
    email_verified: true,
    iat: now - 10,
    exp: now + 3600,
    ...claims,
  });
  const signature = sign(
    'RSA-SHA256',
    Buffer.from(`${header}.${payload}`),
    key,
  ).toString('base64url');
  return `${header}.${payload}.${signature}`;
}

describe('AUTH_MODE=verify-oidc', () => {
  let certs: Server;
  let certsUrl: string;
  let missingCertsUrl: string;

  before(async () => {
    const pem = googleKey.publicKey
      .export({ type: 'spki', format: 'pem' })
      .toString();
    certs = createServer((req, res) => {
      if (req.url !== '/certs') {
        res.statusCode = 404;
        res.end();
        return;
      }
      res.setHeader('Cache-Control', 'public, max-age=3600');
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ 'local-key': pem }));
    });
    await new Promise<void>((resolve) => certs.listen(0, '127.0.0.1', resolve));
    const { port } = certs.address() as AddressInfo;
    certsUrl = `http://127.0.0.1:${port}/certs`;
    // A 404 is not retried by the library, so a client of this URL fails at once.
    missingCertsUrl = `http://127.0.0.1:${port}/missing`;
  });
  after(() => {
    certs.close();
  });

  function verifyingServer(verifier = certsUrl) {
    const counting = countingJob();
    const authenticate = createOidcAuthenticator({
      audience: AUDIENCE,
      invokers: [INVOKER],
      certsUrl: verifier,
    });
    return { ...counting, ...serve(counting.job, { authenticate }) };
  }

  it('runs the job for a valid token from the allowed invoker', async () => {
    const { request, calls } = verifyingServer();

    const res = await request
      .post('/')
      .set({ ...schedulerHeaders(), Authorization: `Bearer ${idToken()}` });

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    assert.equal(calls.length, 1);
  });

  it('answers with an outcome for the HTTP adapter to map, never a status code', async () => {
    const authenticate = createOidcAuthenticator({
      audience: AUDIENCE,
      invokers: [INVOKER],
      certsUrl,
    });

    const missing = await authenticate(undefined);
    const otherAudience = await authenticate(
      `Bearer ${idToken({ aud: 'https://other.run.app' })}`,
    );

    assert.deepEqual(Object.keys(missing).sort(), ['message', 'ok', 'outcome']);
    assert.equal(missing.ok === false && missing.outcome, 'unauthenticated');
    assert.equal(
      otherAudience.ok === false && otherAudience.outcome,
      'forbidden',
    );
  });

  const refused: [string, () => string | undefined, 401 | 403, RegExp][] = [
    ['no Authorization header', () => undefined, 401, /Authorization: Bearer/],
    [
      'a Basic credential',
      () => 'Basic dXNlcjpwYXNz',
      401,
      /Authorization: Bearer/,
    ],
    [
      'a token signed by another key',
      () => `Bearer ${idToken({}, forgerKey.privateKey)}`,
      401,
      /not valid: it is not signed by a current Google key/,
    ],
    [
      'a tampered payload',
      () => `Bearer ${tamper(idToken())}`,
      401,
      /not valid: it is not signed by a current Google key/,
    ],
    [
      'an expired token',
      () => `Bearer ${idToken({ iat: 1_000_000, exp: 1_003_600 })}`,
      401,
      /not valid: it is expired/,
    ],
    [
      'a token from another issuer',
      () => `Bearer ${idToken({ iss: 'https://evil.example' })}`,
      401,
      /not valid: it was not issued by Google/,
    ],
    [
      'a token for another audience',
      () => `Bearer ${idToken({ aud: 'https://other.run.app' })}`,
      403,
      /another audience/,
    ],
    [
      'a token of another caller',
      () =>
        `Bearer ${idToken({ email: 'intruder@demo-project.iam.gserviceaccount.com' })}`,
      403,
      /not an allowed invoker/,
    ],
    [
      'an unverified email',
      () => `Bearer ${idToken({ email_verified: false })}`,
      403,
      /not an allowed invoker/,
    ],
  ];
  for (const [what, authorization, status, message] of refused) {
    it(`refuses ${what} with ${status} and writes nothing`, async () => {
      const { request, calls, collection } = verifyingServer();
      const value = authorization();

      const res = await (value === undefined
        ? request.post('/').set(schedulerHeaders())
        : request
            .post('/')
            .set({ ...schedulerHeaders(), Authorization: value }));

      assert.equal(res.status, status);
      assert.equal(
        res.body.outcome,
        status === 401 ? 'unauthenticated' : 'forbidden',
      );
      assert.match(res.body.message, message);
      if (status === 401) {
        assert.equal(res.headers['www-authenticate'], 'Bearer');
      }
      assert.equal(calls.length, 0);
      assert.equal((await documents(collection)).size, 0);
    });
  }

  // google-auth-library's error text embeds the token or its claims ("Wrong number of segments in
  // token: <token>", "Invalid token signature: <jwt>"); none of it may reach a response or a log.
  const leaky: [string, () => string, RegExp][] = [
    [
      'a malformed credential',
      () => `not-a-jwt-${randomBytes(24).toString('hex')}`,
      /not an ID token/,
    ],
    [
      'an OAuth access token',
      () => `ya29.${randomBytes(96).toString('base64url')}`,
      /not an ID token.*OAuth/,
    ],
    [
      'a JWT whose header is not JSON',
      () =>
        `${Buffer.from(`{${randomUUID()}`).toString('base64url')}.${idToken().split('.').slice(1).join('.')}`,
      /not an ID token/,
    ],
    [
      'a forged token',
      () => idToken({ jti: randomUUID() }, forgerKey.privateKey),
      /not signed by/,
    ],
    [
      'a tampered token',
      () => tamper(idToken({ jti: randomUUID() })),
      /not signed by/,
    ],
    [
      'a token signed with an unknown key id',
      () => withKeyId(idToken(), randomUUID()),
      /not signed by/,
    ],
    [
      'an expired token',
      () => idToken({ iat: 1_000_000, exp: 1_003_600, jti: randomUUID() }),
      /expired/,
    ],
    [
      'a token from another issuer',
      () =>
        idToken({ iss: `https://${randomUUID()}.example`, jti: randomUUID() }),
      /not issued by Google/,
    ],
  ];
  for (const [what, credential, message] of leaky) {
    it(`never echoes ${what} in the response or any log line`, async () => {
      const { request, logs } = verifyingServer();
      const token = credential();

      const res = await request
        .post('/')
        .set({ ...schedulerHeaders(), Authorization: `Bearer ${token}` });

      assert.deepEqual(echoedPieces(token, res, logs), []);
      assert.equal(res.status, 401);
      assert.match(res.body.message, message);
      assert.equal(
        logs.lines().filter((line) => line.outcome === 'unauthenticated')
          .length,
        1,
      );
    });
  }

  it("answers 401 with a retry hint, echoing nothing, when Google's certificates cannot be fetched", async () => {
    const { request, logs, calls } = verifyingServer(missingCertsUrl);
    const token = idToken({ jti: randomUUID() });

    const res = await request
      .post('/')
      .set({ ...schedulerHeaders(), Authorization: `Bearer ${token}` });

    assert.deepEqual(echoedPieces(token, res, logs), []);
    assert.equal(res.status, 401);
    assert.match(
      res.body.message,
      /certificates could not be fetched\. Retry later/,
    );
    assert.equal(calls.length, 0);
  });
});

/**
 * The pieces of `token` found in the response (body or headers) or in any captured log line. A
 * piece is every run of {@link PIECE_LENGTH} characters (which covers each JWT segment), each
 * segment's decoded JSON and each long string claim in it that is not the function's own
 * configuration, raw and JSON-escaped as a body or log line carries them.
 */
function echoedPieces(
  token: string,
  res: { text: string; headers: object },
  logs: { raw: () => string },
): string[] {
  const runs = Array.from(
    { length: Math.max(1, token.length - PIECE_LENGTH + 1) },
    (_, i) => token.slice(i, i + PIECE_LENGTH),
  );
  const decoded = token
    .split('.')
    .map((segment) => Buffer.from(segment, 'base64url').toString())
    .filter((text) => text.startsWith('{'));
  const claims = decoded.flatMap((text) => {
    try {
      return Object.values(JSON.parse(text) as object).filter(
        (v) => typeof v === 'string' && v !== AUDIENCE && v !== INVOKER,
      );
    } catch {
      return [];
    }
  });
  const texts = [...decoded, ...claims].filter(
    (text) => text.length >= PIECE_LENGTH,
  );
  const pieces = [
    ...runs,
    ...texts,
    ...texts.map((text) => JSON.stringify(text).slice(1, -1)),
  ];
  const echoed = `${res.text}\n${JSON.stringify(res.headers)}\n${logs.raw()}`;
  return pieces.filter((piece) => echoed.includes(piece));
}
const PIECE_LENGTH = 12;

/** Replaces the header's key id, keeping payload and signature. */
function withKeyId(token: string, kid: string): string {
  const [, payload, signature] = token.split('.') as [string, string, string];
  return `${base64url({ alg: 'RS256', kid, typ: 'JWT' })}.${payload}.${signature}`;
}

/** Swaps the payload's email for another one, keeping the original signature. */
function tamper(token: string): string {
  const [header, payload, signature] = token.split('.') as [
    string,
    string,
    string,
  ];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  return `${header}.${base64url({ ...claims, email: 'someone-else@example.com' })}.${signature}`;
}
