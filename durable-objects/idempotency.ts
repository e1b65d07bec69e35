/**
 * `IdempotencyObject`: one Durable Object per logical operation, named by `operationId(...)`
 * (src/core/execution/idempotency.ts): (tenant, tool, key), or a v1 name (tenant, contract, key)
 * for objects created before v2. An object that was never claimed holds no storage. It is a thin adapter over the pure state machine: load the row,
 * call the core with `now`, write the row, answer. Every read-modify-write runs synchronously
 * inside the object's input gate (SQLite calls are synchronous and nothing is awaited between the
 * read and the write), so 64 concurrent claims see one another's writes and exactly one proceeds.
 *
 * The object is the source of truth. It mirrors its operation and receipts into the D1 index
 * (`operations`, `receipts`) after every change, and when that write fails it retries from its
 * alarm, so the index converges without depending on the Worker that called it. The same alarm
 * applies time-driven transitions: a lease that ran out (the owner may have crashed after the
 * effect) becomes `reconciliation_required`, a passed reconciliation deadline becomes `escalated`.
 *
 * RPC surface: `claim`, `report`, `reconcile`, `read` (and the runtime's `alarm`). Helpers are
 * `#private` or module functions: a TypeScript `private` method would still be callable over RPC.
 * docs/idempotency.md describes states, storage and alarms.
 */
import { DurableObject } from 'cloudflare:workers';
import { bytesToHex } from '@noble/hashes/utils.js';
import { digestOf } from '../src/core/canonical/canonical.js';
import {
  Operation,
  type Transition,
  claim,
  legacyOperationId,
  nextAlarmAt,
  operationId,
  reconcile,
  report,
  tick,
  viewOf,
} from '../src/core/execution/idempotency.js';
import { ReconciliationReceipt } from '../src/core/execution/reconciliation.js';
import { ExecutionReceipt } from '../src/core/model.js';
import { Identifier } from '../src/core/schema.js';
import { MAX_SHARDS } from '../src/core/identity/identity.js';
import { parseStoredJson, toCanonicalText } from '../src/db/documents.js';
import { mirrorOperation } from '../src/db/operation-index.js';
import type { TenantReceipt } from '../src/db/receipts.js';
import { receiptSigner } from '../src/platform/receipt-keys.js';
import { shardDb } from '../src/platform/shards.js';
import { kickLog } from './log-sequencer.js';
import {
  ClaimRequest,
  type ClaimResult,
  type OperationSnapshot,
  ReconcileRequest,
  type ReconcileResult,
  ReportRequest,
  type ReportResult,
} from '../src/services/operations.js';

/** How long after a failed index write the object tries again. */
export const INDEX_RETRY_MS = 5_000;

// ---------------------------------------------------------------------------------------------
// Storage schema: versioned, applied in order, each version once.

const COLUMNS = Object.keys(Operation.shape) as (keyof Operation)[];

const MIGRATIONS: readonly (readonly string[])[] = [
  // v1
  [
    `CREATE TABLE operation (
      singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
      operation_id TEXT NOT NULL,
      tenant_id TEXT NOT NULL,
      tool_contract_sha256 TEXT NOT NULL,
      idempotency_key TEXT,
      input_sha256 TEXT NOT NULL,
      authorization_receipt_sha256 TEXT NOT NULL,
      owner_principal_id TEXT NOT NULL,
      status TEXT NOT NULL,
      fencing_generation INTEGER NOT NULL,
      fencing_nonce TEXT NOT NULL,
      lease_expires_at_unix_ms INTEGER NOT NULL,
      execution_receipt_sha256 TEXT,
      execution_status TEXT,
      reconciliation_reason TEXT,
      reconciliation_owner TEXT NOT NULL,
      reconciliation_window_ms INTEGER NOT NULL,
      reconciliation_deadline_unix_ms INTEGER,
      escalated_at_unix_ms INTEGER,
      reconciliation_receipt_sha256 TEXT,
      created_at_unix_ms INTEGER NOT NULL,
      updated_at_unix_ms INTEGER NOT NULL
    )`,
    `CREATE TABLE receipt (
      sha256 TEXT PRIMARY KEY,
      kind TEXT NOT NULL CHECK (kind IN ('execution', 'reconciliation')),
      receipt TEXT NOT NULL,
      evidence TEXT NOT NULL,
      principal_id TEXT NOT NULL,
      created_at_unix_ms INTEGER NOT NULL
    )`,
    `CREATE TABLE transition (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      at_unix_ms INTEGER NOT NULL,
      event TEXT NOT NULL,
      from_status TEXT,
      to_status TEXT NOT NULL
    )`,
    `CREATE TABLE index_sync (
      singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
      synced_version INTEGER NOT NULL
    )`,
  ],
  // v2: operations are named by (tenant, tool, key); a v1 row has no tool name (null).
  ['ALTER TABLE operation ADD COLUMN tool_name TEXT'],
  // v3 (shards): the D1 shard the index is mirrored into, as named by the latest claim. An object
  // without a row predates shards: its tenant lives on shard 0.
  [
    `CREATE TABLE index_db (
      singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
      shard INTEGER NOT NULL CHECK (shard >= 0)
    )`,
  ],
];

