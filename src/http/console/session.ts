/**
 * The approval console's session: the approver's API key travels only inside an encrypted,
 * authenticated cookie, and every form carries a per-session CSRF token.
 *
 * Guarantees: the cookie is `__Host-` prefixed (Secure, Path=/, no Domain), HttpOnly and
 * SameSite=Strict, and only signing in or out writes it (the sign-in form's CSRF token has a
 * cookie of its own, `SIGN_IN_COOKIE`); its content is AES-256-GCM under a key derived with HKDF-SHA256 from the
 * Worker secret `WRIT_ADMIN_TOKEN` with a label used for nothing else, and carries its own
 * expiry (`SESSION_TTL_MS`), checked on every request; the principal is looked up by the key's
 * digest on every request, so a revoked key ends the session at once; a write needs the same
 * origin (`Origin`, or `Sec-Fetch-Site` when a browser sends no `Origin`) and the session's CSRF
 * token, compared in constant time.
 * Never: puts the key in a page, a URL or a log line; accepts a cookie it cannot decrypt or whose
 * expiry has passed (both read as "signed out"); runs with an unset, short or guessable secret
 * (`adminTokenProblem`: the console is then disabled, as tenant creation is).
 */
import type { Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import { createMiddleware } from 'hono/factory';
import { z } from 'zod';
import { API_KEY_PATTERN, parseApiKey, secretsEqual } from '../../core/identity/identity.js';
import { operationsPort, platformStore, tenantStore } from '../../platform/bindings.js';
import type { Caller } from '../../services/context.js';
import { ServiceError } from '../../services/errors.js';
import { adminTokenProblem } from '../admin-token.js';
import type { AppEnv } from '../env.js';

/** Sent as `__Host-writ_console`: the prefix makes the browser refuse it without Secure, Path=/ and no Domain. */
export const SESSION_COOKIE = 'writ_console';
/** Absolute session lifetime: a stolen cookie is worth at most this long. */
export const SESSION_TTL_MS = 60 * 60 * 1000;
/** HKDF `info`: the derived key serves this cookie and nothing else. */
export const COOKIE_KEY_LABEL = 'writ/console-session-cookie/v1';
/**
 * Sent as `__Host-writ_console_signin`: the sign-in form's CSRF token before anyone signed in. A
 * cookie of its own, so that serving the sign-in page never writes over a session: a link from
 * another site arrives without the `SameSite=Strict` session cookie and is redirected to sign-in,
 * and a browser stores what that page sets even though it held the session back.
 */
export const SIGN_IN_COOKIE = 'writ_console_signin';
/**
 * Additional authenticated data, one per cookie: a ciphertext made for another purpose (the other
 * cookie included) never opens as this one.
 */
const AAD = {
  session: new TextEncoder().encode('writ console session v1'),
  sign_in: new TextEncoder().encode('writ console sign-in v1'),
} as const;
type Purpose = keyof typeof AAD;

const Session = z.strictObject({
  v: z.literal(1),
  /** The approver's API key, or null before sign-in (the CSRF token then guards the sign-in form). */
  k: z.string().regex(API_KEY_PATTERN).nullable(),
  c: z.string().regex(/^[A-Za-z0-9_-]{43}$/),
  exp: z.number().int(),
});
export type Session = z.infer<typeof Session>;

let derived: { readonly secret: string; readonly key: Promise<CryptoKey> } | null = null;

function cookieKey(env: Env): Promise<CryptoKey> {
  const secret = env.WRIT_ADMIN_TOKEN;
  // A guessable secret would make every session forgeable: no console rather than a weak one. The
  // same rule as tenant creation's (src/http/admin-token.ts): an example or placeholder value is
  // as public as a short one.
  if (typeof secret !== 'string' || adminTokenProblem(secret) !== null) {
    throw new ServiceError('internal', 'the console is disabled: WRIT_ADMIN_TOKEN is not configured');
  }
  if (derived === null || derived.secret !== secret) {
    const enc = new TextEncoder();
    const key = crypto.subtle
      .importKey('raw', enc.encode(secret), 'HKDF', false, ['deriveKey'])
      .then((ikm) =>
        crypto.subtle.deriveKey(
          { name: 'HKDF', hash: 'SHA-256', salt: enc.encode('writ'), info: enc.encode(COOKIE_KEY_LABEL) },
          ikm,
          { name: 'AES-GCM', length: 256 },
          false,
          ['encrypt', 'decrypt'],
        ),
      );
    derived = { secret, key };
  }
  return derived.key;
}

function b64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

function fromB64url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]{1,4096}$/.test(text)) return null;
  try {
    const bin = atob(text.replaceAll('-', '+').replaceAll('_', '/'));
    return Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
  } catch {
    return null;
  }
}

