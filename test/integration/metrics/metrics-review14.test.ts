/**
 * Review 14: the boundaries of `GET /v1/metrics` agree with the rules they count.
 *
 * An operation awaiting reconciliation is escalated once `now >= reconciliation_deadline`
 * (src/core/execution/idempotency.ts `advance`): at its deadline it is overdue. The count used
 * `deadline < now`, so at the deadline's instant it reported none (the operation index is
 * advanced by the operation's alarm, later). A pending approval request is expired once
 * `now - created >= ttl` (src/services/approvals.ts `viewStatus`): checked at the same instant.
 *
 * Every count says when it stopped at its bound (docs/api.md, "Bounds"): the quarantined
 * contracts' count walked at most `scan_cap + 1` rows too, but no `complete` told that it had
 * stopped there (a tenant has no quota on pinned contracts, only on stored bytes).
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { refusalsOf, tenantStore } from '../../../src/platform/bindings.js';
import type { TenantContext } from '../../../src/services/context.js';
import { type MetricsQuery, getMetrics } from '../../../src/services/metrics.js';
import { authorizedRollback, claim, observe, report } from '../executions/helpers.js';
import { ROLLBACK_INPUT, call, seedTenant, tenantRef, contextAt } from '../platform/harness.js';

/** The service as the route calls it, with the tenant's limiter counts. */
const metricsAt = (ctx: TenantContext, q: MetricsQuery) =>
  getMetrics(ctx, q, refusalsOf(env, ctx.caller.tenant_id));

describe('GET /v1/metrics at the exact boundaries', () => {
  it('counts a reconciliation overdue at its deadline, as escalation does', async () => {
    const s = await seedTenant('metrics14');
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
    const deadline = ind.body.operation.reconciliation_deadline_unix_ms as number;

    const before = await metricsAt(contextAt(s, s.admin.principal_id, ['tenant_admin'], deadline - 1), {});
    expect(before.operations.overdue_reconciliations).toBe(0);
    const at = await metricsAt(contextAt(s, s.admin.principal_id, ['tenant_admin'], deadline), {});
    expect(at.operations.open.reconciliation_required).toBe(1);
    expect(at.operations.overdue_reconciliations).toBe(1);
  });

  it('counts a pending request expired at created + ttl, as the request view does', async () => {
    const s = await seedTenant('metrics14');
    const r = await call('POST', '/v1/approval-requests', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.rollback_contract_sha256, input: ROLLBACK_INPUT },
    });
    expect(r.status).toBe(201);
    const expiresAt = r.body.request_expires_at_unix_ms as number;
    const created = r.body.created_at_unix_ms as number;
    const window_ms = expiresAt - created + 60_000;
    const before = await metricsAt(contextAt(s, s.admin.principal_id, ['tenant_admin'], expiresAt - 1), {
      window_ms,
    });
    expect(before.approvals.requested).toMatchObject({ pending: 1, expired: 0 });
    const at = await metricsAt(contextAt(s, s.admin.principal_id, ['tenant_admin'], expiresAt), {
      window_ms,
    });
    expect(at.approvals.requested).toMatchObject({ pending: 1, expired: 1 });
  });

  it('says when the quarantined contracts count stopped at its bound', async () => {
    const s = await seedTenant('metrics14');
    for (const sha of [s.read_contract_sha256, s.rollback_contract_sha256]) {
      const q = await call('POST', `/v1/contracts/${sha}/quarantine`, {
        key: s.admin.api_key,
        body: { reason: 'drift' },
      });
      expect(q.status).toBe(200);
    }
    const store = tenantStore(env, tenantRef(s));
    const now = Date.now();
    const q = { from: now - 3_600_000, to: now + 1, now, expired_before: now - 86_400_000, denial_sample: 1 };
    const capped = await store.securityCounts({ ...q, scan_cap: 1 });
    // The walk stopped after cap + 1 rows: it counts those, and says it stopped.
    expect(capped.contracts_quarantined).toBe(2);
    expect(capped.contracts_complete).toBe(false);
    const whole = await store.securityCounts({ ...q, scan_cap: 2 });
    expect(whole.contracts_quarantined).toBe(2);
    expect(whole.contracts_complete).toBe(true);
    const m = await call('GET', '/v1/metrics', { key: s.admin.api_key });
    expect(m.status).toBe(200);
    expect(m.body.contracts).toEqual({ quarantined: 2, complete: true });
  });
});
