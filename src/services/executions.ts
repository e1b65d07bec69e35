/**
 * Claim, report and reconcile: dispatch one authorized call at most once, record what its
 * execution proves, and settle an unknown outcome (spec ch. 11, "Idempotency is a
 * logical-operation contract", "Verify the effect, not only the response").
 *
 * Guarantees:
 * - a claim names a stored authorization receipt of the caller's tenant whose body hashes to its
 *   identity; a denied, expired, revoked or other executor's receipt is refused before the
 *   operation is touched;
 * - the operation's Durable Object decides: exactly one claim ever proceeds, with a fencing token;
 *   the same input replays the stored outcome; another input under the same key is
 *   `idempotency_key_reused` whatever the state, and the answer carries nothing of the other input;
 * - a report is verified by the pure core against the operation's own contract and authorization,
 *   and recorded only with the current owner's fencing token, inside its lease; the operation's
 *   object stores the receipt and mirrors it into D1;
 * - one logical operation per (tenant, tool, key): an operation under another contract of the
 *   same tool, or an object named before v2 (by contract), is never bypassed;
 * - a report or reconciliation finds its operation in the object itself (not the D1 index), and
 *   a report of an execution that started before the claim is refused;
 * - a reconciliation is verified by the core; a still-indeterminate or violating observation is
 *   refused with every violation and changes nothing; an operation resolves once, and only by
 *   the reconciliation owner the policy named, never as "no effect" by the principal that claimed.
 * Never: trusts a receipt digest it did not recompute, takes tenant, principal, time or the
 *   authorization from the body, or hands out a second `proceed` for an operation whose owner may
 *   have crashed after the effect (that is reconciliation).
 */
