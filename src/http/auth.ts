/**
 * Authentication and role checks. Identity comes only from `Authorization: Bearer <key>` and
 * trusted storage: a tenant or principal named in a body never selects anything.
 *
 * Guarantees: an unknown, malformed or revoked key is a 401 with no hint which; the platform
 * admin token is compared in constant time and only ever admits `POST /v1/tenants`; a role check
 * runs per route, before the body is read.
 * Never: stores or logs a key (only its SHA-256 is looked up), or caches a principal across
 * requests (a revocation takes effect on the very next call).
 */
import { eq } from 'drizzle-orm';
import { createMiddleware } from 'hono/factory';
import { z } from 'zod';
import { API_KEY_PATTERN, apiKeyDigest, Role, secretsEqual } from '../core/identity/identity.js';
import { database } from '../db/client.js';
import { parseStored } from '../db/documents.js';
import { principals } from '../db/schema.js';
import type { AppEnv, AuthenticatedPrincipal } from './env.js';
import { ApiError } from './errors.js';

/** The configured admin token must be at least this long, or tenant creation is disabled. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

const StoredRoles = z.array(Role).min(1);

function bearer(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^Bearer ([\x21-\x7e]{1,512})$/.exec(header);
  return m === null ? null : (m[1] as string);
}

const unauthenticated = () => new ApiError('unauthenticated', 'a valid api key is required');

/** Establish `c.var.principal` from the bearer key. */
export const authenticate = createMiddleware<AppEnv>(async (c, next) => {
  const key = bearer(c.req.header('authorization'));
  if (key === null || !API_KEY_PATTERN.test(key)) throw unauthenticated();
  const row = await database(c.env)
    .select({
      principal_id: principals.principal_id,
      tenant_id: principals.tenant_id,
      roles: principals.roles,
      executor_release: principals.executor_release,
      revoked_at_unix_ms: principals.revoked_at_unix_ms,
    })
    .from(principals)
    .where(eq(principals.key_sha256, apiKeyDigest(key)))
    .get();
  // A revoked key is indistinguishable from an unknown one.
  if (row === undefined || row.revoked_at_unix_ms !== null) throw unauthenticated();
  const principal: AuthenticatedPrincipal = {
    principal_id: row.principal_id,
    tenant_id: row.tenant_id,
    roles: parseStored('principal roles', StoredRoles, row.roles),
    executor_release: row.executor_release,
  };
  c.set('principal', principal);
  c.set('log', { ...c.var.log, tenant_id: principal.tenant_id, principal_id: principal.principal_id });
  await next();
});

/** 403 `forbidden_role` unless the principal holds one of `roles`. */
export function requireRole(...roles: readonly Role[]) {
  return createMiddleware<AppEnv>(async (c, next) => {
    if (!c.var.principal.roles.some((r) => roles.includes(r))) {
      throw new ApiError('forbidden_role', `requires role ${roles.map((r) => `"${r}"`).join(' or ')}`);
    }
    await next();
  });
}

/** The platform admin: may only create tenants and their first admin. */
export const requirePlatformAdmin = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearer(c.req.header('authorization'));
  const configured = c.env.WRIT_ADMIN_TOKEN;
  // An unset or short secret disables tenant creation rather than accepting a guessable token.
  if (
    token === null ||
    typeof configured !== 'string' ||
    configured.length < MIN_ADMIN_TOKEN_LENGTH ||
    !secretsEqual(token, configured)
  ) {
    throw new ApiError('unauthenticated', 'the platform admin token is required');
  }
  c.set('log', { ...c.var.log, principal_id: 'platform_admin' });
  await next();
});

/**
 * A tenant or principal named in a body is checked against the authenticated caller and a
 * mismatch is refused: it is never used to select whose authority applies (confused deputy).
 */
export function assertNamedIdentity(
  principal: AuthenticatedPrincipal,
  named: { readonly tenant_id?: string | undefined; readonly principal_id?: string | undefined },
): void {
  if (named.tenant_id !== undefined && named.tenant_id !== principal.tenant_id) {
    throw new ApiError('tenant_mismatch', 'tenant_id does not match the authenticated tenant');
  }
  if (named.principal_id !== undefined && named.principal_id !== principal.principal_id) {
    throw new ApiError('principal_mismatch', 'principal_id does not match the authenticated principal');
  }
}
