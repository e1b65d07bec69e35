/**
 * The D1 adapter of `TenantStore` (src/services/ports.ts): one tenant's rows, through drizzle.
 *
 * Guarantees: every statement filters on the tenant the store was opened for, so no method can
 * return or change another tenant's row; stored documents are parsed strictly and re-hashed
 * against their keys (a mismatch is `StoredDocumentError`, a 500, never "best effort"); an
 * authorization's receipt, approval consumption and run charge commit in one batch under guards
 * that abort it when a revocation, quarantine, consumption or spend committed first
 * (migrations/0001_invariants.sql).
 * Never: lets a caller pass SQL or a table, or reads outside the tenant.
 */
import {
  type Column,
  type SQL,
  and,
  asc,
  count,
  desc,
  eq,
  getTableColumns,
  gt,
  gte,
  inArray,
  isNotNull,
  isNull,
  lt,
  lte,
  or,
  sql,
} from 'drizzle-orm';
import type { BatchItem } from 'drizzle-orm/batch';
import { z } from 'zod';
import {
  type ApprovalRecord,
  type AuthorizationDecision,
  type AuthorizationState,
  type AuthorizeRequest,
  EMPTY_GRANT_ID,
  type GrantRecord,
} from '../core/authorization/decide.js';
import { digestOf } from '../core/canonical/canonical.js';
import type { JsonValue } from '../core/canonical/json.js';
import { Role } from '../core/identity/identity.js';
import { ObservationReceiptVersion } from '../core/observation/schema.js';
import { toToolApproval } from '../core/authorization/approval.js';
import type { ToolContract, ToolGrant } from '../core/model.js';
import type { TenantPolicy } from '../core/policy.js';
import type {
  ApprovalDecision,
  ApprovalHistoryFilter,
  ApprovalHistoryPage,
  AuthorizationRead,
  ApprovalListFilter,
  FirstApproval,
  ApprovalRow,
  ApprovalWithContract,
  ArchiveManifest,
  BlobRef,
  BlobStore,
  CommitResult,
  DispatchState,
  ExpiredReceipts,
  GrantRow,
  NewPrincipal,
  NewReceipt,
  ObservationRecord,
  OperationListFilter,
  OperationRow,
  PinnedContract,
  PolicyRecord,
  PrincipalRow,
  RetentionStore,
  RunRow,
  SecurityCounts,
  SecurityCountsQuery,
  SignatureRow,
  StoredReceipt,
  TenantStore,
  Usage,
  NewWebhookDelivery,
  WebhookDeliveryClaim,
  WebhookSecretRow,
} from '../services/ports.js';
import { APPROVAL_STATUSES, OPEN_OPERATION_STATES } from '../services/ports.js';
import { type Db, type InvariantViolation, atPrimary, invariantViolation } from './client.js';
import { parseStored, parseStoredJson, StoredDocumentError, toCanonicalText } from './documents.js';
import { contractCache, grantCache, policyCache } from './caches.js';
import { DAY_MS, hasTriggerMessage, quotaChecked, throwIfQuota, utcDay } from './quotas.js';
import {
  archiveLine,
  decodeReceipt,
  insertReceiptStatements,
  invocationFromReceiptBody,
  type ReceiptSigner,
  receiptFromArchive,
  receiptFromRow,
  signatureRowOf,
  signatureRowsAfter,
} from './receipts.js';
import {
  approvals,
  contracts,
  grants,
  operations,
  policies,
  principals,
  receiptArchiveEntries,
  receiptArchives,
  receipts,
  runs,
  tenantQuotas,
  tenants,
  webhookDeliveries,
  webhookSecrets,
} from './schema.js';

/**
 * Evidence above this many UTF-8 bytes is held in R2 and referred to by digest (observation
 * payloads, error details). Authorization evidence (~225 bytes as an object, ~50 stored) stays
 * in the row: the authorization path never touches R2.
 */
export const INLINE_EVIDENCE_MAX_BYTES = 1024;

const StoredRoles = z.array(Role).min(1);

/**
 * Index rows read for one tenant, tool and key. Under v2 names there is at most one per
 * contract of the tool and, in practice, one v1 row per contract pinned before v2.
 */
const KEY_OPERATIONS_LIMIT = 32;

/**
 * The open operation states written as literals, as `operations_open_input`'s WHERE writes them
 * (migrations/0017): SQLite uses a partial index only when the query repeats its WHERE term, which
 * a bound list does not. A state added to `OPEN_OPERATION_STATES` without a new index would still
 * be read correctly, through another index; query-plans.test.ts fails on it.
 */
const OPEN_STATES_AS_INDEXED = sql`${operations.state} IN (${sql.raw(
  OPEN_OPERATION_STATES.map((x) => `'${x}'`).join(', '),
)})`;

/** An id no row has (ids are never empty): a lookup that must find nothing still uses its key. */
const NO_ID = '';

/** A store opened without R2 (some tests): any use of a blob fails closed. */
const NO_BLOBS: BlobStore = {
  put: () => Promise.reject(new Error('no blob store configured')),
  get: () => Promise.reject(new Error('no blob store configured')),
};

/** Issue 11: how the store signs the receipts it writes, and whom it tells once they committed. */
export interface ReceiptHooks {
  /** Throws (nothing is written) when the deployment has no usable key ring. */
  readonly sign: ReceiptSigner;
  /** After a batch that stored receipts committed: kick the tenant's log sequencer (never awaited). */
  readonly committed: () => void;
}

export function d1TenantStore(
  db: Db,
  tenant_id: string,
  hooks: ReceiptHooks,
  blobs: BlobStore = NO_BLOBS,
): TenantStore & RetentionStore {
  return new D1TenantStore(db, tenant_id, hooks, blobs);
}

class D1TenantStore implements TenantStore, RetentionStore {
  constructor(
    readonly db: Db,
    readonly tenant_id: string,
    readonly hooks: ReceiptHooks,
    readonly blobs: BlobStore,
  ) {}

  // -- Policy ---------------------------------------------------------------------------------

