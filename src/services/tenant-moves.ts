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
 * filled as that migration filled it: `MIGRATED_COLUMNS`); a value of another type than its column
 * (TEXT or INTEGER), or a null in a NOT NULL column (`columnValue`); a row of another tenant; other
 * than exactly one `tenants` and one `tenant_quotas` row; a receipt whose stored text is not canonical, whose body
 * (decoded from either encoding; a compact row gets its tenant and principal from the row's
 * columns) does not hash to its digest or whose digest is not the row's key; evidence held in R2
 * whose reference is malformed; a signature row whose envelope names another receipt, tenant or
 * time, or no receipt or archive entry of the file, or out of `seq` order, or whose `seq` is not an
 * integer; a `tenants` row whose creation time is not an integer; an archive entry of no archive of
 * the file; a policy, contract or grant document that does not hash to its key, or whose
 * contract `tool_name` / `effect` or grant `grant_id` / `principal_id` / `tenant_id` columns differ
 * from the document; a run whose envelope does not hash to its `run_envelope_sha256` or whose
 * budget and identity columns differ from the envelope; an approval whose `input` is not the bytes
 * its `input_sha256` and `input_bytes` bind, or of an unknown status or effect class.
 * R2 objects (large evidence, receipt archives) are not read: the bucket is shared by every shard,
 * a move neither copies nor changes them, and every read re-hashes an object against its digest.
 * Webhook secrets and deliveries are not moved (src/db/tenant-rows.ts, `TENANT_TABLES_NOT_MOVED`).
 * The rows are then written staged on the target shard (`importTenant`): bounded chunks while the
 * tenant is invisible, one last batch that makes it live; all or nothing as seen from outside,
 * and a failed import is resumed by sending the same file again. A file is read line by line from
 * an `ExportSource` (the request body in memory, or an upload streamed from R2:
 * src/services/import-uploads.ts), verified by one set of checks (`verifySource`, or `Verification`
 * for an upload verified over several calls from a kept state) whose state does not grow with
 * the file, then read again to write. An API key names its shard (src/core/identity), so a move
 * re-keys the tenant: every principal that was live gets a new key naming the target shard,
 * returned once by the import; keys issued before the move keep failing (the old copy is frozen:
 * every principal revoked, by a freezing export or at the latest by the import).
 * Two ways out of a move that did not finish (migrations/0013): a staged import that will not be
 * finished is aborted (`abortImport`: marked first, so no batch of it commits any more, then its
 * rows deleted in bounded batches); an import that went live but whose directory write failed is
 * finished by the same file again (`finishUnrecorded`: every live principal re-keyed, so the
 * undelivered keys never work), also when that write committed but answered an error (the
 * directory already names the target; the flip noted the old shard, migrations/0014).
 * The directory write is a compare-and-set on the shard the import read (`record`'s `expected`):
 * of two imports of one tenant to different shards at once, the one that records second freezes
 * its own copy and is refused, so a tenant has one live copy, the one the directory names.
 * Never: deletes the old copy (receipts are append-only; a frozen copy is an archive), or lets
 * an import overwrite a tenant already on the target shard.
 */
import { z } from 'zod';
import { canonicalize, digestOf, sha256Hex, sha256HexOfText } from '../core/canonical/canonical.js';
import { decodeJsonText, type JsonValue, utf8Encode } from '../core/canonical/json.js';
import { quoted } from '../core/errors.js';
import { apiKeyDigest } from '../core/identity/identity.js';
import { TOOL_EFFECTS } from '../core/model.js';
import { Identifier } from '../core/schema.js';
import { newApiKey } from '../db/ids.js';
import { movedEvidenceText } from '../db/evidence-encoding.js';
import { RECEIPT_ENCODING, decodeReceipt } from '../db/receipts.js';
import type { LogFields } from './context.js';
import { ServiceError, notFound } from './errors.js';
import { APPROVAL_STATUSES } from './ports.js';
import type {
  ExportPosition,
  TenantColumn,
  TenantMovePort,
  TenantRow,
  TenantRowValue,
  VerifiedFile,
} from './ports.js';

/**
 * Bounds on one import request. The file is read and verified whole (in memory) before anything
 * is written, so these bound the Worker's memory, not D1: the writes are chunked
 * (`IMPORT_CHUNK_ROWS`).
 */
export const MAX_IMPORT_BYTES = 32 * 1024 * 1024;
export const MAX_IMPORT_ROWS = 200_000;
/** A stored document is at most 16 MiB (src/db/documents.ts); a line holds one row. */
export const MAX_LINE_BYTES = 17 * 1024 * 1024;

const ExportRequest = z.strictObject({
  /** Revoke every live principal of the tenant first, so nothing changes the copy after it is read. */
  freeze: z.boolean().optional(),
  /**
   * Answer one segment of the file (bounded like one import request) and where the next starts,
   * instead of refusing an export larger than one request (`413`).
   */
  segmented: z.boolean().optional(),
  /** The next segment: the `Writ-Export-Next` value the previous segment answered. */
  after: z
    .string()
    .regex(/^(0|[1-9][0-9]?)\.(0|[1-9][0-9]{0,14})$/, 'the Writ-Export-Next value of the previous segment')
    .optional(),
});
export { ExportRequest as TenantExportRequest };

/**
 * The tenant's rows as canonical JSON lines (each ends with `\n`), each with its position. With
 * `freeze`, every live principal is revoked first, so no key changes the copy while (or after) it
 * is read; the export shows those principals as they were just before the freeze, so the import
 * re-keys them. With `after`, the rows after that position only.
 */
export async function* exportTenant(
  port: TenantMovePort,
  tenant_id: string,
  options: { readonly freeze?: boolean | undefined; readonly after?: ExportPosition | null | undefined },
  now: number,
  log: (fields: LogFields) => void,
): AsyncGenerator<{ readonly line: string; readonly position: ExportPosition }> {
  const shard = Identifier.safeParse(tenant_id).success ? await port.shardOf(tenant_id) : null;
  if (shard === null) throw notFound('tenant');
  const frozen = new Set(options.freeze === true ? await port.freeze(shard, tenant_id, now) : []);
  log({ tenant_id, shard, frozen_principals: frozen.size });
  for await (const r of port.exportRows(shard, tenant_id, options.after ?? null)) {
    const row =
      r.table === 'principals' && frozen.has(String(r.row.principal_id))
        ? { ...r.row, revoked_at_unix_ms: null }
        : r.row;
    yield { line: `${canonicalize({ row, table: r.table })}\n`, position: r.position };
  }
}

// ---------------------------------------------------------------------------------------------
// The export as one answer, or in segments (an export larger than one import request)

/** Bounds of one export answer (tests lower them). */
export interface ExportBounds {
  /** Bytes of one answer: held in memory before it is sent. */
  readonly max_bytes?: number | undefined;
  /** Rows of one segment: 100,000 rows are 500 D1 pages, half an invocation's 1,000 subrequests. */
  readonly max_rows?: number | undefined;
}
export const EXPORT_SEGMENT_ROWS = 100_000;

/** The position of the `principals` table in export order (src/db/tenant-rows.ts TENANT_TABLES). */
const PRINCIPALS_TABLE = 3;

/**
 * The export read whole before it is answered: a failure half-way is a typed error, never a
 * truncated file that could still import as a smaller tenant. Not segmented, an export larger than
 * `max_bytes` is refused (`413`). Segmented, the answer stops at a row boundary within the bounds
 * and names where the next segment starts (`next`, null for the last one); the segments
 * concatenated are the file. A freezing export's first segment holds every principal (the frozen
 * ones are shown live only by the request that froze them), so it never ends before that table.
 */
export async function exportTenantText(
  port: TenantMovePort,
  tenant_id: string,
  options: z.infer<typeof ExportRequest>,
  now: number,
  log: (fields: LogFields) => void,
  bounds: ExportBounds = {},
): Promise<{ readonly text: string; readonly segmented: boolean; readonly next: string | null }> {
  const maxBytes = bounds.max_bytes ?? MAX_IMPORT_BYTES;
  const maxRows = bounds.max_rows ?? EXPORT_SEGMENT_ROWS;
  const segmented = options.segmented === true || options.after !== undefined;
  if (options.after !== undefined && options.freeze === true)
    throw new ServiceError('invalid_request', 'freeze is for the first segment only');
  const after = options.after === undefined ? null : parsePosition(options.after);
  const lines = exportTenant(port, tenant_id, { freeze: options.freeze, after }, now, log);
  const parts: string[] = [];
  let bytes = 0;
  let last: ExportPosition | null = after;
  const mayEnd = (p: ExportPosition | null) =>
    options.freeze !== true || (p !== null && p.table > PRINCIPALS_TABLE);
  for await (const { line, position } of lines) {
    const size = new TextEncoder().encode(line).byteLength;
    const full = bytes + size > maxBytes || (segmented && parts.length >= maxRows);
    if (full && segmented && parts.length > 0 && mayEnd(position)) {
      // Ends before this row; the next segment starts after the last row answered.
      return { text: parts.join(''), segmented, next: formatPosition(last as ExportPosition) };
    }
    if (bytes + size > maxBytes) {
      throw new ServiceError(
        'payload_too_large',
        segmented
          ? `the first segment of a freezing export (every principal) exceeds ${maxBytes} bytes`
          : `the tenant's export exceeds ${maxBytes} bytes; ask for it in segments ("segmented": true)`,
      );
    }
    parts.push(line);
    bytes += size;
    last = position;
  }
  return { text: parts.join(''), segmented, next: null };
}

const formatPosition = (p: ExportPosition) => `${p.table}.${p.rowid}`;
const parsePosition = (s: string): ExportPosition => {
  const [table, rowid] = s.split('.').map(Number);
  return { table: table as number, rowid: rowid as number };
};

export const refuse = (line: number, message: string) =>
  new ServiceError('invalid_request', `import refused, nothing written: line ${line}: ${message}`, [
    { path: `line ${line}`, message },
  ]);

/**
 * Bounds of one verification (tests lower them to exercise the same paths with small files).
 * The state the verifier keeps does not grow with the file's rows except for the live
 * principals (each gets a new key in the import's answer, which holds them all anyway): the
 * digests the reference check needs are held at most `reference_capacity` at a time.
 */
export interface VerifyBounds {
  /** Rows (lines) of one file. */
  readonly max_rows?: number | undefined;
  /** Digests the reference check holds at once; more are checked in several reads of the file. */
  readonly reference_capacity?: number | undefined;
  /** Operations whose first reconciliation receipt is held for migration 0009's back-fill. */
  readonly backfill_capacity?: number | undefined;
}

/** Digests (and references to them) held at once by default: ~100 bytes each, ≈ 12 MB. */
export const REFERENCE_CAPACITY = 120_000;
/**
 * Operations an older export's back-fill (migrations/0009) holds a reconciliation receipt for:
 * ~250 bytes each, ≈ 30 MB. A file needing the back-fill for more is refused; a file that does
 * not need it is never refused for it (past the bound nothing more is held).
 */
export const BACKFILL_CAPACITY = 120_000;

/**
 * An export file that can be read more than once, from its first line. Each read yields the
 * lines without their `\n` (one trailing `\n` ends the last line); a read of bytes that do not
 * hash to `sha256` throws after its last line and before it ends.
 */
export interface ExportSource {
  /** SHA-256 (hex) of the file's bytes: staging and resume are keyed by it. */
  readonly sha256: string;
  /** The number of lines, when known before reading (an in-memory file). */
  readonly lines_known?: number | undefined;
  lines(): AsyncIterable<string>;
}

/** An export already in memory (the single-request import). */
export function textSource(text: string): ExportSource {
  const lines = text.split('\n');
  // One trailing newline ends the last line; an empty line anywhere else is not a row.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return {
    sha256: sha256HexOfText(text),
    lines_known: lines.length,
    async *lines() {
      yield* lines;
    },
  };
}

