/**
 * `POST /v1/contracts/discovery`: a tool server's advertised definitions compared with the
 * tenant's pinned contracts, black-box through the Worker against real D1. Drift is never
 * merged: a drifted tool's pinned contracts are quarantined and later authorizations denied.
 */
import { describe, expect, it } from 'vitest';
import { READ_CONTRACT, ROLLBACK_CONTRACT } from '../../../scripts/seed.js';
import { authorize, call, createRun, READ_INPUT, seedTenant } from './harness.js';

const snapshotOf = (tools: unknown[], source = 'mcp://deploy-tools tools/list') => ({
  source,
  observed_at_unix_ms: Date.now(),
  tools,
});

describe('POST /v1/contracts/discovery', () => {
  it('the reviewed definitions as advertised: everything matches, nothing is quarantined', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: snapshotOf([READ_CONTRACT, ROLLBACK_CONTRACT]) },
    });
    expect(r.status).toBe(200);
    expect(r.body.tools.map((t: { status: string }) => t.status)).toEqual([
      'matches_reviewed',
      'matches_reviewed',
    ]);
    expect(r.body.quarantine).toEqual([]);
    expect(r.body.quarantined).toEqual([]);
    expect(r.body.snapshot_sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a drifted definition quarantines the pinned contract; authorization is then denied', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const body = { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run };
    expect((await authorize(s, body)).status).toBe(200);

    // The server now runs the read tool as an external write with an extra capability.
    const drifted = {
      ...READ_CONTRACT,
      effect: 'external_write',
      required_capabilities: ['deployment:read', 'deployment:rollback'],
    };
    const r = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: snapshotOf([drifted, ROLLBACK_CONTRACT]) },
    });
    expect(r.status).toBe(200);
    const read = r.body.tools.find((t: { tool_name: string }) => t.tool_name === READ_CONTRACT.tool_name);
    expect(read).toMatchObject({
      status: 'drifted',
      closest_reviewed_sha256: s.read_contract_sha256,
      changed_fields: ['effect', 'required_capabilities'],
      widens: ['effect', 'required_capabilities'],
      quarantine: [s.read_contract_sha256],
    });
    expect(r.body.quarantined).toEqual([s.read_contract_sha256]);

    const pinned = await call('GET', `/v1/contracts/${s.read_contract_sha256}`, { key: s.admin.api_key });
    expect(pinned.body.quarantined).toBe(true);
    expect(pinned.body.quarantine_reason).toBe(`discovery drift (snapshot ${r.body.snapshot_sha256})`);
    const denied = await authorize(s, body);
    expect(denied.status).toBe(403);
    expect(denied.body.violations).toEqual(['contract_quarantined']);
    // The other tool is untouched.
    const rollback = await call('GET', `/v1/contracts/${s.rollback_contract_sha256}`, {
      key: s.admin.api_key,
    });
    expect(rollback.body.quarantined).toBe(false);
  });

  it('quarantine: false reports the drift and changes nothing', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: {
        snapshot: snapshotOf([{ ...READ_CONTRACT, executor_release: 'other 9.9.9' }]),
        quarantine: false,
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.quarantine).toEqual([s.read_contract_sha256]);
    expect(r.body.quarantined).toEqual([]);
    const pinned = await call('GET', `/v1/contracts/${s.read_contract_sha256}`, { key: s.admin.api_key });
    expect(pinned.body.quarantined).toBe(false);
  });

  it('unreviewed and not advertised tools are reported, never pinned', async () => {
    const s = await seedTenant();
    const unknownTool = { ...READ_CONTRACT, tool_name: 'delete_everything', effect: 'irreversible' };
    const r = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: snapshotOf([unknownTool]) },
    });
    expect(r.status).toBe(200);
    const byName = Object.fromEntries(
      r.body.tools.map((t: { tool_name: string; status: string }) => [t.tool_name, t.status]),
    );
    expect(byName).toEqual({
      delete_everything: 'unreviewed',
      [READ_CONTRACT.tool_name]: 'not_advertised',
      [ROLLBACK_CONTRACT.tool_name]: 'not_advertised',
    });
    expect(r.body.quarantined).toEqual([]);
    const sha = r.body.tools.find(
      (t: { tool_name: string }) => t.tool_name === 'delete_everything',
    ).discovered_sha256;
    expect((await call('GET', `/v1/contracts/${sha}`, { key: s.admin.api_key })).status).toBe(404);
  });

  it('refuses a snapshot naming a tool twice, unknown fields, and non-admins; another tenant is untouched', async () => {
    const s = await seedTenant();
    const other = await seedTenant('o');
    const twice = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: snapshotOf([READ_CONTRACT, { ...READ_CONTRACT, executor_release: 'x 1' }]) },
    });
    expect(twice.status).toBe(400);
    expect(twice.body.error.code).toBe('invalid_request');
    const extra = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: { ...snapshotOf([READ_CONTRACT]), note: 'x' } },
    });
    expect(extra.status).toBe(400);
    const extraTop = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: snapshotOf([READ_CONTRACT]), merge: true },
    });
    expect(extraTop.status).toBe(400);
    const agent = await call('POST', '/v1/contracts/discovery', {
      key: s.agent.api_key,
      body: { snapshot: snapshotOf([READ_CONTRACT]) },
    });
    expect(agent.status).toBe(403);

    // Drift reported by one tenant quarantines only that tenant's contract.
    const r = await call('POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: { snapshot: snapshotOf([{ ...READ_CONTRACT, timeout_ms: READ_CONTRACT.timeout_ms + 1 }]) },
    });
    expect(r.body.quarantined).toEqual([s.read_contract_sha256]);
    const theirs = await call('GET', `/v1/contracts/${other.read_contract_sha256}`, {
      key: other.admin.api_key,
    });
    expect(theirs.body.quarantined).toBe(false);
  });
});
