/**
 * Moving a tenant between D1 shards (platform admin): export its rows as canonical JSON lines,
 * import them on another shard. docs/scaling.md ("Shards") gives the operator's procedure.
 *
 * Format: one line per table row, `{"row":{...every column...},"table":"<name>"}` in RFC 8785
 * canonical form (src/core/canonical), lines separated by `\n`. Nothing else: the file can be
 * diffed, hashed and re-verified line by line.
 *
 * Guarantees: an import verifies every line before anything is written, and any problem refuses
 * the whole import with nothing written: a line that is not canonical JSON of that shape; an
 * unknown table or column, or a missing column (other than one a later migration added, which is
 * filled as that migration filled it: `MIGRATED_COLUMNS`); a row of another tenant; other than exactly one
 * `tenants` and one `tenant_quotas` row; a receipt whose stored text is not canonical, whose body
 * (decoded from either encoding; a compact row gets its tenant and principal from the row's
 * columns) does not hash to its digest or whose digest is not the row's key; evidence held in R2
 * whose reference is malformed; a signature row whose envelope names another receipt, tenant or
 * time, or no receipt or archive entry of the file, or out of `seq` order; an archive entry of no
 * archive of the file; a policy, contract or grant document that does not hash to its key.
 * R2 objects (large evidence, receipt archives) are not read: the bucket is shared by every shard,
 * a move neither copies nor changes them, and every read re-hashes an object against its digest.
 * Webhook secrets and deliveries are not moved (src/db/tenant-rows.ts, `TENANT_TABLES_NOT_MOVED`).
 * The rows are then written staged on the target shard (`importTenant`): bounded chunks while the
 * tenant is invisible, one last batch that makes it live; all or nothing as seen from outside,
 * and a failed import is resumed by sending the same file again. An API key names its shard (src/core/identity), so a move
 * re-keys the tenant: every principal that was live gets a new key naming the target shard,
 * returned once by the import; keys issued before the move keep failing (the old copy is frozen:
 * every principal revoked, by a freezing export or at the latest by the import).
 * Two ways out of a move that did not finish (migrations/0013): a staged import that will not be
 * finished is aborted (`abortImport`: marked first, so no batch of it commits any more, then its
 * rows deleted in bounded batches); an import that went live but whose directory write failed is
 * finished by the same file again (`finishUnrecorded`: every live principal re-keyed, so the
 * undelivered keys never work).
 * Never: deletes the old copy (receipts are append-only; a frozen copy is an archive), or lets
 * an import overwrite a tenant already on the target shard.
 */
import { z } from 'zod';
import { canonicalize, digestOf, sha256HexOfText } from '../core/canonical/canonical.js';
import { decodeJsonText, type JsonValue } from '../core/canonical/json.js';
import { quoted } from '../core/errors.js';
import { apiKeyDigest } from '../core/identity/identity.js';
import { Identifier } from '../core/schema.js';
import { newApiKey } from '../db/ids.js';
import { RECEIPT_ENCODING, decodeReceipt } from '../db/receipts.js';
import type { LogFields } from './context.js';
import { ServiceError, notFound } from './errors.js';
import type { TenantMovePort, TenantRow, TenantRowValue } from './ports.js';

/**
 * Bounds on one import request. The file is read and verified whole (in memory) before anything
 * is written, so these bound the Worker's memory, not D1: the writes are chunked
 * (`IMPORT_CHUNK_ROWS`).
 */
export const MAX_IMPORT_BYTES = 32 * 1024 * 1024;
export const MAX_IMPORT_ROWS = 200_000;
/** A stored document is at most 16 MiB (src/db/documents.ts); a line holds one row. */
const MAX_LINE_BYTES = 17 * 1024 * 1024;

const ExportRequest = z.strictObject({
  /** Revoke every live principal of the tenant first, so nothing changes the copy after it is read. */
  freeze: z.boolean().optional(),
});
export { ExportRequest as TenantExportRequest };

/**
 * The tenant's rows as canonical JSON lines (each ends with `\n`). With `freeze`, every live
 * principal is revoked first, so no key changes the copy while (or after) it is read; the export
 * shows those principals as they were just before the freeze, so the import re-keys them.
 */
