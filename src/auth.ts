/**
 * In-app verification of Cloud Scheduler's OIDC token (`AUTH_MODE=verify-oidc`), for deployments
 * where Cloud Run's own IAM invoker check is off (`--no-invoker-iam-check`, or a load balancer in
 * front). With the platform check on, Cloud Run strips the token's signature, so there is nothing
 * left to verify here: keep the default `AUTH_MODE=platform` then.
 */
import { OAuth2Client } from 'google-auth-library';

/**
 * Why a caller is refused: `unauthenticated` (no credential, or one that does not prove who sent it)
 * or `forbidden` (a valid token, but for another audience or caller). The HTTP adapter turns these
 * into status codes; this module never does.
 */
export type AuthFailure = 'unauthenticated' | 'forbidden';

/** Who called, or why the caller is refused. */
export type AuthResult =
  | { readonly ok: true; readonly email: string }
  | { readonly ok: false; readonly outcome: AuthFailure; readonly message: string };

/** Checks one request's credentials; never throws. */
export type Authenticator = (authorization: string | undefined) => Promise<AuthResult>;

/** Settings of {@link createOidcAuthenticator}. */
export interface OidcOptions {
  /** The audience the token must carry: the Scheduler job's `--oidc-token-audience`. */
  readonly audience: string;
  /** Service-account emails allowed to call, lowercase. */
  readonly invokers: readonly string[];
  /** The verifying client; tests give one whose certificate URL is local. */
  readonly client?: OAuth2Client;
}

/**
 * Creates an authenticator for Google-signed ID tokens sent as `Authorization: Bearer <token>`.
 * Checks the signature against Google's certificates, expiry and issuer (google-auth-library), then
 * the audience and that `email` is an allowed invoker with `email_verified`.
 *
 * @returns `unauthenticated` for a missing, malformed, forged or expired token; `forbidden` for a
 *   valid token with the wrong audience or caller.
 */
export function createOidcAuthenticator(options: OidcOptions): Authenticator {
  const client = options.client ?? new OAuth2Client();
  const invokers = new Set(options.invokers.map((e) => e.toLowerCase()));
  return async (authorization) => {
    const match = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(authorization?.trim() ?? '');
    if (match === null) {
      return {
        ok: false,
        outcome: 'unauthenticated',
        message: 'Send an OIDC ID token as "Authorization: Bearer <token>".',
      };
    }
    let payload: Record<string, unknown> | undefined;
    try {
      const ticket = await client.verifyIdToken({ idToken: match[1] as string });
      payload = ticket.getPayload() as Record<string, unknown> | undefined;
    } catch (err) {
      return {
        ok: false,
        outcome: 'unauthenticated',
        message: `The ID token is not valid: ${(err as Error).message}`,
      };
    }
    const audiences = ([] as unknown[]).concat(payload?.aud);
    if (!audiences.includes(options.audience)) {
      return {
        ok: false,
        outcome: 'forbidden',
        message: 'The ID token was issued for another audience.',
      };
    }
    const email = typeof payload?.email === 'string' ? payload.email.toLowerCase() : '';
    if (!invokers.has(email) || payload?.email_verified !== true) {
      return { ok: false, outcome: 'forbidden', message: 'The caller is not an allowed invoker.' };
    }
    return { ok: true, email };
  };
}
