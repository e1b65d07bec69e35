/**
 * Storage invariants: a request that lost a race leaves nothing behind, and the append-only and
 * single-use rules hold in SQLite itself (migrations/0001_invariants.sql), not only in code.
 *
 * The races are made deterministic: state is loaded and evaluated (authorized), a concurrent
 * change is committed, and then the stale evaluation is persisted, exactly as a request would
 * that was overtaken between its read and its write.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { type AuthorizeRequest, decideAuthorization } from '../../../src/core/authorization/decide.js';
import { newId } from '../../../src/db/ids.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import type { Seeded } from '../../../scripts/seed.js';
import {
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  READ_INPUT,
  seedTenant,
  tenantD1,
  tenantRef,
  d1Of,
} from './harness.js';

/**
 * Load and decide now, through the same store and core entry point as the service; return a
 * function that commits this (soon stale) decision and answers which race it lost, if any.
 */
async function staleAuthorization(s: Seeded, body: AuthorizeRequest) {
  const store = tenantStore(env, tenantRef(s));
  const now = Date.now();
  const state = await store.loadAuthorizationState(s.agent.principal_id, body);
  const decided = decideAuthorization(body, state, { invocation_id: newId('invocation') }, now);
  if (!decided.ok) throw new Error(decided.error.message);
  const decision = decided.value;
  expect(decision.receipt.body.decision).toBe('authorized');
  return {
    sha256: decision.receipt.sha256,
    persist: async (): Promise<string | null> => {
      const committed = await store.commitAuthorization(decision, s.agent.principal_id, now);
      return committed.ok ? null : committed.lost;
    },
  };
}

async function receiptExists(tenant_id: string, sha256: string): Promise<boolean> {
  const row = await (
    await d1Of(tenant_id)
  )
    .prepare('SELECT 1 AS x FROM receipts WHERE tenant_id = ? AND sha256 = ?')
    .bind(tenant_id, sha256)
    .first();
  return row !== null;
}

const readBody = (s: Seeded, run_id: string): AuthorizeRequest => ({
  tool_contract_sha256: s.read_contract_sha256,
  input: READ_INPUT,
  run_id,
});

describe('lost races abort the whole batch', () => {
  it('an approval consumed meanwhile', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const body = authorizeBody(s, run, { approval_id }) as AuthorizeRequest;
    const stale = await staleAuthorization(s, body);
    expect((await authorize(s, { ...body, idempotency_key: 'rollback-winner-0001' })).status).toBe(200);
    const e = await stale.persist();
    expect(e).toBe('approval_unusable');
    expect(await receiptExists(s.tenant_id, stale.sha256)).toBe(false);
    const r = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(r.body).toMatchObject({ calls_used: 1, writes_used: 1 });
  });

  it('the last call of a run spent meanwhile', async () => {
    const s = await seedTenant();
    const run = await createRun(s, { max_calls: 1 });
    const stale = await staleAuthorization(s, readBody(s, run));
    expect((await authorize(s, readBody(s, run))).status).toBe(200);
    const e = await stale.persist();
    expect(e).toBe('run_budget_spent');
    expect(await receiptExists(s.tenant_id, stale.sha256)).toBe(false);
  });

  it('a grant revoked meanwhile', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const stale = await staleAuthorization(s, readBody(s, run));
    expect((await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key })).status).toBe(
      200,
    );
    expect(await stale.persist()).toBe('grant_revoked');
    expect(await receiptExists(s.tenant_id, stale.sha256)).toBe(false);
    const r = await call('GET', `/v1/runs/${run}`, { key: s.agent.api_key });
    expect(r.body).toMatchObject({ calls_used: 0 });
  });

  it('a contract quarantined meanwhile', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const stale = await staleAuthorization(s, readBody(s, run));
    await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, { key: s.admin.api_key });
    expect(await stale.persist()).toBe('contract_quarantined');
    expect(await receiptExists(s.tenant_id, stale.sha256)).toBe(false);
  });

  it('a principal revoked meanwhile', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const stale = await staleAuthorization(s, readBody(s, run));
    await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, { key: s.admin.api_key });
    expect(await stale.persist()).toBe('principal_revoked');
    expect(await receiptExists(s.tenant_id, stale.sha256)).toBe(false);
  });

  it('after a lost race the request re-evaluates and stores the denial', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    // Overtake: consume the approval, then let a second request evaluate from fresh state.
    expect((await authorize(s, authorizeBody(s, run, { approval_id }))).status).toBe(200);
    const r = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(r.status).toBe(403);
    expect(r.body.violations).toEqual(['approval_unusable']);
    expect(await receiptExists(s.tenant_id, r.body.receipt.sha256)).toBe(true);
  });
});

