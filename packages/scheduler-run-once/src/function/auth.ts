/** Checks Scheduler's OIDC token in-app (docs/how-it-works.md, "In-app OIDC verification"). */
import { OAuth2Client } from 'google-auth-library';

/** Who called, or why not: `unauthenticated` (no proof of who sent it) or `forbidden`. */
export type AuthResult =
  | Readonly<{ ok: true; email: string }>
  | Readonly<{
      ok: false;
      outcome: 'unauthenticated' | 'forbidden';
      message: string;
    }>;

/** Checks one request's credentials; never throws. */
export type Authenticator = (
  authorization: string | undefined,
) => Promise<AuthResult>;

/** Why a credential was refused, in fixed words: the library's text can quote the token. */
const MESSAGE_BY_PROBLEM = {
  missing: 'Send an OIDC ID token as "Authorization: Bearer <token>".',
  malformed:
    'The bearer credential is not an ID token (a JWT of three base64url parts); configure the Scheduler job with an OIDC token, not an OAuth token.',
  bad_signature:
    'The ID token is not valid: it is not signed by a current Google key.',
  expired:
    'The ID token is not valid: it is expired, not yet valid, or its lifetime is too long.',
  wrong_issuer: 'The ID token is not valid: it was not issued by Google.',
  certificates_unavailable:
    "The ID token could not be verified: Google's signing certificates could not be fetched. Retry later.",
  unverified: 'The ID token is not valid.',
  wrong_audience: 'The ID token was issued for another audience.',
  not_invoker: 'The caller is not an allowed invoker.',
} as const;
type TokenProblem = keyof typeof MESSAGE_BY_PROBLEM;

/** google-auth-library's failures by the start of their message (no codes); else `unverified`. */
const PROBLEM_BY_LIBRARY_MESSAGE: readonly (readonly [RegExp, TokenProblem])[] =
  [
    [
      /^Failed to retrieve verification certificates/,
      'certificates_unavailable',
    ],
    [/^(No (issue|expiration) time|(iat|exp) field)/, 'malformed'], // segments, JSON: isJwtShaped
    [/^(Invalid token signature|No pem found)/, 'bad_signature'],
    [/^(Token used too (early|late)|Expiration time too far)/, 'expired'],
    [/^Invalid issuer/, 'wrong_issuer'],
  ];

function problemOf(libraryError: unknown): TokenProblem {
  const text = libraryError instanceof Error ? libraryError.message : '';
  return (
    PROBLEM_BY_LIBRARY_MESSAGE.find(([pattern]) => pattern.test(text))?.[1] ??
    'unverified'
  );
}

/** Whether `token` is three base64url parts, the first two JSON objects (an OAuth token is not). */
function isJwtShaped(token: string): boolean {
  const parts = token.split('.');
  if (
    parts.length !== 3 ||
    parts.some((part) => !/^[A-Za-z0-9_-]+$/.test(part))
  ) {
    return false;
  }
  return parts.slice(0, 2).every((part) => {
    try {
      const value: unknown = JSON.parse(
        Buffer.from(part, 'base64url').toString('utf8'),
      );
      return (
        typeof value === 'object' && value !== null && !Array.isArray(value)
      );
    } catch {
      return false;
    }
  });
}

/** A refusal: `forbidden` for a valid token of another audience or caller, else `unauthenticated`. */
function refusal(problem: TokenProblem): AuthResult {
  const forbidden = problem === 'wrong_audience' || problem === 'not_invoker';
  const outcome = forbidden ? 'forbidden' : 'unauthenticated';
  return { ok: false, outcome, message: MESSAGE_BY_PROBLEM[problem] };
}

/** Settings of {@link createOidcAuthenticator}. */
export interface OidcOptions {
  /** The audience the token must carry: the Scheduler job's `--oidc-token-audience`. */
  readonly audience: string;
  /** Service-account emails allowed to call, lowercase. */
  readonly invokers: readonly string[];
  /** Development and tests only: a certificate URL instead of Google's (`OIDC_CERTS_URL`). */
  readonly certsUrl?: string;
}

/**
 * Checks Google-signed ID tokens (`Authorization: Bearer <token>`): signature, expiry and issuer
 * (google-auth-library), then the audience and a verified, allowed `email`.
 * @returns a refusal in fixed words, never quoting the token, its claims or the library's error.
 */
export function createOidcAuthenticator(options: OidcOptions): Authenticator {
  const { certsUrl } = options;
  const endpoints =
    certsUrl === undefined
      ? {}
      : { oauth2FederatedSignonPemCertsUrl: certsUrl };
  const client = new OAuth2Client({ endpoints });
  const invokers = new Set(options.invokers.map((e) => e.toLowerCase()));
  return async (authorization) => {
    const match = /^Bearer ([A-Za-z0-9._~+/=-]+)$/.exec(
      authorization?.trim() ?? '',
    );
    if (match === null) {
      return refusal('missing');
    }
    const token = match[1] as string;
    if (!isJwtShaped(token)) {
      return refusal('malformed');
    }
    const ticket = await client
      .verifyIdToken({ idToken: token })
      .catch(problemOf);
    if (typeof ticket === 'string') {
      return refusal(ticket);
    }
    const payload = ticket.getPayload();
    const audiences = ([] as unknown[]).concat(payload?.aud);
    if (!audiences.includes(options.audience)) {
      return refusal('wrong_audience');
    }
    const email =
      typeof payload?.email === 'string' ? payload.email.toLowerCase() : '';
    if (!invokers.has(email) || payload?.email_verified !== true) {
      return refusal('not_invoker');
    }
    return { ok: true, email };
  };
}
