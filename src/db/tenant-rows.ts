/**
 * A tenant's rows on one shard, table by table, for moving the tenant to another shard
 * (src/services/tenant-moves.ts). The export reads every tenant-owned table in pages; the import
 * is staged (migrations/0011): bounded chunks, each one D1 batch, while the tenant is invisible,
 * then one batch that makes it live. A failed import leaves a staged tenant no key reaches, which
 * a retry of the same file resumes where the last committed chunk left it.
 *
 * Guarantees: only the tables and columns of `TENANT_TABLES` (and the staging tables) are read or
 * written; every read and the freeze filter on the one tenant; the staged import first gives the
 * tenant unbounded quotas at zero usage (the quota triggers would otherwise refuse imported rows;
 * they count each once, as stored here), and its last batch sets the exported quota row but for
 * `stored_bytes`, which is the triggers' count of the rows stored here (`stagedStoredBytes`); principals
 * reach `principals` only in that last batch, so no key authenticates a half-written tenant; each
 * staged batch commits only against the progress it was cut for (two importers never both write).
 * Never: deletes a row (receipts and approvals cannot be deleted; a moved tenant's old copy is
 * frozen instead: every principal revoked), except the rows of an import that is aborting
 * (migrations/0013: staged rows no key ever reached); or exports a webhook signing secret
 * (`TENANT_TABLES_NOT_MOVED`).
 */
import { and, asc, eq, getTableColumns, gt, isNull, sql } from 'drizzle-orm';
import type { SQLiteTable } from 'drizzle-orm/sqlite-core';
import type {
  ExportPosition,
  StagedImport,
  TenantColumn,
  TenantRow,
  TenantRowValue,
} from '../services/ports.js';
import type { Db } from './client.js';
import { StoredDocumentError } from './documents.js';
import { movedEvidenceText } from './evidence-encoding.js';
import { decodeReceipt } from './receipts.js';
import {
  PREVIOUS_SHARD_UNKNOWN,
  approvals,
  blobArchivesUnindexed,
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
  tenantImportGuard,
  tenantImportPrincipals,
  tenantImports,
  tenantImportsUnrecorded,
  tenantQuotas,
  tenants,
} from './schema.js';
import { decodeSignatureEnvelope, encodeSignatureEnvelope } from './signature-rows.js';

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

/** Each tenant table's columns: name, SQLite type and NOT NULL, from the drizzle schema. */
const TENANT_COLUMNS: ReadonlyMap<string, readonly TenantColumn[]> = new Map(
  Object.entries(TENANT_TABLES).map(([table, t]) => [
    table,
    // The key is the name an export writes (the `select` of `exportTenantRows` keys rows by it).
    Object.entries(getTableColumns(t)).map(([name, c]): TenantColumn => {
      // An import checks each value's type: a column of another type would need its own rule.
      const type =
        c.columnType === 'SQLiteText' ? 'text' : c.columnType === 'SQLiteInteger' ? 'integer' : null;
      if (type === null)
        throw new Error(`tenant column ${table}.${name} is ${c.columnType}, not TEXT or INTEGER`);
      return { name, type, notNull: c.notNull };
    }),
  ]),
);

/** The columns of `table` (name, type, NOT NULL), or null for a table that is not a tenant table. */
export function tenantTableColumns(table: string): readonly TenantColumn[] | null {
  return TENANT_COLUMNS.get(table) ?? null;
}

/**
 * Every row of the tenant, table by table in import order, each table in insertion order; with
 * `after`, only the rows after that position (a segmented export's next segment). Each row comes
 * with its position: the table's index in `TENANT_TABLES` and the row's `rowid`.
 */