describe('append-only and single-use rules live in SQLite', () => {
  it('receipts cannot be updated or deleted', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const r = await authorize(s, readBody(s, run));
    const sha = r.body.receipt.sha256 as string;
    await expect(
      tenantD1(s).prepare("UPDATE receipts SET outcome = 'denied' WHERE sha256 = ?").bind(sha).run(),
    ).rejects.toThrow(/receipt_immutable/);
    await expect(
      tenantD1(s).prepare('DELETE FROM receipts WHERE sha256 = ?').bind(sha).run(),
    ).rejects.toThrow(/receipt_immutable/);
  });

  it('an approval is never deleted, never re-opened, and its binding never changes', async () => {
    const s = await seedTenant();
    const id = await approvedApproval(s);
    await expect(
      tenantD1(s).prepare('DELETE FROM approvals WHERE approval_id = ?').bind(id).run(),
    ).rejects.toThrow(/approval_immutable/);
    await expect(
      tenantD1(s).prepare("UPDATE approvals SET status = 'pending' WHERE approval_id = ?").bind(id).run(),
    ).rejects.toThrow(/approval_transition/);
    await expect(
      tenantD1(s).prepare("UPDATE approvals SET input_sha256 = 'x' WHERE approval_id = ?").bind(id).run(),
    ).rejects.toThrow(/approval_immutable/);
  });

  it('a pinned contract is never updated in place', async () => {
    const s = await seedTenant();
    await expect(
      tenantD1(s)
        .prepare("UPDATE contracts SET document = '{}' WHERE tool_contract_sha256 = ?")
        .bind(s.rollback_contract_sha256)
        .run(),
    ).rejects.toThrow(/contract_immutable/);
  });

  it('a failing statement rolls back the whole batch', async () => {
    const s = await seedTenant();
    const id = await approvedApproval(s);
    await tenantD1(s)
      .prepare("UPDATE approvals SET status = 'consumed' WHERE approval_id = ?")
      .bind(id)
      .run();
    await expect(
      tenantD1(s).batch([
        tenantD1(s)
          .prepare(
            "INSERT INTO receipts (tenant_id, sha256, kind, receipt, outcome, created_at_unix_ms) VALUES (?, ?, 'authorization', '{}', 'authorized', 0)",
          )
          .bind(s.tenant_id, 'b'.repeat(64)),
        tenantD1(s).prepare("UPDATE approvals SET status = 'consumed' WHERE approval_id = ?").bind(id),
      ]),
    ).rejects.toThrow(/approval_unusable/);
    expect(await receiptExists(s.tenant_id, 'b'.repeat(64))).toBe(false);
  });
});

describe('internal failure', () => {
  it('is a 500 with a request id, authorizes nothing and writes nothing', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    // Put a corrupt policy in force: the service must fail closed, not guess.
    const bogus = 'c'.repeat(64);
    await tenantD1(s).batch([
      tenantD1(s)
        .prepare(
          'INSERT INTO policies (tenant_id, policy_sha256, document, created_at_unix_ms) VALUES (?, ?, ?, 0)',
        )
        .bind(s.tenant_id, bogus, '{"broken":'),
      tenantD1(s)
        .prepare('UPDATE tenants SET policy_sha256 = ? WHERE tenant_id = ?')
        .bind(bogus, s.tenant_id),
    ]);
    const r = await authorize(s, readBody(s, run));
    expect(r.status).toBe(500);
    expect(r.body.error.code).toBe('internal');
    expect(r.body.error.request_id).toMatch(/^req-[a-z2-7]{26}$/);
    expect(r.headers.get('x-request-id')).toBe(r.body.error.request_id);
    expect(r.body.error.message).not.toMatch(/policy|json|sql/i);
    const n = await tenantD1(s)
      .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
      .bind(s.tenant_id)
      .first<{ n: number }>();
    expect(n?.n).toBe(0);
    const runAfter = await tenantD1(s)
      .prepare('SELECT calls_used FROM runs WHERE run_id = ?')
      .bind(run)
      .first<{ calls_used: number }>();
    expect(runAfter?.calls_used).toBe(0);
  });
});
