/**
 * The D1 adapter of `PlatformStore`: what is not one tenant's (API-key lookup, tenant creation).
 *
 * Guarantees: a tenant, its quota row (defaults), its first policy and its first admin are written
 * in one batch; a name race is decided by the unique index (the loser wrote nothing).
 */
import { eq, sql } from 'drizzle-orm';
import type { AuthorizeRequest } from '../core/authorization/decide.js';
import type {
  KeyedAuthorizationRead,
  PlatformStore,
  NewPrincipal,
  PrincipalRow,
  Quotas,
} from '../services/ports.js';
import type { TenantPolicy } from '../core/policy.js';
import { type Db, atPrimary } from './client.js';
import { toCanonicalText } from './documents.js';
import { principals, policies, tenantQuotas, tenants } from './schema.js';
import {
  authorizationStateQueries,
  principalValues,
  toAuthorizationState,
  toPrincipalRow,
} from './tenant-store.js';

export function d1PlatformStore(db: Db): PlatformStore {
  return {
    async principalByKeyDigest(key_sha256: string) {
      const row = await db.select().from(principals).where(eq(principals.key_sha256, key_sha256)).get();
      return row === undefined ? null : { ...toPrincipalRow(row), key_sha256: row.key_sha256 };
    },

    async authorizationByKey(key_sha256: string, request: AuthorizeRequest) {
      // Near the caller first; a key the replica has not seen yet (created a moment ago) is
      // looked up again at the primary before it is called unknown.
      return (
        (await keyedAuthorizationRead(db, key_sha256, request)) ??
        keyedAuthorizationRead(atPrimary(db), key_sha256, request)
      );
    },

    async tenantNameTaken(name: string) {
      const row = await db
        .select({ id: tenants.tenant_id })
        .from(tenants)
        .where(eq(tenants.name, name))
        .get();
      return row !== undefined;
    },

    async createTenant(t: {
      readonly tenant_id: string;
      readonly name: string;
      readonly policy: TenantPolicy;
      readonly policy_sha256: string;
      readonly admin: NewPrincipal;
      readonly now: number;
    }) {
      try {
        await db.batch([
          // First: the quota triggers on the inserts below read the tenant's quota row.
          db.insert(tenantQuotas).values({ tenant_id: t.tenant_id, updated_at_unix_ms: t.now }),
          db.insert(policies).values({
            tenant_id: t.tenant_id,
            policy_sha256: t.policy_sha256,
            document: toCanonicalText(t.policy),
            created_at_unix_ms: t.now,
          }),
          db.insert(tenants).values({
            tenant_id: t.tenant_id,
            name: t.name,
            policy_sha256: t.policy_sha256,
            created_at_unix_ms: t.now,
          }),
          db.insert(principals).values(principalValues(t.admin)),
        ]);
        return 'created';
      } catch (e) {
        // Two creations of one name racing: the unique index decides, the loser wrote nothing.
        if (
          e instanceof Error &&
          /UNIQUE constraint failed: tenants\.name/.test(`${e.message} ${String(e.cause)}`)
        ) {
          return 'name_taken';
        }
        throw e;
      }
    },

    async setQuotas(tenant_id: string, quotas: Quotas, now: number) {
      const r = await db
        .update(tenantQuotas)
        .set({ ...quotas, updated_at_unix_ms: now })
        .where(eq(tenantQuotas.tenant_id, tenant_id))
        .run();
      return r.meta.changes > 0;
    },
  };
}

export type { PrincipalRow };

/**
 * The key's principal and its authorization state in one batch: every state query is keyed by
 * subqueries on the key digest, so it reads only the key's own tenant and principal, and reads
 * nothing when no principal has the key (the subqueries yield NULL, which matches no row).
 */
async function keyedAuthorizationRead(
  db: Db,
  key_sha256: string,
  request: AuthorizeRequest,
): Promise<KeyedAuthorizationRead | null> {
  const tenant = sql`(select ${principals.tenant_id} from ${principals} where ${principals.key_sha256} = ${key_sha256})`;
  const principal = sql`(select ${principals.principal_id} from ${principals} where ${principals.key_sha256} = ${key_sha256})`;
  const [keyRows, ...stateRows] = await db.batch([
    db.select().from(principals).where(eq(principals.key_sha256, key_sha256)),
    ...authorizationStateQueries(db, tenant, principal, request),
  ]);
  const row = keyRows[0];
  if (row === undefined) return null;
  const found = toPrincipalRow(row);
  return { principal: found, state: toAuthorizationState(stateRows, found.tenant_id, found.principal_id) };
}
