/**
 * Issue 9, observation storage: the id lookup goes through a unique index (no scan of the
 * tenant's history), two different observations racing for one id end with one holder, only the
 * executor that reported an execution may observe it, and a refused observation keeps digests,
 * sizes and violations, never the payload it refused.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { verifyWithheldObservationReceipt } from '../../../src/core/observation/index.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { observe as observeService } from '../../../src/services/observations.js';
import type { TenantStore } from '../../../src/services/ports.js';
import { DEMO_EXECUTOR_RELEASE } from '../../../scripts/seed.js';
import { type Json, otherExecutor, seedTenant } from '../executions/helpers.js';
import { operationsPort } from '../../../src/platform/bindings.js';
import { tenantD1, tenantRef, d1Of, shardOf } from '../platform/harness.js';
import { executed, postObservation, rawOutput } from './observation-helpers.js';

const SLOW_MS = 60_000;

async function holders(tenant_id: string, observation_id: string): Promise<number> {
  const row = await (
    await d1Of(tenant_id)
  )
    .prepare(
      "SELECT count(*) AS n FROM receipts WHERE tenant_id = ? AND kind = 'observation' AND observation_claim = ?",
    )
    .bind(tenant_id, observation_id)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe('observation storage', { timeout: SLOW_MS }, () => {
  it('refuses an observation from an executor that did not report the execution (403)', async () => {
    const s = await seedTenant('obs-claimer');
    const e = await executed(s);
    // Same release as the contract's executor: allowed to execute, not to speak for another's run.
    const intruder = await otherExecutor(s, DEMO_EXECUTOR_RELEASE);
    const raw = rawOutput(s, e);
    const r = await postObservation(s, raw, intruder);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('executor_mismatch');
    expect(await holders(s.tenant_id, raw.observation_id)).toBe(0);
    // The id is still free for the executor that ran the call.
    expect((await postObservation(s, raw)).status).toBe(201);
  });

  it('of two different observations racing for one id, one holds it and the other is a conflict', async () => {
    const s = await seedTenant('obs-race');
    const e = await executed(s);
    const first = rawOutput(s, e);
    const second = {
      ...rawOutput(s, e, '{"generation":9,"status":"rolled_back"}'),
      observation_id: first.observation_id,
    };
    expect((await postObservation(s, first)).status).toBe(201);

    // The second request read the id as free before the first committed (a stale read), then writes.
    const store = tenantStore(env, tenantRef(s));
    let stale = true;
    const staleRecords: TenantStore['observationRecords'] = async (kind, id, raw) => {
      if (stale) {
        stale = false;
        return [];
      }
      return store.observationRecords(kind, id, raw);
    };
    const racing = new Proxy(store, {
      get(target, p) {
        if (p === 'observationRecords') return staleRecords;
        const v: unknown = Reflect.get(target, p, target);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const principal = await store.getPrincipal(s.executor.principal_id);
    if (principal === null) throw new Error('executor missing');
    const result = await observeService(
      {
        caller: {
          principal_id: principal.principal_id,
          tenant_id: s.tenant_id,
          roles: principal.roles,
          executor_release: principal.executor_release,
        },
        store: racing,
        operations: operationsPort(env, shardOf(s)),
        shard: shardOf(s),
        now: Date.now(),
        log: () => undefined,
      },
      { kind: 'output', observation: second },
    );
    expect(result.decision).toBe('rejected');
    expect(result.violations).toContain('observation_id_conflict');
    expect(await holders(s.tenant_id, first.observation_id)).toBe(1);

    // Concurrently over HTTP as well: exactly one holder, the other a conflict.
    const third = rawOutput(s, e);
    const fourth = {
      ...rawOutput(s, e, '{"generation":7,"status":"rolled_back"}'),
      observation_id: third.observation_id,
    };
    const [a, b] = await Promise.all([postObservation(s, third), postObservation(s, fourth)]);
    // Whichever arrives first holds the id (the fourth is itself rejected for its digest); the
    // other is rejected as a conflict. Exactly one of the two answers says so.
    const conflicts = [a, b].filter((r) =>
      (r.body.violations as string[]).includes('observation_id_conflict'),
    );
    expect(conflicts).toHaveLength(1);
    expect(conflicts[0]?.status).toBe(403);
    expect(await holders(s.tenant_id, third.observation_id)).toBe(1);
  });

  it('keeps digests, sizes and violations of a refused 200 KB payload, not the payload; it still replays', async () => {
    const s = await seedTenant('obs-refused');
    const e = await executed(s);
    const big = JSON.stringify({ filler: 'x'.repeat(200 * 1024) });
    const raw = rawOutput(s, e, big);
    const r = await postObservation(s, raw);
    expect(r.status).toBe(403);
    expect(r.body.violations).toContain('payload_too_large');
    const sha = r.body.receipt.sha256 as string;

    const row = await tenantD1(s)
      .prepare(
        'SELECT length(receipt) + coalesce(length(evidence), evidence_bytes) AS bytes, evidence, evidence_sha256 FROM receipts WHERE tenant_id = ? AND sha256 = ?',
      )
      .bind(s.tenant_id, sha)
      .first<{ bytes: number; evidence: string | null; evidence_sha256: string | null }>();
    if (row === null) throw new Error('receipt not stored');
    // Evidence over 1 KB is held in R2 by digest (issue 10): look where it is, D1 or R2.
    const text =
      row.evidence ?? (await (await env.BLOBS.get(`sha256/${row.evidence_sha256 ?? ''}`))?.text()) ?? '';
    // Digests, sizes, violations and the raw observation's other fields: a few KB, never the payload.
    expect(row.bytes).toBeLessThan(8 * 1024);
    expect(text).not.toContain('xxxxxxxx');
    const evidence = JSON.parse(text) as Json;
    expect(evidence.observation.payload).toBeUndefined();
    expect(evidence.withheld).toMatchObject({
      actual_bytes: new TextEncoder().encode(big).byteLength,
      actual_sha256: null,
    });

    // Replay from what is stored, with the upstream receipts and contract from storage.
    const store = tenantStore(env, tenantRef(s));
    const [exec, auth, pinned] = await Promise.all([
      store.getReceipt(e.execution.sha256),
      store.getReceipt(e.authorization.sha256),
      store.getContract(s.rollback_contract_sha256),
    ]);
    const stored = await store.getReceipt(sha);
    if (exec === null || auth === null || pinned === null || stored === null) throw new Error('missing');
    const inputs = {
      trusted: evidence.trusted,
      policy: evidence.policy,
      contract: pinned.contract,
      authorization: auth.receipt as Json,
      execution: { receipt: exec.receipt as Json, observation: (exec.evidence as Json).observation },
      now: evidence.evaluated_at_unix_ms,
      observation: evidence.observation,
      withheld: evidence.withheld,
    };
    expect(verifyWithheldObservationReceipt(stored.receipt, inputs)).toEqual({ ok: true, differences: [] });
    // Kept findings are bound by the receipt: an edited one does not replay.
    const edited = verifyWithheldObservationReceipt(stored.receipt, {
      ...inputs,
      withheld: { ...evidence.withheld, raw_observation_sha256: '0'.repeat(64) },
    });
    expect(edited.ok).toBe(false);

    // The same observation again replays the stored receipt (the caller sends the payload again).
    const again = await postObservation(s, raw);
    expect(again.status).toBe(403);
    expect(again.body.receipt).toEqual(r.body.receipt);
  });
});
