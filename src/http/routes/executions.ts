/**
 * `POST /v1/executions/claim` and `POST /v1/executions/report` (executor): dispatch one authorized
 * call at most once, and record what its execution proves (spec ch. 11, "Idempotency is a
 * logical-operation contract", "Verify the effect, not only the response").
 *
 * Guarantees:
 * - a claim names a stored authorization receipt of the caller's tenant whose body hashes to its
 *   identity; a denied, expired, revoked or other executor's receipt is refused (403) before the
 *   operation is touched;
 * - the operation's Durable Object decides: exactly one claim ever proceeds, with a fencing token;
 *   the same input replays the stored outcome; another input under the same key is 422
 *   `idempotency_key_reused` whatever the state, and the answer carries nothing of the other input;
 * - a report is verified by the pure core against the operation's own contract and authorization,
 *   and recorded only with the current owner's fencing token, inside its lease (409
 *   `stale_fencing_token` otherwise); the operation's object stores the receipt and mirrors it
 *   into D1.
 * Never: trusts a receipt digest it did not recompute, takes tenant, principal, time or the
 *   authorization from the body, or hands out a second `proceed` for an operation whose owner may
 *   have crashed after the effect (that is reconciliation, `POST /v1/reconciliations`).
 */
import { and, eq, sql } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import {
  type ClaimResult,
  type OperationSnapshot,
  operationStub,
} from '../../../durable-objects/idempotency.js';
import { digestOf } from '../../core/canonical/canonical.js';
import type { FieldIssue } from '../../core/errors.js';
import { verifyExecution } from '../../core/execution/execution.js';
import {
  type DispatchRefusal,
  FencingToken,
  type OperationKey,
  dispatchRefusal,
  leaseMs,
  operationId,
} from '../../core/execution/idempotency.js';
import { AuthorizationReceipt, type ExecutionReceipt, ToolExecutionObservation } from '../../core/model.js';
import type { TenantPolicy } from '../../core/policy.js';
import { Sha256 } from '../../core/schema.js';
import { type Db, database } from '../../db/client.js';
import { StoredDocumentError } from '../../db/documents.js';
import {
  contractQuery,
  currentPolicy,
  currentPolicyQuery,
  grantCache,
  type PinnedContract,
  policyCache,
  toPinnedContract,
  toPolicyInForce,
} from '../../db/queries.js';
import { getReceipt } from '../../db/receipts.js';
import { approvals, grants, operations, policies, principals } from '../../db/schema.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, fromCoreError, notFound } from '../errors.js';

const DISPATCH_MESSAGES: Record<DispatchRefusal, string> = {
  authorization_denied: 'the authorization receipt is a denial',
  authorization_expired: 'the authorization receipt is past its dispatch deadline, grant or approval expiry',
  authorization_revoked: 'the grant, contract, principal or policy changed since the authorization',
  executor_mismatch: 'the contract names another executor release',
};

// ---------------------------------------------------------------------------------------------
// Shared lookups (tenant-filtered; every stored receipt is re-hashed before it is believed)

/** The tenant's authorization receipt, verified, or null (also for another kind or tenant). */
export async function loadAuthorizationReceipt(
  db: Db,
  tenant_id: string,
  sha256: string,
): Promise<AuthorizationReceipt | null> {
  const stored = await getReceipt(db, tenant_id, sha256);
  if (stored === null || stored.kind !== 'authorization') return null;
  const parsed = AuthorizationReceipt.safeParse(stored.receipt);
  // A stored receipt that does not parse or hash to its key is corruption: fail closed (500).
  if (
    !parsed.success ||
    parsed.data.sha256 !== sha256 ||
    digestOf(parsed.data.body) !== sha256 ||
    parsed.data.body.tenant_id !== tenant_id
  ) {
    throw new StoredDocumentError('stored authorization receipt does not verify');
  }
  return parsed.data;
}

/** The tenant's index row for an operation, or null. A malformed id names nothing. */
export async function findOperationRow(db: Db, tenant_id: string, operation_id: string) {
  if (!Sha256.safeParse(operation_id).success) return null;
  const row = await db
    .select()
    .from(operations)
    .where(and(eq(operations.tenant_id, tenant_id), eq(operations.operation_id, operation_id)))
    .get();
  return row ?? null;
}