export async function* exportTenant(
  port: TenantMovePort,
  tenant_id: string,
  options: { readonly freeze?: boolean | undefined },
  now: number,
  log: (fields: LogFields) => void,
): AsyncGenerator<string> {
  const shard = Identifier.safeParse(tenant_id).success ? await port.shardOf(tenant_id) : null;
  if (shard === null) throw notFound('tenant');
  const frozen = new Set(options.freeze === true ? await port.freeze(shard, tenant_id, now) : []);
  log({ tenant_id, shard, frozen_principals: frozen.size });
  for await (const r of port.exportRows(shard, tenant_id)) {
    const row =
      r.table === 'principals' && frozen.has(String(r.row.principal_id))
        ? { ...r.row, revoked_at_unix_ms: null }
        : r.row;
    yield `${canonicalize({ row, table: r.table })}\n`;
  }
}

const refuse = (line: number, message: string) =>
  new ServiceError('invalid_request', `import refused, nothing written: line ${line}: ${message}`, [
    { path: `line ${line}`, message },
  ]);

/** Parse and verify every line; throws (nothing written) on the first problem. */
export function verifyExport(
  port: Pick<TenantMovePort, 'columnsOf'>,
  text: string,
): {
  readonly tenant_id: string;
  readonly name: string;
  readonly created_at_unix_ms: number;
  readonly rows: TenantRow[];
} {
  const lines = text.split('\n');
  // One trailing newline ends the last line; an empty line anywhere else is not a row.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  if (lines.length === 0) throw refuse(0, 'the export is empty');
  if (lines.length > MAX_IMPORT_ROWS) throw refuse(MAX_IMPORT_ROWS + 1, `more than ${MAX_IMPORT_ROWS} rows`);
  const rows: TenantRow[] = [];
  let tenant: { tenant_id: string; name: string; created_at_unix_ms: number } | null = null;
  let quotas = 0;
  const older = new OlderExportFill();
  for (const [i, line] of lines.entries()) {
    const n = i + 1;
    const decoded = decodeJsonText(line, { maxBytes: MAX_LINE_BYTES, maxDepth: 4 });
    if (!decoded.ok) throw refuse(n, `not json (${decoded.error.reason})`);
    // Canonical form only: a line re-serialized differently is not what an export wrote.
    if (canonicalize(decoded.value) !== line) throw refuse(n, 'not in canonical form (RFC 8785)');
    const row = parseRow(port, n, decoded.value, older);
    if (row.table === 'tenants') {
      if (tenant !== null) throw refuse(n, 'a second tenants row');
      tenant = {
        tenant_id: String(row.row.tenant_id),
        name: String(row.row.name),
        created_at_unix_ms: Number(row.row.created_at_unix_ms),
      };
    }
    if (row.table === 'tenant_quotas') quotas += 1;
    verifyDocuments(n, row);
    rows.push(row);
  }
  if (tenant === null) throw refuse(lines.length, 'no tenants row');
  if (quotas !== 1) throw refuse(lines.length, 'exactly one tenant_quotas row is required');
  const owner = tenant.tenant_id;
  for (const [i, r] of rows.entries()) {
    // Rows of two tenants in one file would plant one tenant's rows under another's move.
    if (r.row.tenant_id !== owner) throw refuse(i + 1, `row of another tenant than ${quoted(owner)}`);
  }
  verifyReferences(rows);
  return { ...tenant, rows };
}

/**
 * Rows that refer to other rows of the file: a signature names a receipt of the file (in D1 or
 * archived), in strictly increasing `seq` (the log's order, kept by the import); an archive entry
 * names an archive of the file.
 */
