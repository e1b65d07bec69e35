/**
 * The doors' authorizations read the caller's key in one batch with the state (issue 12,
 * src/services/tool-call.ts `authorizeNamedToolByKey`), so their routes run before the usual
 * `authenticate` middleware. These tests hold them to what that middleware guaranteed: who asks
 * is answered before what was asked (401, then the PDP, then the role), whatever is wrong with
 * the body, and a refusal of the caller is never turned into a door's denial or stores anything.
 * Round trips: test/integration/storage/replicas.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Seeded } from '../../../scripts/seed.js';
import { READ_INPUT, call, createRun, doorReads, seedTenant } from '../platform/harness.js';

const SLOW_MS = 30_000;

/** For each door: a well-formed read, a body its translation refuses, and bytes that are no JSON. */
function doors(s: Seeded, run_id: string) {
  const read = doorReads(s, run_id);
  return [
    {
      door: 'mcp',
      path: read.mcp.path,
      good: read.mcp.body,
      // An unmapped method: refused by the translation, before the service.
      untranslatable: { jsonrpc: '2.0', id: 1, method: 'resources/read', params: {} },
      // Refused by the service's parse (no run), before the keyed read.
      unparsable: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'get_deployment', arguments: READ_INPUT },
      },
    },
    {
      door: 'authzen',
      path: read.authzen.path,
      good: read.authzen.body,
      untranslatable: { subject: { type: 'agent', id: s.agent.principal_id } },
      unparsable: {
        subject: { type: 'agent', id: s.agent.principal_id },
        action: { name: 'get_deployment' },
        resource: { type: 'deployment', id: 'production/api' },
        context: { input: READ_INPUT, run_id: 7 },
      },
    },
    {
      door: 'docker',
      path: read.docker.path,
      good: read.docker.body,
      untranslatable: { method: 'resources/read', params: {} },
      unparsable: {
        Session: {},
        Params: { name: 'get_deployment', arguments: 'not an object' },
        Extra: null,
      },
    },
  ] as const;
}

/** Receipts the tenant stored today (its usage counter). */
async function receiptsOf(s: Seeded): Promise<number> {
  const r = await call('GET', '/v1/usage', { key: s.admin.api_key });
  expect(r.status).toBe(200);
  return r.body.receipts_per_day.used as number;
}

describe('doors that read the key with the state: who asks is answered first', { timeout: SLOW_MS }, () => {
  it('no key, or a revoked one: 401 whatever the body, and nothing is stored', async () => {
    const s = await seedTenant('kd');
    const run = await createRun(s);
    await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, { key: s.admin.api_key });
    const before = await receiptsOf(s);
    for (const d of doors(s, run)) {
      for (const body of [d.good, d.untranslatable, d.unparsable]) {
        const revoked = await call('POST', d.path, { key: s.agent.api_key, body });
        expect([d.door, revoked.status]).toEqual([d.door, 401]);
        const none = await call('POST', d.path, { body });
        expect([d.door, none.status]).toEqual([d.door, 401]);
      }
      const garbage = await call('POST', d.path, { key: s.agent.api_key, raw: '{"no json' });
      expect([d.door, garbage.status]).toEqual([d.door, 401]);
    }
    expect(await receiptsOf(s)).toBe(before);
  });

  it('a key without the agent role: 403 whatever the body, never a door denial', async () => {
    const s = await seedTenant('kd');
    const run = await createRun(s);
    const before = await receiptsOf(s);
    for (const d of doors(s, run)) {
      for (const body of [d.good, d.untranslatable, d.unparsable]) {
        const r = await call('POST', d.path, { key: s.approver.api_key, body });
        expect([d.door, r.status]).toEqual([d.door, 403]);
      }
    }
    expect(await receiptsOf(s)).toBe(before);
  });

  it("another tenant's key at a tenant-scoped PDP: 403 before the body is looked at; nothing stored", async () => {
    const s = await seedTenant('kd');
    const other = await seedTenant('kd');
    const run = await createRun(other);
    const before = await receiptsOf(other);
    const d = doors(other, run)[1];
    for (const body of [d.good, d.untranslatable, d.unparsable]) {
      const r = await call('POST', `/t/${s.tenant_id}/access/v1/evaluation`, {
        key: other.agent.api_key,
        body,
      });
      expect(r.status).toBe(403);
      expect(r.body).toBe('this api key belongs to another policy decision point');
    }
    expect(await receiptsOf(other)).toBe(before);
    const own = await call('POST', `/t/${other.tenant_id}/access/v1/evaluation`, {
      key: other.agent.api_key,
      body: d.good,
    });
    expect([own.status, own.body.decision]).toEqual([200, true]);
  });

  it('an authenticated agent: the translation and the parse refusals are the door denials they were', async () => {
    const s = await seedTenant('kd');
    const run = await createRun(s);
    const [mcp, authzen, docker] = doors(s, run);
    const m = await call('POST', mcp.path, { key: s.agent.api_key, body: mcp.unparsable });
    expect([m.status, m.body.decision, m.body.jsonrpc_error.error.code]).toEqual([200, 'deny', -32602]);
    const a = await call('POST', authzen.path, { key: s.agent.api_key, body: authzen.untranslatable });
    expect(a.status).toBe(400);
    const e = await call('POST', authzen.path, { key: s.agent.api_key, body: authzen.unparsable });
    expect([e.status, e.body.decision, e.body.context.error.code]).toEqual([200, false, 'invalid_request']);
    const k = await call('POST', docker.path, { key: s.agent.api_key, body: docker.untranslatable });
    expect([k.status, k.body.isError]).toEqual([200, true]);
  });
});
