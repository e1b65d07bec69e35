/**
 * `LogSequencerObject`: one Durable Object per tenant, named by `logSequencerName(tenant_id)`, that
 * sequences the tenant's transparency log (docs/transparency-log.md). Receipts are committed to D1
 * with their signature envelopes (`receipt_signatures`, in `seq` order); this object drains them
 * from D1 after its cursor, appends them as leaves (the canonical envelope bytes), writes the C2SP
 * tiles and entry bundles to R2 (`LOG_TILES`, create-only), signs a checkpoint, and only then
 * commits its new state, leaves and cursor in one storage transaction.
 *
 * The cursor is a `seq` of one shard's sequence, so it is stored with that shard: a move renumbers
 * the tenant's rows on its new shard (src/db/tenant-rows.ts), where the old cursor means nothing.
 * When the directory names another shard than the cursor's, the drain reads that shard's rows of
 * the tenant from the first, skips those already leaves, and counts on that shard from then on.
 *
 * Nothing is lost or repeated on eviction or restart: D1 is the queue and the cursor moves only in
 * the transaction that stores the leaves, so a drain cut short is redone from the same cursor, and
 * what it wrote to R2 is rewritten (paths are immutable once a checkpoint names them;
 * `putCreateOnly` accepts the same bytes and replaces a cut-short drain's other ones, which no
 * checkpoint named). Once a full tile or entry bundle exists, the partial ones it supersedes are
 * deleted (C2SP tlog-tiles allows it), after the commit. One drain runs at a time (`#drainChain`),
 * and the commit re-checks the cursor it read, so even two overlapping drains could not append twice.
 *
 * RPC surface: `kick` (schedule a drain: the Worker's `waitUntil` after a commit), `drain` (drain
 * now, bounded), `checkpoint`, `inclusion`, `consistency`, `publication` and `setPublication` (the
 * opt-in public read path: the object writes the R2 marker the public routes read), `witnesses`,
 * `setWitnesses` and `submitWitnesses` (C2SP tlog-witness: the tenant's witnesses, kept here; the
 * alarm submits each new checkpoint to them after its drain and stores only cosignatures verified
 * against the witness's key; checkpoints, proofs and bundles carry them). The alarm drains and
 * re-arms itself while a backlog remains, after a failure, or for a witness submission due.
 */
import { DurableObject } from 'cloudflare:workers';
import { digestOf } from '../src/core/canonical/canonical.js';
import { utf8Encode } from '../src/core/canonical/json.js';
import {
  type LogState,
  type Tile,
  type TileRef,
  EMPTY_LOG_STATE,
  TILE_WIDTH,
  decodeState,
  encodeState,
  entryBundlePath,
  supersededPartialPrefixes,
  tilePath,
} from '../src/core/log/tiles.js';
import { KickMemo } from '../src/core/log/kicks.js';
import {
  appendBatch,
  checkpointBodyOf,
  proveConsistency,
  proveInclusion,
  sealBatch,
} from '../src/core/log/sequencer.js';
import { attachCheckpointSignature } from '../src/core/log/checkpoint.js';
import {
  type WitnessConfigInput,
  MAX_WITNESS_RESPONSE,
  addCheckpointBody,
  parseLogWitnesses,
  readAddCheckpointAnswer,
  verifyWitnessAnswer,
  withCosignatures,
} from '../src/core/log/witness.js';
import { parseWitnessKey } from '../src/core/log/cosignature.js';
import { Identifier } from '../src/core/schema.js';
import { errorForLog } from '../src/services/errors.js';
import { type LogKey, logKey } from '../src/platform/receipt-keys.js';
import { tenantShard, tenantStore } from '../src/platform/bindings.js';
import type {
  ConsistencyAnswer,
  InclusionAnswer,
  LogWitnessView,
  LogWitnessesState,
  PublicationChange,
  PublicationState,
} from '../src/services/ports.js';

/** Leaves appended per batch: one D1 read, one R2 write per changed tile, one signature. */
export const DRAIN_BATCH = 1024;
/** Batches one `drain` call runs before handing the rest to the alarm. */
export const DRAIN_MAX_BATCHES = 8;
/**
 * How long a kick waits before its drain, so the commits of that window share one drain (one D1
 * read, one R2 write per changed tile, one checkpoint signature) instead of paying one each. The
 * drain is off the decision path either way; this bounds how much log work a busy tenant causes:
 * at most one drain per window, whatever its commit rate (fewer R2 writes and signatures in
 * production; in `npm run bench:log`'s single local process, drains at 250 ms still showed as
 * added authorize latency, at 2 s they did not). A proof or bundle request does not wait for it:
 * it drains on demand. The background delay until a checkpoint covers a receipt is this window
 * plus one drain.
 */
export const KICK_COALESCE_MS = 2_000;
/** Storage key: the latest drain time a kick was told (a Worker may skip kicks until then). */
const PROMISED_KEY = 'promised_drain_at';
/**
 * Storage key: the tree size of the checkpoint last written to R2 (`log/<tenant_id>/checkpoint`).
 * That write follows the commit, so it can fail (or the object stop) after it: a drain that ends
 * with nothing left to read compares this with the committed size and writes the copy again.
 */
const R2_CHECKPOINT_KEY = 'r2_checkpoint_size';
/** Delay before the alarm retries a drain that failed (D1, R2 or the key ring unavailable). */
export const RETRY_MS = 5_000;

/**
 * How the object reaches witnesses (C2SP tlog-witness `add-checkpoint`): `fetch` in production; a
 * test sets `witnessFetcher` on the instance to a fake witness. Called with the full URL.
 */
export type WitnessFetcher = (
  url: string,
  init: {
    readonly method: 'POST';
    readonly headers: Record<string, string>;
    readonly body: string;
    readonly signal: AbortSignal;
    /** Never followed: a redirect would leave the validated https URL (an answer 3xx, refused). */
    readonly redirect: 'manual';
  },
) => Promise<Response>;
/** How long one `add-checkpoint` request may take before it counts as a network failure. */
export const WITNESS_TIMEOUT_MS = 5_000;
/** The first retry delay after a witness failed; doubled per failure in a row, up to the max. */
export const WITNESS_RETRY_BASE_MS = 30_000;
export const WITNESS_RETRY_MAX_MS = 60 * 60_000;
/** Cosigned checkpoints kept for bundles of older receipts (the newest; dominated ones go first). */
export const MAX_COSIGNED_CHECKPOINTS = 32;

/** The R2 key prefix of a tenant's log: `log/<tenant_id>/` (docs/transparency-log.md). */
export function logPrefix(tenant_id: string): string {
  return `log/${tenant_id}/`;
}

/**
 * The R2 key whose presence makes a tenant's log public (docs/transparency-log.md, "Public logs").
 * Outside `log/<tenant_id>/`, so serving that prefix from a bucket never serves it. Only this object
 * writes or deletes it, after (publish) or before (unpublish) recording the change in its storage:
 * the marker is present only while the stored state says published.
 */