/** What verification found: the tenant, and the rows the writing needs beyond the chunks. */
export interface VerifiedExport extends VerifiedFile {
  /** Reads of the file and the most digests held at once (tests check the bound). */
  readonly verification: { readonly reads: number; readonly peak_references: number };
}

/**
 * Verify a file read as a stream, with state bounded independently of its size (see
 * `VerifyBounds`): the first read checks every line and the whole-file rules; the references
 * between rows (a signature names a receipt or archive entry of the file, an archive entry an
 * archive of the file) are checked in that read when they fit in `reference_capacity`, otherwise
 * in further reads, each holding only the digests of one partition (by their leading bits).
 * Throws (nothing written) on the first problem. The single-request import reads its file from
 * memory through the same function: one set of rules. (`Verification` is the same, run in
 * several calls: an uploaded file, src/services/import-uploads.ts.)
 */
export async function verifySource(
  port: Pick<TenantMovePort, 'columnsOf'>,
  source: ExportSource,
  bounds: VerifyBounds = {},
): Promise<VerifiedExport> {
  // A file whose size is known is refused for its size before any line is read.
  const maxRows = bounds.max_rows ?? MAX_IMPORT_ROWS;
  if (source.lines_known !== undefined && source.lines_known > maxRows)
    throw refuse(maxRows + 1, `more than ${maxRows} rows`);
  const run = await Verification.start(port, bounds).run(
    // Never stopped (no budget), so where a line ends is never asked for.
    async function* (offset) {
      if (offset !== 0) throw new Error('an unbudgeted verification reads from the start');
      for await (const text of source.lines()) yield { text, end: -1 };
    },
    Number.POSITIVE_INFINITY,
  );
  if (!('done' in run)) throw new Error('an unbudgeted verification stopped part-way');
  return run.done;
}

/** A line of a file read from a byte offset: its text and the offset just after its `\n`. */
export interface SourceLine {
  readonly text: string;
  readonly end: number;
}

/**
 * The lines of the file from byte `offset` (always the start of a line), `first_line` being the
 * number of the first one (for the errors a read names lines by).
 */
export type LinesFrom = (offset: number, first_line: number) => AsyncIterable<SourceLine>;

/** How far a verification stopped by its budget got (`Verification.save` keeps the rest). */
export interface VerificationProgress {
  /** The read under way: 1 checks every line, 2 and later check references by partition. */
  readonly read: number;
  /** Lines checked by the first read (all of them once it is done). */
  readonly rows_verified: number;
  /** Bytes of the file the read under way has got through. */
  readonly bytes_read: number;
}

/**
 * The state of a verification between two calls: plain JSON, bounded as `VerifyBounds` says
 * (digests of the reference check, reconciliations of the back-fill, the live principals).
 * Whoever keeps it must make sure it comes back unchanged and for the same file: it is what the
 * rules found so far, and lines before `offset` are not read again.
 */
