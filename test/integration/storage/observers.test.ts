/**
 * Issue 9, "only the claiming executor (or a role the policy names) may" observe an execution:
 * the policy's optional `observers` names principals (`principal:<id>`) or the executor role
 * (`role:executor`) that may observe executions they did not report, e.g. a collector service
 * running another release. Anyone else is refused before anything is stored.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { DEMO_POLICY, type Seeded } from '../../../scripts/seed.js';
import { call, otherExecutor, seedTenant, uniqueName } from '../executions/helpers.js';
import { executed, postObservation, rawOutput, withPolicy } from './observation-helpers.js';

async function collector(s: Seeded): Promise<{ principal_id: string; api_key: string }> {
  const r = await call('POST', '/v1/principals', {
    key: s.admin.api_key,
    body: { name: uniqueName('collector'), roles: ['executor'], executor_release: 'log-collector 3.1.0' },
  });
  expect(r.status).toBe(201);
  return { principal_id: r.body.principal_id as string, api_key: r.body.api_key as string };
}

async function stored(tenant_id: string, observation_id: string): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT count(*) AS n FROM receipts WHERE tenant_id = ? AND kind = 'observation' AND observation_id = ?",
  )
    .bind(tenant_id, observation_id)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe('observers named by the policy', { timeout: 60_000 }, () => {
  it('a named principal observes an execution it did not report; an unnamed executor is refused', async () => {
    const seeded = await seedTenant('observers');
    const c = await collector(seeded);
    const s = await withPolicy(seeded, { observers: [`principal:${c.principal_id}`] });
    const e = await executed(s);

    const intruder = await otherExecutor(s, 'log-collector 3.1.0');
    const refused = rawOutput(s, e);
    const r = await postObservation(s, refused, intruder);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('executor_mismatch');
    expect(await stored(s.tenant_id, refused.observation_id)).toBe(0);

    const raw = rawOutput(s, e);
    const ok = await postObservation(s, raw, c.api_key);
    expect(ok.status).toBe(201);
    expect(ok.body.decision).toBe('accepted_untrusted_evidence');
    // The receipt row records who observed.
    const row = await env.DB.prepare(
      "SELECT principal_id FROM receipts WHERE tenant_id = ? AND kind = 'observation' AND observation_id = ?",
    )
      .bind(s.tenant_id, raw.observation_id)
      .first<{ principal_id: string }>();
    expect(row?.principal_id).toBe(c.principal_id);
    // The reporting executor still may.
    expect((await postObservation(s, rawOutput(s, e))).status).toBe(201);
    // An agent is refused whatever the policy says (the observe use case is the executor's).
    expect((await postObservation(s, rawOutput(s, e), s.agent.api_key)).status).toBe(403);
  });

  it('role:executor admits every executor of the tenant; without observers only the reporter may', async () => {
    const seeded = await seedTenant('observers-role');
    const s = await withPolicy(seeded, { observers: ['role:executor'] });
    const e = await executed(s);
    const other = await otherExecutor(s, 'another-release 1.0');
    expect((await postObservation(s, rawOutput(s, e), other)).status).toBe(201);

    // The policy in force decides: back to the default, the same executor is refused.
    const put = await call('PUT', '/v1/policy', { key: s.admin.api_key, body: DEMO_POLICY });
    expect(put.status).toBe(200);
    const r = await postObservation(s, rawOutput(s, e), other);
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('executor_mismatch');
  });

  it('refuses a policy whose observers are malformed, unsorted or name a role that cannot observe', async () => {
    const s = await seedTenant('observers-bad');
    for (const observers of [
      ['role:agent'],
      ['role:tenant_admin'],
      ['team:collectors'],
      ['principal:'],
      ['role:executor', 'principal:prn-a'],
      ['principal:prn-a', 'principal:prn-a'],
      [],
    ]) {
      const r = await call('PUT', '/v1/policy', {
        key: s.admin.api_key,
        body: { ...DEMO_POLICY, observers },
      });
      expect([observers, r.status]).toEqual([observers, 400]);
      expect(r.body.error.code).toBe('invalid_policy');
    }
  });
});