export function publicationMarkerKey(tenant_id: string): string {
  return `log-published/${tenant_id}`;
}

/** Publication changes returned with the state, newest first (all are kept in the object). */
export const PUBLICATION_EVENTS_SHOWN = 20;

export interface DrainReport {
  /** Leaves appended by this call. */
  readonly appended: number;
  /** The tree size after it. */
  readonly size: number;
  /** True when unlogged receipts may remain (the alarm continues). */
  readonly more: boolean;
}

/**
 * 1: `meta`, `leaf`, `tile`. 2: `meta.shard`, the shard the cursor counts on; NULL in a row
 * version 1 wrote, which the next drain treats as another shard's cursor (a rescan of the current
 * shard: safe, and it repairs a log whose cursor a move had carried past unread rows).
 * 3: `publication` (the public read path's opt-in and its history).
 * 4: `witness`, `witness_change`, `cosigned_checkpoint`, `cosignature` (C2SP tlog-witness).
 */
const SCHEMA_VERSION = 4;

/** A row of `witness`. */
type WitnessRow = {
  readonly position: number;
  readonly vkey: string;
  readonly url: string;
  readonly known_size: number | null;
  readonly failures: number;
  readonly next_attempt_unix_ms: number;
  readonly last_attempt_unix_ms: number | null;
  readonly last_outcome: string | null;
  readonly last_error: string | null;
};

/** Where the drain is: the last `seq` it took on `shard` (null: not known, version 1's rows). */
interface Position {
  readonly shard: number | null;
  readonly cursor: number;
}

