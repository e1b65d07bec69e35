/**
 * Authentication and role checks. Identity comes only from `Authorization: Bearer <key>` and
 * trusted storage: a tenant or principal named in a body never selects anything.
 *
 * Guarantees: an unknown, malformed or revoked key is a 401 with no hint which; the platform
 * admin token is compared in constant time and only ever admits `POST /v1/tenants`, and a
 * configured token that is an example value or guessable admits nothing (`adminTokenProblem`); a role check
 * runs per route, before the body is read (the service checks the same roles again).
 * Shards: the key's routing part picks the one D1 shard that is asked (src/core/identity);
 * a key naming an unconfigured shard is a 401 like any other miss.
 * `POST /v1/authorize` looks its key up in its handler, in one batch with the authorization
 * state (src/http/routes/authorize.ts); it answers the same 401 and 403 in the same order. So do
 * the doors' authorizations (MCP, AuthZEN's single evaluation, Docker's `before`: `keyedDoor`).
 * Never: stores or logs a key (only its SHA-256 is looked up), or caches a principal across
 * requests (a revocation binds the very next write or authorization; a `GET` served by a lagging
 * replica may still see the key for as long as the replica lags, SECURITY.md).
 */
import type { Context } from 'hono';
import { createMiddleware } from 'hono/factory';
import { type ApiKeyRoute, type Role, parseApiKey, secretsEqual } from '../core/identity/identity.js';
import { classifierPort, operationsPort, platformStore, tenantStore } from '../platform/bindings.js';
import {
  type Caller,
  type TenantContext,
  ROLES_FOR,
  requireRole as requireCallerRole,
} from '../services/context.js';
import { ServiceError } from '../services/errors.js';
import type { KeyedNamedToolDoor } from '../services/tool-call.js';
import { type AdminTokenProblem, adminTokenProblem } from './admin-token.js';
import type { AppEnv } from './env.js';
import { takeWriteToken } from './rate-limit.js';

export { MIN_ADMIN_TOKEN_LENGTH } from './admin-token.js';

// The verdict on the one configured token, computed once per isolate (the secret is fixed).
let checkedToken: { readonly token: string; readonly problem: AdminTokenProblem | null } | null = null;

function configuredTokenProblem(token: string): AdminTokenProblem | null {
  if (checkedToken?.token !== token) checkedToken = { token, problem: adminTokenProblem(token) };
  return checkedToken.problem;
}

function bearer(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^Bearer ([\x21-\x7e]{1,512})$/.exec(header);
  return m === null ? null : (m[1] as string);
}

const unauthenticated = () => new ServiceError('unauthenticated', 'a valid api key is required');

/** The request's bearer API key: its shard and digest; a missing or malformed key is a 401. */
export function bearerKeyRoute(c: Context<AppEnv>): ApiKeyRoute {
  const key = bearer(c.req.header('authorization'));
  // The key's routing part names the one shard to look in (src/platform/shards.ts); the digest
  // covers it, so a key pointed at another shard finds nothing there.
  const route = key === null ? null : parseApiKey(key);
  if (route === null) throw unauthenticated();
  return route;
}

/** Establish `c.var.principal` from the bearer key, and the caller's service context. */
export const authenticate = createMiddleware<AppEnv>(async (c, next) => {
  await authenticateRequest(c);
  await next();
});

/** What `authenticate` does, for a door that authenticates inside its handler. */
export async function authenticateRequest(c: Context<AppEnv>): Promise<void> {
  const { shard, key_sha256 } = bearerKeyRoute(c);
  const row = await platformStore(c.env).principalByKeyDigest(shard, key_sha256);
  // A revoked key is indistinguishable from an unknown one.
  if (row === null || row.revoked_at_unix_ms !== null) throw unauthenticated();
  establishCaller(
    c,
    {
      principal_id: row.principal_id,
      tenant_id: row.tenant_id,
      roles: row.roles,
      executor_release: row.executor_release,
    },
    shard,
  );
}

/** Record the authenticated caller and open its service context (tenant store, operations, log). */
export function establishCaller(c: Context<AppEnv>, caller: Caller, shard: number): TenantContext {
  c.set('principal', caller);
  c.set('log', { ...c.var.log, tenant_id: caller.tenant_id, principal_id: caller.principal_id });
  c.set('tenant', {
    caller,
    store: tenantStore(c.env, { tenant_id: caller.tenant_id, shard }),
    operations: operationsPort(c.env, shard),
    shard,
    classifier: classifierPort(c.env),
    now: c.var.now,
    log: (fields) => c.set('log', { ...c.var.log, ...fields }),
  });
  return c.var.tenant;
}

// -- Doors that authorize by key (issue 12) ------------------------------------------------------

/**
 * What the standard doors (MCP, AuthZEN, Docker) give `authorizeNamedToolByKey`, which reads the
 * key's principal in one batch with the authorization state, as `POST /v1/authorize` does. The
 * door's own routes are registered before its `authenticate`. `admit` is a door's own check of
 * the caller (an AuthZEN tenant-scoped PDP), run as soon as the caller is known, before its role.
 * `authenticate` is for a refusal found before the keyed read (a bad body): who asks is answered
 * first, in the same order as everywhere (401, then `admit`, then the role, then the write limit).
 */
export function keyedDoor(
  c: Context<AppEnv>,
  key: ApiKeyRoute,
  admit: (caller: Caller) => void = () => {},
): KeyedNamedToolDoor {
  return {
    platform: platformStore(c.env),
    open: (caller) => {
      const ctx = establishCaller(c, caller, key.shard);
      admit(caller);
      return ctx;
    },
    takeWriteToken: (who) => takeWriteToken(c, who),
    authenticate: async () => {
      await authenticateRequest(c);
      admit(c.var.principal);
      requireCallerRole(c.var.principal, ROLES_FOR.authorize);
      await takeWriteToken(c, c.var.principal);
    },
  };
}

/** A refusal of the caller itself (key, role, write limit): never turned into a door's denial. */
export function refusesCaller(e: unknown): boolean {
  return (
    e instanceof ServiceError &&
    (e.reason === 'unauthenticated' || e.reason === 'forbidden_role' || e.reason === 'rate_limited')
  );
}

/** 403 `forbidden_role` unless the principal holds one of `roles`, checked before the body is read. */
export function requireRole(roles: readonly Role[]) {
  return createMiddleware<AppEnv>(async (c, next) => {
    requireCallerRole(c.var.principal, roles);
    await next();
  });
}

/**
 * The platform admin (`/v1/tenants...` only): creates tenants and their first admin, sets their
 * quotas, and exports and imports them between shards (uploads included). It reads and writes
 * nothing else of a tenant: no principal, policy, grant, approval or receipt route accepts it.
 */
export const requirePlatformAdmin = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearer(c.req.header('authorization'));
  const configured = c.env.WRIT_ADMIN_TOKEN;
  // An unset, short, example or low-entropy secret disables tenant creation rather than
  // accepting a token anyone could guess or read in the repository (src/http/admin-token.ts).
  const problem = typeof configured === 'string' ? configuredTokenProblem(configured) : 'too_short';
  if (problem !== null) {
    // The operator's mistake, told to the operator only: the caller learns nothing about it.
    console.error(JSON.stringify({ level: 'error', error: 'admin_token_refused', problem }));
  }
  if (
    token === null ||
    typeof configured !== 'string' ||
    problem !== null ||
    !secretsEqual(token, configured)
  ) {
    throw new ServiceError('unauthenticated', 'the platform admin token is required');
  }
  c.set('log', { ...c.var.log, principal_id: 'platform_admin' });
  await next();
});