export function randomToken(): string {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

export async function sealSession(env: Env, s: Session, purpose: Purpose = 'session'): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv, additionalData: AAD[purpose] },
      await cookieKey(env),
      new TextEncoder().encode(JSON.stringify(s)),
    ),
  );
  const out = new Uint8Array(iv.length + ct.length);
  out.set(iv);
  out.set(ct, iv.length);
  return b64url(out);
}

/** The session in `value`, or null if it is absent, forged, tampered with or expired. */
export async function openSession(
  env: Env,
  value: string | undefined,
  now: number,
  purpose: Purpose = 'session',
): Promise<Session | null> {
  if (value === undefined) return null;
  const bytes = fromB64url(value);
  if (bytes === null || bytes.length < 12 + 16) return null;
  let plain: ArrayBuffer;
  try {
    plain = await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: bytes.subarray(0, 12), additionalData: AAD[purpose] },
      await cookieKey(env),
      bytes.subarray(12),
    );
  } catch {
    return null;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(plain));
  } catch {
    return null;
  }
  const s = Session.safeParse(parsed);
  // The expiry inside the ciphertext bounds a copied cookie whatever its `Max-Age` said.
  if (!s.success || s.data.exp <= now) return null;
  return s.data;
}

/** Write the signed-in session (`s.k` set); the sign-in form's cookie is `writeSignIn`'s. */
export async function writeSession(c: Context<AppEnv>, s: Session): Promise<void> {
  if (s.k === null) throw new Error('the session cookie holds signed-in sessions only');
  await writeCookie(c, SESSION_COOKIE, s, 'session');
}

/** A fresh signed-out session in the sign-in cookie; returns its CSRF token for the form. */
export async function writeSignIn(c: Context<AppEnv>): Promise<string> {
  const s = anonymousSession(c.var.now);
  await writeCookie(c, SIGN_IN_COOKIE, s, 'sign_in');
  return s.c;
}

/** The sign-in form's session (its CSRF token), or null. */
export async function readSignIn(c: Context<AppEnv>): Promise<Session | null> {
  const s = await openSession(c.env, getCookie(c, SIGN_IN_COOKIE, 'host'), c.var.now, 'sign_in');
  return s !== null && s.k === null ? s : null;
}

export function clearSignIn(c: Context<AppEnv>): void {
  deleteCookie(c, SIGN_IN_COOKIE, { path: '/', secure: true, prefix: 'host' });
}

async function writeCookie(c: Context<AppEnv>, name: string, s: Session, purpose: Purpose): Promise<void> {
  setCookie(c, name, await sealSession(c.env, s, purpose), {
    path: '/',
    secure: true,
    httpOnly: true,
    sameSite: 'Strict',
    maxAge: Math.max(0, Math.floor((s.exp - c.var.now) / 1000)),
    prefix: 'host',
  });
}

export function clearSession(c: Context<AppEnv>): void {
  deleteCookie(c, SESSION_COOKIE, { path: '/', secure: true, prefix: 'host' });
}