export class LogSequencerObject extends DurableObject<Env> {
  readonly #sql: SqlStorage;
  #drainChain: Promise<unknown> = Promise.resolve();
  /**
   * The entries of the partial entry bundle at `size`, as the last drain committed them: the next
   * drain rewrites that bundle wider without reading them back (up to 255 entries). Memory only,
   * keyed by the tree size; after an eviction, or for any other size, they are read from `leaf`.
   */
  #pending: { readonly size: number; readonly entries: readonly Uint8Array[] } | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#sql = ctx.storage.sql;
    // Versioned, idempotent schema set-up before any event is delivered.
    void ctx.blockConcurrencyWhile(async () => {
      this.#migrate();
    });
  }

  #migrate(): void {
    this.#sql.exec('CREATE TABLE IF NOT EXISTS schema_version (v INTEGER NOT NULL)');
    const v = this.#sql.exec<{ v: number }>('SELECT v FROM schema_version').toArray()[0]?.v ?? 0;
    if (v >= SCHEMA_VERSION) return;
    // One transaction: an upgrade cut short is redone whole (ALTER TABLE is not repeatable).
    this.ctx.storage.transactionSync(() => {
      if (v < 1) this.#createV1();
      // By the column, not the version alone: before the merge that numbered this schema, the
      // publiclog branch's version 2 was `publication`, so an object it stored is at 2 without it.
      if (!this.#hasColumn('meta', 'shard')) this.#sql.exec('ALTER TABLE meta ADD COLUMN shard INTEGER');
      // Every change of the log's publication, who made it and when (the audit record); the
      // latest row is the state, and no row means not published.
      if (v < 3) {
        this.#sql.exec(`CREATE TABLE IF NOT EXISTS publication (
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          published INTEGER NOT NULL CHECK (published IN (0, 1)),
          principal_id TEXT NOT NULL,
          at_unix_ms INTEGER NOT NULL
        )`);
      }
      if (v < 4) this.#createWitnessTables();
      this.#sql.exec('DELETE FROM schema_version');
      this.#sql.exec('INSERT INTO schema_version (v) VALUES (?)', SCHEMA_VERSION);
    });
  }

  /**
   * The log's witnesses and what they cosigned. Here, not in D1: only this object submits to them
   * and keeps their answers, the list and each witness's known size change together with the
   * cosignatures, and the object is the tenant's by construction (`#checkTenant`).
   */
  #createWitnessTables(): void {
    // One row per configured witness, in the order given; `known_size` is the size it last
    // cosigned (or told in a 409), from which the next consistency proof starts.
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS witness (
      position INTEGER NOT NULL,
      vkey TEXT PRIMARY KEY,
      url TEXT NOT NULL,
      known_size INTEGER,
      failures INTEGER NOT NULL DEFAULT 0,
      next_attempt_unix_ms INTEGER NOT NULL DEFAULT 0,
      last_attempt_unix_ms INTEGER,
      last_outcome TEXT,
      last_error TEXT
    )`);
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS witness_change (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      principal_id TEXT NOT NULL,
      at_unix_ms INTEGER NOT NULL,
      vkeys TEXT NOT NULL
    )`);
    // Checkpoints (log-signed) that at least one witness cosigned, and the verified lines.
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS cosigned_checkpoint (
      size INTEGER PRIMARY KEY,
      checkpoint TEXT NOT NULL
    )`);
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS cosignature (
      size INTEGER NOT NULL,
      vkey TEXT NOT NULL,
      line TEXT NOT NULL,
      timestamp_unix_s INTEGER NOT NULL,
      PRIMARY KEY (size, vkey)
    )`);
  }

  #hasColumn(table: string, column: string): boolean {
    return (
      this.#sql
        .exec<{ n: number }>('SELECT count(*) AS n FROM pragma_table_info(?) WHERE name = ?', table, column)
        .one().n > 0
    );
  }

  #createV1(): void {
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS meta (
      singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
      tenant_id TEXT NOT NULL,
      cursor INTEGER NOT NULL,
      state BLOB NOT NULL,
      checkpoint TEXT
    )`);
    // One row per leaf: its receipt (unique: a receipt is logged once), the D1 row it came from
    // (a `seq` of the shard then read), and its entry bytes (the partial entry bundle is rebuilt from the last ones).
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS leaf (
      idx INTEGER PRIMARY KEY,
      receipt_sha256 TEXT NOT NULL UNIQUE,
      seq INTEGER NOT NULL,
      entry BLOB NOT NULL
    )`);
    // Full tiles only; the partial ones are in the state. Proofs are built from these.
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS tile (
      level INTEGER NOT NULL,
      idx INTEGER NOT NULL,
      hashes BLOB NOT NULL,
      PRIMARY KEY (level, idx)
    )`);
  }

  // -- RPC ------------------------------------------------------------------------------------

  /**
   * Schedule a drain (the alarm, `KICK_COALESCE_MS` out), unless one is already due: the kicks of
   * that window share it. Answers the time the drain is due, which this object then keeps as a
   * promise (`#keepPromise`): the Worker skips its kicks for commits completed before it
   * (src/core/log/kicks.ts). Cheap: no D1 or R2 access. A kick that arrives while a drain runs
   * finds no alarm set (a running alarm no longer counts) and arms the next one, so no receipt is
   * left waiting for a later commit.
   */
  async kick(tenant_id: string): Promise<number> {
    this.#checkTenant(tenant_id);
    const due = await this.ctx.storage.getAlarm();
    if (due !== null) {
      await this.#promise(due);
      return due;
    }
    const at = Date.now() + KICK_COALESCE_MS;
    await this.ctx.storage.setAlarm(at);
    await this.#promise(at);
    return at;
  }

  /** Drain now: at most `batches` batches of `batch` leaves; the alarm takes any rest. */
  async drain(
    tenant_id: string,
    batch: number = DRAIN_BATCH,
    batches: number = DRAIN_MAX_BATCHES,
  ): Promise<DrainReport> {
    this.#checkTenant(tenant_id);
    if (!Number.isSafeInteger(batch) || batch < 1 || batch > DRAIN_BATCH)
      throw new Error('invalid batch size');
    if (!Number.isSafeInteger(batches) || batches < 1 || batches > DRAIN_MAX_BATCHES)
      throw new Error('invalid batch count');
    const r = await this.#serialized(tenant_id, batch, batches);
    if (r.more) await this.ctx.storage.setAlarm(Date.now());
    else await this.#keepPromise();
    // The alarm submits a new checkpoint to the witnesses: never this call (a proof request).
    await this.#armWitnessRetry();
    return r;
  }

  /** The latest signed checkpoint (the empty log's, signed now, before the first receipt). */
  async checkpoint(tenant_id: string): Promise<{ readonly size: number; readonly checkpoint: string }> {
    this.#checkTenant(tenant_id);
    const { size, checkpoint } = await this.#signedCheckpoint(tenant_id);
    // With the verified cosignatures stored for exactly this checkpoint (none yet: the log's alone).
    return { size, checkpoint: this.#cosignedNote(size, checkpoint) };
  }

  /** The latest checkpoint with the log's signature alone. */
  async #signedCheckpoint(
    tenant_id: string,
  ): Promise<{ readonly size: number; readonly checkpoint: string }> {
    const m = this.#meta();
    if (m !== null && m.checkpoint !== null) return { size: m.state.size, checkpoint: m.checkpoint };
    const key = logKey(this.env, tenant_id);
    const body = checkpointBodyOf(m?.state ?? EMPTY_LOG_STATE, key.origin);
    if (!body.ok) throw new Error(body.error.message);
    const cp = attachCheckpointSignature(body.value, await signatureOf(key, body.value));
    if (!cp.ok) throw new Error(cp.error.message);
    return { size: m?.state.size ?? 0, checkpoint: cp.value };
  }

  /** Whether the log is public, and its latest publication changes. */
  async publication(tenant_id: string): Promise<PublicationState> {
    this.#checkTenant(tenant_id);
    return this.#publication();
  }

  /**
   * Publish or unpublish the log (a tenant admin's request; the route checked the role). Runs in
   * the drain chain, so the checkpoint it writes is never older than one a drain wrote.
   * Publish: sign or read the latest checkpoint, record the change, write that checkpoint to R2
   * (the empty log's before any receipt; it also repairs a copy a crash left behind), then the
   * marker. Unpublish: delete the marker, then record. A failure part-way leaves the log not
   * public or the request failed; either call is idempotent, so repeating it completes it. Only a
   * change is recorded.
   */
  async setPublication(
    tenant_id: string,
    published: boolean,
    principal_id: string,
    at_unix_ms: number,
  ): Promise<PublicationChange> {
    this.#checkTenant(tenant_id);
    if (!Identifier.safeParse(principal_id).success) throw new Error('invalid principal id');
    if (!Number.isSafeInteger(at_unix_ms) || at_unix_ms < 0) throw new Error('invalid time');
    const run = this.#drainChain.then(async () => {
      const changed = this.#publication().published !== published;
      const record = () => {
        if (!changed) return;
        this.#sql.exec(
          'INSERT INTO publication (published, principal_id, at_unix_ms) VALUES (?, ?, ?)',
          published ? 1 : 0,
          principal_id,
          at_unix_ms,
        );
      };
      const marker = publicationMarkerKey(tenant_id);
      if (published) {
        // Signed first (the empty log's needs the key ring): a refusal here records nothing.
        const { size, checkpoint } = await this.#signedCheckpoint(tenant_id);
        record();
        await this.#writeR2Checkpoint(tenant_id, size, checkpoint);
        await this.env.LOG_TILES.put(
          marker,
          JSON.stringify({ tenant_id, published_by: principal_id, published_at_unix_ms: at_unix_ms }),
          { httpMetadata: { contentType: 'application/json' } },
        );
      } else {
        await this.env.LOG_TILES.delete(marker);
        record();
      }
      return { changed, state: this.#publication() };
    });
    this.#drainChain = run.catch(() => undefined);
    return run;
  }

  /** The inclusion proof of a receipt against the latest checkpoint, or `not_logged`. */
  async inclusion(tenant_id: string, receipt_sha256: string): Promise<InclusionAnswer> {
    this.#checkTenant(tenant_id);
    const m = this.#meta();
    const row = this.#sql
      .exec<{ idx: number }>('SELECT idx FROM leaf WHERE receipt_sha256 = ?', receipt_sha256)
      .toArray()[0];
    if (m === null || m.checkpoint === null || row === undefined) return { status: 'not_logged' };
    const at = this.#proofCheckpoint(row.idx, m.state.size, m.checkpoint);
    const proof = proveInclusion(m.state, row.idx, at.checkpoint, (refs) => this.#fullTiles(refs), at.size);
    if (!proof.ok) throw new Error(`inclusion proof: ${proof.error.message}`);
    return { status: 'included', index: row.idx, size: at.size, proof: proof.value };
  }

  /** The consistency proof between two sizes of the log (base64 hashes). */
  async consistency(tenant_id: string, from: number, to: number): Promise<ConsistencyAnswer> {
    this.#checkTenant(tenant_id);
    const state = this.#meta()?.state ?? EMPTY_LOG_STATE;
    const p = proveConsistency(state, from, to, (refs) => this.#fullTiles(refs));
    if (p.ok) return { ok: true, size: state.size, proof: p.value };
    if (p.error.reason === 'invalid_proof') throw new Error(p.error.message);
    return { ok: false, reason: p.error.reason, message: p.error.message };
  }

  override async alarm(): Promise<void> {
    const m = this.#meta();
    const tenant_id = m?.tenant_id ?? (await this.ctx.storage.get<string>('tenant_id'));
    if (tenant_id === undefined) return;
    try {
      const r = await this.#serialized(tenant_id, DRAIN_BATCH, DRAIN_MAX_BATCHES);
      if (r.more) await this.ctx.storage.setAlarm(Date.now());
      else {
        await this.#keepPromise();
        // Witnesses after the drain, and only once no backlog remains: a backlog's next alarm
        // drains first. Never fails the alarm; a witness's failure is recorded on its row.
        if (this.witnessAutoSubmit) await this.#submitWitnesses(tenant_id);
      }
      await this.#armWitnessRetry();
    } catch (e) {
      console.error(
        JSON.stringify({
          level: 'error',
          what: 'log drain failed; will retry from the alarm',
          ...(e instanceof Error ? errorForLog(e) : { error: 'unknown' }),
        }),
      );
      await this.ctx.storage.setAlarm(Date.now() + RETRY_MS);
    }
  }

  // -- Witnesses (C2SP tlog-witness) ---------------------------------------------------------

  /** Tests replace it with a fake witness (see `WitnessFetcher`); not reachable over RPC. */
  witnessFetcher: WitnessFetcher = (url, init) => fetch(url, init);
  /**
   * Whether the alarm submits to witnesses after its drain. Tests that drive submissions
   * explicitly (`submitWitnesses`) turn it off, so an alarm firing meanwhile cannot interleave.
   */
  witnessAutoSubmit = true;
  /** The submission round running now, if any: rounds never overlap. */
  #submitting: Promise<void> | null = null;

  /** The log's witnesses and their submission state. */
  async witnesses(tenant_id: string): Promise<LogWitnessesState> {
    this.#checkTenant(tenant_id);
    return this.#witnessesState();
  }

  /**
   * Replace the log's witness list (a tenant admin's request; the route checked the role and the
   * list). Validated again here: nothing reaches storage that `parseLogWitnesses` refuses. A
   * witness kept (same vkey) keeps its known size and backoff; a removed one's cosignatures are
   * deleted (its key may be why it was removed), so no checkpoint is served with them again.
   */
  async setWitnesses(
    tenant_id: string,
    inputs: readonly WitnessConfigInput[],
    allowLoopbackHttp: boolean,
    principal_id: string,
    at_unix_ms: number,
  ): Promise<LogWitnessesState> {
    this.#checkTenant(tenant_id);
    if (!Identifier.safeParse(principal_id).success) throw new Error('invalid principal id');
    if (!Number.isSafeInteger(at_unix_ms) || at_unix_ms < 0) throw new Error('invalid time');
    const parsed = parseLogWitnesses(inputs, { allowLoopbackHttp });
    if (!parsed.ok) throw new Error(`invalid witness list: ${parsed.error.message}`);
    const list = parsed.value;
    const run = this.#drainChain.then(async () => {
      this.ctx.storage.transactionSync(() => {
        const keep = JSON.stringify(list.map((w) => w.key.vkey));
        this.#sql.exec('DELETE FROM witness WHERE vkey NOT IN (SELECT value FROM json_each(?))', keep);
        this.#sql.exec('DELETE FROM cosignature WHERE vkey NOT IN (SELECT value FROM json_each(?))', keep);
        this.#sql.exec('DELETE FROM cosigned_checkpoint WHERE size NOT IN (SELECT size FROM cosignature)');
        for (const [position, w] of list.entries()) {
          this.#sql.exec(
            `INSERT INTO witness (position, vkey, url) VALUES (?, ?, ?)
             ON CONFLICT (vkey) DO UPDATE SET position = excluded.position, url = excluded.url`,
            position,
            w.key.vkey,
            w.url,
          );
        }
        this.#sql.exec(
          'INSERT INTO witness_change (principal_id, at_unix_ms, vkeys) VALUES (?, ?, ?)',
          principal_id,
          at_unix_ms,
          keep,
        );
      });
      // The served copy loses a removed witness's line at once.
      const m = this.#meta();
      if (m !== null && m.checkpoint !== null)
        await this.#writeR2Checkpoint(tenant_id, m.state.size, m.checkpoint);
    });
    this.#drainChain = run.catch(() => undefined);
    await run;
    await this.#armWitnessRetry();
    return this.#witnessesState();
  }

  /**
   * Submit the latest checkpoint to every witness that has not cosigned it and whose backoff has
   * passed (the alarm calls it after a drain; tests call it to drive submissions explicitly).
   * Never throws for a witness's failure: it is recorded on the witness's row and retried later.
   */
  async submitWitnesses(tenant_id: string): Promise<LogWitnessesState> {
    this.#checkTenant(tenant_id);
    await this.#submitWitnesses(tenant_id);
    await this.#armWitnessRetry();
    return this.#witnessesState();
  }

  #submitWitnesses(tenant_id: string): Promise<void> {
    // A round already running covers this call's witnesses (it reads the latest checkpoint);
    // overlapping rounds would race on a witness's known size.
    if (this.#submitting !== null) return this.#submitting;
    const round = this.#submitRound(tenant_id).finally(() => {
      this.#submitting = null;
    });
    this.#submitting = round;
    return round;
  }

  async #submitRound(tenant_id: string): Promise<void> {
    const m = this.#meta();
    if (m === null || m.checkpoint === null) return;
    const now = Date.now();
    const due = this.#witnessRows().filter(
      (w) => (w.known_size === null || w.known_size < m.state.size) && w.next_attempt_unix_ms <= now,
    );
    // In parallel, each bounded by WITNESS_TIMEOUT_MS: no witness waits on another.
    await Promise.allSettled(
      due.map((w) =>
        this.#submitOne(tenant_id, w, m.state, m.checkpoint!).catch((e) =>
          this.#witnessFailed(w.vkey, 'error', e),
        ),
      ),
    );
  }

  /**
   * One witness: `add-checkpoint` from the size it is known to have (0 when unknown), and after a
   * 409 with the witness's size, once more with the proof from that size. A 200 answer is verified
   * against the witness's key before anything of it is stored.
   */
  async #submitOne(tenant_id: string, w: WitnessRow, state: LogState, checkpoint: string): Promise<void> {
    const key = parseWitnessKey(w.vkey);
    if (!key.ok) return this.#witnessFailed(w.vkey, 'invalid_config', key.error.message);
    const size = state.size;
    let old = w.known_size ?? 0;
    for (let attempt = 0; attempt < 2; attempt++) {
      if (old > size) {
        // The witness cosigned a larger tree of this origin than this log has: a rollback of
        // this object's storage or a fork. Never resubmitted blindly: recorded for an operator.
        return this.#witnessFailed(
          w.vkey,
          'witness_ahead',
          `the witness has cosigned size ${old}, beyond ${size}`,
        );
      }
      const proof =
        old === 0 ? { ok: true as const, proof: [] as readonly string[] } : this.#proofFrom(state, old);
      if (!proof.ok) return this.#witnessFailed(w.vkey, 'error', proof.message);
      const body = addCheckpointBody(old, proof.proof, checkpoint);
      if (!body.ok) return this.#witnessFailed(w.vkey, 'error', body.error.message);
      let res: { status: number; type: string | null; text: string };
      try {
        const r = await this.witnessFetcher(`${w.url}/add-checkpoint`, {
          method: 'POST',
          headers: { 'content-type': 'text/plain; charset=utf-8' },
          body: body.value,
          signal: AbortSignal.timeout(WITNESS_TIMEOUT_MS),
          redirect: 'manual',
        });
        res = { status: r.status, type: r.headers.get('content-type'), text: await boundedText(r) };
      } catch (e) {
        return this.#witnessFailed(w.vkey, 'network', e instanceof Error ? e.name : 'fetch failed');
      }
      const answer = readAddCheckpointAnswer(res.status, res.type, res.text);
      if (answer.kind === 'cosigned') {
        const v = verifyWitnessAnswer(checkpoint, answer.body, key.value);
        if (!v.ok) return this.#witnessFailed(w.vkey, 'invalid_answer', v.error.message);
        return this.#storeCosignature(
          tenant_id,
          w.vkey,
          size,
          checkpoint,
          v.value.line,
          v.value.cosigned.timestamp_unix_s,
        );
      }
      if (answer.kind === 'conflict' && attempt === 0 && answer.size !== old) {
        this.#sql.exec('UPDATE witness SET known_size = ? WHERE vkey = ?', answer.size, w.vkey);
        old = answer.size;
        continue;
      }
      const message = answer.kind === 'conflict' ? `conflict again at size ${answer.size}` : answer.message;
      return this.#witnessFailed(w.vkey, String(res.status), message);
    }
  }

  #proofFrom(
    state: LogState,
    from: number,
  ): { ok: true; proof: readonly string[] } | { ok: false; message: string } {
    const p = proveConsistency(state, from, state.size, (refs) => this.#fullTiles(refs));
    return p.ok
      ? { ok: true, proof: p.value }
      : { ok: false, message: `consistency proof: ${p.error.message}` };
  }

  /** A verified cosignature: kept only while its witness is still configured with that key. */
  async #storeCosignature(
    tenant_id: string,
    vkey: string,
    size: number,
    checkpoint: string,
    line: string,
    timestamp: number,
  ): Promise<void> {
    const now = Date.now();
    const stored = this.ctx.storage.transactionSync(() => {
      const still = this.#sql
        .exec<{ n: number }>('SELECT count(*) AS n FROM witness WHERE vkey = ?', vkey)
        .one().n;
      if (still === 0) return false;
      this.#sql.exec(
        `UPDATE witness SET known_size = max(coalesce(known_size, 0), ?), failures = 0, next_attempt_unix_ms = 0,
           last_attempt_unix_ms = ?, last_outcome = 'cosigned', last_error = NULL WHERE vkey = ?`,
        size,
        now,
        vkey,
      );
      this.#sql.exec(
        'INSERT OR IGNORE INTO cosigned_checkpoint (size, checkpoint) VALUES (?, ?)',
        size,
        checkpoint,
      );
      this.#sql.exec(
        'INSERT OR REPLACE INTO cosignature (size, vkey, line, timestamp_unix_s) VALUES (?, ?, ?, ?)',
        size,
        vkey,
        line,
        timestamp,
      );
      this.#pruneCosigned();
      return true;
    });
    if (!stored) return;
    // The R2 copy (public readers) of the latest checkpoint gains the line; in the drain chain, so
    // a drain's newer checkpoint is never overwritten by this older one.
    const run = this.#drainChain.then(async () => {
      const m = this.#meta();
      if (m !== null && m.checkpoint !== null && m.state.size === size) {
        await this.#writeR2Checkpoint(tenant_id, size, m.checkpoint);
      }
    });
    this.#drainChain = run.catch(() => undefined);
    await run.catch(() => undefined);
  }

  /**
   * Keep the cosigned checkpoints a bundle could want: an older one whose witnesses all cosigned a
   * newer one too is never better (the newer covers every receipt it covers), and beyond
   * MAX_COSIGNED_CHECKPOINTS the oldest go.
   */
  #pruneCosigned(): void {
    const rows = this.#sql
      .exec<{ size: number; vkeys: string }>(
        `SELECT size, json_group_array(vkey) AS vkeys FROM cosignature GROUP BY size ORDER BY size DESC`,
      )
      .toArray()
      .map((r) => ({ size: r.size, vkeys: new Set(JSON.parse(r.vkeys) as string[]) }));
    const drop: number[] = [];
    const kept: (typeof rows)[number][] = [];
    for (const r of rows) {
      const dominated = kept.some((k) => [...r.vkeys].every((v) => k.vkeys.has(v)));
      if (dominated || kept.length >= MAX_COSIGNED_CHECKPOINTS) drop.push(r.size);
      else kept.push(r);
    }
    if (drop.length === 0) return;
    const sizes = JSON.stringify(drop);
    this.#sql.exec('DELETE FROM cosignature WHERE size IN (SELECT value FROM json_each(?))', sizes);
    this.#sql.exec('DELETE FROM cosigned_checkpoint WHERE size IN (SELECT value FROM json_each(?))', sizes);
  }

  /** Record a failed submission and back off: 30 s, doubled per failure in a row, at most an hour. */
  #witnessFailed(vkey: string, outcome: string, error: unknown): void {
    const message = (
      typeof error === 'string' ? error : error instanceof Error ? error.name : 'failed'
    ).slice(0, 300);
    const now = Date.now();
    const row = this.#sql
      .exec<{ failures: number }>('SELECT failures FROM witness WHERE vkey = ?', vkey)
      .toArray()[0];
    if (row === undefined) return;
    const delay = Math.min(WITNESS_RETRY_BASE_MS * 2 ** Math.min(row.failures, 20), WITNESS_RETRY_MAX_MS);
    this.#sql.exec(
      `UPDATE witness SET failures = failures + 1, next_attempt_unix_ms = ?, last_attempt_unix_ms = ?,
         last_outcome = ?, last_error = ? WHERE vkey = ?`,
      now + delay,
      now,
      outcome,
      message,
      vkey,
    );
  }

  /**
   * Arm the alarm for the earliest witness submission due (a new checkpoint some witness has not
   * cosigned, after its backoff), unless an earlier alarm is set. The alarm drains first, so this
   * never delays a drain; it may make one sooner.
   */
  async #armWitnessRetry(): Promise<void> {
    // Off (tests drive submissions), or a round is running: its end arms what it leaves due.
    if (!this.witnessAutoSubmit || this.#submitting !== null) return;
    const m = this.#meta();
    if (m === null || m.checkpoint === null) return;
    const next = this.#sql
      .exec<{ t: number | null }>(
        'SELECT min(next_attempt_unix_ms) AS t FROM witness WHERE known_size IS NULL OR known_size < ?',
        m.state.size,
      )
      .one().t;
    if (next === null) return;
    const at = Math.max(next, Date.now());
    const due = await this.ctx.storage.getAlarm();
    if (due === null || due > at) await this.ctx.storage.setAlarm(at);
  }

  #witnessRows(): WitnessRow[] {
    return this.#sql.exec<WitnessRow>('SELECT * FROM witness ORDER BY position').toArray();
  }

  #witnessesState(): LogWitnessesState {
    const views: LogWitnessView[] = this.#witnessRows().map((w) => {
      const k = parseWitnessKey(w.vkey);
      return {
        name: k.ok ? k.value.name : '',
        key_id: k.ok ? k.value.keyId.toString(16).padStart(8, '0') : '',
        vkey: w.vkey,
        url: w.url,
        cosigned_size: w.known_size,
        failures: w.failures,
        last_attempt_unix_ms: w.last_attempt_unix_ms,
        last_outcome: w.last_outcome,
        last_error: w.last_error,
        retry_after_unix_ms: w.failures > 0 ? w.next_attempt_unix_ms : null,
      };
    });
    const change = this.#sql
      .exec<{ principal_id: string; at_unix_ms: number }>(
        'SELECT principal_id, at_unix_ms FROM witness_change ORDER BY seq DESC LIMIT 1',
      )
      .toArray()[0];
    return {
      witnesses: views,
      changed_by: change?.principal_id ?? null,
      changed_at_unix_ms: change?.at_unix_ms ?? null,
    };
  }

  /** The stored verified cosignature lines of the checkpoint of `size`, by witness order. */
  #cosignatureLines(size: number): string[] {
    return this.#sql
      .exec<{ line: string }>(
        `SELECT c.line FROM cosignature c JOIN witness w ON w.vkey = c.vkey WHERE c.size = ? ORDER BY w.position`,
        size,
      )
      .toArray()
      .map((r) => r.line);
  }

  /** A log-signed checkpoint of `size` with its stored verified cosignatures appended. */
  #cosignedNote(size: number, checkpoint: string): string {
    return withCosignatures(checkpoint, this.#cosignatureLines(size));
  }

  /**
   * The checkpoint a receipt's proof is made against: the cosigned checkpoint covering the leaf
   * with the most witnesses' cosignatures, the newest of equals; the latest checkpoint when no
   * cosigned one has more (so without witnesses, or before any cosigned, always the latest).
   */
  #proofCheckpoint(idx: number, size: number, latest: string): { size: number; checkpoint: string } {
    const current = this.#cosignatureLines(size).length;
    const best = this.#sql
      .exec<{ size: number; checkpoint: string; n: number }>(
        `SELECT k.size, k.checkpoint, count(*) AS n FROM cosigned_checkpoint k
           JOIN cosignature c ON c.size = k.size JOIN witness w ON w.vkey = c.vkey
         WHERE k.size > ? AND k.size < ? GROUP BY k.size ORDER BY n DESC, k.size DESC LIMIT 1`,
        idx,
        size,
      )
      .toArray()[0];
    if (best === undefined || best.n <= current)
      return { size, checkpoint: this.#cosignedNote(size, latest) };
    return { size: best.size, checkpoint: this.#cosignedNote(best.size, best.checkpoint) };
  }

  // -- The drain time promised to kickers ----------------------------------------------------

  /** Remember the latest drain time a kick was told (durable: it must survive an eviction). */
  async #promise(at: number): Promise<void> {
    const promised = (await this.ctx.storage.get<number>(PROMISED_KEY)) ?? 0;
    if (at > promised) await this.ctx.storage.put(PROMISED_KEY, at);
  }

  /**
   * After a drain with nothing left: if it ran before a drain time some kick was told (an
   * on-demand drain, or an alarm re-armed early for a backlog), a Worker may have skipped kicks
   * for commits made since, relying on a drain at or after that time; arm it. A later alarm (a
   * retry) also keeps the promise: a drain after the promised time still drains those commits.
   */
  async #keepPromise(): Promise<void> {
    const promised = (await this.ctx.storage.get<number>(PROMISED_KEY)) ?? 0;
    if (promised <= Date.now()) return;
    const due = await this.ctx.storage.getAlarm();
    if (due === null || due < promised) await this.ctx.storage.setAlarm(promised);
  }

  // -- Draining -------------------------------------------------------------------------------

  #serialized(tenant_id: string, batch: number, batches: number): Promise<DrainReport> {
    const run = this.#drainChain.then(() => this.#drainBatches(tenant_id, batch, batches));
    this.#drainChain = run.catch(() => undefined);
    return run;
  }

  async #drainBatches(tenant_id: string, batch: number, batches: number): Promise<DrainReport> {
    let appended = 0;
    for (let i = 0; i < batches; i++) {
      const n = await this.#drainOnce(tenant_id, batch);
      appended += n.appended;
      if (n.read < batch) {
        await this.#catchUpR2Checkpoint(tenant_id);
        return { appended, size: this.#meta()?.state.size ?? 0, more: false };
      }
    }
    return { appended, size: this.#meta()?.state.size ?? 0, more: true };
  }

  /**
   * One batch: read after the cursor, write tiles and bundles, then commit. Returns the rows read
   * (a full batch: more may follow) and the leaves appended.
   */
  async #drainOnce(tenant_id: string, batch: number): Promise<{ read: number; appended: number }> {
    const m = this.#meta();
    const at: Position | null = m === null ? null : { shard: m.shard, cursor: m.cursor };
    const state = m?.state ?? EMPTY_LOG_STATE;
    // The tenant's shard, from the directory at every batch (not cached: a moved tenant's rows
    // live on its new shard). Off the decision path: drains run after the commit.
    const shard = await tenantShard(this.env, tenant_id);
    if (shard === null) throw new Error('log drain: tenant is not in the shard directory');
    // A cursor counted on another shard (or on one version 1 did not record) is no position on
    // this one: a move renumbers the tenant's rows, possibly below it. Read this shard's rows from
    // the first; those already leaves are skipped below. Bounded like any drain: a batch a read.
    const after = at !== null && at.shard === shard ? at.cursor : 0;
    const rows = await tenantStore(this.env, { tenant_id, shard }).signaturesAfter(after, batch);
    if (rows.length === 0) return { read: 0, appended: 0 };
    // D1's unique index makes a receipt appear once per shard; a receipt already a leaf (a moved
    // tenant's rows are renumbered on the new shard, src/db/tenant-rows.ts, and read again from
    // the first) is skipped rather than logged twice, and the cursor still moves past it. One
    // statement for the batch, not one a row.
    const logged = new Set(
      this.#sql
        .exec<{ receipt_sha256: string }>(
          'SELECT receipt_sha256 FROM leaf WHERE receipt_sha256 IN (SELECT value FROM json_each(?))',
          JSON.stringify(rows.map((r) => r.receipt_sha256)),
        )
        .toArray()
        .map((r) => r.receipt_sha256),
    );
    const fresh = rows.filter((r) => !logged.has(r.receipt_sha256));
    const next: Position = { shard, cursor: rows[rows.length - 1]!.seq };
    if (fresh.length === 0) {
      this.#commit(tenant_id, at, next, state, m?.checkpoint ?? null, [], []);
      return { read: rows.length, appended: 0 };
    }
    const entries = fresh.map((r) => utf8Encode(r.envelope));
    const pending = this.#pendingEntries(state.size);
    const key = logKey(this.env, tenant_id);
    const appended = appendBatch(state, pending, entries, key.origin);
    if (!appended.ok) throw new Error(`sequencing failed: ${appended.error.message}`);
    const seq = sealBatch(appended.value, await signatureOf(key, appended.value.checkpointBody));
    if (!seq.ok) throw new Error(`sequencing failed: ${seq.error.message}`);
    const b = seq.value;
    // Tiles and bundles before the checkpoint is published: a checkpoint never names a size
    // whose tiles are missing (C2SP tlog-tiles).
    const prefix = logPrefix(tenant_id);
    const put = (path: string, bytes: Uint8Array) =>
      putCreateOnly(this.env.LOG_TILES, prefix, path, bytes, state.size);
    await Promise.all([
      ...b.tiles.map((t) => put(tilePath(t), t.hashes)),
      ...b.bundles.map((e) => put(entryBundlePath(e.index, e.width), e.bytes)),
    ]);
    const full = b.tiles.filter((t) => t.width === TILE_WIDTH);
    const leaves = fresh.map((r, i) => ({ idx: state.size + i, row: r, entry: entries[i]! }));
    this.#commit(tenant_id, at, next, b.state, b.checkpoint, leaves, full);
    const all = [...pending, ...entries];
    this.#pending = { size: b.state.size, entries: all.slice(all.length - (b.state.size % TILE_WIDTH)) };
    // The mutable checkpoint object for C2SP readers of the bucket; the routes use storage.
    await this.#writeR2Checkpoint(tenant_id, b.state.size, b.checkpoint);
    await deleteSupersededPartials(this.env.LOG_TILES, prefix, supersededPartialPrefixes(b.tiles, b.bundles));
    return { read: rows.length, appended: fresh.length };
  }

  /** Write R2's copy of the checkpoint, then remember its size (`R2_CHECKPOINT_KEY`). */
  async #writeR2Checkpoint(tenant_id: string, size: number, checkpoint: string): Promise<void> {
    await this.env.LOG_TILES.put(`${logPrefix(tenant_id)}checkpoint`, this.#cosignedNote(size, checkpoint));
    await this.ctx.storage.put(R2_CHECKPOINT_KEY, size);
  }

  /**
   * R2's copy of the checkpoint is the committed one: a drain whose write of it failed after its
   * commit left an older one there (still valid: its tiles exist), and a retry reads no row, so
   * nothing else would write it until the tenant's next receipt.
   */
  async #catchUpR2Checkpoint(tenant_id: string): Promise<void> {
    const m = this.#meta();
    if (m === null || m.checkpoint === null) return;
    if ((await this.ctx.storage.get<number>(R2_CHECKPOINT_KEY)) === m.state.size) return;
    await this.#writeR2Checkpoint(tenant_id, m.state.size, m.checkpoint);
  }

  #commit(
    tenant_id: string,
    expected: Position | null,
    next: Position,
    state: LogState,
    checkpoint: string | null,
    leaves: readonly { idx: number; row: { seq: number; receipt_sha256: string }; entry: Uint8Array }[],
    tiles: readonly Tile[],
  ): void {
    this.ctx.storage.transactionSync(() => {
      // Another drain committed since this one read the cursor (on any shard): abort rather than
      // append twice.
      const now = this.#position();
      if (now?.shard !== expected?.shard || now?.cursor !== expected?.cursor)
        throw new Error('log cursor moved during a drain');
      for (const l of leaves) {
        this.#sql.exec(
          'INSERT INTO leaf (idx, receipt_sha256, seq, entry) VALUES (?, ?, ?, ?)',
          l.idx,
          l.row.receipt_sha256,
          l.row.seq,
          l.entry,
        );
      }
      for (const t of tiles) {
        this.#sql.exec(
          'INSERT OR IGNORE INTO tile (level, idx, hashes) VALUES (?, ?, ?)',
          t.level,
          t.index,
          t.hashes,
        );
      }
      this.#sql.exec(
        `INSERT INTO meta (singleton, tenant_id, shard, cursor, state, checkpoint) VALUES (1, ?, ?, ?, ?, ?)
         ON CONFLICT (singleton) DO UPDATE SET shard = excluded.shard, cursor = excluded.cursor,
           state = excluded.state, checkpoint = excluded.checkpoint`,
        tenant_id,
        next.shard,
        next.cursor,
        encodeState(state),
        checkpoint,
      );
    });
  }

  // -- Reading --------------------------------------------------------------------------------

  /** The cursor and its shard alone (no state decoded): `null` before the first commit. */
  #position(): Position | null {
    return (
      this.#sql
        .exec<{ shard: number | null; cursor: number }>('SELECT shard, cursor FROM meta WHERE singleton = 1')
        .toArray()[0] ?? null
    );
  }

  #meta(): {
    tenant_id: string;
    shard: number | null;
    cursor: number;
    state: LogState;
    checkpoint: string | null;
  } | null {
    const row = this.#sql
      .exec<{
        tenant_id: string;
        shard: number | null;
        cursor: number;
        state: ArrayBuffer;
        checkpoint: string | null;
      }>('SELECT tenant_id, shard, cursor, state, checkpoint FROM meta WHERE singleton = 1')
      .toArray()[0];
    if (row === undefined) return null;
    const state = decodeState(new Uint8Array(row.state));
    if (!state.ok) throw new Error(`stored log state is corrupt: ${state.error.message}`);
    return {
      tenant_id: row.tenant_id,
      shard: row.shard,
      cursor: row.cursor,
      state: state.value,
      checkpoint: row.checkpoint,
    };
  }

  #publication(): PublicationState {
    const events = this.#sql
      .exec<{ published: number; principal_id: string; at_unix_ms: number }>(
        'SELECT published, principal_id, at_unix_ms FROM publication ORDER BY seq DESC LIMIT ?',
        PUBLICATION_EVENTS_SHOWN,
      )
      .toArray()
      .map((r) => ({ published: r.published === 1, principal_id: r.principal_id, at_unix_ms: r.at_unix_ms }));
    return { published: events[0]?.published ?? false, events };
  }

  #pendingEntries(size: number): readonly Uint8Array[] {
    if (this.#pending !== null && this.#pending.size === size) return this.#pending.entries;
    return this.#sql
      .exec<{ entry: ArrayBuffer }>(
        'SELECT entry FROM leaf WHERE idx >= ? ORDER BY idx',
        size - (size % TILE_WIDTH),
      )
      .toArray()
      .map((r) => new Uint8Array(r.entry));
  }

  #fullTiles(refs: readonly TileRef[]): Tile[] {
    const out: Tile[] = [];
    for (const r of refs) {
      const row = this.#sql
        .exec<{ hashes: ArrayBuffer }>(
          'SELECT hashes FROM tile WHERE level = ? AND idx = ?',
          r.level,
          r.index,
        )
        .toArray()[0];
      if (row !== undefined)
        out.push({ level: r.level, index: r.index, width: TILE_WIDTH, hashes: new Uint8Array(row.hashes) });
    }
    return out;
  }

  /** One tenant's log in one object: a request naming another tenant is a routing bug. */
  #checkTenant(tenant_id: string): void {
    if (!Identifier.safeParse(tenant_id).success) throw new Error('invalid tenant id');
    if (!this.ctx.id.equals(this.env.LOG_SEQUENCER.idFromName(logSequencerName(tenant_id)))) {
      throw new Error('log request sent to another tenant’s object');
    }
    // The alarm needs the tenant before the first commit stores it in `meta`.
    if (this.#position() === null) void this.ctx.storage.put('tenant_id', tenant_id);
  }
}

