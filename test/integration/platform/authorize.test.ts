/**
 * `POST /v1/authorize` end to end: the rollback scenario, denials as stored receipts, the
 * expired / revoked / quarantined paths, body-named identities, and the single-use and budget
 * races (two concurrent authorizations, one approval: exactly one is authorized).
 */
import { describe, expect, it, vi } from 'vitest';
import {
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  READ_INPUT,
  ROLLBACK_INPUT,
  seedTenant,
  tenantD1,
} from './harness.js';

describe('POST /v1/authorize', () => {
  it('authorizes the approved rollback and binds tenant, principal, policy, contract, input and run', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const r = await authorize(
      s,
      authorizeBody(s, run, { approval_id, idempotency_key: 'rollback-api-v41-0001' }),
    );
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe('authorized');
    expect(r.body.violations).toEqual([]);
    const b = r.body.receipt.body;
    expect(b.tenant_id).toBe(s.tenant_id);
    expect(b.principal_id).toBe(s.agent.principal_id);
    expect(b.policy_sha256).toBe(s.policy_sha256);
    expect(b.tool_contract_sha256).toBe(s.rollback_contract_sha256);
    expect(b.approval_id).toBe(approval_id);
    expect(b.idempotency_key).toBe('rollback-api-v41-0001');
    expect(b.target).toEqual({
      type: 'deployment',
      attributes: { environment: 'production', service: 'api' },
    });
    expect(b.invocation_id).toMatch(/^inv-[a-z2-7]{26}$/);

    // The receipt is stored, replayable, and the approval is consumed by exactly this receipt.
    const stored = await call('GET', `/v1/receipts/${r.body.receipt.sha256}`, { key: s.executor.api_key });
    expect(stored.status).toBe(200);
    expect(stored.body.receipt).toEqual(r.body.receipt);
    expect(stored.body.replay).toEqual({ ok: true, differences: [] });
    expect(JSON.stringify(stored.body.evidence)).not.toContain('from_version');
    const a = await call('GET', `/v1/approval-requests/${approval_id}`, { key: s.approver.api_key });
    expect(a.body.status).toBe('consumed');
    expect(a.body.consumed_by_receipt_sha256).toBe(r.body.receipt.sha256);
    const runAfter = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(runAfter.body).toMatchObject({ calls_used: 1, writes_used: 1 });
  });

  it('authorizes a read-only call without approval or idempotency key', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
    });
    expect(r.status).toBe(200);
    const runAfter = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(runAfter.body).toMatchObject({ calls_used: 1, writes_used: 0 });
  });

  it('denies a write without approval with a stored 403 receipt, and charges nothing', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const r = await authorize(s, authorizeBody(s, run, { idempotency_key: null }));
    expect(r.status).toBe(403);
    expect(r.body.decision).toBe('denied');
    expect(r.body.violations).toEqual(['approval_missing', 'idempotency_key_missing']);
    expect(r.body.receipt.body.violations).toEqual(r.body.violations);
    const stored = await call('GET', `/v1/receipts/${r.body.receipt.sha256}`, { key: s.agent.api_key });
    expect(stored.status).toBe(200);
    expect(stored.body.outcome).toBe('denied');
    expect(stored.body.replay.ok).toBe(true);
    const runAfter = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(runAfter.body).toMatchObject({ calls_used: 0, writes_used: 0 });
  });

  it('derives the target from the input: out-of-scope targets are denied, a contradicting target is a 400', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const input = { ...ROLLBACK_INPUT, service: 'billing' };
    const approval_id = await approvedApproval(s, input);
    const denied = await authorize(s, authorizeBody(s, run, { input, approval_id }));
    expect(denied.status).toBe(403);
    expect(denied.body.violations).toEqual(['resource_out_of_scope']);

    const mismatch = await authorize(
      s,
      authorizeBody(s, run, {
        target: { type: 'deployment', attributes: { environment: 'staging', service: 'api' } },
      }),
    );
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.code).toBe('target_mismatch');

    const noTarget = await authorize(s, authorizeBody(s, run, { input: { service: 'api' } }));
    expect(noTarget.status).toBe(400);
    expect(noTarget.body.error.code).toBe('invalid_request');
  });

  it('an approval binds the exact input: changed parameters are denied', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const r = await authorize(
      s,
      authorizeBody(s, run, { approval_id, input: { ...ROLLBACK_INPUT, to_version: 'v40' } }),
    );
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_input_mismatch']);
    // The mismatched use did not consume it: the exact call is still authorized.
    const ok = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(ok.status).toBe(200);
  });

  it('an approval is single use', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    expect((await authorize(s, authorizeBody(s, run, { approval_id }))).status).toBe(200);
    const again = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(again.status).toBe(403);
    expect(again.body.violations).toEqual(['approval_unusable']);
  });

  it('two concurrent authorizations with one approval yield exactly one authorized receipt', async () => {
    const s = await seedTenant();
    const run = await createRun(s, { max_calls: 50, max_external_writes: 10 });
    const approval_id = await approvedApproval(s);
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => authorize(s, authorizeBody(s, run, { approval_id }))),
    );
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 403, 403, 403, 403, 403, 403, 403]);
    for (const r of replies.filter((x) => x.status === 403)) {
      expect(r.body.violations).toEqual(['approval_unusable']);
    }
    const rows = await tenantD1(s)
      .prepare(
        "SELECT outcome, count(*) AS n FROM receipts WHERE tenant_id = ? AND kind = 'authorization' GROUP BY outcome ORDER BY outcome",
      )
      .bind(s.tenant_id)
      .all<{ outcome: string; n: number }>();
    expect(rows.results).toEqual([
      { outcome: 'authorized', n: 1 },
      { outcome: 'denied', n: 7 },
    ]);
    const runAfter = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(runAfter.body).toMatchObject({ calls_used: 1, writes_used: 1 });
  });

  it('a spent run budget is a violation, also under concurrency', async () => {
    const s = await seedTenant();
    const run = await createRun(s, { max_calls: 2, max_external_writes: 0 });
    const replies = await Promise.all(
      Array.from({ length: 6 }, () =>
        authorize(s, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run }),
      ),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(2);
    for (const r of replies.filter((x) => x.status === 403)) {
      expect(r.body.violations).toEqual(['run_call_budget_spent']);
    }
    const runAfter = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(runAfter.body).toMatchObject({ calls_used: 2, writes_used: 0 });

    const writes = await createRun(s, { max_calls: 5, max_external_writes: 0 });
    const approval_id = await approvedApproval(s);
    const w = await authorize(s, authorizeBody(s, writes, { approval_id }));
    expect(w.status).toBe(403);
    expect(w.body.violations).toEqual(['run_write_budget_spent']);
  });

  it('an unknown run, or another principal’s run, is run_unknown', async () => {
    const s = await seedTenant();
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: 'run-nope',
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['run_unknown']);
  });

  it('an expired run is run_expired', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    await tenantD1(s).prepare('DROP TRIGGER runs_envelope_immutable').run();
    try {
      await tenantD1(s).prepare('UPDATE runs SET deadline_unix_ms = 1 WHERE run_id = ?').bind(run).run();
    } finally {
      await tenantD1(s)
        .prepare(
          "CREATE TRIGGER `runs_envelope_immutable` BEFORE UPDATE OF `tenant_id`, `principal_id`, `run_envelope_sha256`, `envelope`, `max_calls`, `max_external_writes`, `deadline_unix_ms` ON `runs` BEGIN SELECT RAISE(ABORT, 'run_immutable'); END",
        )
        .run();
    }
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['run_expired']);
  });

  it('an expired approval is denied', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const req = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    const id = req.body.approval_id as string;
    const ok = await call('POST', `/v1/approval-requests/${id}/approve`, {
      key: s.approver.api_key,
      body: { expires_in_ms: 60_000 },
    });
    expect(ok.status).toBe(200);
    // The Worker runs in this isolate: move its clock to the expiry instant instead of waiting.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(ok.body.expires_at_unix_ms);
    try {
      const r = await authorize(s, authorizeBody(s, run, { approval_id: id }));
      expect(r.status).toBe(403);
      expect(r.body.violations).toEqual(['approval_expired']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('an expired grant is denied', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const now = Date.now();
    const g = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: {
        principal_id: s.agent.principal_id,
        allowed_tools: ['get_deployment'],
        allowed_effects: ['read_only'],
        capabilities: [
          {
            capability: 'deployment:read',
            resources: [
              { type: 'deployment', attributes: { environment: ['production'], service: ['api'] } },
            ],
          },
        ],
        not_before_unix_ms: now - 10_000,
        expires_at_unix_ms: now - 5_000,
      },
    });
    expect(g.status).toBe(201);
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
      grant_id: g.body.grant_id,
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['grant_expired']);
  });

  it('a revoked grant takes effect on the next call', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const body = { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run };
    expect((await authorize(s, body)).status).toBe(200);
    const rev = await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key });
    expect(rev.status).toBe(200);
    expect(rev.body.revoked_at_unix_ms).toEqual(expect.any(Number));
    const r = await authorize(s, body);
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['grant_revoked']);
  });

  it('a principal without grants is denied by the empty grant', async () => {
    const s = await seedTenant();
    const p = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'idle', roles: ['agent'] },
    });
    const key = p.body.api_key as string;
    const run = await call('POST', '/v1/runs', {
      key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    const r = await call('POST', '/v1/authorize', {
      key,
      body: { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run.body.run_id },
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['capability_not_granted', 'effect_not_allowed', 'tool_not_allowed']);
  });

  it('a quarantined contract blocks every later authorization', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const body = { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run };
    expect((await authorize(s, body)).status).toBe(200);
    const q = await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, {
      key: s.admin.api_key,
      body: { reason: 'definition drift' },
    });
    expect(q.status).toBe(200);
    expect(q.body.quarantined).toBe(true);
    const r = await authorize(s, body);
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['contract_quarantined']);
    // Re-pinning identical content does not lift the quarantine.
    const again = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: (await import('../../../scripts/seed.js')).READ_CONTRACT,
    });
    expect(again.status).toBe(200);
    expect(again.body.quarantined).toBe(true);
  });

  it('a revoked principal cannot authorize at all (401)', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const rev = await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, { key: s.admin.api_key });
    expect(rev.status).toBe(200);
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
    });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('unauthenticated');
  });

  it('a tenant or principal named in the body is checked, never selected', async () => {
    const s = await seedTenant();
    const other = await seedTenant();
    const run = await createRun(s);
    const base = { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run };
    const t = await authorize(s, { ...base, tenant_id: other.tenant_id });
    expect(t.status).toBe(403);
    expect(t.body.violations).toEqual(['named_tenant_mismatch']);
    // The receipt names who actually called (audit never blames the named one).
    expect(t.body.receipt.body).toMatchObject({
      tenant_id: s.tenant_id,
      principal_id: s.agent.principal_id,
      named_tenant_id: other.tenant_id,
      named_principal_id: null,
    });
    const p = await authorize(s, { ...base, principal_id: other.agent.principal_id });
    expect(p.status).toBe(403);
    expect(p.body.violations).toEqual(['named_principal_mismatch']);
    expect(p.body.receipt.body).toMatchObject({
      principal_id: s.agent.principal_id,
      named_principal_id: other.agent.principal_id,
    });
    const same = await authorize(s, { ...base, tenant_id: s.tenant_id, principal_id: s.agent.principal_id });
    expect(same.status).toBe(200);
  });

  it('a grant of another principal named by grant_id is principal_mismatch', async () => {
    const s = await seedTenant();
    const p = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'other', roles: ['agent'] },
    });
    const key = p.body.api_key as string;
    const run = await call('POST', '/v1/runs', {
      key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    const r = await call('POST', '/v1/authorize', {
      key,
      body: {
        tool_contract_sha256: s.read_contract_sha256,
        input: READ_INPUT,
        run_id: run.body.run_id,
        grant_id: s.grant_id,
      },
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['principal_mismatch']);
  });

  it('an approval requested by another agent is not usable', async () => {
    const s = await seedTenant();
    const approval_id = await approvedApproval(s);
    const p = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'other', roles: ['agent'] },
    });
    await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: {
        principal_id: p.body.principal_id,
        allowed_tools: ['execute_rollback'],
        allowed_effects: ['external_write'],
        capabilities: ['deployment:read', 'deployment:rollback'].map((capability) => ({
          capability,
          resources: [{ type: 'deployment', attributes: { environment: ['production'], service: ['api'] } }],
        })),
        expires_at_unix_ms: Date.now() + 600_000,
      },
    });
    const key = p.body.api_key as string;
    const run = await call('POST', '/v1/runs', {
      key,
      body: { max_calls: 1, max_external_writes: 1, max_duration_ms: 60_000 },
    });
    const r = await call('POST', '/v1/authorize', {
      key,
      body: authorizeBody(s, run.body.run_id, { approval_id }),
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_unusable']);
  });

  it('a policy change invalidates grants and approvals issued under the previous policy', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const { DEMO_POLICY } = await import('../../../scripts/seed.js');
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_max_lifetime_ms: 600_000 },
    });
    expect(put.status).toBe(200);
    expect(put.body.previous_policy_sha256).toBe(s.policy_sha256);
    const r = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_policy_mismatch', 'policy_mismatch']);
    expect(r.body.receipt.body.policy_sha256).toBe(put.body.policy_sha256);
  });

  it('a policy can put more effects behind approval', async () => {
    const s = await seedTenant();
    const { DEMO_POLICY } = await import('../../../scripts/seed.js');
    await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_required_effects: ['external_write', 'irreversible', 'read_only'] },
    });
    const g = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: {
        principal_id: s.agent.principal_id,
        allowed_tools: ['get_deployment'],
        allowed_effects: ['read_only'],
        capabilities: [
          {
            capability: 'deployment:read',
            resources: [
              { type: 'deployment', attributes: { environment: ['production'], service: ['api'] } },
            ],
          },
        ],
        expires_at_unix_ms: Date.now() + 600_000,
      },
    });
    const run = await createRun(s);
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
      grant_id: g.body.grant_id,
    });
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_missing']);
  });

  it('an unknown contract, or a named unknown grant, is a 404', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const c = await authorize(s, authorizeBody(s, run, { tool_contract_sha256: 'a'.repeat(64) }));
    expect(c.status).toBe(404);
    expect(c.body.error.code).toBe('not_found');
    const g = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
      grant_id: 'grt-nope',
    });
    expect(g.status).toBe(404);
  });

  it('requires the agent role', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    for (const key of [s.admin.api_key, s.approver.api_key, s.executor.api_key]) {
      const r = await call('POST', '/v1/authorize', { key, body: authorizeBody(s, run) });
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe('forbidden_role');
    }
  });
});
