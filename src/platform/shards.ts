/**
 * D1 shards: which binding is shard N, where a new tenant goes, and the shard directory.
 *
 * Guarantees: shard 0 is the `DB` binding, shard N >= 1 is `DB_SHARD_N`, and `WRIT_D1_SHARDS`
 * says how many exist; the list is explicit (never discovered by enumerating `env`). A shard
 * number outside the configured range, or one whose binding is missing, opens nothing (`null`):
 * the caller fails closed. A tenant is placed once, at creation, on the shard that holds the
 * fewest tenants (ties go to the lowest number), and stays there until an operator moves it.
 * Tenant requests find their shard from the API key (src/core/identity/identity.ts) and touch
 * only that shard. Only platform-admin operations read the directory (on shard 0) or visit every
 * shard.
 * Never: routes a tenant by hashing its id (adding a shard would silently move tenants), or
 * falls back to another shard when the named one is missing.
 */
import { and, count, eq } from 'drizzle-orm';
import { MAX_SHARDS } from '../core/identity/identity.js';
import { type Db, atPrimary, database } from '../db/client.js';
import { tenantShards } from '../db/schema.js';

/** A tenant and the shard holding it: what every tenant-scoped storage handle is opened for. */
export interface TenantRef {
  readonly tenant_id: string;
  readonly shard: number;
}

/** The configured number of shards, or null when `WRIT_D1_SHARDS` is not a number in 1..MAX_SHARDS. */
export function shardCount(env: Env): number | null {
  const raw = (env as { WRIT_D1_SHARDS?: string }).WRIT_D1_SHARDS ?? '1';
  if (!/^[1-9][0-9]{0,3}$/.test(raw)) return null;
  const n = Number(raw);
  return n <= MAX_SHARDS ? n : null;
}

/** The D1 binding of shard `n`, or null when `n` is not a configured shard. */
export function shardBinding(env: Env, n: number): D1Database | null {
  const total = shardCount(env);
  if (total === null || !Number.isSafeInteger(n) || n < 0 || n >= total) return null;
  const name = n === 0 ? 'DB' : `DB_SHARD_${n}`;
  const d1 = (env as unknown as Record<string, unknown>)[name];
  // A declared-but-unbound shard is a deployment error: nothing is read from anywhere else.
  if (typeof d1 !== 'object' || d1 === null || typeof (d1 as D1Database).prepare !== 'function') return null;
  return d1 as D1Database;
}

/**
 * The shard a D1 binding name is (`DB` is 0, `DB_SHARD_N` is N), or null for any other name: the
 * inverse of `shardBinding`'s naming, for qualifying a session's bookmark with its shard.
 */
export function shardOfBindingName(name: string): number | null {
  if (name === 'DB') return 0;
  const m = /^DB_SHARD_([1-9][0-9]{0,3})$/.exec(name);
  if (m === null) return null;
  const n = Number(m[1]);
  return n < MAX_SHARDS ? n : null;
}

/** The drizzle handle over shard `n`; throws when the shard is not configured (an internal error). */
export function shardDb(env: Env, n: number): Db {
  const d1 = shardBinding(env, n);
  if (d1 === null) throw new Error(`D1 shard ${n} is not configured`);
  return database({ DB: d1 });
}

/** Every configured shard, in order: for platform-admin operations that must see all tenants. */
export function allShards(env: Env): number[] {
  const total = shardCount(env);
  if (total === null) throw new Error('WRIT_D1_SHARDS is not a shard count');
  return Array.from({ length: total }, (_, i) => i);
}

/**
 * The placement rule: the shard with the fewest tenants, the lowest number among equals.
 * Deterministic, and fills a newly added (empty) shard first.
 */
