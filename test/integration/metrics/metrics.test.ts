/**
 * `GET /v1/metrics` (tenant admin): the tenant's security decisions as counts over a window
 * ending now (src/services/metrics.ts): receipts by kind and outcome, denials by violation,
 * approval requests and decisions, open operations, overdue reconciliations, quarantined
 * contracts. One tenant's rows only; bounded windows; strict query.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import { refusalsOf, tenantStore } from '../../../src/platform/bindings.js';
import type { TenantContext } from '../../../src/services/context.js';
import { type MetricsQuery, getMetrics } from '../../../src/services/metrics.js';
import { authorizedRollback, claim, observe, report } from '../executions/helpers.js';
import {
  ROLLBACK_INPUT,
  authorize,
  authorizeBody,
  call,
  createRun,
  seedTenant,
  shardOf,
  tenantRef,
  contextAt,
} from '../platform/harness.js';

/** The service as the route calls it, with the tenant's limiter counts. */
const metricsAt = (ctx: TenantContext, q: MetricsQuery) =>
  getMetrics(ctx, q, refusalsOf(env, ctx.caller.tenant_id));

const metrics = (s: Seeded, query = '') => call('GET', `/v1/metrics${query}`, { key: s.admin.api_key });

/** Two tenants on one shard: only the tenant condition tells their rows apart. */
async function twoOnOneShard(): Promise<[Seeded, Seeded]> {
  const s = await seedTenant('metrics');
  let other = await seedTenant('metrics');
  if (shardOf(other) !== shardOf(s)) other = await seedTenant('metrics');
  expect(shardOf(other)).toBe(shardOf(s));
  return [s, other];
}

async function deniedAuthorization(s: Seeded): Promise<string[]> {
  // No approval for an effect that needs one: denied, with its violations in the receipt.
  const r = await authorize(s, authorizeBody(s, await createRun(s)));
  expect(r.status).toBe(403);
  expect(r.body.decision).toBe('denied');
  return r.body.violations as string[];
}

