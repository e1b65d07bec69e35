/**
 * The client's executor helpers against the Worker: a denial is a value, an indeterminate report
 * leaves the operation to reconciliation, the owner settles it from what it observed of the
 * target, and the operation then replays.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { createWritClient } from '../../../src/client/index.js';
import { BASE, ROLLBACK_INPUT, approvedApproval, seedTenant } from '../platform/harness.js';

const fetch = (request: Request) => exports.default.fetch(request);

describe('client executor helpers against the Worker', () => {
  it('denied as a value; indeterminate, then reconciled by the owner from the target; then replayed', async () => {
    const s = await seedTenant('exec');
    const as = (key: string) => createWritClient({ baseUrl: BASE, key, fetch });
    const agent = as(s.agent.api_key);
    const executor = as(s.executor.api_key);
    const admin = as(s.admin.api_key);
    const run = await agent.openRun({ max_calls: 5, max_external_writes: 2, max_duration_ms: 600_000 });
    const body = {
      tool_contract_sha256: s.rollback_contract_sha256,
      input: ROLLBACK_INPUT,
      idempotency_key: 'client-exec-0001',
      run_id: run.run_id,
    };

    const denied = await agent.authorize(body);
    expect([denied.decision, denied.violations]).toEqual(['denied', ['approval_missing']]);

    const auth = await agent.authorize({ ...body, approval_id: await approvedApproval(s) });
    expect(auth.decision).toBe('authorized');
    const claim = await executor.claim(auth.receipt.sha256);
    if (claim.status !== 'proceed') throw new Error(claim.status);
    const start = Math.max(Date.now(), Number(claim.operation.created_at_unix_ms));
    const evidence = {
      authorization: auth.receipt,
      executor_release: 'rollback-executor 1.4.2',
      started_at_unix_ms: start,
      completed_at_unix_ms: start,
      before_state_sha256: 'b'.repeat(64),
    };
    const lost = await executor.report({
      ...evidence,
      claim,
      observation_id: 'obs-exec-lost',
      outcome: 'indeterminate',
      output: null,
      effect_id: null,
      after_state_sha256: null,
    });
    expect(lost.status).toBe('indeterminate');
    expect(lost.operation.status).toBe('reconciliation_required');
    await expect(executor.claim(auth.receipt.sha256)).rejects.toMatchObject({
      status: 409,
      code: 'reconciliation_required',
    });

    const settled = await admin.reconcileFromTarget({
      ...evidence,
      completed_at_unix_ms: Math.max(Date.now(), start),
      operation_id: claim.operation_id,
      observation_id: 'obs-exec-target',
      outcome: 'succeeded',
      output: '{"revision":"v41"}',
      effect_id: 'deploy-api-rollback-42',
      after_state_sha256: 'c'.repeat(64),
    });
    expect(settled.status).toBe('verified_succeeded');
    expect(settled.operation.status).toBe('reconciled_succeeded');
    const replayed = await executor.claim(auth.receipt.sha256);
    expect(replayed.status).toBe('replayed');
  });

  it('observeError records the diagnostics of a verified no-effect failure', async () => {
    const s = await seedTenant('exec-err');
    const as = (key: string) => createWritClient({ baseUrl: BASE, key, fetch });
    const agent = as(s.agent.api_key);
    const executor = as(s.executor.api_key);
    const run = await agent.openRun({ max_calls: 5, max_external_writes: 2, max_duration_ms: 600_000 });
    const auth = await agent.authorize({
      tool_contract_sha256: s.rollback_contract_sha256,
      input: ROLLBACK_INPUT,
      idempotency_key: 'client-exec-err-0001',
      run_id: run.run_id,
      approval_id: await approvedApproval(s),
    });
    expect(auth.decision).toBe('authorized');
    const claim = await executor.claim(auth.receipt.sha256);
    if (claim.status !== 'proceed') throw new Error(claim.status);
    const start = Math.max(Date.now(), Number(claim.operation.created_at_unix_ms));
    const detail = '{"error":"conflict"}';
    const failed = await executor.report({
      claim,
      authorization: auth.receipt,
      executor_release: 'rollback-executor 1.4.2',
      observation_id: 'obs-exec-failed',
      outcome: 'failed_no_effect',
      started_at_unix_ms: start,
      completed_at_unix_ms: start,
      output: detail,
      effect_id: null,
      before_state_sha256: 'b'.repeat(64),
      after_state_sha256: null,
    });
    expect(failed.status).toBe('verified_failed_no_effect');
    if (failed.execution_receipt === null) throw new Error('no execution receipt');
    const diagnostic = await executor.observeError({
      execution_receipt: failed.execution_receipt,
      authorization: auth.receipt,
      observation_id: 'obs-exec-failed-detail',
      source_release: 'deploy-api 2026.11.3',
      error_code: 'conflict',
      media_type: 'application/json',
      detail,
      observed_at_unix_ms: start,
    });
    expect(diagnostic).toMatchObject({ decision: 'accepted_error_diagnostic', violations: [] });
    expect(diagnostic.receipt.body).toMatchObject({
      receipt_kind: 'error_observation',
      error_code: 'conflict',
    });
  });
});
