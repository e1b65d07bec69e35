/**
 * Executions end to end through the Worker's own `fetch`, against real D1 and Durable Objects:
 * claim, report, reconciliation, escalation and operations, with a tenant seeded over the API.
 */
import { evictDurableObject, runDurableObjectAlarm } from 'cloudflare:test';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  READ_INPUT,
  ROLLBACK_INPUT,
  authorizedRollback,
  call,
  claim,
  observe,
  otherExecutor,
  reconcile,
  report,
  seedTenant,
  stub,
} from './helpers.js';
import { authorize, createRun } from '../platform/harness.js';

/** Each test seeds a tenant over HTTP; with every test file running in parallel that takes seconds. */
const SLOW_MS = 30_000;

afterEach(() => {
  vi.useRealTimers();
});

/** Move the clock of this isolate (the Worker and its Durable Objects run in it too). */
function advanceTo(t: number): void {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(t);
}

describe('POST /v1/executions/claim and /report', { timeout: SLOW_MS }, () => {
  it('proceeds once, records a verified success, and replays it for the same input', async () => {
    const s = await seedTenant('exec');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({
      status: 'proceed',
      operation: { status: 'pending', idempotency_key: a.idempotency_key },
    });
    expect(c.body.fencing_token).toMatch(/^1\.[0-9a-f]{32}$/);
    expect(JSON.stringify(c.body.operation)).not.toContain(c.body.fencing_token.slice(2));

    const r = await report(s, c.body.operation_id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      status: 'verified_succeeded',
      violations: [],
      operation: { status: 'succeeded' },
    });
    const exec = r.body.execution_receipt;
    expect(exec.body).toMatchObject({ authorization_receipt_sha256: a.sha256, effect_id: 'rollout-7781' });

    // Same key, same input: the stored outcome, not a second dispatch.
    const again = await claim(s, a.sha256);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      status: 'replayed',
      operation: { status: 'succeeded' },
      execution_receipt: exec,
    });

    // The receipt is in the receipt store, and the operation is readable.
    const stored = await call('GET', `/v1/receipts/${exec.sha256}`, { key: s.admin.api_key });
    expect(stored.status).toBe(200);
    expect(stored.body).toMatchObject({ kind: 'execution', outcome: 'verified_succeeded', receipt: exec });
    const op = await call('GET', `/v1/operations/${c.body.operation_id}`, { key: s.admin.api_key });
    expect(op.status).toBe(200);
    expect(op.body).toMatchObject({
      operation: { status: 'succeeded' },
      execution_receipt: exec,
      reconciliation_receipt: null,
    });
  });

  it('lets exactly one of 64 concurrent claims on one key proceed', async () => {
    const s = await seedTenant('race');
    const a = await authorizedRollback(s);
    const replies = await Promise.all(Array.from({ length: 64 }, () => claim(s, a.sha256)));
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((x) => x === 200)).toHaveLength(1);
    expect(replies.filter((r) => r.status === 409 && r.body.error.code === 'in_progress')).toHaveLength(63);
    expect(replies.find((r) => r.status === 409)?.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
  });

  it('refuses the same key with another input (422) before in_progress, echoing nothing of it', async () => {
    const s = await seedTenant('reuse');
    const first = await authorizedRollback(s);
    const c = await claim(s, first.sha256);
    expect(c.status).toBe(200);
    // The first operation is still pending: a different input under its key is still a 422.
    const other = await authorizedRollback(
      s,
      { ...ROLLBACK_INPUT, to_version: 'v40' },
      first.idempotency_key,
    );
    const r = await claim(s, other.sha256);
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe('idempotency_key_reused');
    const text = JSON.stringify(r.body);
    for (const leak of [
      first.receipt.body.input_sha256,
      first.sha256,
      c.body.operation_id,
      'pending',
      'v41',
    ]) {
      expect(text).not.toContain(leak);
    }
  });

  it('refuses a stale or forged fencing token, and a report after the lease', async () => {
    const s = await seedTenant('fence');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const forged = `1.${'0'.repeat(32)}`;
    const bad = await report(s, c.body.operation_id, forged, observe(a.receipt, 'succeeded'));
    expect(bad.status).toBe(409);
    expect(bad.body.error.code).toBe('stale_fencing_token');
    // Past the lease the real token is stale too: the owner may be presumed crashed.
    advanceTo(c.body.lease_expires_at_unix_ms);
    const late = await report(s, c.body.operation_id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('stale_fencing_token');
  });

  it('answers correctly for an object evicted between claim and report', async () => {
    const s = await seedTenant('evict');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    await evictDurableObject(stub(c.body.operation_id));
    const o = observe(a.receipt, 'failed_no_effect');
    const r = await report(s, c.body.operation_id, c.body.fencing_token, o);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      status: 'verified_failed_no_effect',
      operation: { status: 'failed_no_effect' },
    });
    await evictDurableObject(stub(c.body.operation_id));
    // The lost-answer retry of the same report replays it.
    const again = await report(s, c.body.operation_id, c.body.fencing_token, o);
    expect(again.status).toBe(200);
    expect(again.body.execution_receipt).toEqual(r.body.execution_receipt);
  });

  it('returns a rejected report as a 403 receipt and routes the operation to reconciliation', async () => {
    const s = await seedTenant('reject');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const r = await report(
      s,
      c.body.operation_id,
      c.body.fencing_token,
      observe(a.receipt, 'succeeded', { effect_id: null }),
    );
    expect(r.status).toBe(403);
    expect(r.body).toMatchObject({
      status: 'rejected',
      violations: ['write_effect_id_missing'],
      operation: { status: 'reconciliation_required', reconciliation_reason: 'rejected' },
    });
    const retry = await claim(s, a.sha256);
    expect(retry.status).toBe(409);
    expect(retry.body.error.code).toBe('reconciliation_required');
  });

  it('refuses an observation from the future without recording it', async () => {
    const s = await seedTenant('future');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const o = observe(a.receipt, 'succeeded', { at: Date.now() + 60_000 });
    const r = await report(s, c.body.operation_id, c.body.fencing_token, o);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_observation');
    const op = await call('GET', `/v1/operations/${c.body.operation_id}`, { key: s.executor.api_key });
    expect(op.body.operation.status).toBe('pending');
  });

  it('makes each read-only authorization single-use', async () => {
    const s = await seedTenant('read');
    const run = await createRun(s);
    const auth = async () => {
      const r = await authorize(s, {
        tool_contract_sha256: s.read_contract_sha256,
        input: READ_INPUT,
        run_id: run,
      });
      expect(r.status).toBe(200);
      return r.body.receipt;
    };
    const reader = await otherExecutor(s, 'deployment-reader 2.0.1');
    const first = await auth();
    const c = await claim(s, first.sha256, reader);
    expect(c.status).toBe(200);
    expect(c.body.operation.idempotency_key).toBeNull();
    expect((await claim(s, first.sha256, reader)).body.error.code).toBe('in_progress');
    const o = observe(first, 'succeeded', { executor_release: 'deployment-reader 2.0.1', read_only: true });
    const r = await report(s, c.body.operation_id, c.body.fencing_token, o, reader);
    expect(r.status).toBe(200);
    expect((await claim(s, first.sha256, reader)).body.status).toBe('replayed');
    // A new authorization of the same read is a new operation.
    const second = await auth();
    const c2 = await claim(s, second.sha256, reader);
    expect(c2.body.status).toBe('proceed');
    expect(c2.body.operation_id).not.toBe(c.body.operation_id);
    const list = await call('GET', '/v1/operations?limit=100', { key: s.admin.api_key });
    const ids = list.body.operations.map((x: { operation_id: string }) => x.operation_id);
    expect(ids).toEqual(expect.arrayContaining([c.body.operation_id, c2.body.operation_id]));
    expect(
      list.body.operations.find((x: { operation_id: string }) => x.operation_id === c.body.operation_id)
        .idempotency_key,
    ).toBeNull();
  });
});

