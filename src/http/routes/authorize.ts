/**
 * `POST /v1/authorize` (agent): assemble the invocation from the authenticated principal and
 * trusted storage, decide with the pure core, and store the receipt, authorized or denied.
 *
 * Guarantees:
 * - tenant, principal, policy, time and invocation id come from the key, storage and the clock
 *   read once per request; the target is derived from the exact input by the pinned contract;
 * - an authorized decision stores its receipt, consumes its approval and charges its run in one
 *   D1 batch, guarded so that a revocation, quarantine, consumed approval or spent budget
 *   committed by a concurrent request aborts the whole batch (migrations/0001_invariants.sql);
 *   the request then re-evaluates against fresh state and stores that (denial) receipt instead;
 * - a denial is a stored receipt with sorted violations (403), never an exception.
 * Never: logs the input (only its digest), or lets a body field select a tenant, principal,
 * grant owner, policy or approval of another tenant.
 */
import { and, asc, eq, getTableColumns, isNotNull, sql } from 'drizzle-orm';
import type { BatchItem } from 'drizzle-orm/batch';
import { Hono } from 'hono';
import { z } from 'zod';
import { authorizeToolCall } from '../../core/authorization/authorize.js';
import { digestOf, sha256Hex } from '../../core/canonical/canonical.js';
import { utf8Encode } from '../../core/canonical/json.js';
import {
  type AuthorizationReceipt,
  IdempotencyKey,
  ResourceRef,
  type ToolApproval,
  type ToolGrant,
  type ToolInvocation,
  type TrustedState,
  WRITE_EFFECTS,
} from '../../core/model.js';
import { Identifier, Sha256 } from '../../core/schema.js';
import { database, type Db, invariantViolation } from '../../db/client.js';
import { toCanonicalText } from '../../db/documents.js';
import { newId } from '../../db/ids.js';
import {
  contractQuery,
  currentPolicyQuery,
  grantCache,
  type PinnedContract,
  type PolicyInForce,
  toPinnedContract,
  toPolicyInForce,
} from '../../db/queries.js';
import { insertReceiptStatements } from '../../db/receipts.js';
import { approvals, contracts, grants, principals, runs } from '../../db/schema.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv, AuthenticatedPrincipal } from '../env.js';
import { ApiError, fromCoreError, notFound } from '../errors.js';
import { JsonInput, resolveTarget, toToolApproval } from './approvals.js';

const AuthorizeBody = z.strictObject({
  tool_contract_sha256: Sha256,
  input: JsonInput,
  /** Optional; must equal the target the contract derives from `input` (400 `target_mismatch`). */
  target: ResourceRef.optional(),
  idempotency_key: IdempotencyKey.nullable().optional(),
  approval_id: Identifier.nullable().optional(),
  run_id: Identifier,
  /** Evaluate only this grant; otherwise every grant of the principal, first authorized wins. */
  grant_id: Identifier.optional(),
  /** Checked, never selecting: a mismatch is a `tenant_mismatch` / `principal_mismatch` violation. */
  tenant_id: Identifier.optional(),
  principal_id: Identifier.optional(),
});
export type AuthorizeBody = z.infer<typeof AuthorizeBody>;

/** A lost race is retried against fresh state; the fresh evaluation is normally a denial. */
const MAX_ATTEMPTS = 3;

/** Id of the grant evaluated when a principal holds none: it grants nothing, so it denies. */
export const EMPTY_GRANT_ID = 'grant-none';

export const authorizeRoutes = new Hono<AppEnv>();