export interface SavedVerification {
  readonly bounds: {
    readonly max_rows: number;
    readonly reference_capacity: number;
    readonly backfill_capacity: number;
  };
  readonly read: number;
  readonly offset: number;
  readonly line: number;
  /** The first read's checks (while it is under way). */
  readonly checks: SavedLineChecks | null;
  /** After the first read: what it found, and the reference partitions left to read. */
  readonly after: {
    readonly found: ReturnType<LineChecks['finish']>;
    readonly rows_total: number;
    readonly failure: Failure | null;
    readonly peak: number;
    readonly queue: readonly (readonly [number, number])[];
    readonly current: SavedReferences | null;
  } | null;
}

interface AfterFirstRead {
  readonly found: ReturnType<LineChecks['finish']>;
  readonly rows_total: number;
  failure: Failure | null;
  peak: number;
  readonly queue: [number, number][];
  current: ReferenceCheck | null;
}

/**
 * `verifySource` as a value that can stop after a budget of bytes read and go on later, in
 * another invocation, from `save()`: the same checks in the same order, so a file verified in any
 * number of calls is refused at the same line, or found the same, as in one.
 */
export class Verification {
  #read = 1;
  #offset = 0;
  #line = 0;
  #checks: LineChecks | null;
  #after: AfterFirstRead | null = null;

  private constructor(
    readonly port: Pick<TenantMovePort, 'columnsOf'>,
    readonly bounds: SavedVerification['bounds'],
    checks: LineChecks | null,
  ) {
    this.#checks = checks;
  }

  static start(port: Pick<TenantMovePort, 'columnsOf'>, bounds: VerifyBounds = {}): Verification {
    const b = {
      max_rows: bounds.max_rows ?? MAX_IMPORT_ROWS,
      reference_capacity: bounds.reference_capacity ?? REFERENCE_CAPACITY,
      backfill_capacity: bounds.backfill_capacity ?? BACKFILL_CAPACITY,
    };
    if (!Number.isSafeInteger(b.reference_capacity) || b.reference_capacity < 2)
      throw new RangeError('reference_capacity must be at least 2');
    const checks = new LineChecks(
      port,
      new ReferenceCheck(0, 1, b.reference_capacity),
      new OlderExportFill(b.backfill_capacity),
    );
    return new Verification(port, b, checks);
  }