describe('claim preconditions', { timeout: SLOW_MS }, () => {
  it('refuses a denied receipt', async () => {
    const s = await seedTenant('denied');
    const run = await createRun(s);
    const denied = await authorize(s, {
      tool_contract_sha256: s.rollback_contract_sha256,
      input: ROLLBACK_INPUT,
      idempotency_key: 'rollback-denied-0001',
      run_id: run,
    });
    expect(denied.status).toBe(403);
    const r = await claim(s, denied.body.receipt.sha256);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('authorization_denied');
  });

  it('refuses a receipt past its dispatch deadline', async () => {
    const s = await seedTenant('expired');
    const a = await authorizedRollback(s);
    // The demo policy allows 60 s between evaluation and dispatch.
    advanceTo(a.receipt.body.evaluated_at_unix_ms + 60_000);
    const r = await claim(s, a.sha256);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('authorization_expired');
  });

  it('refuses a receipt whose grant was revoked or whose contract was quarantined since', async () => {
    const s = await seedTenant('revoked');
    const a = await authorizedRollback(s);
    const b = await authorizedRollback(s);
    const revoke = await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key, body: {} });
    expect(revoke.status).toBe(200);
    const r = await claim(s, a.sha256);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('authorization_revoked');

    const s2 = await seedTenant('quarantined');
    const q = await authorizedRollback(s2);
    const qr = await call('POST', `/v1/contracts/${s2.rollback_contract_sha256}/quarantine`, {
      key: s2.admin.api_key,
      body: {},
    });
    expect(qr.status).toBe(200);
    const r2 = await claim(s2, q.sha256);
    expect(r2.status).toBe(403);
    expect(r2.body.error.code).toBe('authorization_revoked');
    expect((await claim(s, b.sha256)).body.error.code).toBe('authorization_revoked');
  });

  it("refuses another executor release's principal, and non-executors", async () => {
    const s = await seedTenant('other-exec');
    const a = await authorizedRollback(s);
    const reader = await otherExecutor(s, 'deployment-reader 2.0.1');
    const r = await claim(s, a.sha256, reader);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('executor_mismatch');
    const agent = await claim(s, a.sha256, s.agent.api_key);
    expect(agent.status).toBe(403);
    expect(agent.body.error.code).toBe('forbidden_role');
  });
});

