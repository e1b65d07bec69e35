/**
 * An irreversible call approved by two people ends with either of them: revoking the FIRST
 * approver after the authorization stops the executor's claim (403 `authorization_revoked`), as
 * revoking the second one does (issue 14; the claim's dispatch re-check reads both approvers).
 */
import { describe, expect, it } from 'vitest';
import { call, createRun, ROLLBACK_INPUT, uniqueName } from '../platform/harness.js';
import { purgeTenant } from './purge.js';

async function approvedIrreversibleCall() {
  const { s, contract, grant_id, second } = await purgeTenant('first-approver-claim');
  const req = await call('POST', '/v1/approval-requests', {
    key: s.agent.api_key,
    body: { tool_contract_sha256: contract, input: ROLLBACK_INPUT },
  });
  expect(req.status).toBe(201);
  const id = req.body.approval_id as string;
  expect(
    (await call('POST', `/v1/approval-requests/${id}/approve`, { key: s.approver.api_key })).status,
  ).toBe(200);
  const done = await call('POST', `/v1/approval-requests/${id}/approve`, { key: second.api_key });
  expect(done.body.status).toBe('approved');
  const run = await createRun(s);
  const z = await call('POST', '/v1/authorize', {
    key: s.agent.api_key,
    body: {
      tool_contract_sha256: contract,
      input: ROLLBACK_INPUT,
      idempotency_key: `purge-${uniqueName('k')}`,
      run_id: run,
      grant_id,
      approval_id: id,
    },
  });
  expect(z.status).toBe(200);
  return { s, second: second.principal_id, receipt: z.body.receipt.sha256 as string };
}

describe('two approvers of an irreversible call, at claim', () => {
  for (const which of ['first', 'second'] as const) {
    it(`revoking the ${which} approver after the authorization refuses the claim`, async () => {
      const { s, second, receipt } = await approvedIrreversibleCall();
      const revoked = which === 'first' ? s.approver.principal_id : second;
      const r = await call('POST', `/v1/principals/${revoked}/revoke`, { key: s.admin.api_key });
      expect(r.status).toBe(200);
      const claim = await call('POST', '/v1/executions/claim', {
        key: s.executor.api_key,
        body: { authorization_receipt_sha256: receipt },
      });
      expect(claim.status).toBe(403);
      expect(claim.body.error.code).toBe('authorization_revoked');
    });
  }

  it('with both approvers live the claim proceeds', async () => {
    const { s, receipt } = await approvedIrreversibleCall();
    const claim = await call('POST', '/v1/executions/claim', {
      key: s.executor.api_key,
      body: { authorization_receipt_sha256: receipt },
    });
    expect(claim.status).toBe(200);
  });
});
