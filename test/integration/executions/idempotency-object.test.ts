/**
 * The idempotency Durable Object through its RPC surface, inside workerd with real SQLite storage,
 * alarms and D1: concurrency, eviction, crash-after-effect, fencing, and index mirroring.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { and, eq } from 'drizzle-orm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  type IdempotencyObject,
  SCHEMA_VERSION,
  operationStub,
} from '../../../durable-objects/idempotency.js';
import type { ClaimRequest } from '../../../src/services/operations.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { formatFencingToken, operationId } from '../../../src/core/execution/idempotency.js';
import type { ExecutionReceipt, ToolExecutionObservation } from '../../../src/core/model.js';
import { database } from '../../../src/db/client.js';
import { operations, receipts } from '../../../src/db/schema.js';
import { baselineRun, mustVerify } from '../../unit/core/fixtures.js';

afterEach(() => {
  vi.useRealTimers();
});

let seq = 0;
/** A fresh operation (own key) over the fixture's receipts, so tests never share an object. */
function setup(outcome: 'succeeded' | 'failed_no_effect' | 'indeterminate' = 'succeeded') {
  const run = baselineRun(outcome);
  const key = `test-key-${Date.now()}-${++seq}`;
  const tenant = run.authorization.body.tenant_id;
  const contractSha = run.authorization.body.tool_contract_sha256;
  const toolName = run.scenario.contract.tool_name;
  const id = operationId(
    tenant,
    { tool_name: toolName, tool_contract_sha256: contractSha },
    { kind: 'idempotency_key', idempotency_key: key },
  );
  const claim = (over: Partial<ClaimRequest> = {}): ClaimRequest => ({
    operation_id: id,
    tenant_id: tenant,
    tool_contract_sha256: contractSha,
    tool_name: toolName,
    idempotency_key: key,
    input_sha256: run.authorization.body.input_sha256,
    authorization_receipt_sha256: run.authorization.sha256,
    principal_id: 'executor-1',
    lease_ms: 60_000,
    reconciliation_owner: 'team:operations',
    reconciliation_window_ms: 3_600_000,
    now: Date.now(),
    ...over,
  });
  return { ...run, id, key, tenant, stub: operationStub(env, id), claim };
}

function reportOf(
  s: ReturnType<typeof setup>,
  token: string,
  receipt: ExecutionReceipt = s.execution,
  observation: ToolExecutionObservation = s.observation,
) {
  return {
    tenant_id: s.tenant,
    principal_id: 'executor-1',
    fencing_token: token,
    execution_receipt: receipt,
    observation,
    now: Date.now(),
  };
}

async function proceed(s: ReturnType<typeof setup>): Promise<string> {
  const r = await s.stub.claim(s.claim(), 0);
  if (r.outcome !== 'proceed') throw new Error(`expected proceed, got ${r.outcome}`);
  return r.fencing_token;
}

async function indexRow(id: string) {
  return database(env).select().from(operations).where(eq(operations.operation_id, id)).get();
}