export async function* exportTenantRows(
  db: Db,
  tenant_id: string,
  after: ExportPosition | null = null,
): AsyncGenerator<TenantRow & { readonly position: ExportPosition }> {
  const tables = Object.entries(TENANT_TABLES) as [TenantTable, (typeof TENANT_TABLES)[TenantTable]][];
  for (const [index, [table, t]] of tables.entries()) {
    if (after !== null && index < after.table) continue;
    let from = after !== null && index === after.table ? after.rowid : 0;
    for (;;) {
      const rows = (await db
        .select({ ...getTableColumns(t), __rowid: sql<number>`rowid` })
        .from(t)
        .where(and(eq(t.tenant_id, tenant_id), gt(sql`rowid`, from)))
        .orderBy(asc(sql`rowid`))
        .limit(PAGE)
        .all()) as Record<string, TenantRowValue>[];
      for (const r of rows) {
        const { __rowid, ...row } = r;
        from = __rowid as number;
        // A signature row carries its canonical envelope, and an authorization receipt row its
        // evidence object, as every export did before the positional forms
        // (src/db/signature-rows.ts, src/db/evidence-encoding.ts): a file never depends on a
        // storage form.
        if (table === 'receipt_signatures') row.envelope = exportedEnvelope(row);
        const exported = table === 'receipts' ? withMovedEvidence(row, 'object') : row;
        yield { table, row: exported, position: { table: index, rowid: from } };
      }
      if (rows.length < PAGE) break;
    }
  }
}

/**
 * A receipt row with its authorization evidence as an export file carries it (`object`: the
 * evidence object, as every export did before the positional encoding) or as this shard stores
 * it (`stored`: re-encoded on import, src/db/evidence-encoding.ts). The receipt is decoded (and
 * re-hashed) from the row only for an authorization row with evidence.
 */
function withMovedEvidence(
  row: Readonly<Record<string, TenantRowValue>>,
  as: 'object' | 'stored',
): Readonly<Record<string, TenantRowValue>> {
  if (typeof row.evidence !== 'string') return row;
  const evidence = movedEvidenceText(
    {
      kind: String(row.kind),
      evidence: row.evidence,
      body: () =>
        decodeReceipt({
          tenant_id: String(row.tenant_id),
          sha256: String(row.sha256),
          kind: String(row.kind),
          principal_id: typeof row.principal_id === 'string' ? row.principal_id : null,
          receipt: String(row.receipt),
          receipt_encoding: Number(row.receipt_encoding),
        }).body,
    },
    as,
  );
  return evidence === row.evidence ? row : { ...row, evidence };
}

/** Rows of one export page (one D1 query each): a segment's reads are counted in these. */
export const EXPORT_PAGE_ROWS = PAGE;

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

// ---------------------------------------------------------------------------------------------
// Staged imports (migrations/0011): any number of rows, in bounded batches, invisible until live

/** A D1 error raised by the chunk guard's trigger: the import's progress moved under the caller. */
const isProgressMoved = (e: unknown) =>
  e instanceof Error && /import_progress_moved/.test(`${e.message} ${String(e.cause)}`);

/**
 * The first statement of every staged batch: aborts the batch (trigger on `tenant_import_guard`)
 * unless the import of this file is staged with exactly `rows_done` rows written. D1 runs a batch
 * as one transaction, so the check and the writes after it are atomic.
 */
function guard(db: Db, s: StagedImport, rows_done: number) {
  return db.insert(tenantImportGuard).select(
    sql`SELECT ${s.tenant_id} WHERE NOT EXISTS (SELECT 1 FROM ${tenantImports}
        WHERE ${tenantImports.tenant_id} = ${s.tenant_id} AND ${tenantImports.file_sha256} = ${s.file_sha256}
        AND ${tenantImports.rows_done} = ${rows_done} AND ${tenantImports.rows_total} = ${s.rows_total}
        AND ${tenantImports.state} = 'staged')`,
  );
}

/**
 * Start the staged import (the mark and an unbounded quota row at zero usage, in one batch: the
 * quota triggers would otherwise refuse imported rows; they count each one as it goes in, which
 * `goLiveImport` keeps), or find it started.
 */