/** Everything a report or reconciliation checks an observation against, from trusted storage. */
export interface OperationContext {
  readonly authorization: AuthorizationReceipt;
  readonly pinned: PinnedContract;
  readonly policy: TenantPolicy;
}

export async function loadOperationContext(
  db: Db,
  tenant_id: string,
  row: { authorization_receipt_sha256: string; tool_contract_sha256: string },
): Promise<OperationContext> {
  const [authorization, contractRow, policy] = await Promise.all([
    loadAuthorizationReceipt(db, tenant_id, row.authorization_receipt_sha256),
    contractQuery(db, tenant_id, row.tool_contract_sha256).get(),
    currentPolicy(db, tenant_id),
  ]);
  // An operation exists only for a stored receipt and pinned contract; anything else is corruption.
  if (authorization === null || contractRow === undefined) {
    throw new StoredDocumentError('operation refers to a missing receipt or contract');
  }
  return { authorization, pinned: toPinnedContract(contractRow), policy: policy.policy };
}

/** 403 `executor_mismatch` unless the principal runs the contract's executor release. */
export function requireExecutorOf(principal: AppEnv['Variables']['principal'], pinned: PinnedContract): void {
  if (
    principal.executor_release === null ||
    principal.executor_release !== pinned.contract.executor_release
  ) {
    throw new ApiError('executor_mismatch', DISPATCH_MESSAGES.executor_mismatch);
  }
}

/**
 * An observation dated in the future (beyond the policy's clock skew) or older than the policy
 * accepts did not come from this execution as reported: 400, nothing recorded.
 */
