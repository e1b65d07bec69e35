/**
 * Issue 9, "run budgets are self-issued without limit": the open-run cap holds under concurrency.
 * The count and the insert are one statement (a conditional insert), so creations that all read
 * the same count before any of them wrote still end with at most the cap open.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import { operationsPort, tenantStore } from '../../../src/platform/bindings.js';
import { createRun as createRunService } from '../../../src/services/runs.js';
import type { TenantStore } from '../../../src/services/ports.js';
import { ServiceError } from '../../../src/services/errors.js';
import { call, createRun, seedTenant, shardOf, tenantRef } from '../platform/harness.js';

const CAP = 2;
const CONCURRENT = 5;

/**
 * The tenant's store, with every run insert held until `n` of them have arrived: every creation
 * has made all its reads before any run is written, the widest interleaving two requests can have.
 */
function barrierStore(store: TenantStore, n: number): TenantStore {
  let arrived = 0;
  let release: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (release = resolve));
  return new Proxy(store, {
    get(target, p) {
      if (p === 'insertRun') {
        return async (...args: unknown[]) => {
          arrived += 1;
          if (arrived >= n) release();
          await all;
          return (target.insertRun as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      }
      const v: unknown = Reflect.get(target, p, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

async function openRuns(tenant_id: string, principal_id: string): Promise<number> {
  const row = await env.DB.prepare('SELECT count(*) AS n FROM runs WHERE tenant_id = ? AND principal_id = ?')
    .bind(tenant_id, principal_id)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe('open-run cap under concurrency', () => {
  it('concurrent creations that all passed the count end with at most the cap open', async () => {
    const s = await seedTenant('rl-race');
    const put = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: {
        ...DEMO_POLICY,
        run_budget_limits: { ...DEMO_POLICY.run_budget_limits, max_open_runs_per_principal: CAP },
      },
    });
    expect(put.status).toBe(200);
    await createRun(s);

    const store = tenantStore(env, tenantRef(s));
    const principal = await store.getPrincipal(s.agent.principal_id);
    if (principal === null) throw new Error('agent missing');
    const ctx = {
      caller: {
        principal_id: principal.principal_id,
        tenant_id: s.tenant_id,
        roles: principal.roles,
        executor_release: principal.executor_release,
      },
      store: barrierStore(store, CONCURRENT),
      operations: operationsPort(env, shardOf(s)),
      shard: shardOf(s),
      now: Date.now(),
      log: () => undefined,
    };
    const body = { max_calls: 1, max_external_writes: 0, max_duration_ms: 60_000 };
    const results = await Promise.allSettled(
      Array.from({ length: CONCURRENT }, () => createRunService(ctx, body)),
    );
    const created = results.filter((r) => r.status === 'fulfilled');
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    expect(created).toHaveLength(CAP - 1);
    expect(refused).toHaveLength(CONCURRENT - (CAP - 1));
    for (const e of refused) {
      expect(e).toBeInstanceOf(ServiceError);
      expect((e as ServiceError).reason).toBe('run_limit_reached');
    }
    expect(await openRuns(s.tenant_id, s.agent.principal_id)).toBe(CAP);

    // Over HTTP as well: many at once, never more than the cap open.
    const more = await Promise.all(
      Array.from({ length: CONCURRENT }, () => call('POST', '/v1/runs', { key: s.agent.api_key, body })),
    );
    expect(more.map((r) => r.status)).toEqual(Array.from({ length: CONCURRENT }, () => 409));
    expect(await openRuns(s.tenant_id, s.agent.principal_id)).toBe(CAP);
  });
});