import { z } from 'zod';
import { digestOf } from '../core/canonical/canonical.js';
import type { FieldIssue } from '../core/errors.js';
import { verifyExecution } from '../core/execution/execution.js';
import {
  type ClaimRefusal,
  type DispatchRefusal,
  FencingToken,
  type OperationKey,
  OperationStatus,
  UNRESOLVED_STATUSES,
  type OperationView,
  dispatchRefusal,
  leaseMs,
  legacyKeyClaim,
  operationId,
  startedBeforeClaim,
} from '../core/execution/idempotency.js';
import { reconcileOperation } from '../core/execution/reconciliation.js';
import { AuthorizationReceipt, type ExecutionReceipt, ToolExecutionObservation } from '../core/model.js';
import { type TenantPolicy, isReconciliationOwner } from '../core/policy.js';
import { Identifier, Sha256, UnixMs } from '../core/schema.js';
import { StoredDocumentError } from '../db/documents.js';
import { SINGLE_USE_INDEX_PREFIX } from '../db/operation-index.js';
import { type Caller, type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { ServiceError, notFound, unwrap } from './errors.js';
import { DEFAULT_PAGE_SIZE, PageQuery, decodeCursor, page } from './pagination.js';
import type { OperationSnapshot } from './operations.js';
import { OPEN_OPERATION_STATES, type OperationRow, type PinnedContract, type TenantStore } from './ports.js';

export const ClaimBody = z.strictObject({ authorization_receipt_sha256: Sha256 });
export type ClaimBody = z.infer<typeof ClaimBody>;
export const ReportBody = z.strictObject({
  operation_id: Sha256,
  fencing_token: FencingToken,
  observation: ToolExecutionObservation,
});
export type ReportBody = z.infer<typeof ReportBody>;
export const ReconcileBody = z.strictObject({ operation_id: Sha256, observation: ToolExecutionObservation });
export type ReconcileBody = z.infer<typeof ReconcileBody>;

export const OperationListQuery = z.strictObject({
  status: OperationStatus.optional(),
  limit: z
    .string()
    .regex(/^[1-9][0-9]{0,2}$/, 'must be an integer from 1 to 100')
    .transform(Number)
    .pipe(z.number().int().min(1).max(100))
    .optional(),
  cursor: PageQuery.cursor,
});
export type OperationListQuery = z.infer<typeof OperationListQuery>;

const DISPATCH_MESSAGES: Record<DispatchRefusal, string> = {
  authorization_denied: 'the authorization receipt is a denial',
  authorization_expired: 'the authorization receipt is past its dispatch deadline, grant or approval expiry',
  authorization_revoked: 'the grant, contract, agent, approver or policy changed since the authorization',
  executor_mismatch: 'the contract names another executor release',
};

// ---------------------------------------------------------------------------------------------
// Shared lookups (tenant-scoped; every stored receipt is re-hashed before it is believed)

/** The tenant's authorization receipt, verified, or null (also for another kind or tenant). */
export async function loadAuthorizationReceipt(
  store: TenantStore,
  sha256: string,
): Promise<AuthorizationReceipt | null> {
  const stored = await store.getReceipt(sha256);
  if (stored === null || stored.kind !== 'authorization') return null;
  const parsed = AuthorizationReceipt.safeParse(stored.receipt);
  // A stored receipt that does not parse or hash to its key is corruption: fail closed (500).
  if (!parsed.success || parsed.data.sha256 !== sha256 || digestOf(parsed.data.body) !== sha256) {
    throw new StoredDocumentError('stored authorization receipt does not verify');
  }
  // Version 1 denials recorded the tenant a body named; such a receipt is still this tenant's
  // (it is stored under it) and still a denial: the claim refuses it (403), it is no corruption.
  // An authorization naming another tenant cannot exist: that is corruption.
  if (parsed.data.body.tenant_id !== store.tenant_id && parsed.data.body.decision !== 'denied') {
    throw new StoredDocumentError('stored authorization receipt names another tenant');
  }
  return parsed.data;
}

/** The tenant's index row for an operation, or null. A malformed id names nothing. */
async function findOperationRow(store: TenantStore, operation_id: string): Promise<OperationRow | null> {
  if (!Sha256.safeParse(operation_id).success) return null;
  return store.getOperation(operation_id);
}

/**
 * The operation as its object holds it, or null (none, or another tenant's: indistinguishable).
 * Report and reconcile ask the object, not the D1 index, so an index write that failed after a
 * claim never hides the operation from its owner. An object that holds nothing answers null and
 * stays empty (it writes no storage on a read), so a guessed id costs one empty lookup and
 * reveals nothing; the id is a SHA-256 that binds the tenant, so another tenant's cannot be named
 * by accident.
 */
async function findOperation(ctx: TenantContext, operation_id: string): Promise<OperationSnapshot | null> {
  if (!Sha256.safeParse(operation_id).success) return null;
  return ctx.operations.read(operation_id, ctx.caller.tenant_id);
}

/** Everything a report or reconciliation checks an observation against, from trusted storage. */
interface OperationContext {
  readonly authorization: AuthorizationReceipt;
  readonly pinned: PinnedContract;
  readonly policy: TenantPolicy;
}

async function loadOperationContext(store: TenantStore, op: OperationView): Promise<OperationContext> {
  const [authorization, pinned, policy] = await Promise.all([
    loadAuthorizationReceipt(store, op.authorization_receipt_sha256),
    store.getContract(op.tool_contract_sha256),
    store.currentPolicy(),
  ]);
  // An operation exists only for a stored receipt and pinned contract; anything else is corruption.
  if (authorization === null || pinned === null) {
    throw new StoredDocumentError('operation refers to a missing receipt or contract');
  }
  return { authorization, pinned, policy: policy.policy };
}

/**
 * An unresolved attempt of the same logical operation (tenant, tool, key) under any contract of
 * the tool, or null: what an approver of a call with this key should see before approving, since
 * the earlier attempt may already have had its effect. Read from the D1 index (it may lag the
 * objects by an index retry); a pending row whose lease ran out is still listed as `pending`.
 * For the approval view (src/services/approvals.ts); nothing here approves or refuses.
 */
export async function unresolvedAttemptFor(
  store: TenantStore,
  tool_name: string,
  idempotency_key: string,
): Promise<{
  readonly operation_id: string;
  readonly status: string;
  readonly tool_contract_sha256: string;
  readonly input_sha256: string;
  readonly reconciliation_deadline_unix_ms: number | null;
  readonly escalated_at_unix_ms: number | null;
} | null> {
  const rows = await store.operationsForKey(tool_name, idempotency_key);
  const open = rows.find((r) => (OPEN_OPERATION_STATES as readonly string[]).includes(r.state));
  if (open === undefined) return null;
  return {
    operation_id: open.operation_id,
    status: open.state,
    tool_contract_sha256: open.tool_contract_sha256,
    input_sha256: open.input_sha256,
    reconciliation_deadline_unix_ms: open.reconciliation_deadline_unix_ms,
    escalated_at_unix_ms: open.escalated_at_unix_ms,
  };
}

/** At most this many same-input attempts are shown beside an approval request. */
export const SAME_INPUT_ATTEMPTS_SHOWN = 5;

/**
 * Open operations of the same tool and the same input digest as an approval request, under any
 * idempotency key (or none on the request): an agent that retried an indeterminate call under a
 * new key asks approval for what may already have happened. Most recently updated first, at most
 * `SAME_INPUT_ATTEMPTS_SHOWN + 1` (so one may be left out by the caller and as many remain).
 */
export async function openAttemptsOfInput(
  store: TenantStore,
  tool_name: string,
  input_sha256: string,
): Promise<
  {
    readonly operation_id: string;
    readonly status: string;
    readonly tool_contract_sha256: string;
    readonly idempotency_key: string;
    readonly reconciliation_deadline_unix_ms: number | null;
    readonly escalated_at_unix_ms: number | null;
    readonly updated_at_unix_ms: number;
  }[]
> {
  const rows = await store.openOperationsOfInput(tool_name, input_sha256, SAME_INPUT_ATTEMPTS_SHOWN + 1);
  return rows.map((r) => ({
    operation_id: r.operation_id,
    status: r.state,
    tool_contract_sha256: r.tool_contract_sha256,
    idempotency_key: r.idempotency_key,
    reconciliation_deadline_unix_ms: r.reconciliation_deadline_unix_ms,
    escalated_at_unix_ms: r.escalated_at_unix_ms,
    updated_at_unix_ms: r.updated_at_unix_ms,
  }));
}

/** `executor_mismatch` unless the caller runs the contract's executor release. */
export function requireExecutorOf(caller: Caller, pinned: PinnedContract): void {
  if (caller.executor_release === null || caller.executor_release !== pinned.contract.executor_release) {
    throw new ServiceError('executor_mismatch', DISPATCH_MESSAGES.executor_mismatch);
  }
}

/**
 * An observation dated in the future (beyond the policy's clock skew) or older than the policy
 * accepts did not come from this execution as reported: refused, nothing recorded.
 */
function checkObservationTime(o: ToolExecutionObservation, policy: TenantPolicy, now: number): void {
  const issues: FieldIssue[] = [];
  if (o.completed_at_unix_ms > now + policy.observation_limits.max_clock_skew_ms) {
    issues.push({ path: 'observation.completed_at_unix_ms', message: 'is in the future' });
  }
  if (now - o.completed_at_unix_ms > policy.observation_max_age_ms) {
    issues.push({ path: 'observation.completed_at_unix_ms', message: 'is older than the policy accepts' });
  }
  if (issues.length > 0) throw new ServiceError('invalid_observation', 'observation is not valid', issues);
}

/** The wire form of an operation and the receipts it links. */
export function snapshotBody(s: OperationSnapshot) {
  return {
    operation: s.operation,
    execution_receipt: s.execution_receipt,
    reconciliation_receipt: s.reconciliation_receipt,
  };
}

// ---------------------------------------------------------------------------------------------
// Claim

export async function claimExecution(ctx: TenantContext, body: ClaimBody) {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.claim);
  const t = caller.tenant_id;
  const authorization = await loadAuthorizationReceipt(store, body.authorization_receipt_sha256);
  if (authorization === null) throw notFound('authorization receipt');
  const a = authorization.body;
  const d = await store.loadDispatchState(a);
  if (d.contract === null || d.receipt_policy === null) {
    throw new StoredDocumentError('authorization receipt refers to a missing contract or policy');
  }
  const pinned = d.contract;
  const refusal = dispatchRefusal(
    {
      receipt: a,
      authorization_max_dispatch_ms: d.receipt_policy.authorization_max_dispatch_ms,
      current_policy_sha256: d.policy.policy_sha256,
      // An authorized receipt whose grant row is gone cannot be re-checked: treat it as revoked.
      grant_expires_at_unix_ms: d.grant?.grant.expires_at_unix_ms ?? Number.MAX_SAFE_INTEGER,
      grant_revoked: d.grant === null || d.grant.revoked,
      approval_expires_at_unix_ms:
        a.approval_id === null ? null : (d.approval_expires_at_unix_ms ?? Number.MIN_SAFE_INTEGER),
      contract_quarantined: pinned.quarantined_at_unix_ms !== null,
      // The authorized agent's row gone is as good as revoked.
      principal_revoked: d.agent_revoked,
      approver_revoked: d.approver_revoked,
      contract_executor_release: pinned.contract.executor_release,
      executor_release: caller.executor_release,
      audience_principal_id: 'executor_principal_id' in a ? a.executor_principal_id : null,
      executor_principal_id: caller.principal_id,
    },
    now,
  );
  ctx.log({ authorization_receipt_sha256: authorization.sha256 });
  if (refusal !== null) throw new ServiceError(refusal, DISPATCH_MESSAGES[refusal]);

  const contract = pinned.contract;
  let key: OperationKey;
  if (contract.idempotency === 'key_required') {
    // The authorizer denies a keyless call to such a contract; an authorized one without a key is corruption.
    if (a.idempotency_key === null)
      throw new StoredDocumentError('authorized receipt without its idempotency key');
    key = { kind: 'idempotency_key', idempotency_key: a.idempotency_key };
  } else {
    key = { kind: 'authorization', authorization_receipt_sha256: authorization.sha256 };
  }
  const scope = { tool_name: contract.tool_name, tool_contract_sha256: a.tool_contract_sha256 };
  let operation_id = operationId(t, scope, key);
  if (key.kind === 'idempotency_key') {
    // An object named before v2 (by contract digest) may hold this tenant, tool and key: the new
    // name must never bypass it. The index is how it is found (v1 names need the contract).
    const legacy = legacyKeyClaim(d.key_operations, operation_id, {
      tenant_id: t,
      tool_contract_sha256: a.tool_contract_sha256,
      idempotency_key: key.idempotency_key,
      input_sha256: a.input_sha256,
    });
    if (legacy.kind === 'route') operation_id = legacy.operation_id;
    if (legacy.kind === 'refused') {
      ctx.log({ claim: legacy.reason, blocking_operation_id: legacy.operation_id });
      throw claimRefusal(legacy.reason, legacy.operation_id, null, now);
    }
  }
  ctx.log({ operation_id });

  const result = await ctx.operations.claim({
    operation_id,
    tenant_id: t,
    tool_contract_sha256: a.tool_contract_sha256,
    tool_name: contract.tool_name,
    idempotency_key: key.kind === 'idempotency_key' ? key.idempotency_key : null,
    input_sha256: a.input_sha256,
    authorization_receipt_sha256: authorization.sha256,
    principal_id: caller.principal_id,
    lease_ms: leaseMs(contract),
    reconciliation_owner: d.policy.policy.reconciliation.owner,
    reconciliation_window_ms: d.policy.policy.reconciliation.deadline_ms,
    now,
  });
  ctx.log({ claim: result.outcome === 'refused' ? result.reason : result.outcome });
  switch (result.outcome) {
    case 'proceed':
      return {
        status: 'proceed' as const,
        operation_id,
        fencing_token: result.fencing_token,
        lease_expires_at_unix_ms: result.lease_expires_at_unix_ms,
        operation: result.operation,
      };
    case 'replay':
      return { status: 'replayed' as const, operation_id, ...snapshotBody(result) };
    case 'refused':
      throw claimRefusal(
        result.reason,
        result.operation?.operation_id ?? null,
        result.operation?.lease_expires_at_unix_ms ?? null,
        now,
      );
  }
}