authorizeRoutes.post('/authorize', requireRole('agent'), async (c) => {
  const body = await readJson(c, AuthorizeBody);
  const p = c.var.principal;
  const now = c.var.now;
  const db = database(c.env);
  const invocation_id = newId('invocation');

  for (let attempt = 1; ; attempt++) {
    const state = await loadState(db, p, body);
    if (state.pinned === null) throw notFound('contract');
    const evaluation = evaluate(state, state.pinned, body, p, invocation_id, now);
    const { receipt } = evaluation;
    c.set('log', {
      ...c.var.log,
      tool_contract_sha256: state.pinned.tool_contract_sha256,
      input_sha256: receipt.body.input_sha256,
      invocation_id,
      run_id: body.run_id,
      receipt_sha256: receipt.sha256,
      decision: receipt.body.decision,
      attempt,
    });
    try {
      await persist(db, p, state, evaluation, now);
    } catch (e) {
      const lost = invariantViolation(e);
      if (lost === null) throw e;
      c.set('log', { ...c.var.log, lost_race: lost });
      if (attempt >= MAX_ATTEMPTS)
        throw new ApiError('conflict', 'authorization is contended; retry the call');
      continue;
    }
    const authorized = receipt.body.decision === 'authorized';
    return c.json(
      { decision: receipt.body.decision, violations: receipt.body.violations, receipt },
      authorized ? 200 : 403,
    );
  }
});

interface GrantCandidate {
  readonly grant: ToolGrant;
  readonly revoked: boolean;
  /** False for the synthetic empty grant, which has no row to guard. */
  readonly stored: boolean;
}

export interface State {
  readonly policy: PolicyInForce;
  readonly pinned: PinnedContract | null;
  readonly principalRevoked: boolean;
  readonly run: typeof runs.$inferSelect | undefined;
  readonly approval:
    (typeof approvals.$inferSelect & { approver_revoked_at_unix_ms: number | null }) | undefined;
  readonly grants: readonly (typeof grants.$inferSelect)[];
}

/**
 * Everything the decision depends on, read in one D1 round trip, all filtered by tenant.
 * `loadState`, `evaluate` and `persist` are exported for the race tests, which persist a stale
 * evaluation on purpose (test/integration/platform/storage.test.ts).
 */
export async function loadState(db: Db, p: AuthenticatedPrincipal, body: AuthorizeBody): Promise<State> {
  const t = p.tenant_id;
  const approvalId = body.approval_id ?? null;
  const [policyRows, contractRows, principalRows, runRows, approvalRows, grantRows] = await db.batch([
    currentPolicyQuery(db, t),
    contractQuery(db, t, body.tool_contract_sha256),
    db
      .select({ revoked_at_unix_ms: principals.revoked_at_unix_ms })
      .from(principals)
      .where(and(eq(principals.tenant_id, t), eq(principals.principal_id, p.principal_id))),
    db
      .select()
      .from(runs)
      .where(and(eq(runs.tenant_id, t), eq(runs.run_id, body.run_id))),
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
        body.grant_id === undefined
          ? and(eq(grants.tenant_id, t), eq(grants.principal_id, p.principal_id))
          : and(eq(grants.tenant_id, t), eq(grants.grant_id, body.grant_id)),
      )
      .orderBy(asc(grants.grant_id))
      .limit(64),
  ]);
  const contractRow = contractRows[0];
  return {
    policy: toPolicyInForce(policyRows[0]),
    pinned: contractRow === undefined ? null : toPinnedContract(contractRow),
    principalRevoked: (principalRows[0]?.revoked_at_unix_ms ?? null) !== null,
    run: runRows[0],
    approval: approvalRows[0],
    grants: grantRows,
  };
}

export interface Evaluation {
  readonly receipt: AuthorizationReceipt;
  readonly candidate: GrantCandidate;
  readonly invocation: ToolInvocation;
  readonly trusted: TrustedState;
}

