/**
 * Issue 9 (hardening), execution items, end to end through the Worker against real D1 and
 * Durable Objects. Each test failed on the code before the fix it names:
 *
 * - one logical operation per (tenant, tool, key): an unresolved operation under a quarantined
 *   contract blocks the same key under the re-pinned one (409 naming it), and an object named
 *   before v2 (by contract) is never bypassed by the new name;
 * - the reconciliation owner is enforced (403 `not_reconciliation_owner`), and the principal that
 *   claimed cannot settle "no effect" alone (403 `self_reconciliation`);
 * - a revoked approver stops the claim (403 `authorization_revoked`);
 * - report and reconcile do not depend on the D1 index row, and a guessed id creates no storage;
 * - an execution that started before the claim is refused (400 `invalid_observation`).
 */
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { legacyOperationId } from '../../../src/core/execution/idempotency.js';
import { database } from '../../../src/db/client.js';
import { env } from 'cloudflare:workers';
import { d1TenantStore } from '../../../src/db/tenant-store.js';
import { receiptHooks } from '../../../src/platform/bindings.js';
import { unresolvedAttemptFor } from '../../../src/services/executions.js';
import {
  ROLLBACK_INPUT,
  authorizedRollback,
  call,
  claim,
  observe,
  pinSecondRollbackContract,
  putReconciliationOwner,
  reconcile,
  report,
  secondExecutor,
  seedTenant,
  stub,
} from './helpers.js';
import { shardOf, tenantD1, tenantRef } from '../platform/harness.js';

/** Each test seeds a tenant over HTTP; with every test file running in parallel that takes seconds. */
const SLOW_MS = 30_000;

afterEach(() => {
  vi.useRealTimers();
});

function advanceTo(t: number): void {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(t);
}

async function quarantine(s: { admin: { api_key: string } }, sha: string): Promise<void> {
  const q = await call('POST', `/v1/contracts/${sha}/quarantine`, { key: s.admin.api_key, body: {} });
  expect(q.status).toBe(200);
}

