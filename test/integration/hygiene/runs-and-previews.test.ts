/**
 * Issue 9, findings 5 and 1 (previews): a principal holds at most the policy's
 * `max_open_runs_per_principal` open runs; an approval preview flags bidi controls and invisible
 * characters in what the approver reads.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { call, createRun, ROLLBACK_INPUT, seedTenant, tenantD1, tenantRef } from '../platform/harness.js';

describe('open runs per principal', () => {
  it('the policy cap refuses one more open run with 409 run_limit_reached; a spent or past run frees a slot', async () => {
    const s = await seedTenant('rl');
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: {
        ...DEMO_POLICY,
        run_budget_limits: { ...DEMO_POLICY.run_budget_limits, max_open_runs_per_principal: 2 },
      },
    });
    expect(put.status).toBe(200);
    const first = await createRun(s, { max_calls: 1 });
    await createRun(s);
    const third = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    expect(third.status).toBe(409);
    expect(third.body.error.code).toBe('run_limit_reached');
    expect(third.body.error.message).toContain('2 open runs');

    // Another principal of the tenant has its own count.
    const store = tenantStore(env, tenantRef(s));
    expect(await store.countOpenRuns(s.agent.principal_id, Date.now())).toBe(2);
    expect(await store.countOpenRuns(s.admin.principal_id, Date.now())).toBe(0);

    // Spending the first run's only call closes it (as an authorization's charge would).
    await tenantD1(s)
      .prepare('UPDATE runs SET calls_used = max_calls WHERE tenant_id = ? AND run_id = ?')
      .bind(s.tenant_id, first)
      .run();
    expect(await store.countOpenRuns(s.agent.principal_id, Date.now())).toBe(1);
    expect(
      (
        await call('POST', '/v1/runs', {
          key: s.agent.api_key,
          body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
        })
      ).status,
    ).toBe(201);
    // A run is no longer open once its deadline has passed.
    expect(await store.countOpenRuns(s.agent.principal_id, Date.now() + 24 * 3600_000)).toBe(0);
  });

  it('the default cap applies to a policy without the field', async () => {
    const s = await seedTenant('rl');
    const store = tenantStore(env, tenantRef(s));
    // The demo policy has no max_open_runs_per_principal: the version 1 default (32) applies.
    for (let i = 0; i < 32; i++) await createRun(s, { max_duration_ms: 60_000 });
    expect(await store.countOpenRuns(s.agent.principal_id, Date.now())).toBe(32);
    const over = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    expect(over.status).toBe(409);
  }, 120_000);
});

describe('approval previews flag bidi controls and invisible characters', () => {
  it('lists each kind with its path and code points; plain requests have none', async () => {
    const s = await seedTenant('pv');
    const plain = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(plain.body.preview.warnings).toEqual([]);
    expect(plain.body.preview.warnings_omitted).toBe(0);
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { ...ROLLBACK_INPUT, service: 'api\u202e\u200b', to_version: 'v41\u{e0041}' },
      },
    });
    expect(r.status).toBe(201);
    expect(r.body.preview.warnings).toEqual([
      { path: '/input/service', kind: 'bidi_control', codepoints: ['U+202E'] },
      { path: '/input/service', kind: 'invisible', codepoints: ['U+200B'] },
      { path: '/input/to_version', kind: 'invisible', codepoints: ['U+E0041'] },
      { path: '/target/attributes/service', kind: 'bidi_control', codepoints: ['U+202E'] },
      { path: '/target/attributes/service', kind: 'invisible', codepoints: ['U+200B'] },
    ]);
    // The approver sees the same warnings when reading or listing.
    const read = await call('GET', `/v1/approval-requests/${r.body.approval_id}`, {
      key: s.approver.api_key,
    });
    expect(read.body.preview.warnings).toEqual(r.body.preview.warnings);
  });
});