export function evaluate(
  state: State,
  pinned: PinnedContract,
  body: AuthorizeBody,
  p: AuthenticatedPrincipal,
  invocation_id: string,
  now: number,
): Evaluation {
  const contract = pinned.contract;
  const input = utf8Encode(toCanonicalText(body.input));
  const target = resolveTarget(contract, body.input, body.target);

  const run = state.run;
  // Another principal's run is as unknown as a missing one.
  const runKnown = run !== undefined && run.principal_id === p.principal_id;
  const run_violations: TrustedState['run_violations'] = [];
  if (!runKnown) run_violations.push('run_unknown');
  else {
    if (now >= run.deadline_unix_ms) run_violations.push('run_expired');
    if (run.calls_used >= run.max_calls) run_violations.push('run_call_budget_spent');
    if (WRITE_EFFECTS.has(contract.effect) && run.writes_used >= run.max_external_writes) {
      run_violations.push('run_write_budget_spent');
    }
  }

  // An approval is usable only by the request it was issued for: same tenant, same requester,
  // approved and not yet consumed. Anything else is treated as missing or unusable.
  let approval: ToolApproval | null = null;
  let approval_unusable = false;
  if ((body.approval_id ?? null) !== null) {
    const row = state.approval;
    if (row === undefined || row.requester_principal_id !== p.principal_id) approval_unusable = true;
    else {
      approval = toToolApproval(row);
      approval_unusable = row.status !== 'approved' || row.approver_revoked_at_unix_ms !== null;
    }
  }

  const invocation: ToolInvocation = {
    invocation_id,
    run_envelope_sha256: runKnown ? run.run_envelope_sha256 : unknownRunDigest(p.tenant_id, body.run_id),
    // A named tenant or principal is carried into the invocation so the core records the
    // mismatch against the trusted grant; lookups above only ever used the authenticated ones.
    tenant_id: body.tenant_id ?? p.tenant_id,
    // A grant named by id may belong to another principal; naming that owner in the body must
    // not make them agree, so such an invocation carries the authenticated principal.
    principal_id: namesForeignGrant(state, body, p) ? p.principal_id : (body.principal_id ?? p.principal_id),
    policy_sha256: state.policy.policy_sha256,
    tool_contract_sha256: pinned.tool_contract_sha256,
    input_sha256: sha256Hex(input),
    input_bytes: input.byteLength,
    target,
    requested_at_unix_ms: now,
    idempotency_key: body.idempotency_key ?? null,
    approval,
  };

  let first: Evaluation | undefined;
  for (const candidate of grantCandidates(state, body, p)) {
    // Keys in RFC 8785 order: its digest takes the canonicalizer's fast path.
    const trusted: TrustedState = {
      approval_required_effects: [...state.policy.policy.approval_required_effects],
      approval_unusable,
      contract_quarantined: pinned.quarantined_at_unix_ms !== null,
      grant_revoked: candidate.revoked,
      principal_revoked: state.principalRevoked,
      run_violations: [...run_violations].sort(),
    };
    const decided = authorizeToolCall(contract, candidate.grant, invocation, now, trusted);
    if (!decided.ok) throw fromCoreError(decided.error);
    const evaluation = { receipt: decided.value, candidate, invocation, trusted };
    if (decided.value.body.decision === 'authorized') return evaluation;
    first ??= evaluation;
  }
  if (first === undefined) throw new ApiError('internal', 'no grant was evaluated');
  return first;
}

/** A grant named by `grant_id` that is not the authenticated principal's own. */
function namesForeignGrant(state: State, body: AuthorizeBody, p: AuthenticatedPrincipal): boolean {
  const named = body.grant_id === undefined ? undefined : state.grants[0];
  return named !== undefined && named.principal_id !== p.principal_id;
}

/**
 * The grants to evaluate, in grant_id order: the named one; else the principal's unrevoked grants;
 * else its revoked ones (so the denial says `grant_revoked`); else the empty grant.
 */
function grantCandidates(state: State, body: AuthorizeBody, p: AuthenticatedPrincipal): GrantCandidate[] {
  const toCandidate = (row: typeof grants.$inferSelect): GrantCandidate => ({
    grant: grantCache.get(row.grant_sha256, row.document),
    revoked: row.revoked_at_unix_ms !== null,
    stored: true,
  });
  if (body.grant_id !== undefined) {
    const row = state.grants[0];
    if (row === undefined) throw notFound('grant');
    return [toCandidate(row)];
  }
  const live = state.grants.filter((g) => g.revoked_at_unix_ms === null);
  const rows = live.length > 0 ? live : state.grants;
  if (rows.length > 0) return rows.map(toCandidate);
  return [{ grant: emptyGrant(p, state.policy.policy_sha256), revoked: false, stored: false }];
}