/** Apply every migration newer than the stored version, each in one transaction. Idempotent. */
function migrate(storage: DurableObjectStorage): void {
  const sqlite = storage.sql;
  sqlite.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)');
  const row = sqlite.exec<{ v: number | null }>('SELECT MAX(version) AS v FROM schema_version').one();
  const current = row.v ?? 0;
  if (current > MIGRATIONS.length) {
    // Older code must not run against a schema it does not know.
    throw new Error(`idempotency object schema v${current} is newer than this code (v${MIGRATIONS.length})`);
  }
  for (let v = current + 1; v <= MIGRATIONS.length; v++) {
    storage.transactionSync(() => {
      for (const statement of MIGRATIONS[v - 1] ?? []) sqlite.exec(statement);
      sqlite.exec('INSERT INTO schema_version (version) VALUES (?)', v);
    });
  }
}

/**
 * Has this object ever been written? Read-only: an object reached by a name that holds nothing
 * (a guessed or mistyped operation id) must not acquire storage by being asked.
 */
function hasSchema(sqlite: SqlStorage): boolean {
  return (
    sqlite.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'").toArray()
      .length > 0
  );
}

export const SCHEMA_VERSION = MIGRATIONS.length;

// ---------------------------------------------------------------------------------------------

type ReceiptKind = 'execution' | 'reconciliation';

interface NewLocalReceipt {
  readonly kind: ReceiptKind;
  readonly receipt: { readonly sha256: string; readonly body: object };
  /** Canonical inputs for replay: the observation (digests only, never raw arguments). */
  readonly evidence: object;
  readonly principal_id: string;
}

interface StoredReceiptRow extends Record<string, SqlStorageValue> {
  sha256: string;
  kind: string;
  receipt: string;
  evidence: string;
  principal_id: string;
  created_at_unix_ms: number;
}

export class IdempotencyObject extends DurableObject<Env> {
  readonly #sql: SqlStorage;
  /** False until the object holds anything: reads of an empty object write nothing. */
  #migrated = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#sql = ctx.storage.sql;
    // No request is delivered before the schema is current. An empty object stays empty until
    // its first claim, so a report or read naming nothing never creates storage.
    void ctx.blockConcurrencyWhile(async () => {
      if (hasSchema(this.#sql)) {
        migrate(ctx.storage);
        this.#migrated = true;
      }
    });
  }

  /**
   * Claim the operation for dispatch. Exactly one claim per operation ever proceeds. `shard` is
   * the D1 shard of the claiming tenant (from its API key): the index is mirrored there.
   */
  async claim(input: ClaimRequest, shard: number): Promise<ClaimResult> {
    const req = ClaimRequest.parse(input);
    if (!Number.isSafeInteger(shard) || shard < 0 || shard >= MAX_SHARDS) {
      throw new Error('claim names no shard');
    }
    // The name must be the one the core derives, or two names could hold one operation.
    if (!this.ctx.id.equals(this.env.IDEMPOTENCY.idFromName(req.operation_id))) {
      throw new Error('claim sent to an object that does not hold this operation');
    }
    if (!expectedNames(req).includes(req.operation_id)) {
      throw new Error('operation id is not derived from the claim it names');
    }
    const nonce = bytesToHex(crypto.getRandomValues(new Uint8Array(16)));
    // Synchronous, like everything up to the write: the input gate stays closed.
    if (!this.#migrated) {
      migrate(this.ctx.storage);
      this.#migrated = true;
    }
    const current = this.#load();
    if (current !== null) assertSameOperation(current, req);
    // The latest claim's shard wins: after a tenant moved, its index follows it.
    this.#sql.exec(
      'INSERT INTO index_db (singleton, shard) VALUES (1, ?) ON CONFLICT (singleton) DO UPDATE SET shard = excluded.shard',
      shard,
    );
    const t = claim(current, { ...req, fencing_nonce: nonce }, req.now);
    this.#apply(current, t, 'claim', req.now);
    await this.#afterChange(t, req.now);
    const op = t.state as Operation;
    switch (t.answer.kind) {
      case 'proceed':
        return {
          outcome: 'proceed',
          operation: viewOf(op),
          fencing_token: t.answer.fencing_token,
          lease_expires_at_unix_ms: t.answer.lease_expires_at_unix_ms,
        };
      case 'replay':
        return { outcome: 'replay', ...this.#snapshot(op) };
      case 'refused':
        return {
          outcome: 'refused',
          reason: t.answer.reason,
          operation: t.answer.reason === 'idempotency_key_reused' ? null : viewOf(op),
        };
    }
  }