  #currentPolicyQuery() {
    return this.db
      .select({ policy_sha256: tenants.policy_sha256, document: policies.document })
      .from(tenants)
      .innerJoin(
        policies,
        and(eq(policies.tenant_id, tenants.tenant_id), eq(policies.policy_sha256, tenants.policy_sha256)),
      )
      .where(eq(tenants.tenant_id, this.tenant_id));
  }

  async currentPolicy(): Promise<PolicyRecord> {
    return toPolicyRecord(await this.#currentPolicyQuery().get());
  }

  async policyByDigest(sha256: string): Promise<TenantPolicy | null> {
    const row = await this.db
      .select({ document: policies.document })
      .from(policies)
      .where(and(eq(policies.tenant_id, this.tenant_id), eq(policies.policy_sha256, sha256)))
      .get();
    return row === undefined ? null : policyCache.get(sha256, row.document);
  }

  async putPolicy(policy: TenantPolicy, policy_sha256: string, now: number): Promise<void> {
    await quotaChecked(
      this.db.batch([
        this.db
          .insert(policies)
          .values({
            tenant_id: this.tenant_id,
            policy_sha256,
            document: toCanonicalText(policy),
            created_at_unix_ms: now,
          })
          .onConflictDoNothing(),
        this.db.update(tenants).set({ policy_sha256 }).where(eq(tenants.tenant_id, this.tenant_id)),
      ]),
      now,
    );
  }

  // -- Contracts ------------------------------------------------------------------------------

  #contractQuery(sha256: string) {
    return this.db
      .select()
      .from(contracts)
      .where(and(eq(contracts.tenant_id, this.tenant_id), eq(contracts.tool_contract_sha256, sha256)));
  }

  async getContract(sha256: string): Promise<PinnedContract | null> {
    const row = await this.#contractQuery(sha256).get();
    return row === undefined ? null : toPinnedContract(row);
  }

  async pinContract(
    contract: ToolContract,
    sha256: string,
    pinned_by: string,
    now: number,
  ): Promise<boolean> {
    const inserted = await quotaChecked(
      this.db
        .insert(contracts)
        .values({
          tenant_id: this.tenant_id,
          tool_contract_sha256: sha256,
          document: toCanonicalText(contract),
          tool_name: contract.tool_name,
          effect: contract.effect,
          pinned_by,
          pinned_at_unix_ms: now,
        })
        .onConflictDoNothing()
        .run(),
      now,
    );
    return inserted.meta.changes > 0;
  }

  async listContracts(): Promise<readonly PinnedContract[]> {
    const rows = await this.db.select().from(contracts).where(eq(contracts.tenant_id, this.tenant_id)).all();
    return rows.map(toPinnedContract);
  }

  async quarantineContracts(sha256s: readonly string[], now: number, reason: string | null): Promise<void> {
    const [first, ...rest] = sha256s.map((sha) =>
      this.db
        .update(contracts)
        .set({ quarantined_at_unix_ms: now, quarantine_reason: reason })
        .where(
          and(
            eq(contracts.tenant_id, this.tenant_id),
            eq(contracts.tool_contract_sha256, sha),
            isNull(contracts.quarantined_at_unix_ms),
          ),
        ),
    );
    if (first !== undefined) await this.db.batch([first, ...rest]);
  }

  // -- Principals and grants ------------------------------------------------------------------

  async getPrincipal(principal_id: string): Promise<PrincipalRow | null> {
    const row = await this.db
      .select()
      .from(principals)
      .where(and(eq(principals.tenant_id, this.tenant_id), eq(principals.principal_id, principal_id)))
      .get();
    return row === undefined ? null : toPrincipalRow(row);
  }

  async insertPrincipal(p: NewPrincipal): Promise<void> {
    if (p.tenant_id !== this.tenant_id) throw new Error('principal of another tenant');
    await this.db.insert(principals).values(principalValues(p));
  }

  async revokePrincipal(principal_id: string, now: number): Promise<void> {
    await this.db
      .update(principals)
      .set({ revoked_at_unix_ms: now })
      .where(
        and(
          eq(principals.tenant_id, this.tenant_id),
          eq(principals.principal_id, principal_id),
          isNull(principals.revoked_at_unix_ms),
        ),
      );
  }

  async getGrant(grant_id: string): Promise<GrantRow | null> {
    const row = await this.db
      .select()
      .from(grants)
      .where(and(eq(grants.tenant_id, this.tenant_id), eq(grants.grant_id, grant_id)))
      .get();
    return row === undefined ? null : toGrantRow(row);
  }

  async insertGrant(g: Omit<GrantRow, 'revoked_at_unix_ms'>): Promise<'inserted' | 'limit'> {
    if (g.grant.tenant_id !== this.tenant_id) throw new Error('grant of another tenant');
    const insert = this.db.insert(grants).values({
      grant_id: g.grant_id,
      tenant_id: this.tenant_id,
      principal_id: g.principal_id,
      grant_sha256: g.grant_sha256,
      document: toCanonicalText(g.grant),
      created_by: g.created_by,
      created_at_unix_ms: g.created_at_unix_ms,
    });
    try {
      await quotaChecked(insert.run(), g.created_at_unix_ms);
      return 'inserted';
    } catch (e) {
      // The live-grant bound is a trigger, so two creations racing cannot both pass it.
      if (hasTriggerMessage(e, 'grant_limit')) return 'limit';
      throw e;
    }
  }

  async revokeGrant(grant_id: string, now: number): Promise<void> {
    await this.db
      .update(grants)
      .set({ revoked_at_unix_ms: now })
      .where(
        and(
          eq(grants.tenant_id, this.tenant_id),
          eq(grants.grant_id, grant_id),
          isNull(grants.revoked_at_unix_ms),
        ),
      );
  }

  // -- Runs -----------------------------------------------------------------------------------

  async insertRun(
    r: Omit<RunRow, 'calls_used' | 'writes_used'>,
    max_open_runs: number,
  ): Promise<'inserted' | 'limit'> {
    const t = this.tenant_id;
    // Count and insert are one statement (D1 runs statements one at a time), so concurrent
    // creations cannot all pass a count none of them has yet added to. The count uses
    // `runs_principal_open` (migrations/0008); open means as in `countOpenRuns`.
    const result = await quotaChecked(
      this.db.run(sql`
        INSERT INTO ${runs} (run_id, tenant_id, principal_id, run_envelope_sha256, envelope, max_calls,
          max_external_writes, deadline_unix_ms, created_at_unix_ms)
        SELECT ${r.run_id}, ${t}, ${r.principal_id}, ${r.run_envelope_sha256}, ${r.envelope}, ${r.max_calls},
          ${r.max_external_writes}, ${r.deadline_unix_ms}, ${r.created_at_unix_ms}
        WHERE (SELECT count(*) FROM ${runs} o WHERE o.tenant_id = ${t} AND o.principal_id = ${r.principal_id}
          AND o.deadline_unix_ms > ${r.created_at_unix_ms} AND o.calls_used < o.max_calls) < ${max_open_runs}`),
      r.created_at_unix_ms,
    );
    return result.meta.changes > 0 ? 'inserted' : 'limit';
  }

  async getRun(run_id: string): Promise<RunRow | null> {
    const row = await this.db
      .select()
      .from(runs)
      .where(and(eq(runs.tenant_id, this.tenant_id), eq(runs.run_id, run_id)))
      .get();
    return row ?? null;
  }

  async countOpenRuns(principal_id: string, now: number): Promise<number> {
    // Through `runs_principal_open` (migrations/0008): the principal's runs not yet past their deadline.
    const row = await this.db
      .select({ n: count() })
      .from(runs)
      .where(
        and(
          eq(runs.tenant_id, this.tenant_id),
          eq(runs.principal_id, principal_id),
          gt(runs.deadline_unix_ms, now),
          lt(runs.calls_used, runs.max_calls),
        ),
      )
      .get();
    return row?.n ?? 0;
  }

  // -- Approvals ------------------------------------------------------------------------------

  #approvalsWithContract() {
    return this.db
      .select({ a: approvals, document: contracts.document })
      .from(approvals)
      .leftJoin(contracts, approvalContract);
  }

  async insertApproval(a: ApprovalRow): Promise<void> {
    if (a.tenant_id !== this.tenant_id) throw new Error('approval of another tenant');
    await quotaChecked(this.db.insert(approvals).values(a).run(), a.created_at_unix_ms);
  }

  async getApproval(approval_id: string): Promise<ApprovalWithContract | null> {
    const row = await this.#approvalsWithContract()
      .where(and(eq(approvals.tenant_id, this.tenant_id), eq(approvals.approval_id, approval_id)))
      .get();
    return row === undefined ? null : withContract(row);
  }

  async listApprovals(q: ApprovalListFilter): Promise<readonly ApprovalWithContract[]> {
    // Keyset pagination over the `approvals_status` index (tenant, status, created_at): a page
    // costs its size, however deep, and a cursor is only a position inside this tenant's rows.
    const rows = await this.#approvalsWithContract()
      .where(
        and(
          eq(approvals.tenant_id, this.tenant_id),
          eq(approvals.status, q.status),
          q.created === undefined
            ? undefined
            : 'after' in q.created
              ? gt(approvals.created_at_unix_ms, q.created.after)
              : lte(approvals.created_at_unix_ms, q.created.at_or_before),
          q.after === null
            ? undefined
            : pastCursor(
                gt,
                [approvals.created_at_unix_ms, q.after.created_at_unix_ms],
                [approvals.approval_id, q.after.approval_id],
              ),
        ),
      )
      .orderBy(asc(approvals.created_at_unix_ms), asc(approvals.approval_id))
      .limit(q.limit);
    return rows.map(withContract);
  }

  async decideApproval(approval_id: string, decision: ApprovalDecision): Promise<'decided' | 'conflict'> {
    // Two approvers racing: the trigger lets exactly one decision through. An irreversible
    // approval without a distinct first approver aborts in the same write (0007).
    const won = await this.#updatePending(approval_id, decision, [
      'approval_not_pending',
      'approval_second_approver',
    ]);
    return won ? 'decided' : 'conflict';
  }

  // Issue 14: the first of two approvals of an irreversible request (migrations/0007_console.sql).
  async recordFirstApproval(approval_id: string, first: FirstApproval): Promise<'recorded' | 'conflict'> {
    // Two approvers racing for the first approval: the trigger lets exactly one through.
    const won = await this.#updatePending(
      approval_id,
      first,
      ['approval_first_approval'],
      isNull(approvals.first_approved_by),
    );
    return won ? 'recorded' : 'conflict';
  }

  /**
   * Update a pending approval of this tenant; false when another write got there first (no row
   * changed, or a trigger named in `lost` aborted this one).
   */
  async #updatePending(
    approval_id: string,
    values: ApprovalDecision | FirstApproval,
    lost: readonly InvariantViolation[],
    condition?: SQL,
  ): Promise<boolean> {
    try {
      const r = await this.db
        .update(approvals)
        .set(values)
        .where(
          and(
            eq(approvals.tenant_id, this.tenant_id),
            eq(approvals.approval_id, approval_id),
            eq(approvals.status, 'pending'),
            condition,
          ),
        )
        .run();
      return r.meta.changes === 1;
    } catch (e) {
      const v = invariantViolation(e);
      if (v !== null && lost.includes(v)) return false;
      throw e;
    }
  }

  // -- Authorization --------------------------------------------------------------------------

  async loadAuthorizationState(
    principal_id: string,
    request: AuthorizeRequest,
    options?: { readonly at: 'primary' },
  ): Promise<AuthorizationState> {
    const db = options?.at === 'primary' ? atPrimary(this.db) : this.db;
    const rows = await db.batch(
      authorizationStateQueries(db, this.tenant_id, principal_id, request, request),
    );
    return toAuthorizationState(rows, this.tenant_id, principal_id);
  }

  async commitAuthorization(
    d: AuthorizationDecision,
    principal_id: string,
    now: number,
    read?: AuthorizationRead,
  ): Promise<CommitResult> {
    const db = this.db;
    const t = this.tenant_id;
    // Before the effects: it compares the rows as the decision read them, not as this batch leaves them.
    const freshness =
      read === undefined
        ? null
        : abortIfChanged(db, t, principal_id, changedSinceRead(t, principal_id, read.request, read.state));
    const inserts = await insertReceiptStatements(db, this.hooks.sign, {
      tenant_id: t,
      kind: 'authorization',
      receipt: d.receipt,
      outcome: d.receipt.body.decision,
      principal_id,
      evidence: authorizationEvidence(d),
      created_at_unix_ms: now,
    });
    const [insert, ...signature] = inserts;
    if (insert === undefined) throw new Error('no receipt statement');
    const e = d.effects;
    try {
      if (e === null) {
        // A denial read from a stale replica is not stored: the freshness guard sends it back to
        // be decided on the primary's state (a grant or approval may have appeared meanwhile).
        await db.batch([insert, ...signature, ...(freshness === null ? [] : [freshness])]);
        this.hooks.committed();
        return { ok: true };
      }
      // Guards: each touches its row only if it was revoked or quarantined meanwhile, and the
      // "final" triggers then abort the batch (a revocation that committed first always wins).
      const guards: BatchItem<'sqlite'>[] = [
        db
          .update(contracts)
          .set({ quarantined_at_unix_ms: sql`${contracts.quarantined_at_unix_ms}` })
          .where(
            and(
              eq(contracts.tenant_id, t),
              eq(contracts.tool_contract_sha256, e.guards.contract_sha256),
              isNotNull(contracts.quarantined_at_unix_ms),
            ),
          ),
        db
          .update(principals)
          .set({ revoked_at_unix_ms: sql`${principals.revoked_at_unix_ms}` })
          .where(
            and(
              eq(principals.tenant_id, t),
              eq(principals.principal_id, e.guards.principal_id),
              isNotNull(principals.revoked_at_unix_ms),
            ),
          ),
      ];
      if (e.guards.grant_id !== null) {
        guards.push(
          db
            .update(grants)
            .set({ revoked_at_unix_ms: sql`${grants.revoked_at_unix_ms}` })
            .where(
              and(
                eq(grants.tenant_id, t),
                eq(grants.grant_id, e.guards.grant_id),
                isNotNull(grants.revoked_at_unix_ms),
              ),
            ),
        );
      }
      if (e.consume_approval_id !== null) {
        // The approver's revocation committing while this authorization was in flight wins, as
        // the caller's does: touch the approver's row only if revoked, and its trigger aborts.
        // The first of two approvers (irreversible effects, issue 14) counts the same, also when
        // the commit has no read to compare against.
        const approvalId = e.consume_approval_id;
        for (const approver of [approvals.decided_by, approvals.first_approved_by]) {
          guards.push(
            db
              .update(principals)
              .set({ revoked_at_unix_ms: sql`${principals.revoked_at_unix_ms}` })
              .where(
                and(
                  eq(principals.tenant_id, t),
                  isNotNull(principals.revoked_at_unix_ms),
                  inArray(
                    principals.principal_id,
                    db
                      .select({ id: approver })
                      .from(approvals)
                      .where(and(eq(approvals.tenant_id, t), eq(approvals.approval_id, approvalId))),
                  ),
                ),
              ),
          );
        }
      }
      // The effects, after the guards and the freshness guard.
      const statements: BatchItem<'sqlite'>[] = [];
      if (e.consume_approval_id !== null) {
        // Single use: the trigger aborts unless the approval is still `approved`.
        statements.push(
          db
            .update(approvals)
            .set({
              status: 'consumed',
              consumed_at_unix_ms: now,
              consumed_by_receipt_sha256: d.receipt.sha256,
            })
            .where(and(eq(approvals.tenant_id, t), eq(approvals.approval_id, e.consume_approval_id))),
        );
      }
      if (e.charge_run === null) throw new Error('authorized without a run');
      // The budget trigger aborts if a concurrent authorization spent the last call or write.
      statements.push(
        db
          .update(runs)
          .set({
            calls_used: sql`${runs.calls_used} + 1`,
            writes_used: sql`${runs.writes_used} + ${e.charge_run.writes}`,
          })
          .where(and(eq(runs.tenant_id, t), eq(runs.run_id, e.charge_run.run_id))),
      );
      // The guards change no row, so the freshness guard after them still compares the rows as
      // the decision read them; placed first, it would pre-empt the approver's guard and report a
      // revocation as `state_changed` (SECURITY.md, approver revoked in flight).
      await db.batch([
        insert,
        ...signature,
        ...guards,
        ...(freshness === null ? [] : [freshness]),
        ...statements,
      ]);
      this.hooks.committed();
      return { ok: true };
    } catch (err) {
      throwIfQuota(err, now);
      if (freshness !== null && hasTriggerMessage(err, 'principal_immutable')) {
        return { ok: false, lost: 'state_changed' };
      }
      const lost = invariantViolation(err);
      // The 0007 approval triggers guard decisions, never this commit: anything else is internal.
      if (lost === null || lost === 'approval_second_approver' || lost === 'approval_first_approval')
        throw err;
      return { ok: false, lost };
    }
  }

  // -- Receipts -------------------------------------------------------------------------------

  async getReceipt(sha256: string): Promise<StoredReceipt | null> {
    // The row and, for a receipt that moved to an R2 archive, its archive: one round trip.
    const [rows, entries] = await this.db.batch([
      this.db
        .select()
        .from(receipts)
        .where(and(eq(receipts.tenant_id, this.tenant_id), eq(receipts.sha256, sha256))),
      this.db
        .select({ archive_sha256: receiptArchiveEntries.archive_sha256 })
        .from(receiptArchiveEntries)
        .where(
          and(eq(receiptArchiveEntries.tenant_id, this.tenant_id), eq(receiptArchiveEntries.sha256, sha256)),
        ),
    ]);
    const row = rows[0];
    if (row !== undefined) return this.#withEvidence(receiptFromRow(row));
    const entry = entries[0];
    if (entry === undefined) return null;
    const archive = await this.blobs.get(entry.archive_sha256);
    // The manifest says the receipt is in this archive: a missing archive is lost evidence.
    if (archive === null) throw new StoredDocumentError('receipt archive is missing from R2');
    const found = receiptFromArchive(new TextDecoder().decode(archive), this.tenant_id, sha256);
    if (found === null) throw new StoredDocumentError('receipt archive does not hold the receipt');
    return this.#withEvidence(found);
  }

  /** Evidence from the row, or from R2 (verified against its digest) when it was held there. */
  async #withEvidence(r: {
    readonly stored: Omit<StoredReceipt, 'evidence'>;
    readonly evidence: JsonValue | null;
    readonly evidence_blob: BlobRef | null;
  }): Promise<StoredReceipt> {
    if (r.evidence_blob === null) return { ...r.stored, evidence: r.evidence };
    return {
      ...r.stored,
      evidence: parseStoredJson('receipt evidence', await this.#evidenceText(r.evidence_blob.sha256)),
    };
  }

  async #evidenceText(sha256: string): Promise<string> {
    const bytes = await this.blobs.get(sha256);
    if (bytes === null) throw new StoredDocumentError('receipt evidence is missing from R2');
    return new TextDecoder().decode(bytes);
  }

  /**
   * Evidence larger than `INLINE_EVIDENCE_MAX_BYTES` goes to R2 first, then the row refers to it
   * by digest. Should the D1 write then fail (or lose a race), the blob is an orphan: harmless,
   * since nothing refers to it and its key is its content (docs/storage.md, "Blobs").
   */
  async #offloaded<R extends NewReceipt>(r: R): Promise<R & { evidence_blob?: BlobRef }> {
    if (r.evidence === undefined || r.evidence === null) return r;
    const text = toCanonicalText(r.evidence);
    const bytes = new TextEncoder().encode(text);
    if (bytes.byteLength <= INLINE_EVIDENCE_MAX_BYTES) return r;
    return { ...r, evidence_blob: await this.blobs.put(bytes, 'application/json') };
  }

  async insertReceipt(r: NewReceipt): Promise<void> {
    const [insert, ...signature] = await insertReceiptStatements(this.db, this.hooks.sign, {
      ...(await this.#offloaded(r)),
      tenant_id: this.tenant_id,
    });
    if (insert === undefined) throw new Error('no receipt statement');
    await quotaChecked(this.db.batch([insert, ...signature]), r.created_at_unix_ms);
    this.hooks.committed();
  }

  // -- Receipt signatures and the log (issue 11) ---------------------------------------------

  async receiptSignature(sha256: string): Promise<SignatureRow | null> {
    return signatureRowOf(this.db, this.tenant_id, sha256);
  }

  async signaturesAfter(after_seq: number, limit: number): Promise<readonly SignatureRow[]> {
    return signatureRowsAfter(this.db, this.tenant_id, after_seq, limit);
  }

  // -- The console's history (issue 14, migrations/0009) ------------------------------------

  async approvalHistory(q: ApprovalHistoryFilter): Promise<ApprovalHistoryPage> {
    const t = this.tenant_id;
    // Only decided requests are in the partial indexes `approvals_decided` (every outcome) and
    // `approvals_status_decided` (one): the `IS NOT NULL` term is what lets the planner use them.
    const decided = and(
      eq(approvals.tenant_id, t),
      isNotNull(approvals.decided_at_unix_ms),
      q.status === undefined ? undefined : eq(approvals.status, q.status),
    );
    const older = q.from === null || q.from.direction === 'older';
    // A row-value comparison is a range on the index (a deep page reads `limit` rows, not the
    // rows before it); page order is (decided_at, approval_id) descending, a total order.
    const position =
      q.from === null
        ? undefined
        : older
          ? sql`(${approvals.decided_at_unix_ms}, ${approvals.approval_id}) < (${q.from.decided_at_unix_ms}, ${q.from.approval_id})`
          : sql`(${approvals.decided_at_unix_ms}, ${approvals.approval_id}) > (${q.from.decided_at_unix_ms}, ${q.from.approval_id})`;
    const dir = older ? desc : asc;
    // The operation the approval's authorization receipt was claimed as: found through
    // `operations_authorization`, at most one per row (a subquery with LIMIT 1, so a row is
    // never repeated), and only this tenant's; its execution receipt's outcome by primary key.
    const claimedAs = sql`(SELECT "o2"."operation_id" FROM "operations" AS "o2" WHERE "o2"."tenant_id" = ${approvals.tenant_id} AND "o2"."authorization_receipt_sha256" = ${approvals.consumed_by_receipt_sha256} ORDER BY "o2"."operation_id" LIMIT 1)`;
    const pageQuery = this.db
      .select({
        a: approvals,
        document: contracts.document,
        operation_id: operations.operation_id,
        state: operations.state,
        execution_receipt_sha256: operations.execution_receipt_sha256,
        execution_outcome: receipts.outcome,
        reconciliation_receipt_sha256: operations.reconciliation_receipt_sha256,
        reconciliation_deadline_unix_ms: operations.reconciliation_deadline_unix_ms,
        escalated_at_unix_ms: operations.escalated_at_unix_ms,
      })
      .from(approvals)
      .leftJoin(contracts, approvalContract)
      .leftJoin(
        operations,
        and(eq(operations.tenant_id, approvals.tenant_id), eq(operations.operation_id, claimedAs)),
      )
      .leftJoin(
        receipts,
        and(
          eq(receipts.tenant_id, approvals.tenant_id),
          eq(receipts.sha256, operations.execution_receipt_sha256),
        ),
      )
      .where(and(decided, position))
      .orderBy(dir(approvals.decided_at_unix_ms), dir(approvals.approval_id))
      .limit(q.limit);
    // Bounded: the count walks at most `count_cap + 1` entries of the same partial index.
    const capped = this.db
      .select({ one: sql<number>`1`.as('one') })
      .from(approvals)
      .where(decided)
      .limit(q.count_cap + 1)
      .as('capped');
    const countQuery = this.db.select({ n: count() }).from(capped);
    const [rows, counted] = await this.db.batch([pageQuery, countQuery]);
    return {
      rows: rows.map((r) => ({
        ...withContract(r),
        operation:
          r.operation_id === null || r.state === null
            ? null
            : {
                operation_id: r.operation_id,
                state: r.state,
                execution_receipt_sha256: r.execution_receipt_sha256,
                execution_outcome: r.execution_outcome,
                reconciliation_receipt_sha256: r.reconciliation_receipt_sha256,
                reconciliation_deadline_unix_ms: r.reconciliation_deadline_unix_ms,
                escalated_at_unix_ms: r.escalated_at_unix_ms,
              },
      })),
      total: counted[0]?.n ?? 0,
    };
  }

  async grantByDigest(grant_sha256: string): Promise<ToolGrant | null> {
    const row = await this.db
      .select({ document: grants.document })
      .from(grants)
      .where(and(eq(grants.tenant_id, this.tenant_id), eq(grants.grant_sha256, grant_sha256)))
      .limit(1)
      .get();
    return row === undefined ? null : grantCache.get(grant_sha256, row.document);
  }

  // -- Executions and operations --------------------------------------------------------------

  async loadDispatchState(a: {
    readonly tool_contract_sha256: string;
    readonly policy_sha256: string;
    readonly grant_sha256: string;
    readonly approval_id: string | null;
    readonly principal_id: string;
    readonly idempotency_key: string | null;
  }): Promise<DispatchState> {
    const t = this.tenant_id;
    const db = this.db;
    // The receipt's tool, by name: every contract of it shares the key (operation family).
    const toolName = sql`(SELECT ${contracts.tool_name} FROM ${contracts} WHERE ${contracts.tenant_id} = ${t} AND ${contracts.tool_contract_sha256} = ${a.tool_contract_sha256})`;
    const [contractRows, policyRows, receiptPolicyRows, grantRows, approvalRows, principalRows, keyRows] =
      await db.batch([
        this.#contractQuery(a.tool_contract_sha256),
        this.#currentPolicyQuery(),
        db
          .select({ document: policies.document })
          .from(policies)
          .where(and(eq(policies.tenant_id, t), eq(policies.policy_sha256, a.policy_sha256))),
        db
          .select()
          .from(grants)
          .where(and(eq(grants.tenant_id, t), eq(grants.grant_sha256, a.grant_sha256)))
          .limit(1),
        db
          .select({
            expires_at_unix_ms: approvals.expires_at_unix_ms,
            // The approver's revocation, read in the same batch: an approval ends with its approver.
            approver_revoked_at_unix_ms: principals.revoked_at_unix_ms,
            approver_id: principals.principal_id,
            // The first of two approvers (irreversible effects, issue 14): revoking either ends it.
            first_approved_by: approvals.first_approved_by,
            first_approver_revoked_at_unix_ms: sql<
              number | null
            >`(select p.revoked_at_unix_ms from principals p where p.tenant_id = ${approvals.tenant_id} and p.principal_id = ${approvals.first_approved_by})`,
          })
          .from(approvals)
          .leftJoin(
            principals,
            and(
              eq(principals.tenant_id, approvals.tenant_id),
              eq(principals.principal_id, approvals.decided_by),
            ),
          )
          .where(and(eq(approvals.tenant_id, t), eq(approvals.approval_id, a.approval_id ?? NO_ID))),
        db
          .select({ revoked_at_unix_ms: principals.revoked_at_unix_ms })
          .from(principals)
          .where(and(eq(principals.tenant_id, t), eq(principals.principal_id, a.principal_id))),
        this.#keyOperationsQuery(toolName, a.idempotency_key),
      ]);
    const contractRow = contractRows[0];
    const receiptPolicyRow = receiptPolicyRows[0];
    const grantRow = grantRows[0];
    const agentRow = principalRows[0];
    const approvalRow = approvalRows[0];
    return {
      contract: contractRow === undefined ? null : toPinnedContract(contractRow),
      policy: toPolicyRecord(policyRows[0]),
      receipt_policy:
        receiptPolicyRow === undefined ? null : policyCache.get(a.policy_sha256, receiptPolicyRow.document),
      grant:
        grantRow === undefined
          ? null
          : {
              grant: grantCache.get(grantRow.grant_sha256, grantRow.document),
              revoked: grantRow.revoked_at_unix_ms !== null,
            },
      approval_expires_at_unix_ms: a.approval_id === null ? null : approvalRow?.expires_at_unix_ms,
      // An approver row that is gone counts as revoked, like the agent's.
      approver_revoked:
        a.approval_id !== null &&
        (approvalRow === undefined ||
          approvalRow.approver_id === null ||
          approvalRow.approver_revoked_at_unix_ms !== null ||
          (approvalRow.first_approved_by !== null && approvalRow.first_approver_revoked_at_unix_ms !== null)),
      agent_revoked: agentRow === undefined || agentRow.revoked_at_unix_ms !== null,
      key_operations: keyRows,
    };
  }

  /** The digests of this tenant's contracts of one tool (a subquery; `contracts_tool_name`). */
  #contractsOfTool(toolName: SQL) {
    return this.db
      .select({ sha: contracts.tool_contract_sha256 })
      .from(contracts)
      .where(and(eq(contracts.tenant_id, this.tenant_id), sql`${contracts.tool_name} = ${toolName}`));
  }

  /**
   * The index rows of one tenant, key and tool (any contract of that tool). Through the
   * (tenant, contract, key) unique index: one seek per contract of the tool.
   */
  #keyOperationsQuery(toolName: SQL, idempotency_key: string | null) {
    const t = this.tenant_id;
    const sameTool = this.#contractsOfTool(toolName);
    return this.db
      .select()
      .from(operations)
      .where(
        idempotency_key === null
          ? sql`0 = 1`
          : and(
              eq(operations.tenant_id, t),
              inArray(operations.tool_contract_sha256, sameTool),
              eq(operations.idempotency_key, idempotency_key),
            ),
      )
      .orderBy(asc(operations.operation_id))
      .limit(KEY_OPERATIONS_LIMIT);
  }

  async operationsForKey(tool_name: string, idempotency_key: string): Promise<readonly OperationRow[]> {
    return this.#keyOperationsQuery(sql`${tool_name}`, idempotency_key);
  }

  async openOperationsOfInput(
    tool_name: string,
    input_sha256: string,
    limit: number,
  ): Promise<readonly OperationRow[]> {
    const t = this.tenant_id;
    const sameTool = this.#contractsOfTool(sql`${tool_name}`);
    // Through `operations_open_input` (tenant, input, updated, id; open rows only, migrations/0017):
    // a seek to the input's open rows, read newest first in index order, so neither the tenant's
    // history nor its other open operations are walked. The states are written as literals, exactly
    // as in the index's WHERE (a bound list would not let SQLite prove the partial index applies).
    return this.db
      .select()
      .from(operations)
      .where(
        and(
          eq(operations.tenant_id, t),
          eq(operations.input_sha256, input_sha256),
          OPEN_STATES_AS_INDEXED,
          inArray(operations.tool_contract_sha256, sameTool),
        ),
      )
      .orderBy(desc(operations.updated_at_unix_ms), desc(operations.operation_id))
      .limit(limit);
  }

  async getOperation(operation_id: string): Promise<OperationRow | null> {
    const row = await this.db
      .select()
      .from(operations)
      .where(and(eq(operations.tenant_id, this.tenant_id), eq(operations.operation_id, operation_id)))
      .get();
    return row ?? null;
  }

  async listOperations(q: OperationListFilter): Promise<readonly OperationRow[]> {
    const t = this.tenant_id;
    return this.db
      .select()
      .from(operations)
      .where(
        and(
          eq(operations.tenant_id, t),
          q.status === undefined ? undefined : eq(operations.state, q.status),
          q.after === null
            ? undefined
            : pastCursor(
                lt,
                [operations.updated_at_unix_ms, q.after.updated_at_unix_ms],
                [operations.operation_id, q.after.operation_id],
              ),
        ),
      )
      .orderBy(desc(operations.updated_at_unix_ms), desc(operations.operation_id))
      .limit(q.limit);
  }

  // -- Observations ---------------------------------------------------------------------------

  async observationRecords(
    kind: string,
    observation_id: string,
    raw_observation_sha256: string,
  ): Promise<readonly ObservationRecord[]> {
    const t = this.tenant_id;
    const columns = {
      sha256: receipts.sha256,
      raw: receipts.observation_raw_sha256,
      claim: receipts.observation_claim,
      evidence: receipts.evidence,
      // Only the version, not the whole receipt: a retry is recomputed under it.
      version: sql<unknown>`json_extract(${receipts.receipt}, '$.body.receipt_version')`,
      evidence_sha256: receipts.evidence_sha256,
    };
    // Two point lookups through unique indexes: the cost does not grow with the tenant's history.
    const [holder, same] = await this.db.batch([
      this.db
        .select(columns)
        .from(receipts)
        .where(
          and(
            eq(receipts.tenant_id, t),
            eq(receipts.kind, kind),
            eq(receipts.observation_claim, observation_id),
          ),
        ),
      this.db
        .select(columns)
        .from(receipts)
        .where(
          and(
            eq(receipts.tenant_id, t),
            eq(receipts.kind, kind),
            eq(receipts.observation_id, observation_id),
            eq(receipts.observation_raw_sha256, raw_observation_sha256),
          ),
        ),
    ]);
    const bySha = new Map([...holder, ...same].map((r) => [r.sha256, r]));
    return Promise.all(
      [...bySha.values()].map(async (r) => {
        const version = ObservationReceiptVersion.safeParse(r.version);
        // Evidence held in R2 is read only for the record that needs it (at most two rows).
        const evidence =
          r.evidence ?? (r.evidence_sha256 === null ? null : await this.#evidenceText(r.evidence_sha256));
        if (r.raw === null || evidence === null || !version.success) {
          throw new StoredDocumentError('stored observation receipt is incomplete');
        }
        return {
          sha256: r.sha256,
          raw_observation_sha256: r.raw,
          holds_id: r.claim !== null,
          evidence,
          receipt_version: version.data,
        };
      }),
    );
  }

  // -- Tools ----------------------------------------------------------------------------------

  async grantsOf(principal_id: string): Promise<readonly GrantRecord[]> {
    const rows = await this.db
      .select()
      .from(grants)
      .where(and(eq(grants.tenant_id, this.tenant_id), eq(grants.principal_id, principal_id)))
      .orderBy(asc(grants.grant_id));
    return rows.map((g) => ({
      grant: grantCache.get(g.grant_sha256, g.document),
      revoked: g.revoked_at_unix_ms !== null,
    }));
  }

  async contractsForTool(
    tool_name: string,
    options?: { readonly at: 'primary' },
  ): Promise<readonly PinnedContract[]> {
    const db = options?.at === 'primary' ? atPrimary(this.db) : this.db;
    const rows = await db
      .select()
      .from(contracts)
      .where(and(eq(contracts.tenant_id, this.tenant_id), eq(contracts.tool_name, tool_name)))
      .orderBy(asc(contracts.pinned_at_unix_ms), asc(contracts.tool_contract_sha256));
    return rows.map(toPinnedContract);
  }

  async insertObservationReceipt(
    r: NewReceipt & {
      readonly observation_id: string;
      readonly raw_observation_sha256: string;
      readonly holds_id: boolean;
    },
  ): Promise<'stored' | 'taken'> {
    // Payload-bearing evidence goes to R2 before the D1 write (never on the authorization path).
    const [insert, ...signature] = await insertReceiptStatements(this.db, this.hooks.sign, {
      ...(await this.#offloaded(r)),
      tenant_id: this.tenant_id,
      observation: {
        observation_id: r.observation_id,
        raw_sha256: r.raw_observation_sha256,
        claim: r.holds_id ? r.observation_id : null,
      },
    });
    if (insert === undefined) throw new Error('no receipt statement');
    // `ON CONFLICT DO NOTHING` covers the unique observation indexes too: no change means another
    // observation took the id (or stored this content) first, and the caller re-decides.
    const [result] = await quotaChecked(this.db.batch([insert, ...signature]), r.created_at_unix_ms);
    if (result.meta.changes === 0) return 'taken';
    this.hooks.committed();
    return 'stored';
  }

  // -- Retention (issue 10; src/services/retention.ts) ----------------------------------------

  async expiredReceipts(before_unix_ms: number, limit: number): Promise<ExpiredReceipts | null> {
    const t = this.tenant_id;
    // The oldest expired receipt fixes the day; an archive never spans two days.
    const oldest = await this.db
      .select({ created: receipts.created_at_unix_ms })
      .from(receipts)
      .where(and(eq(receipts.tenant_id, t), lt(receipts.created_at_unix_ms, before_unix_ms)))
      .orderBy(asc(receipts.created_at_unix_ms))
      .limit(1)
      .get();
    if (oldest === undefined) return null;
    const day = utcDay(oldest.created);
    const end = Math.min((day + 1) * DAY_MS, before_unix_ms);
    const rows = await this.db
      .select()
      .from(receipts)
      .where(
        and(
          eq(receipts.tenant_id, t),
          gte(receipts.created_at_unix_ms, day * DAY_MS),
          lt(receipts.created_at_unix_ms, end),
        ),
      )
      .orderBy(asc(receipts.created_at_unix_ms), asc(receipts.sha256))
      .limit(limit);
    return { day, sha256s: rows.map((r) => r.sha256), lines: rows.map(archiveLine) };
  }

  async commitArchive(m: ArchiveManifest, now: number): Promise<void> {
    const t = this.tenant_id;
    const shas = JSON.stringify(m.sha256s);
    // Manifest first, then entries (a trigger refuses an entry without its manifest), then the
    // deletion, which `receipts_no_delete` allows only for rows that have an entry.
    // A row that was archived before and came back (an operation mirror re-inserted it, before
    // receipt inserts checked for an archive entry) keeps its first entry, whose archive holds the
    // same line; an identical archive (the same rows again) keeps its manifest. Neither conflict may
    // fail the batch: it would stop retention for every later tenant and shard, run after run.
    await this.db.batch([
      this.db
        .insert(receiptArchives)
        .values({
          tenant_id: t,
          archive_sha256: m.archive_sha256,
          day: m.day,
          receipts: m.sha256s.length,
          bytes: m.bytes,
          created_at_unix_ms: now,
        })
        .onConflictDoNothing(),
      // One bound JSON array, not one parameter per digest (D1 allows 100 per statement). The
      // WHERE clause keeps SQLite from reading ON CONFLICT as part of the SELECT.
      this.db
        .insert(receiptArchiveEntries)
        .select(sql`SELECT ${t}, value, ${m.archive_sha256} FROM json_each(${shas}) WHERE true`)
        .onConflictDoNothing(),
      this.db
        .delete(receipts)
        .where(
          and(eq(receipts.tenant_id, t), sql`${receipts.sha256} IN (SELECT value FROM json_each(${shas}))`),
        ),
    ]);
  }

  // -- Quotas ---------------------------------------------------------------------------------

  async usage(now: number): Promise<Usage> {
    const t = this.tenant_id;
    const [quotaRows, runRows, approvalRows] = await this.db.batch([
      this.db.select().from(tenantQuotas).where(eq(tenantQuotas.tenant_id, t)),
      this.db
        .select({ n: sql<number>`count(*)` })
        .from(runs)
        .where(and(eq(runs.tenant_id, t), gt(runs.deadline_unix_ms, now))),
      this.db
        .select({ n: sql<number>`count(*)` })
        .from(approvals)
        .where(and(eq(approvals.tenant_id, t), eq(approvals.status, 'pending'))),
    ]);
    const q = quotaRows[0];
    if (q === undefined) throw new StoredDocumentError('tenant has no quota row');
    return {
      quotas: {
        max_stored_bytes: q.max_stored_bytes,
        max_receipts_per_day: q.max_receipts_per_day,
        max_open_approvals: q.max_open_approvals,
        max_open_runs: q.max_open_runs,
      },
      stored_bytes: q.stored_bytes,
      receipts_today: q.receipts_day === utcDay(now) ? q.receipts_today : 0,
      open_runs: runRows[0]?.n ?? 0,
      open_approvals: approvalRows[0]?.n ?? 0,
    };
  }

  async securityCounts(q: SecurityCountsQuery): Promise<SecurityCounts> {
    const t = this.tenant_id;
    const db = this.db;
    const cap = q.scan_cap;
    const inWindow = (c: Column) => and(gte(c, q.from), lt(c, q.to));
    // Every count walks at most `cap + 1` rows (for receipts, the newest of the window): a count
    // above the cap is one that stopped there (`*_complete` false; it counts the rows walked).
    const receiptsWalked = db
      .select({ kind: receipts.kind, outcome: receipts.outcome })
      .from(receipts)
      .where(and(eq(receipts.tenant_id, t), inWindow(receipts.created_at_unix_ms)))
      .orderBy(desc(receipts.created_at_unix_ms))
      .limit(cap + 1)
      .as('walked');
    const receiptCounts = db
      .select({ kind: receiptsWalked.kind, outcome: receiptsWalked.outcome, n: count() })
      .from(receiptsWalked)
      .groupBy(receiptsWalked.kind, receiptsWalked.outcome);
    // Denials: among the newest `cap` authorizations of the window (receipts_kind), the newest
    // `denial_sample` denied ones, read whole for their violations.
    const authorizationsWalked = db
      .select({
        tenant_id: receipts.tenant_id,
        sha256: receipts.sha256,
        kind: receipts.kind,
        principal_id: receipts.principal_id,
        receipt: receipts.receipt,
        receipt_encoding: receipts.receipt_encoding,
        outcome: receipts.outcome,
        created_at_unix_ms: receipts.created_at_unix_ms,
      })
      .from(receipts)
      .where(
        and(
          eq(receipts.tenant_id, t),
          eq(receipts.kind, 'authorization'),
          inWindow(receipts.created_at_unix_ms),
        ),
      )
      .orderBy(desc(receipts.created_at_unix_ms))
      .limit(cap)
      .as('authorizations');
    const denialRows = db
      .select()
      .from(authorizationsWalked)
      .where(eq(authorizationsWalked.outcome, 'denied'))
      .orderBy(desc(authorizationsWalked.created_at_unix_ms))
      .limit(q.denial_sample + 1);
    const requestedWalked = db
      .select({ status: approvals.status, created: approvals.created_at_unix_ms })
      .from(approvals)
      .where(
        and(
          eq(approvals.tenant_id, t),
          inArray(approvals.status, [...APPROVAL_STATUSES]),
          inWindow(approvals.created_at_unix_ms),
        ),
      )
      .limit(cap + 1)
      .as('requested');
    const requestedCounts = db
      .select({
        status: requestedWalked.status,
        n: count(),
        expired: sql<number>`coalesce(sum(${requestedWalked.status} = 'pending' AND ${requestedWalked.created} < ${q.expired_before}), 0)`,
      })
      .from(requestedWalked)
      .groupBy(requestedWalked.status);
    const decidedWalked = db
      .select({ status: approvals.status })
      .from(approvals)
      .where(
        and(
          eq(approvals.tenant_id, t),
          isNotNull(approvals.decided_at_unix_ms),
          inWindow(approvals.decided_at_unix_ms),
        ),
      )
      .limit(cap + 1)
      .as('decided');
    const decidedCounts = db
      .select({ status: decidedWalked.status, n: count() })
      .from(decidedWalked)
      .groupBy(decidedWalked.status);
    const openWalked = db
      .select({ state: operations.state, updated: operations.updated_at_unix_ms })
      .from(operations)
      .where(and(eq(operations.tenant_id, t), inArray(operations.state, [...OPEN_OPERATION_STATES])))
      .limit(cap + 1)
      .as('open_ops');
    const openCounts = db
      .select({
        state: openWalked.state,
        n: count(),
        oldest: sql<number | null>`min(${openWalked.updated})`,
      })
      .from(openWalked)
      .groupBy(openWalked.state);
    const overdueWalked = db
      .select({ one: sql<number>`1`.as('one') })
      .from(operations)
      .where(
        and(
          eq(operations.tenant_id, t),
          eq(operations.state, 'reconciliation_required'),
          isNull(operations.escalated_at_unix_ms),
          // Due for escalation at the deadline itself (`advance`: `now >= deadline`).
          lte(operations.reconciliation_deadline_unix_ms, q.now),
        ),
      )
      .limit(cap + 1)
      .as('overdue');
    const overdueCount = db.select({ n: count() }).from(overdueWalked);
    const quarantinedWalked = db
      .select({ one: sql<number>`1`.as('one') })
      .from(contracts)
      .where(and(eq(contracts.tenant_id, t), isNotNull(contracts.quarantined_at_unix_ms)))
      .limit(cap + 1)
      .as('quarantined');
    const quarantinedCount = db.select({ n: count() }).from(quarantinedWalked);
    const [rc, denied, requested, decided, open, overdue, quarantined] = await db.batch([
      receiptCounts,
      denialRows,
      requestedCounts,
      decidedCounts,
      openCounts,
      overdueCount,
      quarantinedCount,
    ]);
    const total = (rows: readonly { n: number }[]) => rows.reduce((a, r) => a + r.n, 0);
    const receiptsTotal = total(rc);
    const requestedTotal = total(requested);
    const decidedTotal = total(decided);
    const openTotal = total(open);
    const overdueN = overdue[0]?.n ?? 0;
    const quarantinedN = quarantined[0]?.n ?? 0;
    return {
      receipts: rc,
      receipts_complete: receiptsTotal <= cap,
      denials: denied.slice(0, q.denial_sample).map((r) => decodeReceipt(r)),
      denials_complete: denied.length <= q.denial_sample,
      approvals_requested: requested.map((r) => ({ status: r.status, n: r.n })),
      approvals_expired: requested.reduce((a, r) => a + Number(r.expired), 0),
      approvals_decided: decided,
      approvals_complete: requestedTotal <= cap && decidedTotal <= cap,
      operations_open: open.map((r) => ({
        state: r.state,
        n: r.n,
        oldest_updated_at_unix_ms: r.oldest === null ? null : Number(r.oldest),
      })),
      operations_overdue: overdueN,
      operations_complete: openTotal <= cap && overdueN <= cap,
      contracts_quarantined: quarantinedN,
      contracts_complete: quarantinedN <= cap,
    };
  }

  // -- Signed webhooks for executors (migrations/0006_webhooks.sql) ----------------------------

  #secretsOf(principal_id: string) {
    return and(eq(webhookSecrets.tenant_id, this.tenant_id), eq(webhookSecrets.principal_id, principal_id));
  }

  async liveWebhookSecrets(principal_id: string, now: number): Promise<readonly WebhookSecretRow[]> {
    return this.db
      .select(webhookSecretColumns)
      .from(webhookSecrets)
      .where(
        and(
          this.#secretsOf(principal_id),
          or(isNull(webhookSecrets.expires_at_unix_ms), gt(webhookSecrets.expires_at_unix_ms, now)),
        ),
      )
      .orderBy(desc(webhookSecrets.created_at_unix_ms), desc(webhookSecrets.secret_id))
      .limit(WEBHOOK_SECRETS_READ_LIMIT);
  }

  async listWebhookSecrets(principal_id: string): Promise<readonly Omit<WebhookSecretRow, 'secret'>[]> {
    const { secret: _secret, ...columns } = webhookSecretColumns;
    return this.db
      .select(columns)
      .from(webhookSecrets)
      .where(this.#secretsOf(principal_id))
      .orderBy(desc(webhookSecrets.created_at_unix_ms), desc(webhookSecrets.secret_id))
      .limit(WEBHOOK_SECRETS_READ_LIMIT);
  }

  async rotateWebhookSecret(r: {
    readonly principal_id: string;
    readonly secret: WebhookSecretRow;
    readonly created_by: string;
    readonly previous_expires_at_unix_ms: number;
    readonly max_live: number;
  }): Promise<void> {
    const now = r.secret.created_at_unix_ms;
    const live = or(isNull(webhookSecrets.expires_at_unix_ms), gt(webhookSecrets.expires_at_unix_ms, now));
    // Newest first, the ones beyond `max_live` (the new secret counts) expire now.
    const beyond = sql`${webhookSecrets.secret_id} NOT IN (SELECT ${webhookSecrets.secret_id} FROM ${webhookSecrets} WHERE ${and(this.#secretsOf(r.principal_id), live)} ORDER BY ${webhookSecrets.created_at_unix_ms} DESC, ${webhookSecrets.secret_id} DESC LIMIT ${r.max_live})`;
    await this.db.batch([
      this.db
        .update(webhookSecrets)
        .set({ expires_at_unix_ms: r.previous_expires_at_unix_ms })
        .where(
          and(
            this.#secretsOf(r.principal_id),
            or(
              isNull(webhookSecrets.expires_at_unix_ms),
              gt(webhookSecrets.expires_at_unix_ms, r.previous_expires_at_unix_ms),
            ),
          ),
        ),
      this.db.insert(webhookSecrets).values({
        tenant_id: this.tenant_id,
        principal_id: r.principal_id,
        secret_id: r.secret.secret_id,
        secret: r.secret.secret,
        created_by: r.created_by,
        created_at_unix_ms: now,
        expires_at_unix_ms: r.secret.expires_at_unix_ms,
      }),
      this.db
        .update(webhookSecrets)
        .set({ expires_at_unix_ms: now })
        .where(and(this.#secretsOf(r.principal_id), live, beyond)),
    ]);
  }

  #delivery(principal_id: string, webhook_id: string) {
    return and(
      eq(webhookDeliveries.tenant_id, this.tenant_id),
      eq(webhookDeliveries.principal_id, principal_id),
      eq(webhookDeliveries.webhook_id, webhook_id),
    );
  }

  async claimWebhookDelivery(
    d: NewWebhookDelivery & { readonly stale_before_unix_ms: number; readonly purge_before_unix_ms: number },
  ): Promise<WebhookDeliveryClaim> {
    const key = this.#delivery(d.principal_id, d.webhook_id);
    const [, , inserted, recorded] = await this.db.batch([
      // Bounded housekeeping: rows older than the retention can no longer be replayed (their
      // timestamps are outside the window), so they only cost storage.
      this.db
        .delete(webhookDeliveries)
        .where(
          and(
            eq(webhookDeliveries.tenant_id, this.tenant_id),
            lt(webhookDeliveries.received_at_unix_ms, d.purge_before_unix_ms),
          ),
        ),
      // A first delivery that died before answering does not block its retries forever; only a
      // retry of the same message (route and body) takes its id over: another one stays refused.
      this.db
        .delete(webhookDeliveries)
        .where(
          and(
            key,
            isNull(webhookDeliveries.status),
            lt(webhookDeliveries.received_at_unix_ms, d.stale_before_unix_ms),
            eq(webhookDeliveries.route, d.route),
            eq(webhookDeliveries.body_sha256, d.body_sha256),
          ),
        ),
      this.db
        .insert(webhookDeliveries)
        .values({ tenant_id: this.tenant_id, ...d })
        .onConflictDoNothing()
        .returning({ webhook_id: webhookDeliveries.webhook_id }),
      this.db.select().from(webhookDeliveries).where(key),
    ]);
    if (inserted.length === 1) return { state: 'claimed' };
    const row = recorded[0];
    if (row === undefined) throw new Error('webhook delivery neither inserted nor found');
    return {
      state: 'recorded',
      route: row.route,
      body_sha256: row.body_sha256,
      status: row.status,
      response: row.response,
    };
  }

  async completeWebhookDelivery(
    principal_id: string,
    webhook_id: string,
    status: number,
    response: string,
  ): Promise<void> {
    await this.db
      .update(webhookDeliveries)
      .set({ status, response })
      .where(this.#delivery(principal_id, webhook_id));
  }

  async releaseWebhookDelivery(principal_id: string, webhook_id: string): Promise<void> {
    await this.db
      .delete(webhookDeliveries)
      .where(and(this.#delivery(principal_id, webhook_id), isNull(webhookDeliveries.status)));
  }
}

/** At most this many secrets are read per executor (rotation keeps at most a few live). */
const WEBHOOK_SECRETS_READ_LIMIT = 16;

const webhookSecretColumns = {
  principal_id: webhookSecrets.principal_id,
  secret_id: webhookSecrets.secret_id,
  secret: webhookSecrets.secret,
  created_at_unix_ms: webhookSecrets.created_at_unix_ms,
  expires_at_unix_ms: webhookSecrets.expires_at_unix_ms,
};

/**
 * What an authorization receipt is replayed from besides the receipt body (evidence version 2):
 * the trusted state, the approval the invocation carried, and nothing the body already binds.
 * The contract and the grant are referred to by the body's digests and loaded from storage; only
 * the synthetic empty grant, which has no row, is embedded. The invocation is rebuilt from the
 * body; should it not hash to the body's `invocation_sha256`, it is stored whole instead.
 */
function authorizationEvidence(d: AuthorizationDecision) {
  const approval = d.invocation.approval;
  const rebuilt = invocationFromReceiptBody(d.receipt.body, approval);
  const compact = digestOf(rebuilt) === d.receipt.body.invocation_sha256;
  return {
    evidence_version: 2,
    ...(d.grant.grant_id === EMPTY_GRANT_ID ? { grant: d.grant } : {}),
    ...(compact ? (approval === null ? {} : { approval }) : { invocation: d.invocation }),
    // Version 2 options are not stored: replay takes the dispatch window from the policy the
    // body names (by digest) and the named identities from the body, where they are recorded.
    trusted_state: d.trusted,
  };
}

// ---------------------------------------------------------------------------------------------
// Rows to records

function toPolicyRecord(row: { policy_sha256: string; document: string } | undefined): PolicyRecord {
  // Every tenant is created with a policy, so a missing one is corruption: fail closed.
  if (row === undefined) throw new StoredDocumentError('tenant has no policy in force');
  return { policy_sha256: row.policy_sha256, policy: policyCache.get(row.policy_sha256, row.document) };
}

export function toPinnedContract(row: typeof contracts.$inferSelect): PinnedContract {
  return {
    tool_contract_sha256: row.tool_contract_sha256,
    contract: contractCache.get(row.tool_contract_sha256, row.document),
    pinned_by: row.pinned_by,
    pinned_at_unix_ms: row.pinned_at_unix_ms,
    quarantined_at_unix_ms: row.quarantined_at_unix_ms,
    quarantine_reason: row.quarantine_reason,
  };
}

export function toPrincipalRow(row: typeof principals.$inferSelect): PrincipalRow {
  return {
    principal_id: row.principal_id,
    tenant_id: row.tenant_id,
    name: row.name,
    roles: parseStored('principal roles', StoredRoles, row.roles),
    executor_release: row.executor_release,
    created_at_unix_ms: row.created_at_unix_ms,
    revoked_at_unix_ms: row.revoked_at_unix_ms,
  };
}

export function principalValues(p: NewPrincipal): typeof principals.$inferInsert {
  return {
    principal_id: p.principal_id,
    tenant_id: p.tenant_id,
    name: p.name,
    roles: JSON.stringify(p.roles),
    executor_release: p.executor_release,
    key_sha256: p.key_sha256,
    created_by: p.created_by,
    created_at_unix_ms: p.created_at_unix_ms,
  };
}

function toGrantRow(row: typeof grants.$inferSelect): GrantRow {
  return {
    grant_id: row.grant_id,
    grant_sha256: row.grant_sha256,
    grant: grantCache.get(row.grant_sha256, row.document),
    principal_id: row.principal_id,
    created_by: row.created_by,
    created_at_unix_ms: row.created_at_unix_ms,
    revoked_at_unix_ms: row.revoked_at_unix_ms,
  };
}

/** An approval's pinned contract: same tenant, same digest (a left join: the contract may be gone). */
const approvalContract = and(
  eq(contracts.tenant_id, approvals.tenant_id),
  eq(contracts.tool_contract_sha256, approvals.tool_contract_sha256),
);

/**
 * Keyset pagination's position: the rows strictly past the cursor in (first, second) order,
 * `gt` for an ascending page and `lt` for a descending one. The second column breaks ties, so
 * the pair is a total order and no row is skipped or repeated between pages.
 */
function pastCursor<A extends Column, B extends Column>(
  cmp: typeof gt | typeof lt,
  [first, firstValue]: readonly [A, A['_']['data']],
  [second, secondValue]: readonly [B, B['_']['data']],
): SQL | undefined {
  return or(cmp(first, firstValue), and(eq(first, firstValue), cmp(second, secondValue)));
}

function withContract(row: {
  a: typeof approvals.$inferSelect;
  document: string | null;
}): ApprovalWithContract {
  return {
    approval: row.a,
    contract: row.document === null ? null : contractCache.get(row.a.tool_contract_sha256, row.document),
  };
}

/** The stored approval as the core sees it. */
function toApprovalRecord(a: typeof approvals.$inferSelect, approver_revoked: boolean): ApprovalRecord {
  return {
    approval_id: a.approval_id,
    tenant_id: a.tenant_id,
    requester_principal_id: a.requester_principal_id,
    status: a.status,
    approval: toToolApproval(a),
    approver_revoked,
  };
}

// ---------------------------------------------------------------------------------------------
// Authorization state: the reads `decideAuthorization` needs, and the commit's freshness guard.
// The reads are keyed by a tenant and principal given as ids, or as subqueries on an API key's
// digest, so `POST /v1/authorize` reads key and state in one batch (src/db/platform-store.ts).

/** A tenant or principal id, or a scalar subquery that yields it (NULL matches no row). */
type Key = string | SQL;

/**
 * Which pinned contract the state read selects: one by digest (`/v1`), or every pin of a tool
 * name, oldest first as `contractsForTool` reads them, for a door that binds the name itself
 * (src/services/tool-call.ts) in the same batch.
 */
export type ContractSelector = { readonly tool_contract_sha256: string } | { readonly tool_name: string };

export function authorizationStateQueries(
  db: Db,
  t: Key,
  principal: Key,
  request: Omit<AuthorizeRequest, 'tool_contract_sha256'>,
  contract: ContractSelector,
) {
  const approvalId = request.approval_id ?? null;
  return [
    db
      .select({ policy_sha256: tenants.policy_sha256, document: policies.document })
      .from(tenants)
      .innerJoin(
        policies,
        and(eq(policies.tenant_id, tenants.tenant_id), eq(policies.policy_sha256, tenants.policy_sha256)),
      )
      .where(eq(tenants.tenant_id, t)),
    db
      .select()
      .from(contracts)
      .where(
        and(
          eq(contracts.tenant_id, t),
          'tool_name' in contract
            ? eq(contracts.tool_name, contract.tool_name)
            : eq(contracts.tool_contract_sha256, contract.tool_contract_sha256),
        ),
      )
      .orderBy(asc(contracts.pinned_at_unix_ms), asc(contracts.tool_contract_sha256)),
    db
      .select({ revoked_at_unix_ms: principals.revoked_at_unix_ms })
      .from(principals)
      .where(and(eq(principals.tenant_id, t), eq(principals.principal_id, principal))),
    db
      .select()
      .from(runs)
      .where(and(eq(runs.tenant_id, t), eq(runs.run_id, request.run_id))),
    db
      .select({
        ...getTableColumns(approvals),
        // An approval is only as good as its approver: a revoked approver's approvals stop working.
        approver_revoked_at_unix_ms: sql<
          number | null
        >`(select p.revoked_at_unix_ms from principals p where p.tenant_id = ${approvals.tenant_id} and p.principal_id = ${approvals.decided_by})`,
        // Both approvers of an irreversible call: revoking either voids it (issue 14).
        first_approver_revoked_at_unix_ms: sql<
          number | null
        >`(select p.revoked_at_unix_ms from principals p where p.tenant_id = ${approvals.tenant_id} and p.principal_id = ${approvals.first_approved_by})`,
      })
      .from(approvals)
      // No approval named: a primary-key lookup of an id no row has (never a table scan).
      .where(and(eq(approvals.tenant_id, t), eq(approvals.approval_id, approvalId ?? NO_ID))),
    // Every unrevoked grant, never a window of them: a live grant must not fall out of view
    // behind revoked ones. Their number is bounded when grants are created (MAX_LIVE_GRANTS).
    db
      .select()
      .from(grants)
      .where(
        request.grant_id === undefined
          ? and(
              eq(grants.tenant_id, t),
              eq(grants.principal_id, principal),
              isNull(grants.revoked_at_unix_ms),
            )
          : and(eq(grants.tenant_id, t), eq(grants.grant_id, request.grant_id)),
      )
      .orderBy(asc(grants.grant_id)),
    // One revoked grant, used only when none is live, so the denial says `grant_revoked`.
    db
      .select()
      .from(grants)
      .where(
        request.grant_id === undefined
          ? and(
              eq(grants.tenant_id, t),
              eq(grants.principal_id, principal),
              isNotNull(grants.revoked_at_unix_ms),
            )
          : and(eq(grants.tenant_id, t), eq(grants.grant_id, NO_ID)),
      )
      .orderBy(asc(grants.grant_id))
      .limit(1),
  ] as const;
}

type StateQueries = ReturnType<typeof authorizationStateQueries>;
type AwaitedEach<T> = { readonly [K in keyof T]: Awaited<T[K]> };
export type AuthorizationStateRows = AwaitedEach<StateQueries>;

export function toAuthorizationState(
  rows: AuthorizationStateRows,
  tenant_id: string,
  principal_id: string,
): AuthorizationState {
  const [policyRows, contractRows, principalRows, runRows, approvalRows, grantRows, revokedRows] = rows;
  const contractRow = contractRows[0];
  const approvalRow = approvalRows[0];
  return {
    caller: {
      tenant_id,
      principal_id,
      revoked: (principalRows[0]?.revoked_at_unix_ms ?? null) !== null,
    },
    policy: toPolicyRecord(policyRows[0]),
    contract:
      contractRow === undefined
        ? null
        : {
            tool_contract_sha256: contractRow.tool_contract_sha256,
            contract: contractCache.get(contractRow.tool_contract_sha256, contractRow.document),
            quarantined: contractRow.quarantined_at_unix_ms !== null,
          },
    run: runRows[0] ?? null,
    approval:
      approvalRow === undefined
        ? null
        : toApprovalRecord(
            approvalRow,
            approvalRow.approver_revoked_at_unix_ms !== null ||
              approvalRow.first_approver_revoked_at_unix_ms !== null,
          ),
    grants: (grantRows.length > 0 ? grantRows : revokedRows).map((g) => ({
      grant: grantCache.get(g.grant_sha256, g.document),
      revoked: g.revoked_at_unix_ms !== null,
    })),
  };
}

/**
 * The commit's freshness guard: true at the primary when a row the decision was made from has
 * changed in a way that could change the decision. Revocations, quarantine, consumption and
 * spending have guards and triggers of their own; this covers what can move the other way or
 * is not guarded elsewhere: the policy in force, an approval's status or its approver's
 * revocation, a run or a live grant that appeared. Everything else the state holds is immutable.
 */
function changedSinceRead(
  t: string,
  principal_id: string,
  request: AuthorizeRequest,
  read: AuthorizationState,
): SQL {
  const conditions: SQL[] = [
    sql`(select ${tenants.policy_sha256} from ${tenants} where ${tenants.tenant_id} = ${t}) is not ${read.policy.policy_sha256}`,
  ];
  if (read.run === null) {
    conditions.push(
      sql`exists (select 1 from ${runs} where ${runs.tenant_id} = ${t} and ${runs.run_id} = ${request.run_id})`,
    );
  }
  const approvalId = request.approval_id ?? null;
  if (approvalId !== null) {
    conditions.push(
      sql`(select ${approvals.status} from ${approvals} where ${approvals.tenant_id} = ${t} and ${approvals.approval_id} = ${approvalId}) is not ${read.approval?.status ?? null}`,
    );
    if (read.approval !== null && !read.approval.approver_revoked) {
      conditions.push(
        sql`(select p.revoked_at_unix_ms from ${principals} p where p.tenant_id = ${t} and p.principal_id = (select ${approvals.decided_by} from ${approvals} where ${approvals.tenant_id} = ${t} and ${approvals.approval_id} = ${approvalId})) is not null`,
      );
      // The first of two approvers (irreversible effects, issue 14) counts the same.
      conditions.push(
        sql`(select p.revoked_at_unix_ms from ${principals} p where p.tenant_id = ${t} and p.principal_id = (select ${approvals.first_approved_by} from ${approvals} where ${approvals.tenant_id} = ${t} and ${approvals.approval_id} = ${approvalId})) is not null`,
      );
    }
  }
  if (request.grant_id === undefined) {
    const seen = read.grants.filter((g) => !g.revoked).map((g) => g.grant.grant_id);
    // The ids seen, as one space-delimited parameter rather than one parameter each (D1 binds
    // at most 100 per statement); identifiers never contain a space.
    const seenList = ` ${seen.join(' ')} `;
    conditions.push(
      sql`exists (select 1 from ${grants} where ${grants.tenant_id} = ${t} and ${grants.principal_id} = ${principal_id} and ${grants.revoked_at_unix_ms} is null and instr(${seenList}, ' ' || ${grants.grant_id} || ' ') = 0)`,
    );
  }
  // Parenthesized: the caller ANDs it with the row key, and AND binds tighter than OR.
  return sql`(${sql.join(conditions, sql` or `)})`;
}

/**
 * A statement that aborts the batch when `changed` holds: it names the caller's own row in an
 * update of `roles`, which the `principals_identity_immutable` trigger refuses whatever the value
 * (migrations/0001_invariants.sql). Were the trigger gone, it would set `roles` to itself.
 */
function abortIfChanged(db: Db, t: string, principal_id: string, changed: SQL) {
  return db
    .update(principals)
    .set({ roles: sql`${principals.roles}` })
    .where(and(eq(principals.tenant_id, t), eq(principals.principal_id, principal_id), changed));
}