function emptyGrant(p: AuthenticatedPrincipal, policy_sha256: string): ToolGrant {
  return {
    grant_id: EMPTY_GRANT_ID,
    principal_id: p.principal_id,
    tenant_id: p.tenant_id,
    policy_sha256,
    allowed_tools: [],
    allowed_effects: [],
    capabilities: [],
    not_before_unix_ms: 0,
    expires_at_unix_ms: Number.MAX_SAFE_INTEGER,
  };
}

/** Stand-in run digest for an unknown run: versioned, tenant-scoped, never a real envelope's. */
function unknownRunDigest(tenant_id: string, run_id: string): string {
  return digestOf(['writ.run-unknown.v1', tenant_id, run_id]);
}

export async function persist(
  db: Db,
  p: AuthenticatedPrincipal,
  state: State,
  e: Evaluation,
  now: number,
): Promise<void> {
  const receiptInsert = insertReceiptStatements(db, {
    tenant_id: p.tenant_id,
    kind: 'authorization',
    receipt: e.receipt,
    outcome: e.receipt.body.decision,
    principal_id: p.principal_id,
    evidence: {
      tool_contract_sha256: e.receipt.body.tool_contract_sha256,
      grant: e.candidate.grant,
      invocation: e.invocation,
      trusted_state: e.trusted,
      evaluated_at_unix_ms: now,
    },
    created_at_unix_ms: now,
  });
  const [insert] = receiptInsert;
  if (insert === undefined) throw new ApiError('internal', 'no receipt statement');
  if (e.receipt.body.decision !== 'authorized') {
    await insert.run();
    return;
  }
  const t = p.tenant_id;
  const contractSha = e.receipt.body.tool_contract_sha256;
  // Guards: each touches its row only if it was revoked or quarantined meanwhile, and the
  // "final" triggers then abort the batch (a revocation that committed first always wins).
  const guards: BatchItem<'sqlite'>[] = [
    db
      .update(contracts)
      .set({ quarantined_at_unix_ms: sql`${contracts.quarantined_at_unix_ms}` })
      .where(
        and(
          eq(contracts.tenant_id, t),
          eq(contracts.tool_contract_sha256, contractSha),
          isNotNull(contracts.quarantined_at_unix_ms),
        ),
      ),
    db
      .update(principals)
      .set({ revoked_at_unix_ms: sql`${principals.revoked_at_unix_ms}` })
      .where(
        and(
          eq(principals.tenant_id, t),
          eq(principals.principal_id, p.principal_id),
          isNotNull(principals.revoked_at_unix_ms),
        ),
      ),
  ];
  if (e.candidate.stored) {
    guards.push(
      db
        .update(grants)
        .set({ revoked_at_unix_ms: sql`${grants.revoked_at_unix_ms}` })
        .where(
          and(
            eq(grants.tenant_id, t),
            eq(grants.grant_id, e.candidate.grant.grant_id),
            isNotNull(grants.revoked_at_unix_ms),
          ),
        ),
    );
  }
  const effects: BatchItem<'sqlite'>[] = [];
  const approval = e.invocation.approval;
  if (approval !== null) {
    // Single use: the trigger aborts unless the approval is still `approved`.
    effects.push(
      db
        .update(approvals)
        .set({ status: 'consumed', consumed_at_unix_ms: now, consumed_by_receipt_sha256: e.receipt.sha256 })
        .where(and(eq(approvals.tenant_id, t), eq(approvals.approval_id, approval.approval_id))),
    );
  }
  const run = state.run;
  if (run === undefined) throw new ApiError('internal', 'authorized without a run');
  const isWrite = WRITE_EFFECTS.has(e.receipt.body.effect) ? 1 : 0;
  // The budget trigger aborts if a concurrent authorization spent the last call or write.
  effects.push(
    db
      .update(runs)
      .set({
        calls_used: sql`${runs.calls_used} + 1`,
        writes_used: sql`${runs.writes_used} + ${isWrite}`,
      })
      .where(and(eq(runs.tenant_id, t), eq(runs.run_id, run.run_id))),
  );
  await db.batch([insert, ...guards, ...effects]);
}
