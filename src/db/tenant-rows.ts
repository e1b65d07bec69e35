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
 * frozen instead: every principal revoked), or exports a webhook signing secret
 * (`TENANT_TABLES_NOT_MOVED`).
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
  receiptArchiveEntries,
  receiptArchives,
  receiptSignatures,
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
  // Signatures after receipts (the import checks each names a receipt or an archive entry of the
  // file); `seq` is renumbered on import (`importTenantRows`).
  receipt_signatures: receiptSignatures,
  // Archives before their entries (a trigger refuses an entry whose manifest is not stored). The
  // archive objects stay where they are: R2 `BLOBS` is one bucket shared by every shard.
  receipt_archives: receiptArchives,
  receipt_archive_entries: receiptArchiveEntries,
  operations,
} as const satisfies Record<string, SQLiteTable & { tenant_id: unknown }>;

/**
 * Tenant tables a move deliberately leaves behind, and why (docs/scaling.md, "Moving a tenant").
 * - webhook_secrets: the only recoverable secrets a tenant has (HMAC keys, stored as issued). An
 *   export file carrying them would be a credential; a move already re-keys every principal, so
 *   executors get new webhook secrets too (issued after the move, like their new API keys).
 * - webhook_deliveries: the 24 h de-duplication window of delivered `webhook-id`s. Every message
 *   signed before the move carries a secret the new copy does not hold, so a retry of it is
 *   refused (401) there, never executed twice; the window starts empty and nothing is lost.
 */
export const TENANT_TABLES_NOT_MOVED = ['webhook_secrets', 'webhook_deliveries'] as const;

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
  const exportedMaxSeq = rows.reduce(
    (m, r) => (r.table === 'receipt_signatures' ? Math.max(m, Number(r.row.seq)) : m),
    0,
  );
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
        if (r.table === 'receipt_signatures') return insertSignatureRow(db, r.row, exportedMaxSeq);
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

/**
 * A signature row with a new `seq`. `seq` is one AUTOINCREMENT per database and the order in which
 * the tenant's log sequencer takes signatures in ("after my cursor"); the exported values may
 * belong to other tenants on the target shard, so they cannot be kept. Each row instead gets one
 * more than the larger of the target's highest `seq` and the highest exported `seq`, in export
 * (= old `seq`) order. So the relative order is kept, and every moved row lies above the
 * sequencer's cursor (a `seq` of the old shard, at most the highest exported one): the sequencer
 * re-reads them once on the new shard, skips those already leaves (a receipt is a leaf once) and
 * appends the rest, then the tenant's new receipts, in commit order.
 */
function insertSignatureRow(db: Db, row: TenantRow['row'], exportedMaxSeq: number) {
  return db.insert(receiptSignatures).select(
    sql`SELECT max(coalesce((SELECT max(${receiptSignatures.seq}) FROM ${receiptSignatures}), 0), ${exportedMaxSeq}) + 1,
        ${row.tenant_id}, ${row.receipt_sha256}, ${row.envelope}, ${row.created_at_unix_ms}
        WHERE 1`,
  );
}
