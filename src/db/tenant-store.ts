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
  and,
  asc,
  count,
  desc,
  eq,
  getTableColumns,
  gt,
  isNotNull,
  isNull,
  lt,
  lte,
  or,
  sql,
} from 'drizzle-orm';
import type { BatchItem } from 'drizzle-orm/batch';
import { z } from 'zod';
import type {
  ApprovalRecord,
  AuthorizationDecision,
  AuthorizationState,
  AuthorizeRequest,
} from '../core/authorization/decide.js';
import { Role } from '../core/identity/identity.js';
import { toToolApproval } from '../core/authorization/approval.js';
import type { ToolContract } from '../core/model.js';
import type { TenantPolicy } from '../core/policy.js';
import type {
  ApprovalDecision,
  ApprovalListFilter,
  ApprovalRow,
  ApprovalWithContract,
  CommitResult,
  DispatchState,
  GrantRow,
  NewPrincipal,
  NewReceipt,
  OperationListFilter,
  OperationRow,
  PinnedContract,
  PolicyRecord,
  PrincipalRow,
  RecordedObservation,
  RunRow,
  StoredReceipt,
  TenantStore,
} from '../services/ports.js';
import { type Db, invariantViolation } from './client.js';
import { parseStored, StoredDocumentError, toCanonicalText } from './documents.js';
import { contractCache, grantCache, policyCache } from './caches.js';
import { getReceiptRow, insertReceiptStatements } from './receipts.js';
import {
  approvals,
  contracts,
  grants,
  operations,
  policies,
  principals,
  receipts,
  runs,
  tenants,
} from './schema.js';

const StoredRoles = z.array(Role).min(1);

export function d1TenantStore(db: Db, tenant_id: string): TenantStore {
  return new D1TenantStore(db, tenant_id);
}

class D1TenantStore implements TenantStore {
  constructor(
    readonly db: Db,
    readonly tenant_id: string,
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
    await this.db.batch([
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
    ]);
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
    const inserted = await this.db
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
      .run();
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

  async insertGrant(g: Omit<GrantRow, 'revoked_at_unix_ms'>): Promise<void> {
    if (g.grant.tenant_id !== this.tenant_id) throw new Error('grant of another tenant');
    await this.db.insert(grants).values({
      grant_id: g.grant_id,
      tenant_id: this.tenant_id,
      principal_id: g.principal_id,
      grant_sha256: g.grant_sha256,
      document: toCanonicalText(g.grant),
      created_by: g.created_by,
      created_at_unix_ms: g.created_at_unix_ms,
    });
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

  async insertRun(r: Omit<RunRow, 'calls_used' | 'writes_used'>): Promise<void> {
    await this.db.insert(runs).values({ ...r, tenant_id: this.tenant_id });
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
    // Scans the tenant's prefix of `runs_tenant`; a (tenant, principal, deadline) index would
    // bound it to the principal's live runs, but needs a migration (not added here).
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
      .leftJoin(
        contracts,
        and(
          eq(contracts.tenant_id, approvals.tenant_id),
          eq(contracts.tool_contract_sha256, approvals.tool_contract_sha256),
        ),
      );
  }

  async insertApproval(a: ApprovalRow): Promise<void> {
    if (a.tenant_id !== this.tenant_id) throw new Error('approval of another tenant');
    await this.db.insert(approvals).values(a);
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
            : or(
                gt(approvals.created_at_unix_ms, q.after.created_at_unix_ms),
                and(
                  eq(approvals.created_at_unix_ms, q.after.created_at_unix_ms),
                  gt(approvals.approval_id, q.after.approval_id),
                ),
              ),
        ),
      )
      .orderBy(asc(approvals.created_at_unix_ms), asc(approvals.approval_id))
      .limit(q.limit);
    return rows.map(withContract);
  }

  async decideApproval(approval_id: string, decision: ApprovalDecision): Promise<'decided' | 'conflict'> {
    try {
      const r = await this.db
        .update(approvals)
        .set(decision)
        .where(
          and(
            eq(approvals.tenant_id, this.tenant_id),
            eq(approvals.approval_id, approval_id),
            eq(approvals.status, 'pending'),
          ),
        )
        .run();
      return r.meta.changes === 1 ? 'decided' : 'conflict';
    } catch (e) {
      // Two approvers racing: the trigger lets exactly one decision through.
      if (invariantViolation(e) === 'approval_not_pending') return 'conflict';
      throw e;
    }
  }

  // -- Authorization --------------------------------------------------------------------------

