/**
 * `POST /v1/reconciliations` (executor of the contract's release, or tenant admin): resolve an
 * operation whose outcome is unknown (indeterminate, rejected, or never reported before its lease
 * ran out) with a verified observation of the target (spec ch. 11, "publish a new reconciliation
 * receipt linked to the original").
 *
 * Guarantees: the observation is verified by the pure core against the operation's own contract
 * and authorization receipt; a still-indeterminate or violating observation is refused (422
 * `reconciliation_rejected`, with every violation) and changes nothing; a published reconciliation
 * receipt links the original execution receipt (or null) and the authorization receipt, and
 * neither is ever changed; an operation resolves once, later claims replay the resolution.
 * Never: resolves a pending operation whose owner still holds its lease, or a settled one.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { operationStub } from '../../../durable-objects/idempotency.js';
import { digestOf } from '../../core/canonical/canonical.js';
import { UNRESOLVED_STATUSES } from '../../core/execution/idempotency.js';
import { ToolExecutionObservation } from '../../core/model.js';
import { reconcileOperation } from '../../core/execution/reconciliation.js';
import { Sha256 } from '../../core/schema.js';
import { database } from '../../db/client.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, fromCoreError, notFound } from '../errors.js';
import { findOperationRow, loadOperationContext, requireExecutorOf, snapshotBody } from './executions.js';

const ReconcileBody = z.strictObject({ operation_id: Sha256, observation: ToolExecutionObservation });

export const reconciliationRoutes = new Hono<AppEnv>();

reconciliationRoutes.post('/reconciliations', requireRole('executor', 'tenant_admin'), async (c) => {
  const body = await readJson(c, ReconcileBody);
  const p = c.var.principal;
  const t = p.tenant_id;
  const now = c.var.now;
  const db = database(c.env);
  c.set('log', { ...c.var.log, operation_id: body.operation_id });

  const row = await findOperationRow(db, t, body.operation_id);
  if (row === null) throw notFound('operation');
  const ctx = await loadOperationContext(db, t, row);
  // An executor observes the target with its own release; an admin relays such an observation.
  if (!p.roles.includes('tenant_admin')) requireExecutorOf(p, ctx.pinned);

  const stub = operationStub(c.env, body.operation_id);
  const snapshot = await stub.read(t);
  if (snapshot === null) throw notFound('operation');
  const done = snapshot.reconciliation_receipt;
  // A retry whose answer was lost gets the resolution it made, not a conflict.
  if (done !== null && done.body.target_observation_sha256 === digestOf(body.observation)) {
    return c.json({ status: done.body.resolution, ...snapshotBody(snapshot) });
  }
  const state = snapshot.operation;
  const lapsed = state.status === 'pending' && now >= state.lease_expires_at_unix_ms;
  if (done !== null || !(UNRESOLVED_STATUSES.has(state.status) || lapsed)) {
    throw new ApiError(
      'not_reconcilable',
      `operation is ${state.status}; only an unresolved operation is reconciled`,
    );
  }

  const outcome = reconcileOperation({
    contract: ctx.pinned.contract,
    authorization: ctx.authorization,
    operation_id: body.operation_id,
    original: snapshot.execution_receipt,
    observation: body.observation,
    reconciled_by: p.principal_id,
    now,
    max_clock_skew_ms: ctx.policy.observation_limits.max_clock_skew_ms,
  });
  if (!outcome.ok) throw fromCoreError(outcome.error);
  if (!outcome.value.ok) {
    const violations = outcome.value.refusal.violations;
    c.set('log', { ...c.var.log, violations: violations.join(',') });
    throw new ApiError(
      'reconciliation_rejected',
      'the observation does not settle the outcome',
      violations.map((v) => ({ path: 'observation', message: v })),
    );
  }
  const receipt = outcome.value.receipt;
  c.set('log', { ...c.var.log, reconciliation_receipt_sha256: receipt.sha256 });

  const result = await stub.reconcile({
    tenant_id: t,
    principal_id: p.principal_id,
    reconciliation_receipt: receipt,
    observation: body.observation,
    now,
  });
  if (result.outcome === 'refused') {
    if (result.reason === 'not_found') throw notFound('operation');
    throw new ApiError('not_reconcilable', 'the operation changed meanwhile; read it and try again');
  }
  return c.json(
    { status: receipt.body.resolution, ...snapshotBody(result) },
    result.outcome === 'recorded' ? 201 : 200,
  );
});