/** Whether the request carried a session cookie at all, valid or not. */
export function hasSessionCookie(c: Context<AppEnv>): boolean {
  return getCookie(c, SESSION_COOKIE, 'host') !== undefined;
}

export function readSession(c: Context<AppEnv>): Promise<Session | null> {
  return openSession(c.env, getCookie(c, SESSION_COOKIE, 'host'), c.var.now);
}

/** A fresh signed-out session, holding only the CSRF token for the sign-in form. */
function anonymousSession(now: number): Session {
  return { v: 1, k: null, c: randomToken(), exp: now + SESSION_TTL_MS };
}

/** The caller behind a session's key, and the shard its key routes to (src/platform/shards.ts). */
export type SessionCaller = Caller & { readonly shard: number };

/** The caller behind a session's key, or null when the key is unknown or revoked. */
export async function callerFor(env: Env, key: string): Promise<SessionCaller | null> {
  const route = parseApiKey(key);
  if (route === null) return null;
  const row = await platformStore(env).principalByKeyDigest(route.shard, route.key_sha256);
  if (row === null || row.revoked_at_unix_ms !== null) return null;
  return {
    principal_id: row.principal_id,
    tenant_id: row.tenant_id,
    roles: row.roles,
    executor_release: row.executor_release,
    shard: route.shard,
  };
}

/** Set `principal` and the service context, as `authenticate` (src/http/auth.ts) does. */
export function establish(c: Context<AppEnv>, { shard, ...caller }: SessionCaller): void {
  c.set('principal', caller);
  c.set('log', { ...c.var.log, tenant_id: caller.tenant_id, principal_id: caller.principal_id });
  c.set('tenant', {
    caller,
    store: tenantStore(c.env, { tenant_id: caller.tenant_id, shard }),
    operations: operationsPort(c.env, shard),
    shard,
    now: c.var.now,
    log: (fields) => c.set('log', { ...c.var.log, ...fields }),
  });
}

/**
 * A cross-site request forgery stops here: a write must come from this origin. Browsers send
 * `Origin` on every form POST; one that sends none is judged by `Sec-Fetch-Site`; neither: refused.
 */
export const sameOrigin = createMiddleware<AppEnv>(async (c, next) => {
  const origin = c.req.header('origin');
  const site = c.req.header('sec-fetch-site');
  const ok = origin !== undefined ? origin === new URL(c.req.url).origin : site === 'same-origin';
  if (!ok) throw new ServiceError('forbidden_role', 'cross-origin form submissions are refused');
  await next();
});

/** The form's CSRF token against the session's, in constant time. */
export function csrfMatches(session: Session, submitted: string | undefined): boolean {
  return submitted !== undefined && secretsEqual(submitted, session.c);
}

export const MAX_FORM_BYTES = 16 * 1024;

/**
 * A bounded `application/x-www-form-urlencoded` body; a repeated field is refused (which of two
 * digests was meant is not guessed).
 */
export async function readForm(c: Context<AppEnv>): Promise<Map<string, string>> {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(type)) {
    throw new ServiceError(
      'unsupported_media_type',
      'content-type must be application/x-www-form-urlencoded',
    );
  }
  const declared = Number(c.req.header('content-length') ?? 'NaN');
  if (!Number.isSafeInteger(declared) || declared > MAX_FORM_BYTES) {
    throw new ServiceError('payload_too_large', `a form is at most ${MAX_FORM_BYTES} bytes`);
  }
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (bytes.byteLength > MAX_FORM_BYTES) {
    throw new ServiceError('payload_too_large', `a form is at most ${MAX_FORM_BYTES} bytes`);
  }
  const out = new Map<string, string>();
  for (const [k, v] of new URLSearchParams(new TextDecoder().decode(bytes))) {
    if (out.has(k)) throw new ServiceError('invalid_request', `field "${k.slice(0, 40)}" is repeated`);
    out.set(k, v);
  }
  return out;
}
