/**
 * The local token issuer of the Scheduler (`src/ops/oidc-issuer.ts`): its tokens pass google-auth-library's
 * verification against its own certificate URL, with the claims of a Google service-account ID
 * token, and the certificates carry no caching header (so a verifier never keeps a stale key).
 * Loopback only: no emulator, no network.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { OAuth2Client } from 'google-auth-library';
import { startOidcIssuer } from '../../src/ops/oidc-issuer.ts';

const issuer = await startOidcIssuer();
after(() => issuer.close());
const AUDIENCE = 'https://scheduled-job.example';
const INVOKER = 'invoker@demo-project.iam.gserviceaccount.com';

describe('startOidcIssuer', () => {
  it('signs ID tokens that google-auth-library verifies against its certificate URL', async () => {
    const client = new OAuth2Client({
      endpoints: { oauth2FederatedSignonPemCertsUrl: issuer.certsUrl },
    });
    const now = Date.now();

    const ticket = await client.verifyIdToken({
      idToken: issuer.token(AUDIENCE, INVOKER, now),
      audience: AUDIENCE,
    });

    const claims = ticket.getPayload();
    assert.equal(claims?.iss, 'https://accounts.google.com');
    assert.equal(claims?.email, INVOKER);
    assert.equal(claims?.email_verified, true);
    assert.equal((claims?.exp ?? 0) - (claims?.iat ?? 0), 3600);
  });

  it('serves its certificates without Cache-Control, only on /certs', async () => {
    const certs = await fetch(issuer.certsUrl);
    const other = await fetch(new URL('/', issuer.certsUrl));

    assert.equal(certs.status, 200);
    assert.equal(certs.headers.get('cache-control'), null);
    assert.match(
      Object.values((await certs.json()) as Record<string, string>)[0] ?? '',
      /BEGIN PUBLIC KEY/,
    );
    assert.equal(other.status, 404);
  });
});