  /**
   * A verification from its saved state (which the caller has checked is this file's), with the
   * bounds it began with.
   */
  static resume(port: Pick<TenantMovePort, 'columnsOf'>, saved: SavedVerification): Verification {
    const v = new Verification(
      port,
      saved.bounds,
      saved.checks === null ? null : LineChecks.restore(port, saved.checks),
    );
    v.#read = saved.read;
    v.#offset = saved.offset;
    v.#line = saved.line;
    if (saved.after !== null) {
      const a = saved.after;
      v.#after = {
        found: a.found,
        rows_total: a.rows_total,
        failure: a.failure,
        peak: a.peak,
        queue: a.queue.map(([k, p]) => [k, p]),
        current: a.current === null ? null : ReferenceCheck.restore(a.current),
      };
    }
    return v;
  }

  save(): SavedVerification {
    const a = this.#after;
    return {
      bounds: this.bounds,
      read: this.#read,
      offset: this.#offset,
      line: this.#line,
      checks: this.#checks === null ? null : this.#checks.save(),
      after:
        a === null
          ? null
          : {
              found: a.found,
              rows_total: a.rows_total,
              failure: a.failure,
              peak: a.peak,
              queue: a.queue,
              current: a.current === null ? null : a.current.save(),
            },
    };
  }

  progress(): VerificationProgress {
    return {
      read: this.#read,
      rows_verified: this.#after === null ? this.#line : this.#after.rows_total,
      bytes_read: this.#offset,
    };
  }

  /**
   * Go on reading from where it stopped, until the file is verified (`done`) or `budget` bytes
   * were read in this call (`stopped`: at a line boundary, after at least one line). Throws
   * (`refuse`) on the first problem, as `verifySource` does.
   */
  async run(
    linesFrom: LinesFrom,
    budget: number,
  ): Promise<{ readonly done: VerifiedExport } | { readonly stopped: VerificationProgress }> {
    const maxRows = this.bounds.max_rows;
    const capacity = this.bounds.reference_capacity;
    let used = 0;
    const spent = (end: number) => {
      used += end - this.#offset;
      this.#offset = end;
      return used >= budget;
    };
    for (;;) {
      const checks = this.#checks;
      if (checks !== null) {
        // The first read: every line and the whole-file rules.
        for await (const { text, end } of linesFrom(this.#offset, this.#line + 1)) {
          this.#line += 1;
          if (this.#line > maxRows) throw refuse(maxRows + 1, `more than ${maxRows} rows`);
          checks.line(text);
          if (spent(end)) return { stopped: this.progress() };
        }
        const n = this.#line;
        if (n === 0) throw refuse(0, 'the export is empty');
        const found = checks.finish();
        const queue: [number, number][] = [];
        if (checks.refs.overflowed) {
          // Partitions of the digests, each checked in a read of its own: expected to hold half
          // the capacity; one that still overflows (digests chosen to share their leading bits)
          // is split.
          const parts = nextPowerOfTwo(Math.ceil((2 * checks.refs.seen) / capacity));
          for (let k = 0; k < parts; k++) queue.push([k, parts]);
        }
        this.#after = {
          found,
          rows_total: n,
          failure: checks.refs.firstFailure(checks.seqFailure),
          peak: checks.refs.peak,
          queue,
          current: null,
        };
        this.#checks = null;
        this.#offset = 0;
        this.#line = 0;
      }
      const a = this.#after as AfterFirstRead;
      if (a.current === null) {
        const next = a.queue.shift();
        if (next === undefined) break;
        const [k, p] = next;
        if (p > MAX_PARTITIONS)
          throw refuse(
            a.rows_total,
            `more than ${capacity} digests share their leading bits; references cannot be checked`,
          );
        a.current = new ReferenceCheck(k, p, capacity);
        this.#read += 1;
        this.#offset = 0;
        this.#line = 0;
      }
      const refs = a.current;
      let stopped = false;
      for await (const { text, end } of linesFrom(this.#offset, this.#line + 1)) {
        this.#line += 1;
        // Every line passed the first read's checks (and the read re-hashes the file), so the
        // line is canonical JSON of a known table, `"table"` its last key: rows of tables without
        // references are skipped unparsed, and only the digest columns of the others are read.
        if (REFERENCE_TABLES.some((suffix) => text.endsWith(suffix))) {
          const v = JSON.parse(text) as { table: string; row: Record<string, unknown> };
          refs.row(v.table, v.row, this.#line);
          if (refs.overflowed) break;
        }
        if (spent(end)) {
          stopped = true;
          break;
        }
      }
      if (refs.overflowed) {
        a.queue.push([refs.part, 2 * refs.parts], [refs.part + refs.parts, 2 * refs.parts]);
        a.current = null;
        continue;
      }
      if (stopped) return { stopped: this.progress() };
      a.peak = Math.max(a.peak, refs.peak);
      a.failure = refs.firstFailure(a.failure);
      a.current = null;
    }
    const a = this.#after as AfterFirstRead;
    if (a.failure !== null) throw refuse(a.failure.line, a.failure.message);
    return {
      done: {
        ...a.found,
        rows_total: a.rows_total,
        verification: { reads: this.#read, peak_references: a.peak },
      },
    };
  }
}

const REFERENCE_TABLES = [
  'receipts',
  'receipt_archive_entries',
  'receipt_archives',
  'receipt_signatures',
].map((t) => `"table":"${t}"}`);

/** Partitions never exceed 2^32 (the 48 leading bits of a digest choose one). */
const MAX_PARTITIONS = 2 ** 32;

const nextPowerOfTwo = (x: number) => {
  let p = 1;
  while (p < x) p *= 2;
  return p;
};

export interface Failure {
  readonly line: number;
  readonly message: string;
  /** Two problems on one line: the missing reference is named first (as it always was). */
  readonly rank: number;
}

const earlier = (a: Failure | null, b: Failure | null): Failure | null =>
  a === null ? b : b === null ? a : b.line < a.line || (b.line === a.line && b.rank < a.rank) ? b : a;

/** A `ReferenceCheck` between two calls (`Verification.save`). */
export interface SavedReferences {
  readonly part: number;
  readonly parts: number;
  readonly capacity: number;
  readonly receipts: readonly string[];
  readonly archives: readonly string[];
  readonly wanted: readonly (readonly [string, number])[];
  readonly malformed: Failure | null;
  readonly overflowed: boolean;
  readonly seen: number;
  readonly peak: number;
}

/**
 * The references between rows of one partition of the digests (all of them when `parts` is 1):
 * the digests rows are known by, and the first line naming each digest. Holds at most
 * `capacity` entries; past that it only counts (`overflowed`), and the caller splits.
 */
class ReferenceCheck {
  readonly #receipts = new Set<string>();
  readonly #archives = new Set<string>();
  /** `r:<digest>` (a signature's receipt) or `a:<digest>` (an entry's archive): its first line. */
  readonly #wanted = new Map<string, number>();
  /** A reference that is not a digest at all names nothing in any partition. */
  #malformed: Failure | null = null;
  overflowed = false;
  /** Digests and references met, held or not (sizes the partitions). */
  seen = 0;
  peak = 0;

  constructor(
    readonly part: number,
    readonly parts: number,
    readonly capacity: number,
  ) {}

  save(): SavedReferences {
    return {
      part: this.part,
      parts: this.parts,
      capacity: this.capacity,
      receipts: [...this.#receipts],
      archives: [...this.#archives],
      wanted: [...this.#wanted],
      malformed: this.#malformed,
      overflowed: this.overflowed,
      seen: this.seen,
      peak: this.peak,
    };
  }

  static restore(s: SavedReferences): ReferenceCheck {
    const r = new ReferenceCheck(s.part, s.parts, s.capacity);
    for (const k of s.receipts) r.#receipts.add(k);
    for (const k of s.archives) r.#archives.add(k);
    for (const [k, line] of s.wanted) r.#wanted.set(k, line);
    r.#malformed = s.malformed;
    r.overflowed = s.overflowed;
    r.seen = s.seen;
    r.peak = s.peak;
    return r;
  }

  #mine(digest: string): boolean {
    return this.parts === 1 || parseInt(digest.slice(0, 12), 16) % this.parts === this.part;
  }

  #hold(set: Set<string> | Map<string, number>, key: string, line: number): void {
    if (!this.#mine(key.slice(key.indexOf(':') + 1))) return;
    this.seen += 1;
    if (this.overflowed || set.has(key)) return;
    if (this.#receipts.size + this.#archives.size + this.#wanted.size >= this.capacity) {
      this.overflowed = true;
      this.#receipts.clear();
      this.#archives.clear();
      this.#wanted.clear();
      return;
    }
    if (set instanceof Set) set.add(key);
    else set.set(key, line);
    this.peak = Math.max(this.peak, this.#receipts.size + this.#archives.size + this.#wanted.size);
  }

  row(table: string, row: Readonly<Record<string, unknown>>, line: number): void {
    switch (table) {
      case 'receipts':
      case 'receipt_archive_entries':
        // Verified digests (a receipt's by its body, an entry's by its form).
        this.#hold(this.#receipts, `r:${String(row.sha256)}`, line);
        if (table === 'receipt_archive_entries') this.#want('a', row.archive_sha256, line);
        return;
      case 'receipt_archives':
        this.#hold(this.#archives, `a:${String(row.archive_sha256)}`, line);
        return;
      case 'receipt_signatures':
        this.#want('r', row.receipt_sha256, line);
        return;
      default:
        return;
    }
  }

  #want(kind: 'r' | 'a', digest: unknown, line: number): void {
    if (typeof digest === 'string' && SHA256_HEX.test(digest))
      this.#hold(this.#wanted, `${kind}:${digest}`, line);
    else if (this.parts === 1) this.#malformed = earlier(this.#malformed, missing(kind, digest, line));
  }

  /** The first line naming a digest of this partition the file does not hold, or `before`. */
  firstFailure(before: Failure | null): Failure | null {
    let first = earlier(before, this.#malformed);
    for (const [key, line] of this.#wanted) {
      const held = key.startsWith('r:') ? this.#receipts : this.#archives;
      if (!held.has(key)) first = earlier(first, missing(key[0] === 'r' ? 'r' : 'a', key.slice(2), line));
    }
    return first;
  }
}

const missing = (kind: 'r' | 'a', digest: unknown, line: number): Failure =>
  kind === 'r'
    ? {
        line,
        rank: 0,
        message: `signature of receipt ${quoted(String(digest))}, which the file does not hold`,
      }
    : {
        line,
        rank: 0,
        message: `archive entry of archive ${quoted(String(digest))}, which the file does not hold`,
      };

/** `LineChecks` between two calls (`Verification.save`). */
export interface SavedLineChecks {
  readonly n: number;
  readonly tenant: {
    readonly tenant_id: string;
    readonly name: string;
    readonly created_at_unix_ms: number;
  } | null;
  readonly quota: TenantRow | null;
  readonly quotas: number;
  readonly first: string | null;
  readonly first_foreign: number | null;
  readonly last_seq: number;
  readonly max_seq: number;
  readonly principals: readonly TenantRow[];
  readonly seq_failure: Failure | null;
  readonly refs: SavedReferences;
  readonly older: SavedOlderFill;
}

/**
 * The checks of one line, in file order, and the whole-file rules kept as bounded state: the
 * tenant, the quota row, the first row of another tenant, the signatures' `seq` order.
 */
class LineChecks {
  #n = 0;
  #tenant: { tenant_id: string; name: string; created_at_unix_ms: number } | null = null;
  #quota: TenantRow | null = null;
  #quotas = 0;
  #first: string | null = null;
  #firstForeign: number | null = null;
  #lastSeq = 0;
  #maxSeq = 0;
  readonly #principals: TenantRow[] = [];
  seqFailure: Failure | null = null;

  constructor(
    readonly port: Pick<TenantMovePort, 'columnsOf'>,
    readonly refs: ReferenceCheck,
    /** Columns of an older export, filled as their migrations did (bounded: `BACKFILL_CAPACITY`). */
    readonly older: OlderExportFill,
  ) {}

  save(): SavedLineChecks {
    return {
      n: this.#n,
      tenant: this.#tenant,
      quota: this.#quota,
      quotas: this.#quotas,
      first: this.#first,
      first_foreign: this.#firstForeign,
      last_seq: this.#lastSeq,
      max_seq: this.#maxSeq,
      principals: this.#principals,
      seq_failure: this.seqFailure,
      refs: this.refs.save(),
      older: this.older.save(),
    };
  }

  static restore(port: Pick<TenantMovePort, 'columnsOf'>, s: SavedLineChecks): LineChecks {
    const c = new LineChecks(port, ReferenceCheck.restore(s.refs), OlderExportFill.restore(s.older));
    c.#n = s.n;
    c.#tenant = s.tenant;
    c.#quota = s.quota;
    c.#quotas = s.quotas;
    c.#first = s.first;
    c.#firstForeign = s.first_foreign;
    c.#lastSeq = s.last_seq;
    c.#maxSeq = s.max_seq;
    c.#principals.push(...s.principals);
    c.seqFailure = s.seq_failure;
    return c;
  }

  line(line: string): TenantRow {
    const n = (this.#n += 1);
    const row = checkLine(this.port, n, line, this.older);
    if (row.table === 'tenants') {
      if (this.#tenant !== null) throw refuse(n, 'a second tenants row');
      const created = row.row.created_at_unix_ms;
      // Held as a number (the directory's creation time): text would be NaN or Infinity, which
      // the kept state (JSON) turns into null, so a resumed call would find another tenant.
      if (typeof created !== 'number') throw refuse(n, 'tenants.created_at_unix_ms is not an integer');
      this.#tenant = {
        tenant_id: String(row.row.tenant_id),
        name: String(row.row.name),
        created_at_unix_ms: created,
      };
    }
    if (row.table === 'tenant_quotas') {
      this.#quotas += 1;
      this.#quota = row;
    }
    const id = String(row.row.tenant_id);
    this.#first ??= id;
    if (id !== this.#first && this.#firstForeign === null) this.#firstForeign = n;
    if (row.table === 'principals' && row.row.revoked_at_unix_ms === null) this.#principals.push(row);
    if (row.table === 'receipt_signatures') {
      const seq = row.row.seq;
      // Text would be held as NaN or Infinity, which the kept state (JSON) turns into null: a
      // signature out of order after it would pass in a resumed call and fail in one.
      if (typeof seq !== 'number') throw refuse(n, 'receipt_signatures.seq is not an integer');
      if (!(seq > this.#lastSeq) && this.seqFailure === null)
        this.seqFailure = { line: n, rank: 1, message: 'receipt_signatures out of seq order' };
      this.#lastSeq = seq;
      this.#maxSeq = Math.max(this.#maxSeq, seq);
    }
    this.refs.row(row.table, row.row, n);
    return row;
  }

  /** The whole-file rules but the references, in the order the import has always named them. */
  finish() {
    const n = this.#n;
    if (this.#tenant === null) throw refuse(n, 'no tenants row');
    if (this.#quotas !== 1 || this.#quota === null)
      throw refuse(n, 'exactly one tenant_quotas row is required');
    const owner = this.#tenant.tenant_id;
    // Rows of two tenants in one file would plant one tenant's rows under another's move.
    const foreign = owner !== this.#first ? 1 : this.#firstForeign;
    if (foreign !== null) throw refuse(foreign, `row of another tenant than ${quoted(owner)}`);
    return {
      ...this.#tenant,
      exported_max_seq: this.#maxSeq,
      principals: this.#principals,
      quota: this.#quota,
    };
  }
}

/** One line: canonical JSON of `{row, table}`, its columns and the digests it is keyed by. */
function checkLine(
  port: Pick<TenantMovePort, 'columnsOf'>,
  n: number,
  line: string,
  older: OlderExportFill,
): TenantRow {
  const decoded = decodeJsonText(line, { maxBytes: MAX_LINE_BYTES, maxDepth: 4 });
  if (!decoded.ok) throw refuse(n, `not json (${decoded.error.reason})`);
  // Canonical form only: a line re-serialized differently is not what an export wrote.
  if (canonicalize(decoded.value) !== line) throw refuse(n, 'not in canonical form (RFC 8785)');
  const row = parseRow(port, n, decoded.value, older);
  verifyDocuments(n, row);
  return row;
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
    if (!columns.some((c) => c.name === k)) throw refuse(n, `unknown column ${quoted(k)} of ${table}`);
  }
  const out: Record<string, string | number | null> = {};
  // Only a column a later migration added may be missing (filled below as it filled it).
  const missing = older.missing(
    n,
    table,
    columns.filter((c) => !Object.hasOwn(row, c.name)).map((c) => c.name),
  );
  for (const c of columns) {
    if (missing.has(c.name)) continue;
    out[c.name] = columnValue(n, table, c, row[c.name]);
  }
  if (typeof out.tenant_id !== 'string') throw refuse(n, 'tenant_id is not text');
  older.fill(n, table, out, missing);
  return { table, row: out };
}

/**
 * A value as its column holds it: text in a TEXT column, a safe integer in an INTEGER one, null
 * only where the column allows it. Checked here, before anything is written: D1 would refuse a
 * null in a NOT NULL column only at the batch holding the row (an import already part-staged),
 * and SQLite's type affinity would store text in an INTEGER column as text.
 */
function columnValue(
  n: number,
  table: string,
  c: TenantColumn,
  value: JsonValue | undefined,
): TenantRowValue {
  if (value === null) {
    if (c.notNull) throw refuse(n, `column ${quoted(c.name)} of ${table} is null (the column is NOT NULL)`);
    return null;
  }
  if (c.type === 'text' && typeof value === 'string') return value;
  if (c.type === 'integer' && typeof value === 'number' && Number.isSafeInteger(value)) return value;
  throw refuse(
    n,
    `column ${quoted(c.name)} of ${table} is not ${c.type === 'text' ? 'text' : 'an integer'}${c.notNull ? '' : ' or null'}`,
  );
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

/** `OlderExportFill` between two calls (`Verification.save`). */
export interface SavedOlderFill {
  readonly capacity: number;
  readonly lacking: readonly (readonly [string, string])[];
  readonly reconciliations: readonly (readonly [string, { readonly at: number; readonly sha256: string }])[];
  readonly untextual: boolean;
  readonly overflowed: boolean;
  readonly backfilled: boolean;
}

/**
 * The state one file's fill needs, line by line (rows arrive in export order: receipts before
 * operations). Refuses, rather than guesses: a column not in `MIGRATED_COLUMNS`; rows of one
 * table that disagree on which columns they lack (one export is taken at one schema); and a
 * back-fill it cannot compute as the migration did (a receipt after a back-filled operation, or a
 * reconciliation receipt whose `operation_id` is not text, which SQL would compare by affinity),
 * or not in bounded memory (reconciliation receipts of more than `capacity` operations).
 */
class OlderExportFill {
  readonly #lacking = new Map<string, string>();
  /** Per operation id, the first reconciliation receipt by (`created_at_unix_ms`, `sha256`). */
  readonly #reconciliations = new Map<string, { readonly at: number; readonly sha256: string }>();
  #untextualReconciliation = false;
  /** More operations than `capacity` have reconciliation receipts: none is held any more. */
  #overflowed = false;
  #backfilled = false;

  constructor(readonly capacity: number = BACKFILL_CAPACITY) {}

  save(): SavedOlderFill {
    return {
      capacity: this.capacity,
      lacking: [...this.#lacking],
      reconciliations: [...this.#reconciliations],
      untextual: this.#untextualReconciliation,
      overflowed: this.#overflowed,
      backfilled: this.#backfilled,
    };
  }

  static restore(s: SavedOlderFill): OlderExportFill {
    const f = new OlderExportFill(s.capacity);
    for (const [table, key] of s.lacking) f.#lacking.set(table, key);
    for (const [id, r] of s.reconciliations) f.#reconciliations.set(id, r);
    f.#untextualReconciliation = s.untextual;
    f.#overflowed = s.overflowed;
    f.#backfilled = s.backfilled;
    return f;
  }

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
    if (this.#overflowed) return;
    const created = Number(r.created_at_unix_ms);
    const sha256 = String(r.sha256);
    const best = this.#reconciliations.get(id);
    // Every file notes its reconciliations (whether it lacks 0009's column is known only at its
    // operations, after the receipts), so the state is bounded here, not by the file.
    if (best === undefined && this.#reconciliations.size >= this.capacity) {
      this.#overflowed = true;
      this.#reconciliations.clear();
      return;
    }
    if (best === undefined || created < best.at || (created === best.at && sha256 < best.sha256))
      this.#reconciliations.set(id, { at: created, sha256 });
  }

  #reconciliationOf(n: number, op: Record<string, TenantRowValue>): TenantRowValue {
    this.#backfilled = true;
    if (!RECONCILED.has(String(op.state))) return null;
    if (this.#untextualReconciliation)
      throw refuse(n, 'cannot back-fill reconciliation_receipt_sha256: a receipt names a non-text operation');
    if (this.#overflowed)
      throw refuse(
        n,
        `cannot back-fill reconciliation_receipt_sha256: reconciliation receipts of more than ${this.capacity} operations`,
      );
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
      const { sha256, kind, principal_id, receipt, receipt_encoding } = r.row;
      if (receipt_encoding === RECEIPT_ENCODING.wrapped) {
        const keys = typeof stored === 'object' && stored !== null ? Object.keys(stored).sort() : [];
        if (keys.join(',') !== 'body,sha256') throw refuse(n, 'receipt is not {body, sha256}');
      }
      // The receipt's identity is its body's digest, and the row is keyed by that identity. The
      // reader's own decoder: a compact row's body is completed from the row's tenant and
      // principal columns, so an edited column is caught as an edited body is.
      let decoded = false;
      let body: unknown = null;
      if (
        typeof sha256 === 'string' &&
        typeof kind === 'string' &&
        typeof receipt === 'string' &&
        typeof receipt_encoding === 'number' &&
        (principal_id === null || typeof principal_id === 'string')
      ) {
        try {
          const d = decodeReceipt({
            tenant_id: String(r.row.tenant_id),
            sha256,
            kind,
            principal_id,
            receipt,
            receipt_encoding,
          });
          decoded = d.sha256 === sha256;
          body = d.body;
        } catch {
          decoded = false;
        }
      }
      expect(decoded, `receipt ${quoted(String(sha256))}`);
      if (r.row.evidence !== null) text('evidence');
      // Exports carry evidence objects; an array (the positional storage encoding) is taken only
      // when it decodes, bound to this receipt: an edited one never becomes other evidence.
      if (typeof r.row.evidence === 'string' && typeof kind === 'string') {
        try {
          movedEvidenceText({ kind, evidence: r.row.evidence, body: () => body }, 'stored');
        } catch {
          throw refuse(n, 'receipt evidence does not match its encoding');
        }
      }
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
    case 'contracts': {
      const doc = text('document');
      expect(digestOf(doc) === r.row.tool_contract_sha256, 'contract');
      // The columns doors and listings select by are copies of the document's: the same values.
      const d = asObject(doc);
      if (d?.tool_name !== r.row.tool_name || d?.effect !== r.row.effect)
        throw refuse(n, 'contract tool_name or effect differs from its document');
      return;
    }
    case 'grants': {
      const doc = text('document');
      expect(digestOf(doc) === r.row.grant_sha256, 'grant');
      // A grant is loaded by its principal column: it must be the principal the document names.
      const d = asObject(doc);
      if (
        d?.grant_id !== r.row.grant_id ||
        d?.principal_id !== r.row.principal_id ||
        d?.tenant_id !== r.row.tenant_id
      )
        throw refuse(n, 'grant grant_id, principal_id or tenant_id differs from its document');
      return;
    }
    case 'runs': {
      // A run's budget is enforced from its columns: they must be the envelope its digest binds.
      const doc = text('envelope');
      expect(digestOf(doc) === r.row.run_envelope_sha256, 'run envelope');
      const d = asObject(doc);
      const copied = [
        'run_id',
        'tenant_id',
        'principal_id',
        'created_at_unix_ms',
        'deadline_unix_ms',
        'max_calls',
        'max_external_writes',
      ] as const;
      if (copied.some((c) => d?.[c] !== r.row[c]))
        throw refuse(n, `run columns differ from its envelope (${copied.join(', ')})`);
      return;
    }
    case 'approvals': {
      // An approval binds the exact input an approver is shown: the bytes and their digest.
      const input = r.row.input;
      text('input');
      text('target');
      const bytes = typeof input === 'string' ? utf8Encode(input) : null;
      if (bytes === null || sha256Hex(bytes) !== r.row.input_sha256 || bytes.byteLength !== r.row.input_bytes)
        throw refuse(n, 'approval input does not match its input_sha256 and input_bytes');
      if (!(APPROVAL_STATUSES as readonly unknown[]).includes(r.row.status))
        throw refuse(
          n,
          `approval status ${quoted(String(r.row.status))} is not one of ${APPROVAL_STATUSES.join(', ')}`,
        );
      if (!(TOOL_EFFECTS as readonly unknown[]).includes(r.row.effect))
        throw refuse(n, `approval effect ${quoted(String(r.row.effect))} is not an effect class`);
      return;
    }
    default:
      return;
  }
}

const asObject = (v: JsonValue): { readonly [k: string]: JsonValue } | null =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? v : null;

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
 * The lines after the first `from`, each checked again as it is about to be written (the rows
 * come from the file, not from memory: a streamed file is read once more for the writing), cut
 * into chunks of at most `max` rows and `IMPORT_CHUNK_BYTES` bytes (by canonical line length).
 * Deterministic for a file, though a resumed import may cut differently from the first attempt:
 * progress is counted in rows, not chunks.
 */
async function* chunksFrom(
  port: Pick<TenantMovePort, 'columnsOf'>,
  source: ExportSource,
  tenant_id: string,
  from: number,
  max: number,
): AsyncGenerator<readonly TenantRow[]> {
  let chunk: TenantRow[] = [];
  let bytes = 0;
  let n = 0;
  // Filled as in verification: migration 0009's back-fill reads the reconciliation receipts that
  // come before the operations, so a resumed write still reads those it skips.
  const older = new OlderExportFill();
  for await (const line of source.lines()) {
    n += 1;
    if (n <= from) {
      if (line.endsWith('"table":"receipts"}') && line.includes('"kind":"reconciliation"')) {
        try {
          checkLine(port, n, line, older);
        } catch {
          throw new Error(`export line ${n} changed since the file was verified`);
        }
      }
      continue;
    }
    const size = line.length;
    if (chunk.length > 0 && (chunk.length >= max || bytes + size > IMPORT_CHUNK_BYTES)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    // Verified already; checked again because a resumed call may write from a file verified by
    // an earlier call (`SourceImportOptions.verified`): never a row of another tenant. Failing
    // here is not a bad file (that was refused before any write) but bytes that changed since
    // they were verified: an internal error, with chunks of this call possibly staged (invisible).
    let row: TenantRow;
    try {
      row = checkLine(port, n, line, older);
    } catch {
      row = { table: '', row: {} };
    }
    if (row.table === '' || row.row.tenant_id !== tenant_id)
      throw new Error(`export line ${n} changed since the file was verified`);
    chunk.push(row);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

/**
 * The rows an import of `text` would write, in order, after verifying it whole (the same
 * `verifySource` and the same write-pass parsing, `chunksFrom`, older columns filled): what a
 * test or an operator's dry run compares. Throws as the import would, nothing written.
 */
export async function rowsToWrite(
  port: Pick<TenantMovePort, 'columnsOf'>,
  text: string,
): Promise<TenantRow[]> {
  const source = textSource(text);
  const { tenant_id } = await verifySource(port, source);
  const rows: TenantRow[] = [];
  for await (const chunk of chunksFrom(port, source, tenant_id, 0, Number.MAX_SAFE_INTEGER))
    rows.push(...chunk);
  return rows;
}

const progressMoved = (tenant_id: string) =>
  new ServiceError(
    'conflict',
    `another import of this file is writing tenant ${quoted(tenant_id)}, or it finished; send the file again to resume`,
  );

const abortUnfinished = (tenant_id: string, shard: number) =>
  new ServiceError(
    'conflict',
    `an abort of the staged import of tenant ${quoted(tenant_id)} on shard ${shard} has not finished; abort it again to finish it, then import`,
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
 * fails after the tenant went live, the call reads the directory back (the write may have
 * committed) and goes on if it names `shard`; otherwise the same file again finishes the move
 * (`finishUnrecorded`), whether the directory names the old shard or already this one.
 */
export async function importTenant(
  port: TenantMovePort,
  shard: number,
  text: string,
  now: number,
  log: (fields: LogFields) => void,
  options: ImportOptions = {},
) {
  const imported = await importSource(port, shard, textSource(text), now, log, options);
  // Without a chunk budget every chunk is written in this call.
  if (!('keys' in imported)) throw new Error('an import without a chunk budget stopped part-way');
  return imported;
}

/** How far an import got when it stopped at its chunk budget: call again to go on. */
export interface ImportInProgress {
  readonly status: 'in_progress';
  /** Verified whole; writing (an upload's import answers `verifying` before: import-uploads.ts). */
  readonly phase: 'writing';
  readonly tenant_id: string;
  readonly shard: number;
  readonly rows_done: number;
  readonly rows_total: number;
  readonly chunks: number;
}

export interface SourceImportOptions extends ImportOptions {
  /**
   * Chunks (D1 batches) this call writes at most; then it answers how far it got and the next
   * call resumes (a streamed file's import may need several calls: docs/scaling.md).
   */
  readonly max_chunks?: number | undefined;
  readonly verify?: VerifyBounds | undefined;
  /**
   * What an earlier call's verification of this very file (same digest) found: this call skips
   * verifying it again. Each line is still checked as it is written, every read re-hashes the
   * file, and the tenant goes live only after a read to the end matched the digest.
   */
  readonly verified?: VerifiedFile | undefined;
}

/** `importTenant` for a file read from a source (an upload: src/services/import-uploads.ts). */
export async function importSource(
  port: TenantMovePort,
  shard: number,
  source: ExportSource,
  now: number,
  log: (fields: LogFields) => void,
  options: SourceImportOptions = {},
) {
  if (!port.shardExists(shard)) throw new ServiceError('invalid_request', `shard ${shard} is not configured`);
  const chunkRows = options.chunk_rows ?? IMPORT_CHUNK_ROWS;
  if (!Number.isSafeInteger(chunkRows) || chunkRows < 1)
    throw new RangeError('chunk_rows must be a positive integer');
  const maxChunks = options.max_chunks ?? Number.POSITIVE_INFINITY;
  if (!(maxChunks >= 1)) throw new RangeError('max_chunks must be at least 1');
  // Every line, and every rule of the whole file, before anything is written.
  const verified: VerifiedFile = options.verified ?? (await verifySource(port, source, options.verify));
  const { tenant_id, name, rows_total, exported_max_seq } = verified;
  const previous = await port.shardOf(tenant_id);
  const file_sha256 = source.sha256;
  // The directory names the target already: refused, unless it is this file's import that went
  // live there and whose directory write committed but answered an error (finished below).
  if (previous === shard) return finishUnrecorded(port, shard, verified, file_sha256, previous, now, log);
  // A tenant new to this deployment must not take a name another tenant holds.
  if (previous === null && (await port.nameTaken(name))) {
    throw new ServiceError('conflict', `tenant ${quoted(name)} already exists`);
  }
  const staged = { tenant_id, file_sha256, rows_total };
  const begun = await port.beginImport(shard, staged, now);
  if (begun === 'exists') return finishUnrecorded(port, shard, verified, file_sha256, previous, now, log);
  if (begun === 'aborting') throw abortUnfinished(tenant_id, shard);
  if (begun === 'other_import')
    throw new ServiceError(
      'conflict',
      `an import of another export of tenant ${quoted(tenant_id)} is staged on shard ${shard}; send that file again to finish it`,
    );
  let from = begun.rows_done;
  let chunks = 0;
  for await (const chunk of chunksFrom(port, source, tenant_id, from, chunkRows)) {
    if (chunks >= maxChunks) {
      // The budget of this call is spent: the rest stays staged (invisible) for the next call.
      log({ tenant_id, shard, rows: rows_total, resumed_at_row: begun.rows_done, rows_done: from, chunks });
      const progress: ImportInProgress = {
        status: 'in_progress',
        phase: 'writing',
        tenant_id,
        shard,
        rows_done: from,
        rows_total,
        chunks,
      };
      return progress;
    }
    if ((await port.importChunk(shard, staged, { from, rows: chunk, exported_max_seq }, now)) === 'moved')
      throw progressMoved(tenant_id);
    from += chunk.length;
    chunks += 1;
  }
  // A key names its shard: the old key cannot reach the new copy, so each live principal gets a
  // new one. Issued on this attempt, written to the staging rows, live only with the last batch.
  const keys: { principal_id: string; name: string; roles: JsonValue; api_key: string }[] = [];
  for (const r of verified.principals) {
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
  const quota = verified.quota;
  // The copy the recording freezes is noted with the flip: a directory write that commits but
  // answers an error leaves the directory naming this shard, and only the note still knows it.
  if ((await port.goLive(shard, staged, quota, previous, now)) === 'moved') throw progressMoved(tenant_id);
  const frozen = await recordMove(port, shard, verified, { expected: previous, previous }, 0, now);
  log({
    tenant_id,
    shard,
    previous_shard: previous,
    rows: rows_total,
    resumed_at_row: begun.rows_done,
    chunks,
    frozen_principals: frozen.length,
  });
  return { tenant_id, name, shard, previous_shard: previous, rows: rows_total, keys };
}

// ---------------------------------------------------------------------------------------------
// After go-live: the directory, the old copy, and a retry when the directory write failed

/**
 * Point the directory at `shard` if it still names `from.expected` (the shard this import read;
 * a compare-and-set), freeze the copy left behind (`from.previous`), and close the re-keying
 * window (`settleImport`, only if `attempt` is still the latest). Returns the frozen principals.
 * An import that loses the compare-and-set to another import of the tenant (recorded on another
 * shard since this one read the directory) freezes its own copy on `shard`, so the keys it issued
 * never work, and answers `409`: one live copy of a tenant, the one the directory names.
 */
async function recordMove(
  port: TenantMovePort,
  shard: number,
  verified: { readonly tenant_id: string; readonly name: string; readonly created_at_unix_ms: number },
  from: { readonly expected: number | null; readonly previous: number | null },
  attempt: number,
  now: number,
): Promise<string[]> {
  const { tenant_id, name } = verified;
  let recorded: 'recorded' | 'name_taken' | 'moved';
  try {
    recorded = await port.record({
      tenant_id,
      name,
      shard,
      expected: from.expected,
      created_at_unix_ms: verified.created_at_unix_ms,
      now,
    });
  } catch (e) {
    // The write may have committed before its answer was lost. Read back at the primary: the
    // directory naming `shard` now can only be this import's recording (the tenant's rows here
    // are this import's, and no other import of it can go live here), so the move goes on.
    // Anything else, or a read that fails too, answers the error; the same file finishes it.
    const named = await port.recordedShard(tenant_id).catch(() => null);
    if (named !== shard) throw e;
    recorded = 'recorded';
  }
  if (recorded === 'moved') {
    // The directory no longer names the shard this import read. If it names `shard`, an attempt
    // of this very import recorded it (only this file's import is live here; a directory read by
    // a retry may predate that attempt's write): the move goes on, and `settleImport` decides
    // whose keys are kept. Otherwise another import of the tenant was recorded, its copy is the
    // tenant: this copy is frozen (its keys were never delivered and never will work) and the
    // import refused. A read-back that fails answers its error with nothing frozen; the same file
    // again is then refused by `finishUnrecorded`, which freezes this copy.
    const named = await port.recordedShard(tenant_id);
    if (named !== shard) {
      await port.freeze(shard, tenant_id, now);
      throw lostRecording(tenant_id, shard, named);
    }
    recorded = 'recorded';
  }
  if (recorded === 'name_taken') {
    // Lost a race for the name after the check above: the copy is written but the directory does
    // not point at it. It is frozen, so the keys it issued (never delivered) never work.
    await port.freeze(shard, tenant_id, now);
    throw new ServiceError('conflict', `another tenant took the name ${quoted(name)} during the import`);
  }
  // The copy left behind must not take writes any more: no key of it authenticates.
  const frozen = from.previous === null ? [] : await port.freeze(from.previous, tenant_id, now);
  // A retry that began after this attempt re-keyed has replaced (or will replace) this attempt's
  // keys: they must not be returned as if they worked.
  if ((await port.settleImport(shard, tenant_id, attempt)) === 'moved')
    throw new ServiceError(
      'conflict',
      `a later retry of the import of tenant ${quoted(tenant_id)} took over; its keys are the ones that work`,
    );
  return frozen;
}

/** Another import of the tenant was recorded while this one (live on `shard`) was not. */
const lostRecording = (tenant_id: string, shard: number, named: number | null) =>
  new ServiceError(
    'conflict',
    `tenant ${quoted(tenant_id)} was ${named === null ? 'removed from the directory' : `moved to shard ${named}`} by another import while this one went live on shard ${shard}; this copy is frozen, its keys never work: export the tenant again to move it`,
  );

/**
 * The tenant is live on `shard` but its move there is not recorded. If this file's import went
 * live there and its recording failed (`record` threw: its keys were never delivered, the old
 * copy not frozen), finish the move: new keys for every live principal (the undelivered ones
 * are replaced, so they never work), the directory, the old copy frozen. `directory` is the shard
 * the directory names: another one (or none) when the directory write did not commit; `shard`
 * itself when it committed but answered an error, and then the old copy is the one the flip
 * noted (`goLive`'s `previous_shard`). Anything else (another file, an import recorded or from
 * before migration 0013, a tenant that was never imported, a directory naming `shard` with no
 * unrecorded import of this file there, or one live before 0014 whose old copy is not known) is
 * refused as before: the tenant already has rows on `shard`; and so is a directory naming neither
 * `shard` nor the noted copy (another import of the tenant was recorded since: its copy is live).
 */
async function finishUnrecorded(
  port: TenantMovePort,
  shard: number,
  verified: { readonly tenant_id: string; readonly name: string; readonly created_at_unix_ms: number },
  file_sha256: string,
  directory: number | null,
  now: number,
  log: (fields: LogFields) => void,
) {
  const { tenant_id, name } = verified;
  const begun = await port.beginRekey(shard, tenant_id, file_sha256, now);
  if (begun === 'none')
    throw new ServiceError(
      'conflict',
      directory === shard
        ? `tenant ${quoted(tenant_id)} is already on shard ${shard}`
        : `tenant ${quoted(tenant_id)} already has rows on shard ${shard}`,
    );
  if (begun === 'other_file')
    throw new ServiceError(
      'conflict',
      `another export of tenant ${quoted(tenant_id)} went live on shard ${shard}; send that file again to finish it`,
    );
  // The directory names neither the target nor the copy noted when the import went live: another
  // import of the tenant was recorded since, and its copy is the live tenant. Finishing this one
  // would freeze that copy (its delivered keys) and point the directory at a stale one. Confirmed
  // at the primary, this copy is frozen instead: none of its keys was delivered (that takes the
  // settled recording, which ends this unrecorded import), so none may ever work (an import that
  // lost its recording to another one and whose own freeze failed is finished here).
  if (directory !== shard && begun.previous_shard !== 'unknown' && directory !== begun.previous_shard) {
    const named = await port.recordedShard(tenant_id);
    if (named !== shard && named !== begun.previous_shard) {
      await port.freeze(shard, tenant_id, now);
      // The copy this import noted as the old one is not the tenant either (the directory names
      // neither), yet its keys were delivered. It is live if this import's directory write
      // committed unanswered and the import recorded since read the directory at `shard`: that
      // one froze this copy, not the old one. Frozen here, so the only live copy is the named one.
      if (begun.previous_shard !== null) await port.freeze(begun.previous_shard, tenant_id, now);
      throw new ServiceError(
        'conflict',
        `tenant ${quoted(tenant_id)} was moved ${named === null ? 'out of the directory' : `to shard ${named}`} since this export went live on shard ${shard} (this copy is frozen): export the tenant again to move it`,
      );
    }
    // A read behind the primary: go on from what the primary names.
    directory = named;
  }
  const previous = directory === shard ? begun.previous_shard : directory;
  // The flip notes the directory's shard only after refusing the target itself: never reached.
  if (previous === shard) throw new Error(`the import of ${tenant_id} noted its target as the old copy`);
  // Which copy to freeze is not guessed: a wrong one would be a live tenant.
  if (previous === 'unknown')
    throw new ServiceError(
      'conflict',
      `tenant ${quoted(tenant_id)} is already on shard ${shard}, and the shard it came from is not known (it went live before migration 0014): freeze the old copy and delete the tenant_imports_unrecorded row by hand (docs/scaling.md)`,
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
  const frozen = await recordMove(
    port,
    shard,
    verified,
    { expected: directory, previous },
    begun.attempt,
    now,
  );
  log({
    tenant_id,
    shard,
    previous_shard: previous,
    rekeyed_attempt: begun.attempt,
    directory_written_before: directory === shard,
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