export function placementShard(tenantsPerShard: readonly number[]): number {
  if (tenantsPerShard.length === 0) throw new RangeError('no shard to place a tenant on');
  let best = 0;
  for (let i = 1; i < tenantsPerShard.length; i++) {
    if ((tenantsPerShard[i] as number) < (tenantsPerShard[best] as number)) best = i;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// The shard directory (table `tenant_shards` on shard 0)

export interface ShardDirectory {
  /** The shard holding `tenant_id`, or null for an unknown tenant. */
  shardOf(tenant_id: string): Promise<number | null>;
  nameTaken(name: string): Promise<boolean>;
  /** Tenants per shard for shards 0..total-1 (shards without tenants count 0). */
  tenantsPerShard(total: number): Promise<number[]>;
  /** Record a new tenant's shard; `name_taken` when the name exists on any shard. */
  reserve(t: {
    tenant_id: string;
    name: string;
    shard: number;
    now: number;
  }): Promise<'reserved' | 'name_taken'>;
  /** Forget a reservation whose tenant was never written. */
  release(tenant_id: string): Promise<void>;
  /**
   * Point a tenant at shard `to` (after an import there) only if the directory still names `from`,
   * the shard the import read: one statement, a compare-and-set. False when it names another shard
   * (another import of the tenant was recorded since) or does not hold the tenant.
   */
  move(tenant_id: string, from: number, to: number, now: number): Promise<boolean>;
  /**
   * Record a tenant imported from another deployment; `name_taken` as for `reserve`; `exists`
   * when the directory holds the tenant already (also when its row was written by a concurrent
   * adoption: one statement decides, `adopt` never fails on the tenant's own key).
   */
  adopt(t: {
    tenant_id: string;
    name: string;
    shard: number;
    now: number;
    created_at_unix_ms: number;
  }): Promise<'adopted' | 'name_taken' | 'exists'>;
}

/** `at_primary`: every read at shard 0's primary (a re-read after a write whose answer was lost). */
export function shardDirectory(env: Env, options: { readonly at_primary?: boolean } = {}): ShardDirectory {
  const db = options.at_primary === true ? atPrimary(shardDb(env, 0)) : shardDb(env, 0);
  /** A new directory entry, or false when another tenant holds the name (the unique index decides
   * between creations racing on whatever shards). */
  const insertEntry = async (
    row: Omit<typeof tenantShards.$inferInsert, 'updated_at_unix_ms'>,
    now: number,
  ): Promise<boolean> => {
    try {
      await db
        .insert(tenantShards)
        .values({ ...row, updated_at_unix_ms: now })
        .run();
      return true;
    } catch (e) {
      if (isNameRace(e)) return false;
      throw e;
    }
  };
  const isNameRace = (e: unknown) =>
    e instanceof Error &&
    /UNIQUE constraint failed: tenant_shards\.name/.test(`${e.message} ${String(e.cause)}`);
  return {
    async shardOf(tenant_id) {
      const row = await db
        .select({ shard: tenantShards.shard })
        .from(tenantShards)
        .where(eq(tenantShards.tenant_id, tenant_id))
        .get();
      return row?.shard ?? null;
    },
    async nameTaken(name) {
      const row = await db
        .select({ id: tenantShards.tenant_id })
        .from(tenantShards)
        .where(eq(tenantShards.name, name))
        .get();
      return row !== undefined;
    },
    async tenantsPerShard(total) {
      const rows = await db
        .select({ shard: tenantShards.shard, n: count() })
        .from(tenantShards)
        .groupBy(tenantShards.shard)
        .all();
      const out = Array.from({ length: total }, () => 0);
      for (const r of rows) if (r.shard < total) out[r.shard] = r.n;
      return out;
    },
    async reserve(t) {
      const row = { tenant_id: t.tenant_id, name: t.name, shard: t.shard, created_at_unix_ms: t.now };
      return (await insertEntry(row, t.now)) ? 'reserved' : 'name_taken';
    },
    async release(tenant_id) {
      await db.delete(tenantShards).where(eq(tenantShards.tenant_id, tenant_id)).run();
    },
    async move(tenant_id, from, to, now) {
      const r = await db
        .update(tenantShards)
        .set({ shard: to, updated_at_unix_ms: now })
        .where(and(eq(tenantShards.tenant_id, tenant_id), eq(tenantShards.shard, from)))
        .run();
      return r.meta.changes > 0;
    },
    async adopt(t) {
      // One batch (one round trip, one transaction, at the primary since it writes): the insert
      // adds the row unless the tenant id or the name is taken (either constraint, nothing
      // thrown), and the read after it, in the same transaction, tells which. A read and then an
      // insert in two calls let a concurrent adoption of the tenant land in between, and the
      // insert then failed on the primary key (an internal error instead of `exists`).
      const [inserted, found] = await db.batch([
        db
          .insert(tenantShards)
          .values({
            tenant_id: t.tenant_id,
            name: t.name,
            shard: t.shard,
            created_at_unix_ms: t.created_at_unix_ms,
            updated_at_unix_ms: t.now,
          })
          .onConflictDoNothing()
          .returning({ tenant_id: tenantShards.tenant_id }),
        db
          .select({ tenant_id: tenantShards.tenant_id })
          .from(tenantShards)
          .where(eq(tenantShards.tenant_id, t.tenant_id)),
      ]);
      if (inserted.length > 0) return 'adopted';
      return found.length > 0 ? 'exists' : 'name_taken';
    },
  };
}