describe('IdempotencyObject', () => {
  it('lets exactly one of 64 concurrent claims proceed', async () => {
    const s = setup();
    const results = await Promise.all(Array.from({ length: 64 }, () => s.stub.claim(s.claim(), 0)));
    const proceeds = results.filter((r) => r.outcome === 'proceed');
    expect(proceeds).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'refused' && r.reason === 'in_progress')).toHaveLength(63);
    expect(await indexRow(s.id)).toMatchObject({
      state: 'pending',
      tenant_id: s.tenant,
      idempotency_key: s.key,
    });
  });

  it('answers correctly after eviction between claim and report, and replays the report', async () => {
    const s = setup();
    const token = await proceed(s);
    await evictDurableObject(s.stub);
    const reported = await s.stub.report(reportOf(s, token));
    expect(reported).toMatchObject({ outcome: 'recorded', operation: { status: 'succeeded' } });
    await evictDurableObject(s.stub);
    // The owner retrying a report whose answer it lost gets the same answer.
    expect(await s.stub.report(reportOf(s, token))).toMatchObject({
      outcome: 'replay',
      execution_receipt: s.execution,
    });
    // A retried claim with the same input replays the stored outcome, receipt included.
    const again = await s.stub.claim(s.claim(), 0);
    expect(again).toMatchObject({
      outcome: 'replay',
      operation: { status: 'succeeded' },
      execution_receipt: s.execution,
    });
    // Mirrored into D1: the index row and the execution receipt.
    expect(await indexRow(s.id)).toMatchObject({
      state: 'succeeded',
      execution_receipt_sha256: s.execution.sha256,
    });
    const stored = await database(env)
      .select()
      .from(receipts)
      .where(and(eq(receipts.tenant_id, s.tenant), eq(receipts.sha256, s.execution.sha256)))
      .get();
    expect(stored).toMatchObject({ kind: 'execution', outcome: 'verified_succeeded' });
  });

  it('routes a crash after the effect to reconciliation, never to a second proceed', async () => {
    const s = setup();
    const token = await proceed(s);
    // The executor applies the effect, then its isolate dies before it reports.
    await evictDurableObject(s.stub);
    // The lease runs out; the alarm fires.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 61_000);
    expect(await runDurableObjectAlarm(s.stub)).toBe(true);
    const retry = await s.stub.claim(s.claim({ now: Date.now() }), 0);
    expect(retry).toMatchObject({
      outcome: 'refused',
      reason: 'reconciliation_required',
      operation: {
        status: 'reconciliation_required',
        reconciliation_reason: 'lease_expired',
        execution_receipt_sha256: null,
      },
    });
    // The late report of the crashed owner is fenced out.
    expect(await s.stub.report(reportOf(s, token))).toEqual({
      outcome: 'refused',
      reason: 'stale_fencing_token',
    });
    expect(await indexRow(s.id)).toMatchObject({ state: 'reconciliation_required' });
  });

  it('refuses a claim past the lease even before the alarm ran', async () => {
    const s = setup();
    await proceed(s);
    const late = await s.stub.claim(s.claim({ now: Date.now() + 60_000 }), 0);
    expect(late).toMatchObject({ outcome: 'refused', reason: 'reconciliation_required' });
  });

  it('refuses a different input with the same key, without anything of the stored operation', async () => {
    const s = setup();
    await proceed(s);
    const other = await s.stub.claim(s.claim({ input_sha256: digestOf({ other: 'input' }) }), 0);
    expect(other).toEqual({ outcome: 'refused', reason: 'idempotency_key_reused', operation: null });
    expect(JSON.stringify(other)).not.toContain(s.authorization.body.input_sha256);
  });

  it('refuses a stale, forged or foreign fencing token', async () => {
    const s = setup();
    const token = await proceed(s);
    const forged = formatFencingToken(1, '0'.repeat(32));
    expect(await s.stub.report(reportOf(s, forged))).toEqual({
      outcome: 'refused',
      reason: 'stale_fencing_token',
    });
    expect(await s.stub.report({ ...reportOf(s, token), principal_id: 'executor-2' })).toEqual({
      outcome: 'refused',
      reason: 'stale_fencing_token',
    });
    // Another tenant's report finds nothing.
    expect(await s.stub.report({ ...reportOf(s, token), tenant_id: 'globex' })).toEqual({
      outcome: 'refused',
      reason: 'not_found',
    });
    expect(await s.stub.read('globex')).toBeNull();
    // The real owner still can.
    expect(await s.stub.report(reportOf(s, token))).toMatchObject({ outcome: 'recorded' });
  });

  it('escalates an indeterminate outcome at its deadline, from the alarm, idempotently', async () => {
    const s = setup('indeterminate');
    const token = await proceed(s);
    const reported = await s.stub.report(reportOf(s, token));
    expect(reported).toMatchObject({
      outcome: 'recorded',
      operation: { status: 'reconciliation_required', reconciliation_reason: 'indeterminate' },
    });
    const deadline = (await s.stub.read(s.tenant))?.operation.reconciliation_deadline_unix_ms as number;
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(deadline);
    expect(await runDurableObjectAlarm(s.stub)).toBe(true);
    const escalated = await s.stub.read(s.tenant);
    expect(escalated?.operation).toMatchObject({ status: 'escalated', escalated_at_unix_ms: deadline });
    expect(await indexRow(s.id)).toMatchObject({ state: 'escalated', escalated_at_unix_ms: deadline });
    // Nothing further is due: no alarm left, and the state does not move.
    expect(await runDurableObjectAlarm(s.stub)).toBe(false);
    expect((await s.stub.read(s.tenant))?.operation).toEqual(escalated?.operation);
  });

  it('records a rejected report as needing reconciliation: it proves nothing about the target', async () => {
    const s = setup();
    const token = await proceed(s);
    const lying = { ...s.observation, effect_id: null };
    const rejected = mustVerify(s.scenario.contract, s.authorization, lying);
    expect(rejected.body.status).toBe('rejected');
    const r = await s.stub.report(reportOf(s, token, rejected, lying));
    expect(r).toMatchObject({
      outcome: 'recorded',
      operation: { status: 'reconciliation_required', reconciliation_reason: 'rejected' },
    });
  });

  it('keeps its schema versioned and migrates once, across evictions', async () => {
    const s = setup();
    await proceed(s);
    await evictDurableObject(s.stub);
    await s.stub.read(s.tenant);
    const versions = await runInDurableObject(s.stub, (_o: IdempotencyObject, state) =>
      state.storage.sql
        .exec<{ version: number }>('SELECT version FROM schema_version ORDER BY version')
        .toArray(),
    );
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    const log = await runInDurableObject(s.stub, (_o: IdempotencyObject, state) =>
      state.storage.sql
        .exec<{ event: string; to_status: string }>('SELECT event, to_status FROM transition ORDER BY seq')
        .toArray(),
    );
    expect(log).toEqual([{ event: 'claim', to_status: 'pending' }]);
  });

  it('upgrades an object stored under schema v1 in place: no tool name, same answers', async () => {
    const s = setup();
    await proceed(s);
    // Back to the v1 layout, as an object created before v2 would be stored.
    await runInDurableObject(s.stub, (_o: IdempotencyObject, state) => {
      state.storage.sql.exec('ALTER TABLE operation DROP COLUMN tool_name');
      state.storage.sql.exec('DROP TABLE index_db');
      state.storage.sql.exec('DELETE FROM schema_version WHERE version > 1');
    });
    await evictDurableObject(s.stub);
    const read = await s.stub.read(s.tenant);
    expect(read?.operation).toMatchObject({ status: 'pending', tool_name: null });
    const again = await s.stub.claim(s.claim({ now: Date.now() }), 0);
    expect(again).toMatchObject({ outcome: 'refused', reason: 'in_progress' });
    const versions = await runInDurableObject(s.stub, (_o: IdempotencyObject, state) =>
      state.storage.sql.exec<{ version: number }>('SELECT version FROM schema_version').toArray(),
    );
    expect(versions.map((v) => v.version).sort()).toEqual([1, 2, 3]);
  });

  it('upgrades an object stored under schema v2 (before shards): it mirrors into shard 0 until a claim names a shard', async () => {
    const s = setup();
    await proceed(s);
    await runInDurableObject(s.stub, (_o: IdempotencyObject, state) => {
      state.storage.sql.exec('DROP TABLE index_db');
      state.storage.sql.exec('DELETE FROM schema_version WHERE version > 2');
    });
    await evictDurableObject(s.stub);
    const again = await s.stub.claim(s.claim({ now: Date.now() }), 1);
    expect(again).toMatchObject({ outcome: 'refused', reason: 'in_progress' });
    const shard = await runInDurableObject(s.stub, (_o: IdempotencyObject, state) =>
      state.storage.sql.exec<{ shard: number }>('SELECT shard FROM index_db').toArray(),
    );
    expect(shard).toEqual([{ shard: 1 }]);
  });

  it('exposes only its intended RPC methods', async () => {
    const s = setup();
    const names = await runInDurableObject(s.stub, (o: IdempotencyObject) =>
      Object.getOwnPropertyNames(Object.getPrototypeOf(o)).sort(),
    );
    expect(names).toEqual(['alarm', 'claim', 'constructor', 'read', 'reconcile', 'report']);
  });

  it('refuses a claim sent to an object whose name is not the operation id', async () => {
    const s = setup();
    const wrong = operationStub(env, digestOf(['somewhere', 'else']));
    // Called on the instance: a rejecting stub call leaks an extra unhandled rejection in the
    // test pool (cloudflare/workers-sdk#14736).
    await runInDurableObject(wrong, async (o: IdempotencyObject) => {
      await expect(o.claim(s.claim(), 0)).rejects.toThrow(/does not hold this operation/);
    });
    expect(await wrong.read(s.tenant)).toBeNull();
  });
});