/**
 * Delete the partial tiles and entry bundles a full one now supersedes (C2SP tlog-tiles allows it
 * once the full tile is available; a client that still holds an older checkpoint reads the full
 * tile instead). Runs after the batch is committed and its checkpoint published, so a retried
 * drain never needs them. Best effort: a partial left behind is stale garbage that names no new
 * content (paths are immutable), so a failure here must not fail or repeat the drain.
 */
async function deleteSupersededPartials(
  bucket: R2Bucket,
  prefix: string,
  partialPrefixes: readonly string[],
): Promise<void> {
  try {
    for (const p of partialPrefixes) {
      // At most 255 partial widths per tile: one page of a listing.
      const listed = await bucket.list({ prefix: prefix + p, limit: 1000 });
      const keys = listed.objects.map((o) => o.key);
      if (keys.length > 0) await bucket.delete(keys);
    }
  } catch {
    // Best effort (see above): a partial left behind is only garbage.
  }
}

/**
 * Write an immutable object once, in one R2 operation: a conditional put (`If-None-Match: *`) that
 * writes only where no object exists, so a published tile or bundle is never overwritten. The
 * common case, a new path, costs one operation instead of a `head` and a `put`.
 *
 * Only when one exists (a drain redone after it was cut short between its R2 writes and its
 * commit) is it read. The same bytes: done. Other bytes are a cut-short drain's of other entries
 * at this size: a move can leave a row it read behind on the old shard, so the redo appends
 * another one there (docs/transparency-log.md, "The cursor names its shard"). Every object a drain
 * writes lies beyond the committed size (`committed`), which no checkpoint written to R2 exceeds
 * (it is written after the commit), so no checkpoint has named it: it is replaced, or the
 * checkpoint of this size would name tiles that lie. If R2's checkpoint is beyond the committed
 * size, the object's storage went back (a restore) and the object may be published: nothing is
 * replaced, the drain fails.
 */