export function checkObservationTime(o: ToolExecutionObservation, policy: TenantPolicy, now: number): void {
  const issues: FieldIssue[] = [];
  if (o.completed_at_unix_ms > now + policy.observation_limits.max_clock_skew_ms) {
    issues.push({ path: 'observation.completed_at_unix_ms', message: 'is in the future' });
  }
  if (now - o.completed_at_unix_ms > policy.observation_max_age_ms) {
    issues.push({ path: 'observation.completed_at_unix_ms', message: 'is older than the policy accepts' });
  }
  if (issues.length > 0) throw new ApiError('invalid_observation', 'observation is not valid', issues);
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
// Routes

const ClaimBody = z.strictObject({ authorization_receipt_sha256: Sha256 });
const ReportBody = z.strictObject({
  operation_id: Sha256,
  fencing_token: FencingToken,
  observation: ToolExecutionObservation,
});

export const executionRoutes = new Hono<AppEnv>();

executionRoutes.post('/executions/claim', requireRole('executor'), async (c) => {
  const body = await readJson(c, ClaimBody);
  const p = c.var.principal;
  const t = p.tenant_id;
  const now = c.var.now;
  const db = database(c.env);

  const authorization = await loadAuthorizationReceipt(db, t, body.authorization_receipt_sha256);
  if (authorization === null) throw notFound('authorization receipt');
  const a = authorization.body;
  const [contractRows, policyRows, receiptPolicyRows, grantRows, approvalRows, principalRows] =
    await db.batch([
      contractQuery(db, t, a.tool_contract_sha256),
      currentPolicyQuery(db, t),
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
  if (contractRow === undefined || receiptPolicyRow === undefined) {
    throw new StoredDocumentError('authorization receipt refers to a missing contract or policy');
  }
  const pinned = toPinnedContract(contractRow);
  const inForce = toPolicyInForce(policyRows[0]);
  const receiptPolicy = policyCache.get(a.policy_sha256, receiptPolicyRow.document);
  const grantRow = grantRows[0];
  const grant = grantRow === undefined ? null : grantCache.get(grantRow.grant_sha256, grantRow.document);
  const approvalRow = approvalRows[0];
  const agentRow = principalRows[0];

  const refusal = dispatchRefusal(
    {
      receipt: a,
      authorization_max_dispatch_ms: receiptPolicy.authorization_max_dispatch_ms,
      current_policy_sha256: inForce.policy_sha256,
      // An authorized receipt whose grant row is gone cannot be re-checked: treat it as revoked.
      grant_expires_at_unix_ms: grant?.expires_at_unix_ms ?? Number.MAX_SAFE_INTEGER,
      grant_revoked: grantRow === undefined || grantRow.revoked_at_unix_ms !== null,
      approval_expires_at_unix_ms:
        a.approval_id === null ? null : (approvalRow?.expires_at_unix_ms ?? Number.MIN_SAFE_INTEGER),
      contract_quarantined: pinned.quarantined_at_unix_ms !== null,
      // The authorized agent's row gone is as good as revoked.
      principal_revoked: agentRow === undefined || agentRow.revoked_at_unix_ms !== null,
      contract_executor_release: pinned.contract.executor_release,
      executor_release: p.executor_release,
    },
    now,
  );
  c.set('log', { ...c.var.log, authorization_receipt_sha256: authorization.sha256 });
  if (refusal !== null) throw new ApiError(refusal, DISPATCH_MESSAGES[refusal]);

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
  const operation_id = operationId(t, a.tool_contract_sha256, key);
  c.set('log', { ...c.var.log, operation_id });

  const result: ClaimResult = await operationStub(c.env, operation_id).claim({
    operation_id,
    tenant_id: t,
    tool_contract_sha256: a.tool_contract_sha256,
    idempotency_key: key.kind === 'idempotency_key' ? key.idempotency_key : null,
    input_sha256: a.input_sha256,
    authorization_receipt_sha256: authorization.sha256,
    principal_id: p.principal_id,
    lease_ms: leaseMs(contract),
    reconciliation_owner: inForce.policy.reconciliation.owner,
    reconciliation_window_ms: inForce.policy.reconciliation.deadline_ms,
    now,
  });
  c.set('log', { ...c.var.log, claim: result.outcome === 'refused' ? result.reason : result.outcome });
  switch (result.outcome) {
    case 'proceed':
      return c.json({
        status: 'proceed',
        operation_id,
        fencing_token: result.fencing_token,
        lease_expires_at_unix_ms: result.lease_expires_at_unix_ms,
        operation: result.operation,
      });
    case 'replay':
      return c.json({ status: 'replayed', operation_id, ...snapshotBody(result) });
    case 'refused':
      switch (result.reason) {
        case 'idempotency_key_reused':
          // The reason only: neither the other input's digest nor how far its operation got.
          throw new ApiError(
            'idempotency_key_reused',
            'this idempotency key was already used for a different input; use a new key',
          );
        case 'in_progress': {
          const lease = result.operation?.lease_expires_at_unix_ms ?? now;
          throw new ApiError(
            'in_progress',
            'another executor holds this operation',
            [],
            Math.max(1, Math.ceil((lease - now) / 1000)),
          );
        }
        case 'reconciliation_required':
          throw new ApiError(
            'reconciliation_required',
            'the outcome of this operation is unknown; it must be reconciled, not retried',
          );
      }
  }
});

executionRoutes.post('/executions/report', requireRole('executor'), async (c) => {
  const body = await readJson(c, ReportBody);
  const p = c.var.principal;
  const t = p.tenant_id;
  const now = c.var.now;
  const db = database(c.env);
  c.set('log', { ...c.var.log, operation_id: body.operation_id });

  const row = await findOperationRow(db, t, body.operation_id);
  if (row === null) throw notFound('operation');
  const ctx = await loadOperationContext(db, t, row);
  requireExecutorOf(p, ctx.pinned);
  checkObservationTime(body.observation, ctx.policy, now);

  const verified = verifyExecution(ctx.pinned.contract, ctx.authorization, body.observation);
  if (!verified.ok) throw fromCoreError(verified.error);
  const receipt: ExecutionReceipt = verified.value;
  c.set('log', { ...c.var.log, execution_receipt_sha256: receipt.sha256, status: receipt.body.status });

  const result = await operationStub(c.env, body.operation_id).report({
    tenant_id: t,
    principal_id: p.principal_id,
    fencing_token: body.fencing_token,
    execution_receipt: receipt,
    observation: body.observation,
    now,
  });
  if (result.outcome === 'refused') {
    if (result.reason === 'not_found') throw notFound('operation');
    throw new ApiError('stale_fencing_token', 'this fencing token no longer holds the operation');
  }
  const stored = result.execution_receipt ?? receipt;
  // A rejection is a receipted outcome, answered like a denial: 403 with the receipt.
  return c.json(
    { status: stored.body.status, violations: stored.body.violations, ...snapshotBody(result) },
    stored.body.status === 'rejected' ? 403 : 200,
  );
});
