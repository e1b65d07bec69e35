/**
 * Approver revocation committing while an authorization is in flight (between its one read and
 * its commit) wins, as grant and principal revocation do: the commit's guard on the approver's
 * row aborts the batch, the call is re-decided against fresh state and denied
 * `approval_unusable`, and the approval is not consumed.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { operationsPort, tenantStore } from '../../../src/platform/bindings.js';
import { authorize as authorizeService } from '../../../src/services/authorize.js';
import type { TenantStore } from '../../../src/services/ports.js';
import {
  ROLLBACK_INPUT,
  approvedApproval,
  createRun,
  seedTenant,
  shardOf,
  tenantRef,
} from '../platform/harness.js';

describe('approver revocation during an authorization', () => {
  it('a revocation committing between the read and the commit aborts the commit; the retry is denied', async () => {
    const s = await seedTenant('apr-flight');
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const store = tenantStore(env, tenantRef(s));
    let revoked = false;
    // The approver's key is revoked right after the authorization read its state.
    const racing = new Proxy(store, {
      get(target, p) {
        if (p === 'loadAuthorizationState') {
          return async (...args: Parameters<TenantStore['loadAuthorizationState']>) => {
            const state = await target.loadAuthorizationState(...args);
            if (!revoked) {
              revoked = true;
              await target.revokePrincipal(s.approver.principal_id, Date.now());
            }
            return state;
          };
        }
        const v: unknown = Reflect.get(target, p, target);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const agent = await store.getPrincipal(s.agent.principal_id);
    if (agent === null) throw new Error('agent missing');
    const log: Record<string, unknown>[] = [];
    const outcome = await authorizeService(
      {
        caller: {
          principal_id: agent.principal_id,
          tenant_id: s.tenant_id,
          roles: agent.roles,
          executor_release: agent.executor_release,
        },
        store: racing,
        operations: operationsPort(env, shardOf(s)),
        shard: shardOf(s),
        now: Date.now(),
        log: (fields) => log.push(fields),
      },
      {
        tool_contract_sha256: s.rollback_contract_sha256,
        input: { ...ROLLBACK_INPUT },
        run_id: run,
        approval_id,
        idempotency_key: `k-${approval_id}`,
      },
    );
    expect(revoked).toBe(true);
    expect(log.some((f) => f.lost_race === 'principal_revoked')).toBe(true);
    expect(outcome.authorized).toBe(false);
    expect(outcome.decision.receipt.body.violations).toEqual(['approval_unusable']);
    const approval = await store.getApproval(approval_id);
    expect(approval?.approval.status).toBe('approved');
    expect((await store.getRun(run))?.calls_used).toBe(0);
  });
});
