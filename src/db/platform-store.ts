/**
 * The per-shard half of `PlatformStore`: what is not one tenant's (API-key lookup, tenant
 * creation, quotas), on one D1 shard. src/platform/bindings.ts composes the shards and the shard
 * directory (src/platform/shards.ts) into the `PlatformStore` the services see.
 *
 * Guarantees: a tenant, its quota row (defaults), its first policy and its first admin are written
 * in one batch; a name race is decided by the unique index (the loser wrote nothing).
 */
import { and, asc, eq, gt, notExists, sql } from 'drizzle-orm';
import type { AuthorizeRequest } from '../core/authorization/decide.js';
import type {
  KeyedAuthorizationRead,
  NamedToolKeyedRead,
  NewPrincipal,
  PlatformStore,
  PrincipalRow,
  Quotas,
  RetentionWindow,
} from '../services/ports.js';
import type { TenantPolicy } from '../core/policy.js';
import { type Db, atPrimary } from './client.js';
import { toCanonicalText } from './documents.js';
import {
  principals,
  policies,
  tenantImports,
  tenantImportsUnrecorded,
  tenantQuotas,
  tenants,
} from './schema.js';
import {
  type ContractSelector,
  authorizationStateQueries,
  principalValues,
  toAuthorizationState,
  toPinnedContract,
  toPrincipalRow,
} from './tenant-store.js';

/** One shard's part of the platform store. */
export interface ShardPlatformStore {
  principalByKeyDigest(key_sha256: string): ReturnType<PlatformStore['principalByKeyDigest']>;
  /** The key's principal and its authorization state in one batch (see `PlatformStore`). */
  authorizationByKey(key_sha256: string, request: AuthorizeRequest): Promise<KeyedAuthorizationRead | null>;
  /** The doors' keyed read: the tool name's pins instead of one contract (see `PlatformStore`). */
  namedToolAuthorizationByKey(
    key_sha256: string,
    tool_name: string,
    request: Omit<AuthorizeRequest, 'tool_contract_sha256'>,
    options?: { readonly at: 'primary' },
  ): Promise<NamedToolKeyedRead | null>;
  tenantNameTaken(name: string): Promise<boolean>;
  createTenant(
    t: Omit<Parameters<PlatformStore['createTenant']>[0], 'shard'>,
  ): Promise<'created' | 'name_taken'>;
  /** Whether the tenant's row exists, read at the primary (`PlatformStore.tenantWritten`). */
  tenantWritten(tenant_id: string): Promise<boolean>;
  setQuotas(
    tenant_id: string,
    quotas: Quotas & { readonly receipt_retention_days?: number | undefined },
    now: number,
  ): Promise<boolean>;
  /** This shard's tenants after `after` (by id) and their retention windows, at most `limit`. */
  retentionWindows(after: string | null, limit: number): Promise<readonly RetentionWindow[]>;
}

export function d1PlatformStore(db: Db): ShardPlatformStore {
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

    async namedToolAuthorizationByKey(key_sha256, tool_name, request, options) {
      // As above; `at: 'primary'` re-reads there when a replica's binding refused the name.
      if (options?.at === 'primary') return keyedNamedToolRead(atPrimary(db), key_sha256, tool_name, request);
      return (
        (await keyedNamedToolRead(db, key_sha256, tool_name, request)) ??
        keyedNamedToolRead(atPrimary(db), key_sha256, tool_name, request)
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

    async tenantWritten(tenant_id: string) {
      // The creation batch writes the `tenants` row with the others (all or nothing), so the row
      // is there exactly when the batch committed; a replica could lag behind that commit.
      const row = await atPrimary(db)
        .select({ id: tenants.tenant_id })
        .from(tenants)
        .where(eq(tenants.tenant_id, tenant_id))
        .get();
      return row !== undefined;
    },

    async setQuotas(
      tenant_id: string,
      quotas: Quotas & { readonly receipt_retention_days?: number | undefined },
      now: number,
    ) {
      const { receipt_retention_days, ...q } = quotas;
      const r = await db
        .update(tenantQuotas)
        .set({
          ...q,
          ...(receipt_retention_days === undefined ? {} : { receipt_retention_days }),
          updated_at_unix_ms: now,
        })
        .where(eq(tenantQuotas.tenant_id, tenant_id))
        .run();
      return r.meta.changes > 0;
    },

    // -- Retention (issue 10) -----------------------------------------------------------------

    async retentionWindows(after: string | null, limit: number) {
      return db
        .select({
          tenant_id: tenantQuotas.tenant_id,
          receipt_retention_days: tenantQuotas.receipt_retention_days,
        })
        .from(tenantQuotas)
        .where(
          and(
            after === null ? undefined : gt(tenantQuotas.tenant_id, after),
            // A tenant staged by an import in progress (migrations/0011) is not live: moving its
            // receipts to archives under the import would change rows the import is writing.
            notExists(
              db
                .select({ one: sql`1` })
                .from(tenantImports)
                .where(eq(tenantImports.tenant_id, tenantQuotas.tenant_id)),
            ),
            // Nor is one that went live here but is not in the directory yet (migrations/0013): a
            // retry of its file may still re-key it, and until then no key reaches it; archiving
            // it would leave R2 archives and manifests for a copy that is not (yet) the tenant.
            notExists(
              db
                .select({ one: sql`1` })
                .from(tenantImportsUnrecorded)
                .where(eq(tenantImportsUnrecorded.tenant_id, tenantQuotas.tenant_id)),
            ),
          ),
        )
        .orderBy(asc(tenantQuotas.tenant_id))
        .limit(limit);
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
  const read = await keyedStateRows(db, key_sha256, request, request);
  if (read === null) return null;
  const { principal, rows } = read;
  return { principal, state: toAuthorizationState(rows, principal.tenant_id, principal.principal_id) };
}

async function keyedStateRows(
  db: Db,
  key_sha256: string,
  request: Omit<AuthorizeRequest, 'tool_contract_sha256'>,
  contract: ContractSelector,
) {
  const tenant = sql`(select ${principals.tenant_id} from ${principals} where ${principals.key_sha256} = ${key_sha256})`;
  const principal = sql`(select ${principals.principal_id} from ${principals} where ${principals.key_sha256} = ${key_sha256})`;
  const [keyRows, ...rows] = await db.batch([
    db.select().from(principals).where(eq(principals.key_sha256, key_sha256)),
    ...authorizationStateQueries(db, tenant, principal, request, contract),
  ]);
  const row = keyRows[0];
  return row === undefined ? null : { principal: toPrincipalRow(row), rows };
}

// -- Doors: the keyed read by tool name (issue 12) ----------------------------------------------

/**
 * `keyedAuthorizationRead` for a door that names a tool: the tool name's pins in place of the one
 * contract by digest, in the same batch; the state's contract is left null for the service to
 * bind (src/services/tool-call.ts). Same round trips as `POST /v1/authorize`.
 */
async function keyedNamedToolRead(
  db: Db,
  key_sha256: string,
  tool_name: string,
  request: Omit<AuthorizeRequest, 'tool_contract_sha256'>,
): Promise<NamedToolKeyedRead | null> {
  const read = await keyedStateRows(db, key_sha256, request, { tool_name });
  if (read === null) return null;
  const { principal } = read;
  const [policy, pins, self, run, approval, live, revoked] = read.rows;
  return {
    principal,
    pins: pins.map(toPinnedContract),
    state: toAuthorizationState(
      [policy, [], self, run, approval, live, revoked],
      principal.tenant_id,
      principal.principal_id,
    ),
  };
}