export async function beginStagedImport(
  db: Db,
  s: StagedImport,
  now: number,
): Promise<{ readonly rows_done: number } | 'exists' | 'other_import' | 'aborting'> {
  const started = async () => {
    const mark = await db.select().from(tenantImports).where(eq(tenantImports.tenant_id, s.tenant_id)).get();
    if (mark === undefined) return null;
    if (mark.state === 'aborting') return 'aborting' as const;
    return mark.file_sha256 === s.file_sha256 && mark.rows_total === s.rows_total
      ? { rows_done: mark.rows_done }
      : ('other_import' as const);
  };
  const found = await started();
  if (found !== null) return found;
  const present = await db
    .select({ id: tenantQuotas.tenant_id })
    .from(tenantQuotas)
    .where(eq(tenantQuotas.tenant_id, s.tenant_id))
    .get();
  if (present !== undefined) return 'exists';
  const unbounded = Math.floor(Number.MAX_SAFE_INTEGER / 100);
  try {
    await db.batch([
      db.insert(tenantImports).values({
        tenant_id: s.tenant_id,
        file_sha256: s.file_sha256,
        rows_total: s.rows_total,
        rows_done: 0,
        started_at_unix_ms: now,
        updated_at_unix_ms: now,
      }),
      db.insert(tenantQuotas).values({
        tenant_id: s.tenant_id,
        max_stored_bytes: unbounded,
        max_receipts_per_day: unbounded,
        max_open_approvals: unbounded,
        max_open_runs: unbounded,
        updated_at_unix_ms: now,
      }),
    ]);
    return { rows_done: 0 };
  } catch (e) {
    // Two imports starting at once: the primary keys decide; the loser wrote nothing.
    if (!(e instanceof Error && /UNIQUE constraint failed/.test(`${e.message} ${String(e.cause)}`))) throw e;
    return (await started()) ?? 'exists';
  }
}

/**
 * One chunk in one batch, with the progress mark moved past it. Principals go to the staging
 * table (live ones without a key digest yet), the exported quota row waits for `goLiveImport`.
 * The rows were verified by the caller; a constraint or trigger refusing one aborts the chunk.
 */
export async function writeStagedChunk(
  db: Db,
  s: StagedImport,
  chunk: { readonly from: number; readonly rows: readonly TenantRow[]; readonly exported_max_seq: number },
  now: number,
): Promise<'written' | 'moved'> {
  const statements = [
    guard(db, s, chunk.from),
    db
      .update(tenantImports)
      .set({ rows_done: chunk.from + chunk.rows.length, updated_at_unix_ms: now })
      .where(eq(tenantImports.tenant_id, s.tenant_id)),
    ...chunk.rows
      .filter((r) => r.table !== 'tenant_quotas')
      .map((r) => {
        if (r.table === 'receipt_signatures') return insertSignatureRow(db, r.row, chunk.exported_max_seq);
        if (r.table === 'principals') {
          const row = r.row as typeof principals.$inferInsert;
          return db
            .insert(tenantImportPrincipals)
            .values({ ...row, key_sha256: row.revoked_at_unix_ms === null ? null : row.key_sha256 });
        }
        const t = TENANT_TABLES[r.table as TenantTable];
        const row = r.table === 'receipts' ? withMovedEvidence(r.row, 'stored') : r.row;
        // Columns were checked against the table by the caller; drizzle binds every value.
        return db.insert(t).values(row as typeof t.$inferInsert);
      }),
  ];
  return runStaged(db, statements, 'written');
}

/** Give staged live principals their key digests (the caller cuts the list into bounded batches). */
export async function keyStagedPrincipals(
  db: Db,
  s: StagedImport,
  keys: readonly { readonly principal_id: string; readonly key_sha256: string }[],
): Promise<'written' | 'moved'> {
  const statements = [
    guard(db, s, s.rows_total),
    ...keys.map((k) =>
      db
        .update(tenantImportPrincipals)
        .set({ key_sha256: k.key_sha256 })
        .where(
          and(
            eq(tenantImportPrincipals.tenant_id, s.tenant_id),
            eq(tenantImportPrincipals.principal_id, k.principal_id),
          ),
        ),
    ),
  ];
  return runStaged(db, statements, 'written');
}