/**
 * The error for a refused claim. A blocking operation is named (it may be another contract's, or
 * a v1 object's): the caller reconciles that one. A reused key names nothing of the other input.
 */
function claimRefusal(
  reason: ClaimRefusal,
  blocking: string | null,
  leaseEnd: number | null,
  now: number,
): ServiceError {
  const named = blocking === null ? [] : [{ path: 'operation_id', message: blocking }];
  switch (reason) {
    case 'idempotency_key_reused':
      // The reason only: neither the other input's digest nor how far its operation got.
      return new ServiceError(
        'idempotency_key_reused',
        'this idempotency key was already used for a different input or contract; use a new key',
      );
    case 'in_progress':
      return new ServiceError(
        'in_progress',
        `another executor holds operation ${blocking ?? 'of this key'}`,
        named,
        Math.max(1, Math.ceil(((leaseEnd ?? now) - now) / 1000)),
      );
    case 'reconciliation_required':
      return new ServiceError(
        'reconciliation_required',
        `the outcome of operation ${blocking ?? 'of this key'} is unknown; it must be reconciled, not retried`,
        named,
      );
  }
}

// ---------------------------------------------------------------------------------------------
// Report

export async function reportExecution(ctx: TenantContext, body: ReportBody) {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.report);
  ctx.log({ operation_id: body.operation_id });
  const found = await findOperation(ctx, body.operation_id);
  if (found === null) throw notFound('operation');
  const opCtx = await loadOperationContext(store, found.operation);
  requireExecutorOf(caller, opCtx.pinned);
  checkObservationTime(body.observation, opCtx.policy, now);
  // An effect that started before the claim ran without the operation's fence.
  if (
    startedBeforeClaim(
      found.operation,
      body.observation.started_at_unix_ms,
      opCtx.policy.observation_limits.max_clock_skew_ms,
    )
  ) {
    throw new ServiceError('invalid_observation', 'observation is not valid', [
      { path: 'observation.started_at_unix_ms', message: 'is before the operation was claimed' },
    ]);
  }

  const receipt: ExecutionReceipt = unwrap(
    verifyExecution(opCtx.pinned.contract, opCtx.authorization, body.observation),
  );
  ctx.log({ execution_receipt_sha256: receipt.sha256, status: receipt.body.status });

  const result = await ctx.operations.report(body.operation_id, {
    tenant_id: caller.tenant_id,
    principal_id: caller.principal_id,
    fencing_token: body.fencing_token,
    execution_receipt: receipt,
    observation: body.observation,
    now,
  });
  if (result.outcome === 'refused') {
    if (result.reason === 'not_found') throw notFound('operation');
    throw new ServiceError('stale_fencing_token', 'this fencing token no longer holds the operation');
  }
  const stored = result.execution_receipt ?? receipt;
  return {
    status: stored.body.status,
    violations: stored.body.violations,
    rejected: stored.body.status === 'rejected',
    ...snapshotBody(result),
  };
}