describe('GET /v1/metrics', () => {
  it("counts the tenant's decisions, approvals, open operations and quarantines, and nobody else's", async () => {
    const [s, other] = await twoOnOneShard();
    const empty = await metrics(s);
    expect(empty.status).toBe(200);
    expect(empty.body).toMatchObject({
      tenant_id: s.tenant_id,
      window: { window_ms: 86_400_000 },
      denials: { by_violation: [], receipts_read: 0, complete: true },
      approvals: {
        requested: { pending: 0, approved: 0, denied: 0, consumed: 0, expired: 0 },
        decided: { approved: 0, consumed: 0, denied: 0 },
        complete: true,
      },
      operations: {
        open: { pending: 0, reconciliation_required: 0, escalated: 0 },
        oldest_open_updated_at_unix_ms: null,
        overdue_reconciliations: 0,
        complete: true,
      },
      contracts: { quarantined: 0 },
    });
    // Seeding stores no receipt.
    expect(empty.body.receipts).toEqual({ by_kind: {}, complete: true });

    // This tenant: one authorization allowed (its approval requested, approved, consumed), then
    // claimed and reported indeterminate; two denials; one approval denied; one left pending.
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    const ind = await report(
      s,
      c.body.operation_id,
      c.body.fencing_token,
      observe(a.receipt, 'indeterminate'),
    );
    expect(ind.body.operation.status).toBe('reconciliation_required');
    const v1 = await deniedAuthorization(s);
    const v2 = await deniedAuthorization(s);
    const toDeny = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { ...ROLLBACK_INPUT, to_version: 'v39' },
      },
    });
    const denied = await call('POST', `/v1/approval-requests/${toDeny.body.approval_id}/deny`, {
      key: s.approver.api_key,
      body: { reason: 'not this one' },
    });
    expect(denied.status).toBe(200);
    const pending = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { ...ROLLBACK_INPUT, to_version: 'v38' },
      },
    });
    expect(pending.status).toBe(201);
    const q = await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, {
      key: s.admin.api_key,
      body: { reason: 'schema drift' },
    });
    expect(q.status).toBe(200);

    // The other tenant, on the same shard: activity of every kind that must not be counted.
    const oa = await authorizedRollback(other);
    const oc = await claim(other, oa.sha256);
    await report(other, oc.body.operation_id, oc.body.fencing_token, observe(oa.receipt, 'indeterminate'));
    await deniedAuthorization(other);
    await call('POST', `/v1/contracts/${other.read_contract_sha256}/quarantine`, {
      key: other.admin.api_key,
      body: { reason: 'drift' },
    });

    const m = await metrics(s);
    expect(m.status).toBe(200);
    const kinds = m.body.receipts.by_kind as Record<string, Record<string, number>>;
    expect(kinds.authorization).toEqual({ authorized: 1, denied: 2 });
    expect(kinds.execution).toEqual({ indeterminate: 1 });
    expect(Object.keys(kinds).sort()).toEqual(['authorization', 'execution']);
    expect(m.body.receipts.complete).toBe(true);

    const expected = new Map<string, number>();
    for (const v of [...v1, ...v2]) expected.set(v, (expected.get(v) ?? 0) + 1);
    expect(v1.length).toBeGreaterThan(0);
    expect(m.body.denials).toEqual({
      by_violation: [...expected]
        .map(([code, n]) => ({ code, n }))
        .sort((x, y) => y.n - x.n || (x.code < y.code ? -1 : 1)),
      receipts_read: 2,
      complete: true,
    });
    expect(m.body.approvals).toEqual({
      requested: { pending: 1, approved: 0, denied: 1, consumed: 1, expired: 0 },
      decided: { approved: 0, consumed: 1, denied: 1 },
      complete: true,
    });
    expect(m.body.operations).toMatchObject({
      open: { pending: 0, reconciliation_required: 1, escalated: 0 },
      overdue_reconciliations: 0,
      complete: true,
    });
    expect(m.body.operations.oldest_open_updated_at_unix_ms).toBe(ind.body.operation.updated_at_unix_ms);
    expect(m.body.contracts).toEqual({ quarantined: 1, complete: true });

    // Later: the pending request has expired, the reconciliation is overdue, and a one-minute
    // window ending then holds none of today's receipts or requests.
    const deadline = ind.body.operation.reconciliation_deadline_unix_ms as number;
    const later = Math.max(deadline + 1, (pending.body.request_expires_at_unix_ms as number) + 1);
    const lateAll = await metricsAt(contextAt(s, s.admin.principal_id, ['tenant_admin'], later), {
      window_ms: later - (a.receipt.body.evaluated_at_unix_ms as number) + 60_000,
    });
    expect(lateAll.approvals.requested).toMatchObject({ pending: 1, expired: 1 });
    expect(lateAll.operations.overdue_reconciliations).toBe(1);
    expect(lateAll.operations.oldest_open_age_ms).toBe(
      later - (ind.body.operation.updated_at_unix_ms as number),
    );
    const lateMinute = await metricsAt(contextAt(s, s.admin.principal_id, ['tenant_admin'], later), {
      window_ms: 60_000,
    });
    expect(lateMinute.receipts.by_kind).toEqual({});
    expect(lateMinute.approvals.requested).toMatchObject({ pending: 0, consumed: 0, denied: 0, expired: 0 });
    expect(lateMinute.approvals.decided).toEqual({ approved: 0, consumed: 0, denied: 0 });
    // Open operations and quarantines are counted now, whatever the window.
    expect(lateMinute.operations.open.reconciliation_required).toBe(1);
    expect(lateMinute.contracts.quarantined).toBe(1);
  });

  it('bounds every count and says where it stopped', async () => {
    const s = await seedTenant('metrics');
    for (let i = 0; i < 3; i++) await deniedAuthorization(s);
    const store = tenantStore(env, tenantRef(s));
    const now = Date.now();
    const q = { from: now - 3_600_000, to: now + 1, now, expired_before: now - 86_400_000 };
    const capped = await store.securityCounts({ ...q, scan_cap: 2, denial_sample: 1 });
    expect(capped.receipts_complete).toBe(false);
    // The walk stopped after cap + 1 rows: it counts those.
    expect(capped.receipts.reduce((x, r) => x + r.n, 0)).toBe(3);
    expect(capped.denials).toHaveLength(1);
    expect(capped.denials_complete).toBe(false);
    expect(capped.denials[0]?.body.decision).toBe('denied');
    const whole = await store.securityCounts({ ...q, scan_cap: 3, denial_sample: 3 });
    expect(whole.receipts_complete).toBe(true);
    expect(whole.denials).toHaveLength(3);
    expect(whole.denials_complete).toBe(true);
  });

  it('is for the tenant admin only', async () => {
    const s = await seedTenant('metrics');
    for (const key of [s.agent.api_key, s.approver.api_key, s.executor.api_key]) {
      const r = await call('GET', '/v1/metrics', { key });
      expect(r.status).toBe(403);
    }
    expect((await call('GET', '/v1/metrics')).status).toBe(401);
  });

  it('refuses a window out of bounds, malformed or unknown parameters, changing nothing', async () => {
    const s = await seedTenant('metrics');
    for (const query of [
      '?window_ms=59999',
      `?window_ms=${7 * 86_400_000 + 1}`,
      '?window_ms=0',
      '?window_ms=-60000',
      '?window_ms=6e4',
      '?window_ms=60000.5',
      '?window_ms=',
      '?window=1d',
      '?window_ms=60000&tenant_id=other',
    ]) {
      const r = await metrics(s, query);
      expect(r.status, query).toBe(400);
      expect(r.body.error.code, query).toBe('invalid_request');
    }
    expect((await metrics(s, '?window_ms=60000')).body.window.window_ms).toBe(60_000);
    expect((await metrics(s, `?window_ms=${7 * 86_400_000}`)).status).toBe(200);
  });
});