/**
 * The flip, one batch whose size does not grow with the tenant: the staged principals are copied
 * into `principals` (a live one still without a key digest fails the NOT NULL column: nothing goes
 * live), the quota row is set as exported (limits, retention window, receipts today) but for
 * `stored_bytes`, the count of the rows stored here (`stagedStoredBytes`), and the staging is
 * removed. `previous_shard` is the shard
 * the directory names now (null: the tenant is new here), noted for the recording (0014).
 */
export async function goLiveImport(
  db: Db,
  s: StagedImport,
  quota: TenantRow,
  previous_shard: number | null,
  now: number,
): Promise<'live' | 'moved'> {
  const columns = Object.keys(getTableColumns(principals)).map((c) => sql.identifier(c));
  const list = sql.join(columns, sql`, `);
  const statements = [
    guard(db, s, s.rows_total),
    db
      .insert(principals)
      .select(
        sql`SELECT ${list} FROM ${tenantImportPrincipals} WHERE ${tenantImportPrincipals.tenant_id} = ${s.tenant_id}`,
      ),
    db.delete(tenantImportPrincipals).where(eq(tenantImportPrincipals.tenant_id, s.tenant_id)),
    db
      .update(tenantQuotas)
      .set({
        ...(quota.row as Partial<typeof tenantQuotas.$inferInsert>),
        tenant_id: s.tenant_id,
        stored_bytes: stagedStoredBytes(s.tenant_id),
      })
      .where(eq(tenantQuotas.tenant_id, s.tenant_id)),
    // Live, directory not written yet: until it is, a retry of this file may re-key (0013).
    db.insert(tenantImportsUnrecorded).values({
      tenant_id: s.tenant_id,
      file_sha256: s.file_sha256,
      attempt: 0,
      live_at_unix_ms: now,
      updated_at_unix_ms: now,
      previous_shard,
    }),
    db.delete(tenantImports).where(eq(tenantImports.tenant_id, s.tenant_id)),
  ];
  return runStaged(db, statements, 'live');
}

/**
 * What an archive entry whose receipt has left D1 counts in `stored_bytes` (migrations/0004,
 * `receipts_archived_usage`: the receipt gives back its own count and adds this, once).
 */
export const ARCHIVE_ENTRY_STORED_BYTES = 200;

/**
 * The tenant's `stored_bytes` once its staged rows go live, read in the flip's own batch: what the
 * usage triggers counted while the chunks went in (every receipt with its in-row or R2 evidence,
 * signature, approval, run, grant, contract and policy row, as the target stores it), plus
 * `ARCHIVE_ENTRY_STORED_BYTES` for each archive entry whose receipt is not a row (no trigger
 * counts an entry on insert; retention counts it when it deletes the receipt). So the counter is
 * exactly what the triggers count for the same rows written here normally, whatever the file's
 * quota row says: that count was read before the rows (a non-freezing export races writes and
 * retention), by a release that did not count signatures yet (before 0010), or of rows the
 * source stored in longer forms than the import does (before 0004 and 0016).
 */
function stagedStoredBytes(tenant_id: string) {
  return sql`${tenantQuotas.stored_bytes} + ${ARCHIVE_ENTRY_STORED_BYTES} * (SELECT count(*) FROM ${receiptArchiveEntries} e
    WHERE e.tenant_id = ${tenant_id} AND NOT EXISTS (SELECT 1 FROM ${receipts} r WHERE r.tenant_id = e.tenant_id AND r.sha256 = e.sha256))`;
}

async function runStaged<T extends string>(
  db: Db,
  statements: readonly unknown[],
  ok: T,
): Promise<T | 'moved'> {
  try {
    await db.batch(statements as unknown as Parameters<Db['batch']>[0]);
    return ok;
  } catch (e) {
    if (isProgressMoved(e)) return 'moved';
    throw e;
  }
}