// ---------------------------------------------------------------------------------------------
// Reconcile

export async function reconcileExecution(ctx: TenantContext, body: ReconcileBody) {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.reconcile);
  ctx.log({ operation_id: body.operation_id });
  const snapshot = await findOperation(ctx, body.operation_id);
  if (snapshot === null) throw notFound('operation');
  // Only the owner the policy named when the operation was claimed settles it: a false "no
  // effect" from anyone else invites a second write.
  if (!isReconciliationOwner(snapshot.operation.reconciliation_owner, caller)) {
    throw new ServiceError(
      'not_reconciliation_owner',
      'only the reconciliation owner named by the policy may reconcile this operation',
    );
  }
  const opCtx = await loadOperationContext(store, snapshot.operation);
  // An executor observes the target with its own release; an admin relays such an observation.
  if (!caller.roles.includes('tenant_admin')) requireExecutorOf(caller, opCtx.pinned);

  const done = snapshot.reconciliation_receipt;
  // A retry whose answer was lost gets the resolution it made, not a conflict.
  if (done !== null && done.body.target_observation_sha256 === digestOf(body.observation)) {
    return { status: done.body.resolution, recorded: false, ...snapshotBody(snapshot) };
  }
  const state = snapshot.operation;
  const lapsed = state.status === 'pending' && now >= state.lease_expires_at_unix_ms;
  if (done !== null || !(UNRESOLVED_STATUSES.has(state.status) || lapsed)) {
    throw new ServiceError(
      'not_reconcilable',
      `operation is ${state.status}; only an unresolved operation is reconciled`,
    );
  }

  const outcome = unwrap(
    reconcileOperation({
      contract: opCtx.pinned.contract,
      authorization: opCtx.authorization,
      operation_id: body.operation_id,
      original: snapshot.execution_receipt,
      observation: body.observation,
      reconciled_by: caller.principal_id,
      now,
      max_clock_skew_ms: opCtx.policy.observation_limits.max_clock_skew_ms,
    }),
  );
  if (!outcome.ok) {
    const violations = outcome.refusal.violations;
    ctx.log({ violations: violations.join(',') });
    throw new ServiceError(
      'reconciliation_rejected',
      'the observation does not settle the outcome',
      violations.map((v) => ({ path: 'observation', message: v })),
    );
  }
  const receipt = outcome.receipt;
  // The principal that claimed (and may have performed the effect) cannot alone declare that
  // nothing happened: that claim is what would license a second write.
  if (
    receipt.body.resolution === 'verified_failed_no_effect' &&
    caller.principal_id === snapshot.operation.owner_principal_id
  ) {
    throw new ServiceError(
      'self_reconciliation',
      'the principal that claimed this operation cannot settle it as no effect; another owner must',
    );
  }
  ctx.log({ reconciliation_receipt_sha256: receipt.sha256 });

  const result = await ctx.operations.reconcile(body.operation_id, {
    tenant_id: caller.tenant_id,
    principal_id: caller.principal_id,
    reconciliation_receipt: receipt,
    observation: body.observation,
    max_clock_skew_ms: opCtx.policy.observation_limits.max_clock_skew_ms,
    now,
  });
  if (result.outcome === 'refused') {
    if (result.reason === 'not_found') throw notFound('operation');
    throw new ServiceError('not_reconcilable', 'the operation changed meanwhile; read it and try again');
  }
  return {
    status: receipt.body.resolution,
    recorded: result.outcome === 'recorded',
    ...snapshotBody(result),
  };
}