async function putCreateOnly(
  bucket: R2Bucket,
  prefix: string,
  path: string,
  bytes: Uint8Array,
  committed: number,
): Promise<void> {
  const key = prefix + path;
  const options = { httpMetadata: { contentType: 'application/octet-stream' } };
  if ((await bucket.put(key, bytes, { ...options, onlyIf: { etagDoesNotMatch: '*' } })) !== null) return;
  const existing = await bucket.get(key);
  // Gone since the put was refused: only a concurrent delete could do it; the drain is retried.
  if (existing === null) throw new Error(`log object ${key} changed during a write`);
  if (sameBytes(new Uint8Array(await existing.arrayBuffer()), bytes)) return;
  const published = await publishedSize(bucket, prefix);
  if (published === null || published > committed) {
    throw new Error(`log object ${key} differs and may be published: refusing to replace it`);
  }
  const replaced = await bucket.put(key, bytes, { ...options, onlyIf: { etagMatches: existing.etag } });
  if (replaced === null) throw new Error(`log object ${key} changed during a write`);
}

/** The size R2's checkpoint names (0 without one); null when it does not parse. */
async function publishedSize(bucket: R2Bucket, prefix: string): Promise<number | null> {
  const o = await bucket.get(`${prefix}checkpoint`);
  if (o === null) return 0;
  const size = (await o.text()).split('\n')[1] ?? '';
  return /^(0|[1-9][0-9]{0,15})$/.test(size) && Number.isSafeInteger(Number(size)) ? Number(size) : null;
}