/**
 * A signature row with a new `seq`. `seq` is one AUTOINCREMENT per database and the order in which
 * the tenant's log sequencer takes signatures in ("after my cursor"); the exported values may
 * belong to other tenants on the target shard, so they cannot be kept. Each row instead gets one
 * more than the larger of the target's highest `seq` and the highest exported `seq`, in export
 * (= old `seq`) order. So the relative order is kept. The new numbers may lie below the
 * sequencer's cursor (a `seq` of the old shard, where a row the old copy took after a non-freezing
 * export can be higher), so that cursor names its shard: on another shard the sequencer reads the
 * tenant's rows from the first, skips those already leaves (a receipt is a leaf once) and appends
 * the rest, then the tenant's new receipts, in commit order (durable-objects/log-sequencer.ts).
 */
function insertSignatureRow(db: Db, row: TenantRow['row'], exportedMaxSeq: number) {
  // Stored as the writer stores a new row: positional when it reads back as exactly the file's
  // canonical envelope (an export of any release carries the envelope itself), else as it is.
  const envelope = encodeSignatureEnvelope(String(row.envelope), {
    tenant_id: String(row.tenant_id),
    receipt_sha256: String(row.receipt_sha256),
  });
  return db.insert(receiptSignatures).select(
    sql`SELECT max(coalesce((SELECT max(${receiptSignatures.seq}) FROM ${receiptSignatures}), 0), ${exportedMaxSeq}) + 1,
        ${row.tenant_id}, ${row.receipt_sha256}, ${envelope}, ${row.created_at_unix_ms}
        WHERE 1`,
  );
}

/** A stored signature row's canonical envelope, through the one reader (a 500 if it refuses). */
function exportedEnvelope(row: Record<string, TenantRowValue>): string {
  const { envelope, tenant_id, receipt_sha256 } = row;
  if (typeof envelope !== 'string' || typeof tenant_id !== 'string' || typeof receipt_sha256 !== 'string') {
    throw new StoredDocumentError('stored signature row is not text');
  }
  return decodeSignatureEnvelope(envelope, { tenant_id, receipt_sha256 });
}

// ---------------------------------------------------------------------------------------------
// Aborting a staged import (migrations/0013): the import is marked `aborting` first, so no batch
// of it commits any more, then its rows are deleted in bounded batches, the mark last.

/**
 * The tables an abort empties, children first; the quota row and the mark go in the last batch
 * (`abortStagedChunk`). `principals` is empty for a staged tenant (its principals wait in
 * `tenant_import_principals`); it is listed so nothing could be left behind.
 */
const ABORT_ORDER: readonly SQLiteTable[] = [
  tenantImportPrincipals,
  ...(Object.entries(TENANT_TABLES) as [string, SQLiteTable][])
    .filter(([name]) => name !== 'tenant_quotas')
    .map(([, t]) => t)
    .reverse(),
];

/** Aborts the batch (the guard table's trigger) unless the tenant's import here is aborting. */
function abortGuard(db: Db, tenant_id: string) {
  return db.insert(tenantImportGuard).select(
    sql`SELECT ${tenant_id} WHERE NOT EXISTS (SELECT 1 FROM ${tenantImports}
        WHERE ${tenantImports.tenant_id} = ${tenant_id} AND ${tenantImports.state} = 'aborting')`,
  );
}

/**
 * Mark the tenant's staged import `aborting` (one statement: from its commit on, every chunk, key
 * and flip batch of the import aborts). `aborting` also when it was already marked (an abort is
 * resumed); `live` when the tenant has rows here and no import (live, or a frozen copy): never
 * touched; `none` when nothing of the tenant is here.
 */