describe('one logical operation per tenant, tool and key', { timeout: SLOW_MS }, () => {
  it('blocks the key under a re-pinned contract while the first operation is unresolved', async () => {
    const s = await seedTenant('one-op');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    const opA = c.body.operation_id as string;
    const ind = await report(s, opA, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    expect(ind.body.operation.status).toBe('reconciliation_required');

    // Drift: contract A is quarantined and a reviewed contract B of the same tool is pinned.
    await quarantine(s, s.rollback_contract_sha256);
    const shaB = await pinSecondRollbackContract(s);
    const underB = { ...s, rollback_contract_sha256: shaB };
    const b = await authorizedRollback(underB, { ...ROLLBACK_INPUT }, a.idempotency_key);
    expect(b.receipt.body.tool_contract_sha256).toBe(shaB);

    // The effect under A may have happened: B must not dispatch it again.
    const blocked = await claim(s, b.sha256);
    expect(blocked.status).toBe(409);
    expect(blocked.body.error.code).toBe('reconciliation_required');
    expect(blocked.body.error.message).toContain(opA);
    expect(blocked.body.error.issues).toEqual([{ path: 'operation_id', message: opA }]);
    // What the approval view shows an approver of a retry with this key.
    const store = d1TenantStore(database({ DB: tenantD1(s) }), s.tenant_id, receiptHooks(env, tenantRef(s)));
    expect(await unresolvedAttemptFor(store, 'execute_rollback', a.idempotency_key)).toMatchObject({
      operation_id: opA,
      status: 'reconciliation_required',
      tool_contract_sha256: s.rollback_contract_sha256,
    });
    const held = await call('GET', `/v1/operations/${opA}`, { key: s.admin.api_key });
    expect(held.body.operation).toMatchObject({
      tool_contract_sha256: s.rollback_contract_sha256,
      status: 'reconciliation_required',
    });

    // Once A is reconciled the key named A's operation: B's call needs a new key.
    const rec = await reconcile(s, opA, observe(a.receipt, 'succeeded'), s.admin.api_key);
    expect(rec.status).toBe(201);
    expect(await unresolvedAttemptFor(store, 'execute_rollback', a.idempotency_key)).toBeNull();
    const after = await claim(s, b.sha256);
    expect(after.status).toBe(422);
    expect(after.body.error.code).toBe('idempotency_key_reused');
    expect(JSON.stringify(after.body)).not.toContain(opA);
  });

  it('never bypasses an unresolved object named before v2 (by contract digest)', async () => {
    const s = await seedTenant('legacy-op');
    const a = await authorizedRollback(s);
    const body = a.receipt.body;
    // An operation claimed by the previous release: its object is named by the v1 tag.
    const v1 = legacyOperationId(s.tenant_id, s.rollback_contract_sha256, a.idempotency_key);
    const old = stub(v1);
    const now = Date.now();
    const proceed = await old.claim(
      {
        operation_id: v1,
        tenant_id: s.tenant_id,
        tool_contract_sha256: s.rollback_contract_sha256,
        tool_name: 'execute_rollback',
        idempotency_key: a.idempotency_key,
        input_sha256: body.input_sha256,
        authorization_receipt_sha256: a.sha256,
        principal_id: s.executor.principal_id,
        lease_ms: 1_000,
        reconciliation_owner: 'team:sre',
        reconciliation_window_ms: 3_600_000,
        now,
      },
      shardOf(s),
    );
    expect(proceed.outcome).toBe('proceed');

    // The same contract and key reach the v1 object, not a fresh v2 one: no second proceed.
    const same = await claim(s, a.sha256);
    expect(same.status).toBe(409);
    expect(same.body.error.code).toBe('in_progress');
    expect(same.body.error.issues).toEqual([{ path: 'operation_id', message: v1 }]);

    // Its owner crashed; the lease ran out (the alarm mirrors reconciliation_required).
    advanceTo(now + 1_000);
    expect(await runDurableObjectAlarm(old)).toBe(true);
    vi.useRealTimers();
    await quarantine(s, s.rollback_contract_sha256);
    const shaB = await pinSecondRollbackContract(s);
    const b = await authorizedRollback(
      { ...s, rollback_contract_sha256: shaB },
      { ...ROLLBACK_INPUT },
      a.idempotency_key,
    );
    const blocked = await claim(s, b.sha256);
    expect(blocked.status).toBe(409);
    expect(blocked.body.error.code).toBe('reconciliation_required');
    expect(blocked.body.error.issues).toEqual([{ path: 'operation_id', message: v1 }]);
  });
});

describe('the reconciliation owner', { timeout: SLOW_MS }, () => {
  async function indeterminate(s: Awaited<ReturnType<typeof seedTenant>>) {
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    await report(s, id, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    return { a, id };
  }

  it('reads a legacy label as the tenant admins only: an executor is refused', async () => {
    const s = await seedTenant('owner-legacy');
    const { a, id } = await indeterminate(s);
    const byExecutor = await reconcile(s, id, observe(a.receipt, 'failed_no_effect'));
    expect(byExecutor.status).toBe(403);
    expect(byExecutor.body.error.code).toBe('not_reconciliation_owner');
    const op = await call('GET', `/v1/operations/${id}`, { key: s.admin.api_key });
    expect(op.body.operation.status).toBe('reconciliation_required');
    const byAdmin = await reconcile(s, id, observe(a.receipt, 'failed_no_effect'), s.admin.api_key);
    expect(byAdmin.status).toBe(201);
  });

  it('admits the named role, never the claimant alone for "no effect", and refuses others', async () => {
    const s = await seedTenant('owner-role');
    await putReconciliationOwner(s, 'role:executor');
    const other = await secondExecutor(s);
    const { a, id } = await indeterminate(s);

    const notNamed = await reconcile(s, id, observe(a.receipt, 'failed_no_effect'), s.admin.api_key);
    expect(notNamed.status).toBe(403);
    expect(notNamed.body.error.code).toBe('not_reconciliation_owner');
    // The executor that claimed (and may have performed the effect) cannot declare none alone.
    const self = await reconcile(s, id, observe(a.receipt, 'failed_no_effect'));
    expect(self.status).toBe(403);
    expect(self.body.error.code).toBe('self_reconciliation');
    const second = await reconcile(s, id, observe(a.receipt, 'failed_no_effect'), other.api_key);
    expect(second.status).toBe(201);
    expect(second.body.reconciliation_receipt.body.reconciled_by).toBe(other.principal_id);
  });

  it('lets the claimant, when an owner, record that the effect happened', async () => {
    const s = await seedTenant('owner-self-ok');
    await putReconciliationOwner(s, 'role:executor');
    const { a, id } = await indeterminate(s);
    const rec = await reconcile(s, id, observe(a.receipt, 'succeeded'));
    expect(rec.status).toBe(201);
    expect(rec.body.operation.status).toBe('reconciled_succeeded');
  });

  it('admits only the named principal', async () => {
    const s = await seedTenant('owner-principal');
    const other = await secondExecutor(s);
    await putReconciliationOwner(s, `principal:${other.principal_id}`);
    const { a, id } = await indeterminate(s);
    const byClaimant = await reconcile(s, id, observe(a.receipt, 'succeeded'));
    expect(byClaimant.status).toBe(403);
    expect(byClaimant.body.error.code).toBe('not_reconciliation_owner');
    const byOwner = await reconcile(s, id, observe(a.receipt, 'succeeded'), other.api_key);
    expect(byOwner.status).toBe(201);
  });

  it('refuses a policy whose owner uses the syntax wrongly', async () => {
    const s = await seedTenant('owner-invalid');
    const current = await call('GET', '/v1/policy', { key: s.admin.api_key });
    const r = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...current.body.policy, reconciliation: { owner: 'role:agent', deadline_ms: 60_000 } },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_policy');
    expect(r.body.error.issues[0].path).toBe('policy.reconciliation.owner');
  });
});

describe('claim and report preconditions', { timeout: SLOW_MS }, () => {
  it('refuses a claim whose approval was approved by a since-revoked approver', async () => {
    const s = await seedTenant('approver-revoked');
    const a = await authorizedRollback(s);
    const revoke = await call('POST', `/v1/principals/${s.approver.principal_id}/revoke`, {
      key: s.admin.api_key,
      body: {},
    });
    expect(revoke.status).toBe(200);
    const r = await claim(s, a.sha256);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('authorization_revoked');
  });

  it('refuses a report of an execution that started before the claim', async () => {
    const s = await seedTenant('before-claim');
    const a = await authorizedRollback(s);
    const t0 = a.receipt.body.evaluated_at_unix_ms as number;
    // Claimed 20 s after the authorization (inside the 60 s dispatch window, beyond the 5 s skew).
    advanceTo(t0 + 20_000);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    const early = observe(a.receipt, 'succeeded', { at: t0 + 1_000 });
    const r = await report(s, c.body.operation_id, c.body.fencing_token, early);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_observation');
    expect(r.body.error.issues).toEqual([
      { path: 'observation.started_at_unix_ms', message: 'is before the operation was claimed' },
    ]);
    // Nothing was recorded; an execution after the claim is.
    const ok = await report(
      s,
      c.body.operation_id,
      c.body.fencing_token,
      observe(a.receipt, 'succeeded', { at: t0 + 20_000 }),
    );
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe('verified_succeeded');
  });

  it('reports and reconciles although the index write after the claim was lost', async () => {
    const s = await seedTenant('no-index');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    // The claim's index write failed (the object would retry from its alarm).
    await tenantD1(s).prepare('DELETE FROM operations WHERE operation_id = ?').bind(id).run();
    const r = await report(s, id, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    expect(r.status).toBe(200);
    expect(r.body.operation.status).toBe('reconciliation_required');
    await tenantD1(s).prepare('DELETE FROM operations WHERE operation_id = ?').bind(id).run();
    const rec = await reconcile(s, id, observe(a.receipt, 'succeeded'), s.admin.api_key);
    expect(rec.status).toBe(201);
  });

  it('answers 404 for a guessed operation id without giving its object any storage', async () => {
    const s = await seedTenant('guessed');
    const a = await authorizedRollback(s);
    const guessed = 'c'.repeat(64);
    const r = await report(s, guessed, `1.${'a'.repeat(32)}`, observe(a.receipt, 'succeeded'));
    expect(r.status).toBe(404);
    const rec = await reconcile(s, guessed, observe(a.receipt, 'succeeded'), s.admin.api_key);
    expect(rec.status).toBe(404);
    const tables = await runInDurableObject(stub(guessed), (_o, state) =>
      state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'").toArray(),
    );
    expect(tables.filter((t) => !String(t.name).startsWith('_cf'))).toEqual([]);
  });
});
