/**
 * Issue 9, "storage that one tenant can exhaust": per-tenant quotas set by the platform admin,
 * refused with 429 `quota_exceeded` and `Retry-After`, nothing written, in a stated order (new
 * runs and approval requests first, observations next, authorizations of existing runs last);
 * authorization receipts refer to the grant by digest; usage is reported to the tenant admin.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { type AuthorizeRequest, decideAuthorization } from '../../../src/core/authorization/decide.js';
import { newId } from '../../../src/db/ids.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { DEFAULT_QUOTAS } from '../../../src/services/ports.js';
import type { Seeded } from '../../../scripts/seed.js';
import {
  ADMIN_TOKEN,
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  READ_INPUT,
  ROLLBACK_INPUT,
  seedTenant,
  setQuotas,
  tenantD1,
  tenantRef,
  d1Of,
} from '../platform/harness.js';

const SLOW_MS = 60_000;

async function count(table: 'runs' | 'approvals' | 'receipts', tenant_id: string): Promise<number> {
  const row = await (
    await d1Of(tenant_id)
  )
    .prepare(`SELECT count(*) AS n FROM ${table} WHERE tenant_id = ?`)
    .bind(tenant_id)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

const readBody = (s: Seeded, run_id: string) =>
  authorizeBody(s, run_id, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT });

describe('tenant quotas', { timeout: SLOW_MS }, () => {
  it('PUT /v1/tenants/{id}/quotas needs the platform admin token and a known tenant', async () => {
    const s = await seedTenant('quota-admin');
    expect((await setQuotas(s.tenant_id, {}, 'not-the-token-0123456789abcdef0123456789')).status).toBe(401);
    expect((await setQuotas('ten-unknown', {})).status).toBe(404);
    const bad = await call('PUT', `/v1/tenants/${s.tenant_id}/quotas`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      body: { max_stored_bytes: 0 },
    });
    expect(bad.status).toBe(400);
    const ok = await setQuotas(s.tenant_id, { max_open_runs: 7 });
    expect(ok.status).toBe(200);
    expect(ok.body.quotas).toEqual({ ...DEFAULT_QUOTAS, max_open_runs: 7 });
    // A tenant admin is a customer, not an operator.
    const tenantAdmin = await call('PUT', `/v1/tenants/${s.tenant_id}/quotas`, {
      key: s.admin.api_key,
      body: DEFAULT_QUOTAS,
    });
    expect(tenantAdmin.status).toBe(401);
  });

  it('GET /v1/usage reports bytes and counts against the quotas (tenant admin only)', async () => {
    const s = await seedTenant('quota-usage');
    await createRun(s);
    const u = await call('GET', '/v1/usage', { key: s.admin.api_key });
    expect(u.status).toBe(200);
    expect(u.body.open_runs).toEqual({ used: 1, limit: DEFAULT_QUOTAS.max_open_runs });
    expect(u.body.open_approvals).toEqual({ used: 0, limit: DEFAULT_QUOTAS.max_open_approvals });
    expect(u.body.stored_bytes.used).toBeGreaterThan(0);
    expect(u.body.stored_bytes.limit).toBe(DEFAULT_QUOTAS.max_stored_bytes);
    expect(u.body.receipts_per_day).toEqual({ used: 0, limit: DEFAULT_QUOTAS.max_receipts_per_day });
    expect((await call('GET', '/v1/usage', { key: s.agent.api_key })).status).toBe(403);
  });

  it('refuses open runs and approval requests over their quotas with 429, writing nothing', async () => {
    const s = await seedTenant('quota-stock');
    expect((await setQuotas(s.tenant_id, { max_open_runs: 1, max_open_approvals: 1 })).status).toBe(200);
    const run = await createRun(s);
    const refused = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('quota_exceeded');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await count('runs', s.tenant_id)).toBe(1);

    const request = () =>
      call('POST', '/v1/approval-requests', {
        key: s.agent.api_key,
        body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
      });
    expect((await request()).status).toBe(201);
    const second = await request();
    expect(second.status).toBe(429);
    expect(second.body.error.code).toBe('quota_exceeded');
    expect(await count('approvals', s.tenant_id)).toBe(1);

    // The existing run still authorizes.
    expect((await authorize(s, readBody(s, run))).status).toBe(200);
  });

  it('refuses new runs first and authorizations of existing runs last as stored bytes run out', async () => {
    const s = await seedTenant('quota-bytes');
    const run = await createRun(s, { max_calls: 50 });
    // Some history, so that a fifth of the quota holds a few receipts.
    for (let k = 0; k < 20; k++) await createRun(s);
    const used = (await call('GET', '/v1/usage', { key: s.admin.api_key })).body.stored_bytes.used as number;
    // Past 80% already (new runs refused), with a fifth of the quota left for authorizations.
    expect((await setQuotas(s.tenant_id, { max_stored_bytes: Math.floor(used / 0.8) - 1 })).status).toBe(200);
    const newRun = await call('POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    expect(newRun.status).toBe(429);
    expect(newRun.headers.get('retry-after')).toBe('60');
    // Observations are refused at 90%, before authorizations (quota-tiers.test.ts, both sides).
    expect((await authorize(s, readBody(s, run))).status).toBe(200);

    // Authorize until the quota is reached: then 429 and nothing written.
    let last = 200;
    for (let k = 0; k < 40 && last === 200; k++) last = (await authorize(s, readBody(s, run))).status;
    expect(last).toBe(429);
    const receipts = await count('receipts', s.tenant_id);
    const runRow = await tenantStore(env, tenantRef(s)).getRun(run);
    const again = await authorize(s, readBody(s, run));
    expect(again.status).toBe(429);
    expect(again.body.error.code).toBe('quota_exceeded');
    expect(await count('receipts', s.tenant_id)).toBe(receipts);
    expect((await tenantStore(env, tenantRef(s)).getRun(run))?.calls_used).toBe(runRow?.calls_used);
  });

  it('refuses receipts over the daily quota with Retry-After until the UTC day ends', async () => {
    const s = await seedTenant('quota-daily');
    const run = await createRun(s, { max_calls: 20 });
    expect((await setQuotas(s.tenant_id, { max_receipts_per_day: 3 })).status).toBe(200);
    for (let k = 0; k < 3; k++) expect((await authorize(s, readBody(s, run))).status).toBe(200);
    const before = Date.now();
    const refused = await authorize(s, readBody(s, run));
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('quota_exceeded');
    const retryAfter = Number(refused.headers.get('retry-after'));
    const untilMidnight = Math.ceil((Math.floor(before / 86_400_000 + 1) * 86_400_000 - before) / 1000);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(untilMidnight);
    expect(await count('receipts', s.tenant_id)).toBe(3);
    const u = await call('GET', '/v1/usage', { key: s.admin.api_key });
    expect(u.body.receipts_per_day).toEqual({ used: 3, limit: 3 });
  });
});

describe('authorization receipt evidence', { timeout: SLOW_MS }, () => {
  it('names the grant by digest, replays from the stored grant, and old evidence still replays', async () => {
    const s = await seedTenant('evidence');
    const run = await createRun(s);
    const r = await authorize(s, readBody(s, run));
    expect(r.status).toBe(200);
    const sha = r.body.receipt.sha256 as string;
    const got = await call('GET', `/v1/receipts/${sha}`, { key: s.admin.api_key });
    // Only what the body does not bind: no grant, no contract, no invocation copy.
    expect(Object.keys(got.body.evidence).sort()).toEqual(['evidence_version', 'trusted_state']);
    expect(got.body.replay).toEqual({ ok: true, differences: [] });

    const row = await tenantD1(s)
      .prepare(
        'SELECT length(CAST(receipt AS BLOB)) + length(CAST(evidence AS BLOB)) AS bytes FROM receipts WHERE tenant_id = ? AND sha256 = ?',
      )
      .bind(s.tenant_id, sha)
      .first<{ bytes: number }>();
    // Measured and stated in docs/storage.md ("Bytes per receipt").
    console.info(`authorization receipt row: ${row?.bytes} bytes of receipt and evidence`);
    // Version 2 receipts measured 1580 in `{sha256, body}` text, ~1400 in the compact encoding of
    // migrations/0004 (tenant and principal ids in their columns), ~820 in the positional one and
    // ~640 with the evidence positional too.
    expect(row?.bytes).toBeLessThanOrEqual(700);

    // With an approval (carried in the evidence) and as a denial under the empty grant.
    const approval_id = await approvedApproval(s);
    const approved = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(approved.status).toBe(200);
    const a = await call('GET', `/v1/receipts/${approved.body.receipt.sha256}`, { key: s.admin.api_key });
    expect(a.body.evidence.approval.approval_id).toBe(approval_id);
    expect(a.body.replay).toEqual({ ok: true, differences: [] });
    const stranger = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'no grants', roles: ['agent'] },
    });
    const strangerRun = await call('POST', '/v1/runs', {
      key: stranger.body.api_key,
      body: { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 },
    });
    const denied = await call('POST', '/v1/authorize', {
      key: stranger.body.api_key,
      body: readBody(s, strangerRun.body.run_id),
    });
    expect(denied.status).toBe(403);
    const dr = await call('GET', `/v1/receipts/${denied.body.receipt.sha256}`, { key: s.admin.api_key });
    expect(dr.body.evidence.grant.grant_id).toBe('grant-none');
    expect(dr.body.replay).toEqual({ ok: true, differences: [] });

    // A receipt stored before 0002, whose evidence embeds the grant, still replays.
    const store = tenantStore(env, tenantRef(s));
    const body: AuthorizeRequest = {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: run,
    };
    const now = Date.now();
    const state = await store.loadAuthorizationState(s.agent.principal_id, body);
    const decided = decideAuthorization(body, state, { invocation_id: newId('invocation') }, now);
    if (!decided.ok) throw new Error(decided.error.message);
    const d = decided.value;
    await store.insertReceipt({
      kind: 'authorization',
      receipt: d.receipt,
      outcome: d.receipt.body.decision,
      principal_id: s.agent.principal_id,
      evidence: {
        tool_contract_sha256: d.receipt.body.tool_contract_sha256,
        grant: d.grant,
        invocation: d.invocation,
        trusted_state: d.trusted,
        evaluated_at_unix_ms: now,
      },
      created_at_unix_ms: now,
    });
    const old = await call('GET', `/v1/receipts/${d.receipt.sha256}`, { key: s.admin.api_key });
    expect(old.body.replay).toEqual({ ok: true, differences: [] });
  });
});