export async function markImportAborting(
  db: Db,
  tenant_id: string,
  now: number,
): Promise<'aborting' | 'live' | 'none'> {
  const marked = await db
    .update(tenantImports)
    .set({ state: 'aborting', updated_at_unix_ms: now })
    .where(and(eq(tenantImports.tenant_id, tenant_id), eq(tenantImports.state, 'staged')))
    .returning({ tenant_id: tenantImports.tenant_id })
    .all();
  if (marked.length > 0) return 'aborting';
  const mark = await db
    .select({ state: tenantImports.state })
    .from(tenantImports)
    .where(eq(tenantImports.tenant_id, tenant_id))
    .get();
  if (mark?.state === 'aborting') return 'aborting';
  const present = await db
    .select({ id: tenantQuotas.tenant_id })
    .from(tenantQuotas)
    .where(eq(tenantQuotas.tenant_id, tenant_id))
    .get();
  const tenant = await db
    .select({ id: tenants.tenant_id })
    .from(tenants)
    .where(eq(tenants.tenant_id, tenant_id))
    .get();
  // A mark still `staged` here means an import opened between the two reads: not ours to abort.
  return present !== undefined || tenant !== undefined || mark !== undefined ? 'live' : 'none';
}

/**
 * An archive manifest put its object in `blob_archives_unindexed` (0011), and the orphan collector
 * deletes nothing while any mark is left and fails on one whose object is missing. So the marks
 * of the manifests an abort deletes go with them, unless another tenant's manifest names the same
 * object. (`blob_archive_refs` rows already indexed from them stay: they only keep objects.)
 */
function forgetUnindexedArchives(db: Db, tenant_id: string, chosen: ReturnType<typeof sql>) {
  return db.delete(blobArchivesUnindexed).where(
    sql`${blobArchivesUnindexed.archive_sha256} IN (SELECT ${receiptArchives.archive_sha256} FROM ${receiptArchives} WHERE rowid IN (${chosen}))
        AND NOT EXISTS (SELECT 1 FROM ${receiptArchives} a WHERE a.archive_sha256 = ${blobArchivesUnindexed.archive_sha256} AND a.tenant_id <> ${tenant_id})`,
  );
}

/**
 * Delete at most `max` rows of the aborting import, from the first table (children first) that
 * still has some, in one guarded batch; `done` once the last batch removed the quota row and the
 * mark; `moved` when the import is not aborting (another abort finished it).
 */
export async function abortStagedChunk(
  db: Db,
  tenant_id: string,
  max: number,
): Promise<{ readonly deleted: number } | 'done' | 'moved'> {
  for (const t of ABORT_ORDER) {
    const tid = (t as unknown as { tenant_id: typeof tenants.tenant_id }).tenant_id;
    const any = await db.select({ id: tid }).from(t).where(eq(tid, tenant_id)).limit(1).get();
    if (any === undefined) continue;
    const chosen = sql`SELECT rowid FROM ${t} WHERE ${tid} = ${tenant_id} ORDER BY rowid LIMIT ${max}`;
    const statements = [
      abortGuard(db, tenant_id),
      ...(t === receiptArchives ? [forgetUnindexedArchives(db, tenant_id, chosen)] : []),
      db
        .delete(t)
        .where(sql`rowid IN (${chosen})`)
        .returning({ id: tid }),
    ];
    try {
      const results = (await db.batch(
        statements as unknown as Parameters<Db['batch']>[0],
      )) as readonly unknown[];
      return { deleted: (results[1] as unknown[]).length };
    } catch (e) {
      if (isProgressMoved(e)) return 'moved';
      throw e;
    }
  }
  return runStaged(
    db,
    [
      abortGuard(db, tenant_id),
      db.delete(tenantQuotas).where(eq(tenantQuotas.tenant_id, tenant_id)),
      db.delete(tenantImports).where(eq(tenantImports.tenant_id, tenant_id)),
    ],
    'done',
  );
}

// ---------------------------------------------------------------------------------------------
// An import live here whose directory write failed (migrations/0013): a retry of the same file
// re-keys the live principals (the failed attempt's keys were never delivered) and records it.

