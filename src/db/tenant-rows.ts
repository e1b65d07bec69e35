/**
 * A tenant's rows on one shard, table by table, for moving the tenant to another shard
 * (src/services/tenant-moves.ts). The export reads every tenant-owned table in pages; the import
 * writes every row in one D1 batch, so a refused or failed import leaves nothing behind.
 *
 * Guarantees: only the tables and columns of `TENANT_TABLES` are read or written; every read and
 * the freeze filter on the one tenant; the import batch first gives the tenant unbounded quotas
 * (the quota triggers would otherwise count the imported rows a second time, or refuse them),
 * then sets the exported quota row as it was, last.
 * Never: deletes a row (receipts and approvals cannot be deleted; a moved tenant's old copy is
 * frozen instead: every principal revoked).
 */
import { and, asc, eq, getTableColumns, gt, isNull, sql } from 'drizzle-orm';
import type { SQLiteTable } from 'drizzle-orm/sqlite-core';
import type { TenantRow, TenantRowValue } from '../services/ports.js';
import type { Db } from './client.js';
import {
  approvals,
  contracts,
  grants,
  operations,
  policies,
  principals,
  receipts,
  runs,
  tenantQuotas,
  tenants,
} from './schema.js';

/**
 * Every table holding a tenant's rows, in import order (policies before the tenant that names
 * one; the quota row first, because the quota triggers read it). A table added to the schema
 * that holds tenant rows must be added here, or a move would leave its rows behind.
 */
export const TENANT_TABLES = {
  tenant_quotas: tenantQuotas,
  policies,
  tenants,
  principals,
  contracts,
  grants,
  approvals,
  runs,
  receipts,
  operations,
} as const satisfies Record<string, SQLiteTable & { tenant_id: unknown }>;

export type TenantTable = keyof typeof TENANT_TABLES;

const PAGE = 200;

/** Column names of `table`, or null for a table that is not a tenant table. */
export function tenantTableColumns(table: string): readonly string[] | null {
  if (!Object.hasOwn(TENANT_TABLES, table)) return null;
  return Object.keys(getTableColumns(TENANT_TABLES[table as TenantTable]));
}

/** Every row of the tenant, table by table in import order, each table in insertion order. */
export async function* exportTenantRows(db: Db, tenant_id: string): AsyncGenerator<TenantRow> {
  for (const [table, t] of Object.entries(TENANT_TABLES) as [
    TenantTable,
    (typeof TENANT_TABLES)[TenantTable],
  ][]) {
    let after = 0;
    for (;;) {
      const rows = (await db
        .select({ ...getTableColumns(t), __rowid: sql<number>`rowid` })
        .from(t)
        .where(and(eq(t.tenant_id, tenant_id), gt(sql`rowid`, after)))
        .orderBy(asc(sql`rowid`))
        .limit(PAGE)
        .all()) as Record<string, TenantRowValue>[];
      for (const r of rows) {
        const { __rowid, ...row } = r;
        after = __rowid as number;
        yield { table, row };
      }
      if (rows.length < PAGE) break;
    }
  }
}

/** Revoke every live principal of the tenant on this shard: no key reaches this copy any more. */
export async function freezeTenant(db: Db, tenant_id: string, now: number): Promise<string[]> {
  const r = await db
    .update(principals)
    .set({ revoked_at_unix_ms: now })
    .where(and(eq(principals.tenant_id, tenant_id), isNull(principals.revoked_at_unix_ms)))
    .returning({ principal_id: principals.principal_id })
    .all();
  return r.map((x) => x.principal_id);
}

/**
 * Write every row in one batch. `exists` when the tenant already has rows on this shard (nothing
 * written). The rows were verified by the caller; a constraint or trigger refusing one aborts
 * the whole batch.
 */
export async function importTenantRows(
  db: Db,
  tenant_id: string,
  rows: readonly TenantRow[],
  now: number,
): Promise<'imported' | 'exists'> {
  const present = await db
    .select({ id: tenants.tenant_id })
    .from(tenants)
    .where(eq(tenants.tenant_id, tenant_id))
    .get();
  if (present !== undefined) return 'exists';
  const quota = rows.find((r) => r.table === 'tenant_quotas');
  if (quota === undefined) throw new Error('an import needs the tenant_quotas row');
  const unbounded = Math.floor(Number.MAX_SAFE_INTEGER / 100);
  const statements = [
    db.insert(tenantQuotas).values({
      tenant_id,
      max_stored_bytes: unbounded,
      max_receipts_per_day: unbounded,
      max_open_approvals: unbounded,
      max_open_runs: unbounded,
      updated_at_unix_ms: now,
    }),
    ...rows
      .filter((r) => r.table !== 'tenant_quotas')
      .map((r) => {
        const t = TENANT_TABLES[r.table as TenantTable];
        // Columns were checked against the table by the caller; drizzle binds every value.
        return db.insert(t).values(r.row as typeof t.$inferInsert);
      }),
    // Last: the quota row exactly as exported (limits and usage), replacing the counts the
    // triggers kept while the rows above went in.
    db
      .update(tenantQuotas)
      .set(quota.row as Partial<typeof tenantQuotas.$inferInsert>)
      .where(eq(tenantQuotas.tenant_id, tenant_id)),
  ];
  await db.batch(statements as unknown as Parameters<Db['batch']>[0]);
  return 'imported';
}