  async loadAuthorizationState(principal_id: string, request: AuthorizeRequest): Promise<AuthorizationState> {
    const t = this.tenant_id;
    const db = this.db;
    const approvalId = request.approval_id ?? null;
    const [policyRows, contractRows, principalRows, runRows, approvalRows, grantRows] = await db.batch([
      this.#currentPolicyQuery(),
      this.#contractQuery(request.tool_contract_sha256),
      db
        .select({ revoked_at_unix_ms: principals.revoked_at_unix_ms })
        .from(principals)
        .where(and(eq(principals.tenant_id, t), eq(principals.principal_id, principal_id))),
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
        })
        .from(approvals)
        .where(
          approvalId === null
            ? sql`0 = 1`
            : and(eq(approvals.tenant_id, t), eq(approvals.approval_id, approvalId)),
        ),
      db
        .select()
        .from(grants)
        .where(
          request.grant_id === undefined
            ? and(eq(grants.tenant_id, t), eq(grants.principal_id, principal_id))
            : and(eq(grants.tenant_id, t), eq(grants.grant_id, request.grant_id)),
        )
        .orderBy(asc(grants.grant_id))
        .limit(64),
    ]);
    const contractRow = contractRows[0];
    const approvalRow = approvalRows[0];
    return {
      caller: {
        tenant_id: t,
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
          : toApprovalRecord(approvalRow, approvalRow.approver_revoked_at_unix_ms !== null),
      grants: grantRows.map((g) => ({
        grant: grantCache.get(g.grant_sha256, g.document),
        revoked: g.revoked_at_unix_ms !== null,
      })),
    };
  }

  async commitAuthorization(
    d: AuthorizationDecision,
    principal_id: string,
    now: number,
  ): Promise<CommitResult> {
    const db = this.db;
    const t = this.tenant_id;
    const [insert] = insertReceiptStatements(db, {
      tenant_id: t,
      kind: 'authorization',
      receipt: d.receipt,
      outcome: d.receipt.body.decision,
      principal_id,
      evidence: {
        tool_contract_sha256: d.receipt.body.tool_contract_sha256,
        grant: d.grant,
        invocation: d.invocation,
        trusted_state: d.trusted,
        evaluated_at_unix_ms: now,
      },
      created_at_unix_ms: now,
    });
    if (insert === undefined) throw new Error('no receipt statement');
    const e = d.effects;
    try {
      if (e === null) {
        await insert.run();
        return { ok: true };
      }
      // Guards: each touches its row only if it was revoked or quarantined meanwhile, and the
      // "final" triggers then abort the batch (a revocation that committed first always wins).
      const statements: BatchItem<'sqlite'>[] = [
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
        statements.push(
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
      await db.batch([insert, ...statements]);
      return { ok: true };
    } catch (err) {
      const lost = invariantViolation(err);
      if (lost === null) throw err;
      return { ok: false, lost };
    }
  }

  // -- Receipts -------------------------------------------------------------------------------

  async getReceipt(sha256: string): Promise<StoredReceipt | null> {
    return getReceiptRow(this.db, this.tenant_id, sha256);
  }

  async insertReceipt(r: NewReceipt): Promise<void> {
    const [insert] = insertReceiptStatements(this.db, { ...r, tenant_id: this.tenant_id });
    if (insert === undefined) throw new Error('no receipt statement');
    await insert.run();
  }

  // -- Executions and operations --------------------------------------------------------------

  async loadDispatchState(a: {
    readonly tool_contract_sha256: string;
    readonly policy_sha256: string;
    readonly grant_sha256: string;
    readonly approval_id: string | null;
    readonly principal_id: string;
  }): Promise<DispatchState> {
    const t = this.tenant_id;
    const db = this.db;
    const [contractRows, policyRows, receiptPolicyRows, grantRows, approvalRows, principalRows] =
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
          .select({ expires_at_unix_ms: approvals.expires_at_unix_ms })
          .from(approvals)
          .where(
            a.approval_id === null
              ? sql`0 = 1`
              : and(eq(approvals.tenant_id, t), eq(approvals.approval_id, a.approval_id)),
          ),
        db
          .select({ revoked_at_unix_ms: principals.revoked_at_unix_ms })
          .from(principals)
          .where(and(eq(principals.tenant_id, t), eq(principals.principal_id, a.principal_id))),
      ]);
    const contractRow = contractRows[0];
    const receiptPolicyRow = receiptPolicyRows[0];
    const grantRow = grantRows[0];
    const agentRow = principalRows[0];
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
      approval_expires_at_unix_ms: a.approval_id === null ? null : approvalRows[0]?.expires_at_unix_ms,
      agent_revoked: agentRow === undefined || agentRow.revoked_at_unix_ms !== null,
    };
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
            : or(
                lt(operations.updated_at_unix_ms, q.after.updated_at_unix_ms),
                and(
                  eq(operations.updated_at_unix_ms, q.after.updated_at_unix_ms),
                  lt(operations.operation_id, q.after.operation_id),
                ),
              ),
        ),
      )
      .orderBy(desc(operations.updated_at_unix_ms), desc(operations.operation_id))
      .limit(q.limit);
  }

  // -- Observations ---------------------------------------------------------------------------

  async recordedObservations(kind: string, observation_id: string): Promise<readonly RecordedObservation[]> {
    const rows = await this.db
      .select({
        sha256: receipts.sha256,
        raw_observation_sha256: sql<
          string | null
        >`json_extract(${receipts.receipt}, '$.body.raw_observation_sha256')`,
        evidence: receipts.evidence,
      })
      .from(receipts)
      .where(
        and(
          eq(receipts.tenant_id, this.tenant_id),
          eq(receipts.kind, kind),
          sql`json_extract(${receipts.receipt}, '$.body.observation_id') = ${observation_id}`,
        ),
      )
      .limit(64);
    return rows.map((r) => {
      if (r.raw_observation_sha256 === null || r.evidence === null) {
        throw new StoredDocumentError('stored observation receipt is incomplete');
      }
      return { sha256: r.sha256, raw_observation_sha256: r.raw_observation_sha256, evidence: r.evidence };
    });
  }
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