// ---------------------------------------------------------------------------------------------
// Operations (read)

/** Newest first; `next_cursor` continues after the last one (src/services/pagination.ts). */
export async function listOperations(ctx: TenantContext, q: OperationListQuery) {
  requireRole(ctx.caller, ROLES_FOR.readOperations);
  const limit = q.limit ?? DEFAULT_PAGE_SIZE;
  const filter = q.status ?? '';
  const after =
    q.cursor === undefined
      ? null
      : decodeCursor(q.cursor, z.tuple([z.literal('operations'), z.literal(filter), UnixMs, Identifier]));
  const rows = await ctx.store.listOperations({
    status: q.status,
    after: after === null ? null : { updated_at_unix_ms: after[2], operation_id: after[3] },
    limit: limit + 1,
  });
  // An operation updated while a client pages moves to the front: it may be seen twice or not
  // at all in that walk (the sort key is its last update); a cursor is a position, not a snapshot.
  const { items, next_cursor } = page(rows, limit, (r) => [
    'operations',
    filter,
    r.updated_at_unix_ms,
    r.operation_id,
  ]);
  return {
    next_cursor,
    operations: items.map((r) => ({
      operation_id: r.operation_id,
      status: r.state,
      tool_contract_sha256: r.tool_contract_sha256,
      // A single-use operation's index key is not a client key.
      idempotency_key: r.idempotency_key.startsWith(SINGLE_USE_INDEX_PREFIX) ? null : r.idempotency_key,
      input_sha256: r.input_sha256,
      authorization_receipt_sha256: r.authorization_receipt_sha256,
      execution_receipt_sha256: r.execution_receipt_sha256,
      reconciliation_owner: r.reconciliation_owner,
      reconciliation_deadline_unix_ms: r.reconciliation_deadline_unix_ms,
      escalated_at_unix_ms: r.escalated_at_unix_ms,
      updated_at_unix_ms: r.updated_at_unix_ms,
    })),
  };
}

/**
 * A single operation, read from its Durable Object (the source of truth) once the tenant's D1
 * index has shown it exists, so a guessed id never instantiates an object.
 */
export async function getOperation(ctx: TenantContext, operation_id: string) {
  requireRole(ctx.caller, ROLES_FOR.readOperations);
  const row = await findOperationRow(ctx.store, operation_id);
  if (row === null) throw notFound('operation');
  const snapshot = await ctx.operations.read(operation_id, ctx.caller.tenant_id);
  if (snapshot === null) throw notFound('operation');
  return snapshotBody(snapshot);
}