/** Aborts the batch unless `attempt` is still the latest retry of the tenant's unrecorded import. */
function rekeyGuard(db: Db, tenant_id: string, attempt: number) {
  return db.insert(tenantImportGuard).select(
    sql`SELECT ${tenant_id} WHERE NOT EXISTS (SELECT 1 FROM ${tenantImportsUnrecorded}
        WHERE ${tenantImportsUnrecorded.tenant_id} = ${tenant_id} AND ${tenantImportsUnrecorded.attempt} = ${attempt})`,
  );
}

/**
 * Take the next attempt at the tenant's unrecorded import of `file_sha256`: its number (a retry
 * that started earlier then fails its next batch) and the shard the directory named when it went
 * live (`previous_shard`: null for a tenant new here, `unknown` for an import live before 0014);
 * `other_file` when another file's import is the unrecorded one; `none` when there is none (never
 * imported here, or recorded).
 */
export async function beginRekey(
  db: Db,
  tenant_id: string,
  file_sha256: string,
  now: number,
): Promise<
  { readonly attempt: number; readonly previous_shard: number | null | 'unknown' } | 'other_file' | 'none'
> {
  const r = await db
    .update(tenantImportsUnrecorded)
    .set({ attempt: sql`${tenantImportsUnrecorded.attempt} + 1`, updated_at_unix_ms: now })
    .where(
      and(
        eq(tenantImportsUnrecorded.tenant_id, tenant_id),
        eq(tenantImportsUnrecorded.file_sha256, file_sha256),
      ),
    )
    .returning({
      attempt: tenantImportsUnrecorded.attempt,
      previous_shard: tenantImportsUnrecorded.previous_shard,
    })
    .get();
  if (r !== undefined) {
    const previous_shard = r.previous_shard === PREVIOUS_SHARD_UNKNOWN ? 'unknown' : r.previous_shard;
    return { attempt: r.attempt, previous_shard };
  }
  const other = await db
    .select({ id: tenantImportsUnrecorded.tenant_id })
    .from(tenantImportsUnrecorded)
    .where(eq(tenantImportsUnrecorded.tenant_id, tenant_id))
    .get();
  return other === undefined ? 'none' : 'other_file';
}

/** The tenant's unrevoked principals here, in insertion order. */
export async function livePrincipals(
  db: Db,
  tenant_id: string,
): Promise<{ readonly principal_id: string; readonly name: string; readonly roles: string }[]> {
  return db
    .select({ principal_id: principals.principal_id, name: principals.name, roles: principals.roles })
    .from(principals)
    .where(and(eq(principals.tenant_id, tenant_id), isNull(principals.revoked_at_unix_ms)))
    .orderBy(asc(sql`rowid`))
    .all();
}

/** New key digests for unrevoked principals, in one batch, only while `attempt` is the latest. */
export async function rekeyPrincipals(
  db: Db,
  tenant_id: string,
  attempt: number,
  keys: readonly { readonly principal_id: string; readonly key_sha256: string }[],
): Promise<'written' | 'moved'> {
  return runStaged(
    db,
    [
      rekeyGuard(db, tenant_id, attempt),
      ...keys.map((k) =>
        db
          .update(principals)
          .set({ key_sha256: k.key_sha256 })
          .where(
            and(
              eq(principals.tenant_id, tenant_id),
              eq(principals.principal_id, k.principal_id),
              isNull(principals.revoked_at_unix_ms),
            ),
          ),
      ),
    ],
    'written',
  );
}

/** The directory points here now: no more re-keying (only if `attempt` is still the latest). */
export async function settleImport(db: Db, tenant_id: string, attempt: number): Promise<'settled' | 'moved'> {
  return runStaged(
    db,
    [
      rekeyGuard(db, tenant_id, attempt),
      db.delete(tenantImportsUnrecorded).where(eq(tenantImportsUnrecorded.tenant_id, tenant_id)),
    ],
    'settled',
  );
}