  /** The owner's report: a verified execution receipt, fenced by the owner's token. */
  async report(input: ReportRequest): Promise<ReportResult> {
    const req = ReportRequest.parse(input);
    const current = this.#loadForTenant(req.tenant_id);
    const receipt = req.execution_receipt;
    if (current !== null) {
      // The Worker verified this receipt against this operation's authorization; re-check the link.
      checkReceipt(receipt.sha256, receipt.body, receipt.body.tenant_id === current.tenant_id);
      if (receipt.body.authorization_receipt_sha256 !== current.authorization_receipt_sha256) {
        throw new Error('execution receipt is for another authorization than this operation');
      }
      if (receipt.body.observation_sha256 !== digestOf(req.observation)) {
        throw new Error('observation does not match the execution receipt');
      }
    }
    const t = report(
      current,
      {
        principal_id: req.principal_id,
        fencing_token: req.fencing_token,
        execution_receipt_sha256: receipt.sha256,
        execution_status: receipt.body.status,
      },
      req.now,
    );
    this.#apply(current, t, `report:${receipt.body.status}`, req.now, {
      kind: 'execution',
      receipt,
      evidence: { observation: req.observation },
      principal_id: req.principal_id,
    });
    await this.#afterChange(t, req.now);
    if (t.answer.kind === 'refused') return { outcome: 'refused', reason: t.answer.reason };
    return { outcome: t.answer.kind, ...this.#snapshot(t.state as Operation) };
  }

  /** Resolve an unresolved operation with a verified reconciliation receipt. */
  async reconcile(input: ReconcileRequest): Promise<ReconcileResult> {
    const req = ReconcileRequest.parse(input);
    const current = this.#loadForTenant(req.tenant_id);
    const receipt = req.reconciliation_receipt;
    if (current !== null) {
      checkReceipt(receipt.sha256, receipt.body, receipt.body.tenant_id === current.tenant_id);
      // A reconciliation must name this operation, or it resolves another one.
      if (
        receipt.body.operation_id !== current.operation_id ||
        receipt.body.authorization_receipt_sha256 !== current.authorization_receipt_sha256
      ) {
        throw new Error('reconciliation receipt does not link this operation');
      }
      // It was built against an older history (a report landed meanwhile): the caller must look again.
      if (receipt.body.original_execution_receipt_sha256 !== current.execution_receipt_sha256) {
        return { outcome: 'refused', reason: 'not_reconcilable' };
      }
    }
    const t = reconcile(
      current,
      { reconciliation_receipt_sha256: receipt.sha256, resolution: receipt.body.resolution },
      req.now,
    );
    this.#apply(current, t, `reconcile:${receipt.body.resolution}`, req.now, {
      kind: 'reconciliation',
      receipt,
      // The skew is the policy's of this moment: without it no bundle can recompute the receipt.
      evidence: { observation: req.observation, max_clock_skew_ms: req.max_clock_skew_ms },
      principal_id: req.principal_id,
    });
    await this.#afterChange(t, req.now);
    if (t.answer.kind === 'refused') return { outcome: 'refused', reason: t.answer.reason };
    return { outcome: t.answer.kind, ...this.#snapshot(t.state as Operation) };
  }

  /** The stored operation and its receipts, or null. Reading never changes anything. */
  read(tenantId: string): OperationSnapshot | null {
    const op = this.#loadForTenant(Identifier.parse(tenantId));
    return op === null ? null : this.#snapshot(op);
  }

  /**
   * Time passes: apply lease expiry and escalation, mirror the state into D1, arm the next alarm.
   * Retry-safe: every step is idempotent, and a failed index write re-arms a retry instead of
   * throwing, so the runtime's limited retries can never strand an operation without an alarm.
   */
  override async alarm(): Promise<void> {
    const now = Date.now();
    const current = this.#load();
    if (current === null) return;
    const t = tick(current, now);
    this.#apply(current, t, 'alarm', now);
    const op = t.state as Operation;
    const synced = this.#syncedVersion() >= op.updated_at_unix_ms || (await this.#syncIndex(op));
    await this.#arm(synced ? null : now + INDEX_RETRY_MS);
  }

  // -------------------------------------------------------------------------------------------

  #load(): Operation | null {
    if (!this.#migrated) return null;
    const rows = this.#sql.exec(`SELECT ${COLUMNS.join(', ')} FROM operation WHERE singleton = 1`).toArray();
    const row = rows[0];
    if (row === undefined) return null;
    // Stored state that does not parse is corruption: fail closed rather than guess.
    return Operation.parse(row);
  }

  /** Another tenant's operation is indistinguishable from none. */
  #loadForTenant(tenantId: string): Operation | null {
    const op = this.#load();
    return op !== null && op.tenant_id === tenantId ? op : null;
  }

  /**
   * Write a changed state, the receipt it records (if any) and the transition log entry, in one
   * synchronous transaction: a receipt is never stored without the state that links it.
   */
  #apply<A>(
    before: Operation | null,
    t: Transition<A>,
    event: string,
    now: number,
    receipt?: NewLocalReceipt,
  ): void {
    if (!t.changed || t.state === null) return;
    const op = Operation.parse(t.state);
    this.ctx.storage.transactionSync(() => {
      this.#sql.exec(
        `INSERT OR REPLACE INTO operation (singleton, ${COLUMNS.join(', ')}) VALUES (1, ${COLUMNS.map(() => '?').join(', ')})`,
        ...COLUMNS.map((c) => op[c]),
      );
      this.#sql.exec(
        'INSERT INTO transition (at_unix_ms, event, from_status, to_status) VALUES (?, ?, ?, ?)',
        now,
        event,
        before?.status ?? null,
        op.status,
      );
      const linked =
        receipt !== undefined &&
        [op.execution_receipt_sha256, op.reconciliation_receipt_sha256].includes(receipt.receipt.sha256);
      if (receipt !== undefined && linked) {
        this.#sql.exec(
          'INSERT OR IGNORE INTO receipt (sha256, kind, receipt, evidence, principal_id, created_at_unix_ms) VALUES (?, ?, ?, ?, ?, ?)',
          receipt.receipt.sha256,
          receipt.kind,
          toCanonicalText(receipt.receipt),
          toCanonicalText(receipt.evidence),
          receipt.principal_id,
          now,
        );
      }
    });
  }

  #receiptRows(): StoredReceiptRow[] {
    return this.#sql
      .exec<StoredReceiptRow>('SELECT * FROM receipt ORDER BY created_at_unix_ms, sha256')
      .toArray();
  }

  #snapshot(op: Operation): OperationSnapshot {
    const rows = this.#receiptRows();
    const find = (sha: string | null) => (sha === null ? undefined : rows.find((r) => r.sha256 === sha));
    const exec = find(op.execution_receipt_sha256);
    const rec = find(op.reconciliation_receipt_sha256);
    return {
      operation: viewOf(op),
      execution_receipt:
        exec === undefined ? null : ExecutionReceipt.parse(parseStoredJson('receipt', exec.receipt)),
      reconciliation_receipt:
        rec === undefined ? null : ReconciliationReceipt.parse(parseStoredJson('receipt', rec.receipt)),
    };
  }

  /** After a change: arm the alarm for what is due, then mirror into D1 (retry on failure). */
  async #afterChange<A>(t: Transition<A>, now: number): Promise<void> {
    if (!t.changed || t.state === null) return;
    await this.#arm(null);
    if (!(await this.#syncIndex(t.state))) await this.#arm(now + INDEX_RETRY_MS);
  }

  /** One alarm: the earliest of the next time-driven transition and a pending index retry. */
  async #arm(retryAt: number | null): Promise<void> {
    // Reloaded: another event may have changed the state while an index write was in flight.
    const op = this.#load();
    const due = op === null ? null : nextAlarmAt(op);
    const at = due === null ? retryAt : retryAt === null ? due : Math.min(due, retryAt);
    if (at === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(at);
  }

  #indexShard(): number {
    const rows = this.#sql
      .exec<{ s: number }>('SELECT shard AS s FROM index_db WHERE singleton = 1')
      .toArray();
    return rows[0]?.s ?? 0;
  }

  #syncedVersion(): number {
    const rows = this.#sql
      .exec<{ v: number }>('SELECT synced_version AS v FROM index_sync WHERE singleton = 1')
      .toArray();
    return rows[0]?.v ?? 0;
  }

  /** Mirror the operation and its receipts into D1. Returns false (and logs) when D1 failed. */
  async #syncIndex(op: Operation): Promise<boolean> {
    try {
      const receipts = this.#receiptRows().map((r) => toTenantReceipt(op.tenant_id, r));
      // Issue 11: the mirror signs each receipt (deterministic, so a retry writes the same row).
      await mirrorOperation(shardDb(this.env, this.#indexShard()), receiptSigner(this.env), op, receipts);
      if (receipts.length > 0) this.ctx.waitUntil(kickLog(this.env, op.tenant_id));
    } catch (e) {
      console.error(
        JSON.stringify({
          level: 'error',
          what: 'operation index write failed; will retry from the alarm',
          operation_id: op.operation_id,
          error: e instanceof Error ? e.name : 'unknown',
        }),
      );
      return false;
    }
    this.#sql.exec(
      'INSERT INTO index_sync (singleton, synced_version) VALUES (1, ?) ON CONFLICT (singleton) DO UPDATE SET synced_version = MAX(synced_version, excluded.synced_version)',
      op.updated_at_unix_ms,
    );
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Module helpers (not on the class, so never reachable over RPC)

function assertSameOperation(op: Operation, req: ClaimRequest): void {
  // The name is a digest of these; a difference means a caller bug, never a client input. A v2
  // object is named by tool, so another contract of that tool reaches it (and is refused by the
  // core); a v1 object (no tool name stored) is named by its contract.
  if (
    op.operation_id !== req.operation_id ||
    op.tenant_id !== req.tenant_id ||
    op.idempotency_key !== req.idempotency_key ||
    (op.tool_name === null
      ? op.tool_contract_sha256 !== req.tool_contract_sha256
      : op.tool_name !== req.tool_name)
  ) {
    throw new Error('claim does not name the operation this object holds');
  }
}

/** The names a claim may be addressed to: its v2 name, its v1 name (legacy object) or single-use. */
function expectedNames(req: ClaimRequest): string[] {
  const scope = { tool_name: req.tool_name, tool_contract_sha256: req.tool_contract_sha256 };
  if (req.idempotency_key === null) {
    return [
      operationId(req.tenant_id, scope, {
        kind: 'authorization',
        authorization_receipt_sha256: req.authorization_receipt_sha256,
      }),
    ];
  }
  return [
    operationId(req.tenant_id, scope, { kind: 'idempotency_key', idempotency_key: req.idempotency_key }),
    legacyOperationId(req.tenant_id, req.tool_contract_sha256, req.idempotency_key),
  ];
}

function checkReceipt(sha256: string, body: object, sameTenant: boolean): void {
  if (digestOf(body) !== sha256) throw new Error('receipt does not hash to its identity');
  if (!sameTenant) throw new Error('receipt is for another tenant than this operation');
}

function toTenantReceipt(tenantId: string, r: StoredReceiptRow): TenantReceipt {
  const receipt = parseStoredJson('receipt', r.receipt) as { sha256: string; body: { [k: string]: unknown } };
  const kind = r.kind as ReceiptKind;
  const body = receipt.body;
  const outcome = kind === 'execution' ? body.status : body.resolution;
  return {
    tenant_id: tenantId,
    kind,
    receipt,
    outcome: typeof outcome === 'string' ? outcome : 'unknown',
    principal_id: r.principal_id,
    evidence: parseStoredJson('receipt evidence', r.evidence),
    created_at_unix_ms: r.created_at_unix_ms,
  };
}

/** The stub for an operation. Names come only from `operationId(...)`. */
export function operationStub(env: Env, operationId: string): DurableObjectStub<IdempotencyObject> {
  return env.IDEMPOTENCY.get(env.IDEMPOTENCY.idFromName(operationId));
}
