/**
 * Approval requests: exact canonical input, preview, independent approver, bounded lifetime,
 * single decision.
 */
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import { call, ROLLBACK_INPUT, seedTenant } from './harness.js';

describe('approval requests', () => {
  it('returns the input digest and a preview; the approver sees the exact canonical input', async () => {
    const s = await seedTenant();
    // Key order in the request does not change the digest (RFC 8785).
    const input = { to_version: 'v41', from_version: 'v42', environment: 'production', service: 'api' };
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input },
    });
    expect(r.status).toBe(201);
    expect(r.body.status).toBe('pending');
    expect(r.body.input_sha256).toBe(digestOf(ROLLBACK_INPUT));
    expect(r.body.input_bytes).toBe(new TextEncoder().encode(canonicalize(ROLLBACK_INPUT)).byteLength);
    expect(r.body.preview).toMatchObject({
      tool_name: 'execute_rollback',
      effect: 'external_write',
      reversible: true,
      target: { type: 'deployment', attributes: { environment: 'production', service: 'api' } },
    });
    const list = await call('GET', '/v1/approval-requests?status=pending', { key: s.approver.api_key });
    expect(list.status).toBe(200);
    const item = list.body.items.find((i: { approval_id: string }) => i.approval_id === r.body.approval_id);
    expect(item.input).toEqual(ROLLBACK_INPUT);
    expect(item.requester_principal_id).toBe(s.agent.principal_id);

    const ok = await call('POST', `/v1/approval-requests/${r.body.approval_id}/approve`, {
      key: s.approver.api_key,
    });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe('approved');
    expect(ok.body.approval).toEqual({
      approval_id: r.body.approval_id,
      approver_principal_id: s.approver.principal_id,
      tenant_id: s.tenant_id,
      policy_sha256: s.policy_sha256,
      tool_contract_sha256: s.rollback_contract_sha256,
      input_sha256: digestOf(ROLLBACK_INPUT),
      effect: 'external_write',
      expires_at_unix_ms: expect.any(Number),
    });
    const pending = await call('GET', '/v1/approval-requests', { key: s.approver.api_key });
    expect(pending.body.items.map((i: { approval_id: string }) => i.approval_id)).not.toContain(
      r.body.approval_id,
    );
    const approved = await call('GET', '/v1/approval-requests?status=approved', { key: s.approver.api_key });
    expect(approved.body.items).toHaveLength(1);
    expect(
      (await call('GET', '/v1/approval-requests?status=bogus', { key: s.approver.api_key })).status,
    ).toBe(400);
  });

  it('the requester may not decide its own request', async () => {
    const s = await seedTenant();
    const both = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'both', roles: ['agent', 'approver'] },
    });
    const key = both.body.api_key as string;
    const r = await call('POST', '/v1/approval-requests', {
      key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    const self = await call('POST', `/v1/approval-requests/${r.body.approval_id}/approve`, { key });
    expect(self.status).toBe(403);
    expect(self.body.error.code).toBe('self_approval');
    const selfDeny = await call('POST', `/v1/approval-requests/${r.body.approval_id}/deny`, { key });
    expect(selfDeny.status).toBe(403);
  });

  it('a request is decided once; deny is final', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    const id = r.body.approval_id as string;
    const d = await call('POST', `/v1/approval-requests/${id}/deny`, {
      key: s.approver.api_key,
      body: { reason: 'not now' },
    });
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ status: 'denied', decision_reason: 'not now', approval: null });
    const a = await call('POST', `/v1/approval-requests/${id}/approve`, { key: s.approver.api_key });
    expect(a.status).toBe(409);
    const run = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 1, max_duration_ms: 60_000 },
    });
    const z = await call('POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: ROLLBACK_INPUT,
        idempotency_key: 'rollback-denied-0001',
        approval_id: id,
        run_id: run.body.run_id,
      },
    });
    expect(z.status).toBe(403);
    expect(z.body.violations).toEqual(['approval_unusable']);
  });

  it('concurrent approvals: exactly one decision wins', async () => {
    const s = await seedTenant();
    const second = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'a2', roles: ['approver'] },
    });
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    const id = r.body.approval_id as string;
    const replies = await Promise.all([
      call('POST', `/v1/approval-requests/${id}/approve`, { key: s.approver.api_key }),
      call('POST', `/v1/approval-requests/${id}/deny`, { key: second.body.api_key }),
      call('POST', `/v1/approval-requests/${id}/approve`, { key: second.body.api_key }),
    ]);
    expect(replies.map((x) => x.status).sort()).toEqual([200, 409, 409]);
  });

  it('the lifetime is bounded by the policy', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    const long = await call('POST', `/v1/approval-requests/${r.body.approval_id}/approve`, {
      key: s.approver.api_key,
      body: { expires_in_ms: 16 * 60_000 },
    });
    expect(long.status).toBe(400);
    const ok = await call('POST', `/v1/approval-requests/${r.body.approval_id}/approve`, {
      key: s.approver.api_key,
      body: { expires_in_ms: 60_000 },
    });
    expect(ok.body.expires_at_unix_ms - ok.body.decided_at_unix_ms).toBe(60_000);
  });

  it('validates the request: pinned contract, derived target, size, quarantine, roles', async () => {
    const s = await seedTenant();
    const missing = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: 'd'.repeat(64), input: ROLLBACK_INPUT },
    });
    expect(missing.status).toBe(404);
    const mismatch = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: ROLLBACK_INPUT,
        target: { type: 'deployment', attributes: { environment: 'production', service: 'web' } },
      },
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.code).toBe('target_mismatch');
    const big = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { ...ROLLBACK_INPUT, note: 'x'.repeat(5000) },
      },
    });
    expect(big.status).toBe(400);
    const byApprover = await call('POST', '/v1/approval-requests', {
      key: s.approver.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(byApprover.status).toBe(403);
    const listByAgent = await call('GET', '/v1/approval-requests', { key: s.agent.api_key });
    expect(listByAgent.status).toBe(403);
    await call('POST', `/v1/contracts/${s.rollback_contract_sha256}/quarantine`, { key: s.admin.api_key });
    const quarantined = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(quarantined.status).toBe(409);
    expect(quarantined.body.error.code).toBe('contract_quarantined');
  });

  it('a request whose contract was quarantined after it was made cannot be approved', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(r.status).toBe(201);
    await call('POST', `/v1/contracts/${s.rollback_contract_sha256}/quarantine`, { key: s.admin.api_key });
    const approved = await call('POST', `/v1/approval-requests/${r.body.approval_id}/approve`, {
      key: s.approver.api_key,
    });
    expect(approved.status).toBe(409);
    expect(approved.body.error.code).toBe('contract_quarantined');
    const view = await call('GET', `/v1/approval-requests/${r.body.approval_id}`, {
      key: s.approver.api_key,
    });
    expect(view.body.status).toBe('pending');
  });

  it('an agent reads its own requests only', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(
      (await call('GET', `/v1/approval-requests/${r.body.approval_id}`, { key: s.agent.api_key })).status,
    ).toBe(200);
    const other = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'o', roles: ['agent'] },
    });
    expect(
      (await call('GET', `/v1/approval-requests/${r.body.approval_id}`, { key: other.body.api_key })).status,
    ).toBe(404);
  });
});

describe('runs', () => {
  it('budgets are bounded by the policy and the envelope digest is returned', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 5, max_external_writes: 1, max_duration_ms: 60_000, label: 'rollback api' },
    });
    expect(r.status).toBe(201);
    expect(r.body.run_envelope_sha256).toBe(digestOf(r.body.envelope));
    expect(r.body.envelope).toMatchObject({
      tenant_id: s.tenant_id,
      principal_id: s.agent.principal_id,
      policy_sha256: s.policy_sha256,
      max_calls: 5,
      max_external_writes: 1,
    });
    const over = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 101, max_external_writes: 11, max_duration_ms: 2 * 3_600_000 },
    });
    expect(over.status).toBe(400);
    expect(over.body.error.issues.map((i: { path: string }) => i.path)).toEqual([
      'max_calls',
      'max_external_writes',
      'deadline_unix_ms',
    ]);
    const both = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: {
        max_calls: 1,
        max_external_writes: 0,
        max_duration_ms: 1000,
        deadline_unix_ms: Date.now() + 1000,
      },
    });
    expect(both.status).toBe(400);
    const past = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 0, deadline_unix_ms: 1 },
    });
    expect(past.status).toBe(400);
  });
});