describe('reconciliation and escalation', { timeout: SLOW_MS }, () => {
  it('blocks retries after an indeterminate outcome, escalates at the deadline, and reconciles', async () => {
    const s = await seedTenant('recon');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    const ind = await report(s, id, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    expect(ind.status).toBe(200);
    expect(ind.body).toMatchObject({
      status: 'indeterminate',
      operation: { status: 'reconciliation_required', reconciliation_owner: 'team:sre' },
    });
    const original = ind.body.execution_receipt;
    expect(original.body.reconciliation_required).toBe(true);
    expect((await claim(s, a.sha256)).body.error.code).toBe('reconciliation_required');

    // The deadline passes; the object's alarm escalates and records it in the index.
    const deadline = ind.body.operation.reconciliation_deadline_unix_ms as number;
    advanceTo(deadline);
    expect(await runDurableObjectAlarm(stub(id))).toBe(true);
    const escalated = await call('GET', '/v1/operations?status=escalated', { key: s.admin.api_key });
    expect(escalated.status).toBe(200);
    expect(escalated.body.operations).toEqual([
      expect.objectContaining({ operation_id: id, status: 'escalated', escalated_at_unix_ms: deadline }),
    ]);
    // A retry, re-authorized under the same key for the same input, is still blocked.
    const retryAuth = await authorizedRollback(s, { ...ROLLBACK_INPUT }, a.idempotency_key);
    expect((await claim(s, retryAuth.sha256)).body.error.code).toBe('reconciliation_required');

    // The demo policy's owner is a legacy label (`team:sre`): it names nobody, so only the tenant
    // admins reconcile (test/integration/executions/hardening.test.ts covers enforced owners).
    // Still indeterminate resolves nothing.
    const unsure = await reconcile(
      s,
      id,
      observe(a.receipt, 'indeterminate', { at: deadline - 1_000 }),
      s.admin.api_key,
    );
    expect(unsure.status).toBe(422);
    expect(unsure.body.error.code).toBe('reconciliation_rejected');
    expect(unsure.body.error.issues).toEqual([{ path: 'observation', message: 'outcome_indeterminate' }]);

    // The target shows the rollback happened: a reconciliation receipt linked to the original.
    const target = observe(a.receipt, 'succeeded', { at: deadline - 1_000 });
    const rec = await reconcile(s, id, target, s.admin.api_key);
    expect(rec.status).toBe(201);
    const rr = rec.body.reconciliation_receipt;
    expect(rr.body).toMatchObject({
      receipt_kind: 'reconciliation',
      operation_id: id,
      original_execution_receipt_sha256: original.sha256,
      authorization_receipt_sha256: a.sha256,
      resolution: 'verified_succeeded',
      reconciled_by: s.admin.principal_id,
      violations: [],
    });
    expect(rec.body.operation).toMatchObject({
      status: 'reconciled_succeeded',
      escalated_at_unix_ms: deadline,
    });
    // A lost-answer retry gets the same resolution; a different one is refused.
    const retry = await reconcile(s, id, target, s.admin.api_key);
    expect(retry.status).toBe(200);
    expect(retry.body.reconciliation_receipt).toEqual(rr);
    const differ = await reconcile(
      s,
      id,
      observe(a.receipt, 'failed_no_effect', { at: deadline - 500 }),
      s.admin.api_key,
    );
    expect(differ.status).toBe(409);
    expect(differ.body.error.code).toBe('not_reconcilable');

    // The original receipt is unchanged; the operation now replays the reconciled outcome.
    const orig = await call('GET', `/v1/receipts/${original.sha256}`, { key: s.admin.api_key });
    expect(orig.body.receipt).toEqual(original);
    const recStored = await call('GET', `/v1/receipts/${rr.sha256}`, { key: s.admin.api_key });
    expect(recStored.body).toMatchObject({
      kind: 'reconciliation',
      outcome: 'verified_succeeded',
      receipt: rr,
    });
    // The first receipt is long past its dispatch window; the re-authorized retry replays.
    expect((await claim(s, a.sha256)).body.error.code).toBe('authorization_expired');
    const replay = await claim(s, retryAuth.sha256);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ status: 'replayed', reconciliation_receipt: rr });
    const op = await call('GET', `/v1/operations/${id}`, { key: s.admin.api_key });
    expect(op.body).toMatchObject({
      operation: { status: 'reconciled_succeeded' },
      execution_receipt: original,
      reconciliation_receipt: rr,
    });
  });

  it('replays a reconciled outcome to a claim still within its dispatch window', async () => {
    const s = await seedTenant('recon-replay');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    await report(s, id, c.body.fencing_token, observe(a.receipt, 'indeterminate'));
    const rec = await reconcile(s, id, observe(a.receipt, 'failed_no_effect'), s.admin.api_key);
    expect(rec.status).toBe(201);
    const replay = await claim(s, a.sha256);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({
      status: 'replayed',
      operation: { status: 'reconciled_no_effect' },
      reconciliation_receipt: rec.body.reconciliation_receipt,
    });
  });

  it('sends a crash after the effect (evicted before the report) to reconciliation, not a second effect', async () => {
    const s = await seedTenant('crash');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;
    // The executor rolls back the deployment, then dies before reporting; the object is evicted.
    await evictDurableObject(stub(id));
    advanceTo(c.body.lease_expires_at_unix_ms);
    expect(await runDurableObjectAlarm(stub(id))).toBe(true);
    const op = await call('GET', `/v1/operations/${id}`, { key: s.admin.api_key });
    expect(op.body.operation).toMatchObject({
      status: 'reconciliation_required',
      reconciliation_reason: 'lease_expired',
    });
    // No second proceed for a retry (re-authorized: the first receipt's window is over), and
    // the old owner is fenced out.
    const retry = await claim(
      s,
      (await authorizedRollback(s, { ...ROLLBACK_INPUT }, a.idempotency_key)).sha256,
    );
    expect(retry.status).toBe(409);
    expect(retry.body.error.code).toBe('reconciliation_required');
    const late = await report(s, id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    expect(late.body.error.code).toBe('stale_fencing_token');
    // Reconciled from the target; there was no execution receipt to link.
    const rec = await reconcile(s, id, observe(a.receipt, 'succeeded'), s.admin.api_key);
    expect(rec.status).toBe(201);
    expect(rec.body.reconciliation_receipt.body.original_execution_receipt_sha256).toBeNull();
  });

  it('refuses to reconcile a live pending or a settled operation', async () => {
    const s = await seedTenant('recon-refuse');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const live = await reconcile(s, c.body.operation_id, observe(a.receipt, 'succeeded'), s.admin.api_key);
    expect(live.status).toBe(409);
    expect(live.body.error.code).toBe('not_reconcilable');
    await report(s, c.body.operation_id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    const settled = await reconcile(
      s,
      c.body.operation_id,
      observe(a.receipt, 'succeeded', { tookMs: 6 }),
      s.admin.api_key,
    );
    expect(settled.status).toBe(409);
  });
});

describe('tenant isolation', { timeout: SLOW_MS }, () => {
  it("answers 404 for another tenant's receipts and operations", async () => {
    const s = await seedTenant('iso-a');
    const other = await seedTenant('iso-b');
    const a = await authorizedRollback(s);
    const c = await claim(s, a.sha256);
    const id = c.body.operation_id as string;

    expect((await claim(other, a.sha256)).status).toBe(404);
    const rep = await report(other, id, c.body.fencing_token, observe(a.receipt, 'succeeded'));
    expect(rep.status).toBe(404);
    expect((await reconcile(other, id, observe(a.receipt, 'succeeded'))).status).toBe(404);
    const get = await call('GET', `/v1/operations/${id}`, { key: other.admin.api_key });
    expect(get.status).toBe(404);
    expect(get.body.error.code).toBe('not_found');
    const list = await call('GET', '/v1/operations', { key: other.admin.api_key });
    expect(list.body.operations).toEqual([]);
    // The owner's operation is untouched by all of that.
    const mine = await call('GET', `/v1/operations/${id}`, { key: s.admin.api_key });
    expect(mine.body.operation.status).toBe('pending');
  });

  it('answers 404 for a malformed or unknown operation id', async () => {
    const s = await seedTenant('iso-c');
    expect((await call('GET', '/v1/operations/not-a-digest', { key: s.admin.api_key })).status).toBe(404);
    expect((await call('GET', `/v1/operations/${'a'.repeat(64)}`, { key: s.admin.api_key })).status).toBe(
      404,
    );
    const bad = await call('GET', '/v1/operations?status=nonsense', { key: s.admin.api_key });
    expect(bad.status).toBe(400);
  });
});