/** A witness's answer as text, read no further than MAX_WITNESS_RESPONSE bytes. */
async function boundedText(r: Response): Promise<string> {
  if (r.body === null) return '';
  const reader = r.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > MAX_WITNESS_RESPONSE) {
      await reader.cancel();
      // Longer than any answer: returned as such, and refused by the answer's check.
      return 'x'.repeat(MAX_WITNESS_RESPONSE + 1);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** The log key's signature over a checkpoint body, as a note signature line's parts. */
async function signatureOf(key: LogKey, body: string) {
  return { name: key.origin, keyId: key.keyId, signature: await key.sign(utf8Encode(body)) };
}

/** The object's name: versioned and hashed from an unambiguous encoding of the tenant. */
export function logSequencerName(tenant_id: string): string {
  return digestOf(['writ.log-sequencer.v1', tenant_id]);
}

export function logSequencerStub(env: Env, tenant_id: string): DurableObjectStub<LogSequencerObject> {
  return env.LOG_SEQUENCER.get(env.LOG_SEQUENCER.idFromName(logSequencerName(tenant_id)));
}

/** Drain times the tenants' sequencers told this isolate (bounded; src/core/log/kicks.ts). */
const kicked = new KickMemo(1_000);

/**
 * The Worker's kick after a commit, left out when a drain this isolate was told of is due after
 * the commit (with a margin): that drain reads D1 after the commit. Never throws: a lost kick is
 * caught up by the next one, and a proof request drains on demand.
 */
export async function kickLog(env: Env, tenant_id: string): Promise<void> {
  // In a Worker, `Date.now()` after the commit's I/O is no earlier than the commit's completion.
  if (kicked.covered(tenant_id, Date.now())) return;
  try {
    kicked.record(tenant_id, await logSequencerStub(env, tenant_id).kick(tenant_id));
  } catch (e) {
    kicked.forget(tenant_id);
    console.error(
      JSON.stringify({
        level: 'error',
        what: 'log kick failed; the next commit or proof request drains',
        error: e instanceof Error ? e.name : 'unknown',
      }),
    );
  }
}