function verifyReferences(rows: readonly TenantRow[]): void {
  const of = (table: string, column: string) =>
    new Set(rows.filter((r) => r.table === table).map((r) => r.row[column]));
  const stored = of('receipts', 'sha256');
  const archived = of('receipt_archive_entries', 'sha256');
  const archives = of('receipt_archives', 'archive_sha256');
  let lastSeq = 0;
  for (const [i, r] of rows.entries()) {
    if (r.table === 'receipt_signatures') {
      const sha = r.row.receipt_sha256;
      if (!stored.has(sha) && !archived.has(sha))
        throw refuse(i + 1, `signature of receipt ${quoted(String(sha))}, which the file does not hold`);
      const seq = Number(r.row.seq);
      if (!(seq > lastSeq)) throw refuse(i + 1, 'receipt_signatures out of seq order');
      lastSeq = seq;
    }
    if (r.table === 'receipt_archive_entries' && !archives.has(r.row.archive_sha256))
      throw refuse(
        i + 1,
        `archive entry of archive ${quoted(String(r.row.archive_sha256))}, which the file does not hold`,
      );
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

function parseRow(
  port: Pick<TenantMovePort, 'columnsOf'>,
  n: number,
  v: JsonValue,
  older: OlderExportFill,
): TenantRow {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw refuse(n, 'not an object');
  const keys = Object.keys(v);
  if (keys.length !== 2 || !('table' in v) || !('row' in v))
    throw refuse(n, 'expected exactly "row" and "table"');
  const { table, row } = v;
  if (typeof table !== 'string') throw refuse(n, '"table" is not a string');
  const columns = port.columnsOf(table);
  // An unknown table could be one this version does not know how to verify: refuse, never skip.
  if (columns === null) throw refuse(n, `unknown table ${quoted(table)}`);
  if (typeof row !== 'object' || row === null || Array.isArray(row))
    throw refuse(n, '"row" is not an object');
  for (const k of Object.keys(row)) {
    if (!columns.includes(k)) throw refuse(n, `unknown column ${quoted(k)} of ${table}`);
  }
  const out: Record<string, string | number | null> = {};
  // Only a column a later migration added may be missing (filled below as it filled it).
  const missing = older.missing(
    n,
    table,
    columns.filter((c) => !Object.hasOwn(row, c)),
  );
  for (const c of columns) {
    if (missing.has(c)) continue;
    const value = row[c];
    if (!(
      value === null ||
      typeof value === 'string' ||
      (typeof value === 'number' && Number.isSafeInteger(value))
    )) {
      throw refuse(n, `column ${quoted(c)} is not text, an integer or null`);
    }
    out[c] = value as string | number | null;
  }
  if (typeof out.tenant_id !== 'string') throw refuse(n, 'tenant_id is not text');
  older.fill(n, table, out, missing);
  return { table, row: out };
}

// ---------------------------------------------------------------------------------------------
// Exports taken before a later migration added a column to a moved table

/** How a migration filled a column it added, for the rows that already existed. */
type MigratedFill =
  | { readonly value: TenantRowValue }
  /** migrations/0009: the first reconciliation receipt stored for the operation (`OlderExportFill`). */
  | { readonly backfill: 'reconciliation_receipt' };

/**
 * Every column that migrations 0004..0012 added to a table a move carries (`TENANT_TABLES`), and
 * what the migration filled the rows already there with. Exports exist since migration 0003
 * (shards); 0005 adds a whole table (an older export has no rows of it), and 0006, 0008, 0010,
 * 0011 and 0012 add no column to a moved table. An export taken before one of these migrations
 * lacks exactly that column: the import fills it as the migration would have, so the rows are the
 * ones the source database holds now. A row missing any other column is refused.
 */
export const MIGRATED_COLUMNS: readonly {
  readonly table: string;
  readonly column: string;
  readonly migration: string;
  readonly fill: MigratedFill;
}[] = [
  // Every row before 0004 was `{sha256, body}` (encoding 1) with its evidence in the row.
  { table: 'receipts', column: 'receipt_encoding', migration: '0004', fill: { value: 1 } },
  { table: 'receipts', column: 'evidence_sha256', migration: '0004', fill: { value: null } },
  { table: 'receipts', column: 'evidence_bytes', migration: '0004', fill: { value: null } },
  { table: 'tenant_quotas', column: 'receipt_retention_days', migration: '0004', fill: { value: 90 } },
  { table: 'approvals', column: 'first_approved_by', migration: '0007', fill: { value: null } },
  { table: 'approvals', column: 'first_approved_at_unix_ms', migration: '0007', fill: { value: null } },
  { table: 'approvals', column: 'first_approval_lifetime_ms', migration: '0007', fill: { value: null } },
  { table: 'approvals', column: 'idempotency_key', migration: '0007', fill: { value: null } },
  {
    table: 'operations',
    column: 'reconciliation_receipt_sha256',
    migration: '0009',
    fill: { backfill: 'reconciliation_receipt' },
  },
];

const RECONCILED = new Set(['reconciled_succeeded', 'reconciled_no_effect']);

/**
 * The state one file's fill needs, line by line (rows arrive in export order: receipts before
 * operations). Refuses, rather than guesses: a column not in `MIGRATED_COLUMNS`; rows of one
 * table that disagree on which columns they lack (one export is taken at one schema); and a
 * back-fill it cannot compute as the migration did (a receipt after a back-filled operation, or a
 * reconciliation receipt whose `operation_id` is not text, which SQL would compare by affinity).
 */
class OlderExportFill {
  readonly #lacking = new Map<string, string>();
  /** Per operation id, the first reconciliation receipt by (`created_at_unix_ms`, `sha256`). */
  readonly #reconciliations = new Map<string, { readonly at: number; readonly sha256: string }>();
  #untextualReconciliation = false;
  #backfilled = false;

  missing(n: number, table: string, absent: readonly string[]): ReadonlySet<string> {
    for (const c of absent) {
      if (!MIGRATED_COLUMNS.some((m) => m.table === table && m.column === c))
        throw refuse(n, `missing column ${quoted(c)} of ${table}`);
    }
    const key = absent.join(',');
    const first = this.#lacking.get(table);
    if (first === undefined) this.#lacking.set(table, key);
    else if (first !== key) throw refuse(n, `rows of ${table} differ in the columns they lack`);
    return new Set(absent);
  }

  fill(n: number, table: string, out: Record<string, TenantRowValue>, missing: ReadonlySet<string>): void {
    if (table === 'receipts') {
      // The back-fill reads every receipt of the file: one after it would have been missed.
      if (this.#backfilled) throw refuse(n, 'a receipt after an operation whose column was back-filled');
      this.#noteReceipt(out);
    }
    for (const c of missing) {
      const m = MIGRATED_COLUMNS.find((x) => x.table === table && x.column === c);
      if (m === undefined) throw refuse(n, `missing column ${quoted(c)} of ${table}`);
      out[c] = 'value' in m.fill ? m.fill.value : this.#reconciliationOf(n, out);
    }
  }

  /**
   * migrations/0009: `json_extract` of `$.body.operation_id`, else of `$.operation_id`, of the
   * stored text (encoding 1 wraps the body, encoding 2 is the body).
   */
  #noteReceipt(r: Record<string, TenantRowValue>): void {
    if (r.kind !== 'reconciliation' || typeof r.receipt !== 'string') return;
    const decoded = decodeJsonText(r.receipt, { maxBytes: MAX_LINE_BYTES, maxDepth: 64 });
    // Text that does not decode is refused by `verifyDocuments` on this same line.
    if (!decoded.ok) return;
    const at = (v: JsonValue | undefined, k: string): JsonValue | undefined =>
      typeof v === 'object' && v !== null && !Array.isArray(v) ? v[k] : undefined;
    const id = at(at(decoded.value, 'body'), 'operation_id') ?? at(decoded.value, 'operation_id') ?? null;
    if (id === null) return;
    if (typeof id !== 'string') {
      this.#untextualReconciliation = true;
      return;
    }
    const created = Number(r.created_at_unix_ms);
    const sha256 = String(r.sha256);
    const best = this.#reconciliations.get(id);
    if (best === undefined || created < best.at || (created === best.at && sha256 < best.sha256))
      this.#reconciliations.set(id, { at: created, sha256 });
  }

  #reconciliationOf(n: number, op: Record<string, TenantRowValue>): TenantRowValue {
    this.#backfilled = true;
    if (!RECONCILED.has(String(op.state))) return null;
    if (this.#untextualReconciliation)
      throw refuse(n, 'cannot back-fill reconciliation_receipt_sha256: a receipt names a non-text operation');
    return this.#reconciliations.get(String(op.operation_id))?.sha256 ?? null;
  }
}

/** Every digest a row is keyed by is recomputed from the bytes the row holds. */
function verifyDocuments(n: number, r: TenantRow): void {
  const text = (column: string): JsonValue => {
    const raw = r.row[column];
    if (typeof raw !== 'string') throw refuse(n, `${r.table}.${column} is not text`);
    const decoded = decodeJsonText(raw, { maxBytes: MAX_LINE_BYTES, maxDepth: 64 });
    if (!decoded.ok) throw refuse(n, `${r.table}.${column} is not json`);
    if (canonicalize(decoded.value) !== raw) throw refuse(n, `${r.table}.${column} is not canonical`);
    return decoded.value;
  };
  const expect = (ok: boolean, what: string) => {
    if (!ok) throw refuse(n, `${what} does not match its digest`);
  };
  switch (r.table) {
    case 'receipts': {
      const stored = text('receipt');
      const { sha256, principal_id, receipt, receipt_encoding } = r.row;
      if (receipt_encoding === RECEIPT_ENCODING.wrapped) {
        const keys = typeof stored === 'object' && stored !== null ? Object.keys(stored).sort() : [];
        if (keys.join(',') !== 'body,sha256') throw refuse(n, 'receipt is not {body, sha256}');
      }
      // The receipt's identity is its body's digest, and the row is keyed by that identity. The
      // reader's own decoder: a compact row's body is completed from the row's tenant and
      // principal columns, so an edited column is caught as an edited body is.
      let decoded = false;
      if (
        typeof sha256 === 'string' &&
        typeof receipt === 'string' &&
        typeof receipt_encoding === 'number' &&
        (principal_id === null || typeof principal_id === 'string')
      ) {
        try {
          decoded =
            decodeReceipt({
              tenant_id: String(r.row.tenant_id),
              sha256,
              principal_id,
              receipt,
              receipt_encoding,
            }).sha256 === sha256;
        } catch {
          decoded = false;
        }
      }
      expect(decoded, `receipt ${quoted(String(sha256))}`);
      if (r.row.evidence !== null) text('evidence');
      verifyEvidenceRef(n, r);
      return;
    }
    case 'receipt_signatures': {
      const e = text('envelope');
      // What the store checks before it writes a signature row (src/db/receipts.ts).
      const ok =
        typeof e === 'object' &&
        e !== null &&
        !Array.isArray(e) &&
        e.receipt_sha256 === r.row.receipt_sha256 &&
        e.tenant_id === r.row.tenant_id &&
        e.issued_at_unix_ms === r.row.created_at_unix_ms;
      if (!ok) throw refuse(n, 'signature envelope does not match its row');
      return;
    }
    case 'receipt_archives':
      if (!SHA256_HEX.test(String(r.row.archive_sha256))) throw refuse(n, 'archive_sha256 is not a digest');
      return;
    case 'receipt_archive_entries':
      if (!SHA256_HEX.test(String(r.row.sha256)) || !SHA256_HEX.test(String(r.row.archive_sha256)))
        throw refuse(n, 'archive entry is not two digests');
      return;
    case 'policies':
      expect(digestOf(text('document')) === r.row.policy_sha256, 'policy');
      return;
    case 'contracts':
      expect(digestOf(text('document')) === r.row.tool_contract_sha256, 'contract');
      return;
    case 'grants':
      expect(digestOf(text('document')) === r.row.grant_sha256, 'grant');
      return;
    default:
      return;
  }
}

/**
 * Evidence held in R2: the row names it by digest and size, with no text of its own. Only the
 * reference is checked (the object stays in the shared bucket; reads re-hash it).
 */
function verifyEvidenceRef(n: number, r: TenantRow): void {
  const { evidence, evidence_sha256, evidence_bytes } = r.row;
  const ok =
    evidence_sha256 === null
      ? evidence_bytes === null
      : evidence === null &&
        SHA256_HEX.test(String(evidence_sha256)) &&
        typeof evidence_bytes === 'number' &&
        evidence_bytes > 0;
  if (!ok) throw refuse(n, 'receipt evidence reference is malformed');
}

/** A chunk of a staged import: at most this many rows... */
export const IMPORT_CHUNK_ROWS = 100;
/** ...and at most this many bytes of lines (a longer line goes alone), so a batch stays small. */
export const IMPORT_CHUNK_BYTES = 1024 * 1024;

export interface ImportOptions {
  /** Rows per chunk (tests force several chunks with a small number). */
  readonly chunk_rows?: number | undefined;
}

/**
 * The rows from `from` on, cut into chunks of at most `rows` rows and `IMPORT_CHUNK_BYTES` bytes
 * (by canonical line length). Deterministic for a file, though a resumed import may cut
 * differently from the first attempt: progress is counted in rows, not chunks.
 */
function* chunksFrom(rows: readonly TenantRow[], from: number, max: number): Generator<readonly TenantRow[]> {
  let chunk: TenantRow[] = [];
  let bytes = 0;
  for (let i = from; i < rows.length; i++) {
    const r = rows[i] as TenantRow;
    const size = canonicalize({ row: r.row, table: r.table }).length;
    if (chunk.length > 0 && (chunk.length >= max || bytes + size > IMPORT_CHUNK_BYTES)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(r);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

const abortUnfinished = (tenant_id: string, shard: number) =>
  new ServiceError(
    'conflict',
    `an abort of the staged import of tenant ${quoted(tenant_id)} on shard ${shard} has not finished; abort it again to finish it, then import`,
  );

const progressMoved = (tenant_id: string) =>
  new ServiceError(
    'conflict',
    `another import of this file is writing tenant ${quoted(tenant_id)}, or it finished; send the file again to resume`,
  );

/**
 * Verify an export and write it on `shard`, re-keyed, then point the directory there and freeze
 * the copy the tenant came from (if it was on another shard of this deployment). Returns each
 * live principal's new key, once.
 *
 * The whole file is verified before anything is written. It is then written staged: bounded
 * chunks, each one D1 batch, while the tenant is invisible (its principals wait in a staging
 * table, so no key authenticates; the directory does not point here), and one last batch makes it
 * live. A failure in between leaves only the invisible staged rows; sending the same file again
 * resumes after the last chunk that committed (keys are issued anew on every attempt, so keys of
 * a failed attempt never work). Another file for a tenant staged on `shard` is refused, and so is
 * any file while an abort of the tenant's import there is unfinished. If the directory write
 * fails after the tenant went live, the same file again finishes the move (`finishUnrecorded`).
 */
export async function importTenant(
  port: TenantMovePort,
  shard: number,
  text: string,
  now: number,
  log: (fields: LogFields) => void,
  options: ImportOptions = {},
) {
  if (!port.shardExists(shard)) throw new ServiceError('invalid_request', `shard ${shard} is not configured`);
  const chunkRows = options.chunk_rows ?? IMPORT_CHUNK_ROWS;
  if (!Number.isSafeInteger(chunkRows) || chunkRows < 1)
    throw new RangeError('chunk_rows must be a positive integer');
  const verified = verifyExport(port, text);
  const { tenant_id, name, rows } = verified;
  const previous = await port.shardOf(tenant_id);
  if (previous === shard)
    throw new ServiceError('conflict', `tenant ${quoted(tenant_id)} is already on shard ${shard}`);
  // A tenant new to this deployment must not take a name another tenant holds.
  if (previous === null && (await port.nameTaken(name))) {
    throw new ServiceError('conflict', `tenant ${quoted(name)} already exists`);
  }
  const staged = { tenant_id, file_sha256: sha256HexOfText(text), rows_total: rows.length };
  const begun = await port.beginImport(shard, staged, now);
  if (begun === 'exists')
    return finishUnrecorded(port, shard, verified, staged.file_sha256, previous, now, log);
  if (begun === 'aborting') throw abortUnfinished(tenant_id, shard);
  if (begun === 'other_import')
    throw new ServiceError(
      'conflict',
      `an import of another export of tenant ${quoted(tenant_id)} is staged on shard ${shard}; send that file again to finish it`,
    );
  const exported_max_seq = rows.reduce(
    (m, r) => (r.table === 'receipt_signatures' ? Math.max(m, Number(r.row.seq)) : m),
    0,
  );
  let from = begun.rows_done;
  let chunks = 0;
  for (const chunk of chunksFrom(rows, from, chunkRows)) {
    if ((await port.importChunk(shard, staged, { from, rows: chunk, exported_max_seq }, now)) === 'moved')
      throw progressMoved(tenant_id);
    from += chunk.length;
    chunks += 1;
  }
  // A key names its shard: the old key cannot reach the new copy, so each live principal gets a
  // new one. Issued on this attempt, written to the staging rows, live only with the last batch.
  const keys: { principal_id: string; name: string; roles: JsonValue; api_key: string }[] = [];
  for (const r of rows) {
    if (r.table !== 'principals' || r.row.revoked_at_unix_ms !== null) continue;
    keys.push({
      principal_id: String(r.row.principal_id),
      name: String(r.row.name),
      roles: JSON.parse(String(r.row.roles)) as JsonValue,
      api_key: newApiKey(shard),
    });
  }
  for (let i = 0; i < keys.length; i += chunkRows) {
    const part = keys
      .slice(i, i + chunkRows)
      .map((k) => ({ principal_id: k.principal_id, key_sha256: apiKeyDigest(k.api_key) }));
    if ((await port.keyPrincipals(shard, staged, part)) === 'moved') throw progressMoved(tenant_id);
  }
  const quota = rows.find((r) => r.table === 'tenant_quotas') as TenantRow;
  if ((await port.goLive(shard, staged, quota, now)) === 'moved') throw progressMoved(tenant_id);
  const frozen = await recordMove(port, shard, verified, previous, 0, now);
  log({
    tenant_id,
    shard,
    previous_shard: previous,
    rows: rows.length,
    resumed_at_row: begun.rows_done,
    chunks,
    frozen_principals: frozen.length,
  });
  return { tenant_id, name, shard, previous_shard: previous, rows: rows.length, keys };
}

// ---------------------------------------------------------------------------------------------
// After go-live: the directory, the old copy, and a retry when the directory write failed

/**
 * Point the directory at `shard`, freeze the copy left behind, and close the re-keying window
 * (`settleImport`, only if `attempt` is still the latest). Returns the frozen principals.
 */
async function recordMove(
  port: TenantMovePort,
  shard: number,
  verified: { readonly tenant_id: string; readonly name: string; readonly created_at_unix_ms: number },
  previous: number | null,
  attempt: number,
  now: number,
): Promise<string[]> {
  const { tenant_id, name } = verified;
  const recorded = await port.record({
    tenant_id,
    name,
    shard,
    created_at_unix_ms: verified.created_at_unix_ms,
    now,
  });
  if (recorded === 'name_taken') {
    // Lost a race for the name after the check above: the copy is written but the directory
    // does not point at it; the keys below still reach it. Reported, not hidden.
    throw new ServiceError('conflict', `another tenant took the name ${quoted(name)} during the import`);
  }
  // The copy left behind must not take writes any more: no key of it authenticates.
  const frozen = previous === null ? [] : await port.freeze(previous, tenant_id, now);
  // A retry that began after this attempt re-keyed has replaced (or will replace) this attempt's
  // keys: they must not be returned as if they worked.
  if ((await port.settleImport(shard, tenant_id, attempt)) === 'moved')
    throw new ServiceError(
      'conflict',
      `a later retry of the import of tenant ${quoted(tenant_id)} took over; its keys are the ones that work`,
    );
  return frozen;
}

/**
 * The tenant is live on `shard` but the directory does not point there. If this file's import
 * went live there and its directory write failed (`record` threw: its keys were never
 * delivered), finish the move: new keys for every live principal (the undelivered ones are
 * replaced, so they never work), the directory, the old copy frozen. Anything else (another
 * file, an import recorded or from before migration 0013, a tenant that was never imported) is
 * refused as before: the tenant already has rows on `shard`.
 */
async function finishUnrecorded(
  port: TenantMovePort,
  shard: number,
  verified: { readonly tenant_id: string; readonly name: string; readonly created_at_unix_ms: number },
  file_sha256: string,
  previous: number | null,
  now: number,
  log: (fields: LogFields) => void,
) {
  const { tenant_id, name } = verified;
  const begun = await port.beginRekey(shard, tenant_id, file_sha256, now);
  if (begun === 'none')
    throw new ServiceError('conflict', `tenant ${quoted(tenant_id)} already has rows on shard ${shard}`);
  if (begun === 'other_file')
    throw new ServiceError(
      'conflict',
      `another export of tenant ${quoted(tenant_id)} went live on shard ${shard}; send that file again to finish it`,
    );
  const keys = (await port.livePrincipals(shard, tenant_id)).map((p) => ({
    principal_id: p.principal_id,
    name: p.name,
    roles: JSON.parse(p.roles) as JsonValue,
    api_key: newApiKey(shard),
  }));
  for (let i = 0; i < keys.length; i += IMPORT_CHUNK_ROWS) {
    const part = keys
      .slice(i, i + IMPORT_CHUNK_ROWS)
      .map((k) => ({ principal_id: k.principal_id, key_sha256: apiKeyDigest(k.api_key) }));
    if ((await port.rekeyPrincipals(shard, tenant_id, begun.attempt, part)) === 'moved')
      throw progressMoved(tenant_id);
  }
  const frozen = await recordMove(port, shard, verified, previous, begun.attempt, now);
  log({
    tenant_id,
    shard,
    previous_shard: previous,
    rekeyed_attempt: begun.attempt,
    rekeyed_principals: keys.length,
    frozen_principals: frozen.length,
  });
  return { tenant_id, name, shard, previous_shard: previous, rows: 0, keys };
}

// ---------------------------------------------------------------------------------------------
// Aborting a staged import (platform admin; migrations/0013)

export interface AbortOptions {
  /** Rows per delete batch (tests force several batches with a small number). */
  readonly chunk_rows?: number | undefined;
}

/**
 * Remove every row of `tenant_id`'s staged import on `shard`: the import is marked `aborting`
 * first (from then on no chunk, key or flip of it commits, whoever sends it), then its rows are
 * deleted in bounded batches, the quota row and the mark last. Resumable: an abort cut short is
 * finished by calling it again; while it is unfinished the import of any file is refused. Never
 * touches a live tenant or a frozen copy (409), and a shard with nothing of the tenant is a 404.
 * R2 objects named by the deleted rows are left to the orphan collector (src/services/blob-collection.ts).
 */
export async function abortImport(
  port: TenantMovePort,
  shard: number,
  tenant_id: string,
  now: number,
  log: (fields: LogFields) => void,
  options: AbortOptions = {},
) {
  if (!port.shardExists(shard)) throw new ServiceError('invalid_request', `shard ${shard} is not configured`);
  const chunkRows = options.chunk_rows ?? IMPORT_CHUNK_ROWS;
  if (!Number.isSafeInteger(chunkRows) || chunkRows < 1)
    throw new RangeError('chunk_rows must be a positive integer');
  if (!Identifier.safeParse(tenant_id).success) throw notFound('staged import');
  const marked = await port.markAbort(shard, tenant_id, now);
  if (marked === 'none') throw notFound('staged import');
  if (marked === 'live')
    throw new ServiceError(
      'conflict',
      `tenant ${quoted(tenant_id)} is live on shard ${shard}: only a staged import can be aborted`,
    );
  let rows = 0;
  let chunks = 0;
  for (;;) {
    const r = await port.abortChunk(shard, tenant_id, chunkRows);
    if (r === 'moved')
      throw new ServiceError(
        'conflict',
        `another request finished aborting the import of ${quoted(tenant_id)}`,
      );
    if (r === 'done') break;
    rows += r.deleted;
    chunks += 1;
  }
  log({ tenant_id, shard, aborted_rows: rows, chunks });
  return { tenant_id, shard, aborted: true, rows_deleted: rows };
}
