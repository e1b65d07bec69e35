/**
 * Tenant-admin endpoints: policy, contracts, grants.
 */
import { describe, expect, it } from 'vitest';
import { DEMO_POLICY, READ_CONTRACT, ROLLBACK_CONTRACT } from '../../../scripts/seed.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { DEFAULT_POLICY, policyDigest } from '../../../src/core/policy.js';
import { call, seedTenant } from './harness.js';

describe('PUT /v1/policy', () => {
  it('returns the digest of the canonical document and makes it the policy in force', async () => {
    const s = await seedTenant();
    expect(s.policy_sha256).toBe(digestOf(DEMO_POLICY));
    const doc = { ...DEMO_POLICY, approval_max_lifetime_ms: 120_000 };
    const r = await call('PUT', '/v1/policy', { key: s.admin.api_key, body: doc });
    expect(r.status).toBe(200);
    expect(r.body.policy_sha256).toBe(digestOf(doc));
    const g = await call('GET', '/v1/policy', { key: s.agent.api_key });
    expect(g.body).toEqual({ policy_sha256: digestOf(doc), policy: doc });
    // Same content again: same digest.
    const again = await call('PUT', '/v1/policy', { key: s.admin.api_key, body: doc });
    expect(again.body.policy_sha256).toBe(r.body.policy_sha256);
  });

  it('a new tenant starts with the stored default policy', async () => {
    const { ADMIN_TOKEN, uniqueName } = await import('./harness.js');
    const t = await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name: uniqueName('d') } });
    expect(t.body.tenant.policy_sha256).toBe(policyDigest(DEFAULT_POLICY));
  });

  it('rejects a policy that waives approval for writes, unsorted lists, unknown fields and absurd bounds', async () => {
    const s = await seedTenant();
    const waive = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_required_effects: ['external_write'] },
    });
    expect(waive.status).toBe(400);
    expect(waive.body.error.code).toBe('invalid_policy');
    expect(waive.body.error.issues).toEqual([
      { path: 'policy.approval_required_effects', message: 'must include "irreversible"' },
    ]);
    const unsorted = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_required_effects: ['irreversible', 'external_write'] },
    });
    expect(unsorted.status).toBe(400);
    const unknown = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, tenant_id: s.tenant_id },
    });
    expect(unknown.status).toBe(400);
    const absurd = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, approval_max_lifetime_ms: 365 * 24 * 3_600_000 },
    });
    expect(absurd.status).toBe(400);
    const missing = await call('PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...DEMO_POLICY, reconciliation: undefined },
    });
    expect(missing.status).toBe(400);
    const g = await call('GET', '/v1/policy', { key: s.admin.api_key });
    expect(g.body.policy_sha256).toBe(s.policy_sha256);
  });

  it('is tenant-admin only', async () => {
    const s = await seedTenant();
    const r = await call('PUT', '/v1/policy', { key: s.agent.api_key, body: DEMO_POLICY });
    expect(r.status).toBe(403);
  });
});

describe('contracts', () => {
  it('pinning identical content returns the same digest; a changed field is a different contract', async () => {
    const s = await seedTenant();
    const again = await call('POST', '/v1/contracts', { key: s.admin.api_key, body: ROLLBACK_CONTRACT });
    expect(again.status).toBe(200);
    expect(again.body.tool_contract_sha256).toBe(s.rollback_contract_sha256);
    expect(s.rollback_contract_sha256).toBe(digestOf(ROLLBACK_CONTRACT));
    const changed = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: { ...ROLLBACK_CONTRACT, executor_release: 'rollback-executor 1.5.0' },
    });
    expect(changed.status).toBe(201);
    expect(changed.body.tool_contract_sha256).not.toBe(s.rollback_contract_sha256);
    const g = await call('GET', `/v1/contracts/${s.rollback_contract_sha256}`, { key: s.agent.api_key });
    expect(g.status).toBe(200);
    expect(g.body.contract).toEqual(ROLLBACK_CONTRACT);
    expect(g.body.quarantined).toBe(false);
  });

  it('quarantine is final and idempotent', async () => {
    const s = await seedTenant();
    const q = await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, {
      key: s.admin.api_key,
      body: { reason: 'schema drift' },
    });
    expect(q.status).toBe(200);
    expect(q.body).toMatchObject({ quarantined: true, quarantine_reason: 'schema drift' });
    const again = await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, {
      key: s.admin.api_key,
    });
    expect(again.body.quarantined_at_unix_ms).toBe(q.body.quarantined_at_unix_ms);
    expect(again.body.quarantine_reason).toBe('schema drift');
    const agent = await call('POST', `/v1/contracts/${s.rollback_contract_sha256}/quarantine`, {
      key: s.agent.api_key,
    });
    expect(agent.status).toBe(403);
  });

  it('an unknown or malformed digest is a 404', async () => {
    const s = await seedTenant();
    expect((await call('GET', `/v1/contracts/${'0'.repeat(64)}`, { key: s.admin.api_key })).status).toBe(404);
    expect((await call('GET', '/v1/contracts/not-a-digest', { key: s.admin.api_key })).status).toBe(404);
  });
});

describe('grants', () => {
  const scope = [{ type: 'deployment', attributes: { environment: ['staging'], service: ['api'] } }];
  const grantBody = (principal_id: string, extra: Record<string, unknown> = {}) => ({
    principal_id,
    allowed_tools: ['get_deployment'],
    allowed_effects: ['read_only'],
    capabilities: [{ capability: 'deployment:read', resources: scope }],
    expires_at_unix_ms: Date.now() + 3_600_000,
    ...extra,
  });

  it('issues a grant under the policy in force, for a principal of the tenant', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(s.agent.principal_id),
    });
    expect(r.status).toBe(201);
    expect(r.body.grant).toMatchObject({
      tenant_id: s.tenant_id,
      principal_id: s.agent.principal_id,
      policy_sha256: s.policy_sha256,
    });
    expect(r.body.grant_sha256).toBe(digestOf(r.body.grant));
    const g = await call('GET', `/v1/grants/${r.body.grant_id}`, { key: s.admin.api_key });
    expect(g.body.grant).toEqual(r.body.grant);
  });

  it('checks named tenant and policy, rejects invalid grants, 404s unknown principals', async () => {
    const s = await seedTenant();
    const other = await seedTenant();
    const t = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(s.agent.principal_id, { tenant_id: other.tenant_id }),
    });
    expect(t.status).toBe(403);
    expect(t.body.error.code).toBe('tenant_mismatch');
    const p = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(s.agent.principal_id, { policy_sha256: 'e'.repeat(64) }),
    });
    expect(p.status).toBe(409);
    const cross = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(other.agent.principal_id),
    });
    expect(cross.status).toBe(404);
    const dup = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(s.agent.principal_id, { allowed_tools: ['get_deployment', 'get_deployment'] }),
    });
    expect(dup.status).toBe(400);
    expect(dup.body.error.code).toBe('invalid_grant');
    const wrongType = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(s.agent.principal_id, {
        capabilities: [
          { capability: 'deployment:read', resources: [{ type: 'database', attributes: { name: ['x'] } }] },
        ],
      }),
    });
    expect(wrongType.status).toBe(400);
    const wildcard = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: grantBody(s.agent.principal_id, {
        capabilities: [
          {
            capability: 'deployment:read',
            resources: [{ type: 'deployment', attributes: { service: ['*'] } }],
          },
        ],
      }),
    });
    expect(wildcard.status).toBe(400);
  });

  it('revocation is final and idempotent', async () => {
    const s = await seedTenant();
    const r = await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key });
    expect(r.status).toBe(200);
    const again = await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key });
    expect(again.body.revoked_at_unix_ms).toBe(r.body.revoked_at_unix_ms);
    expect((await call('POST', '/v1/grants/grt-nope/revoke', { key: s.admin.api_key })).status).toBe(404);
  });

  it('the seeded read contract is pinned as given', async () => {
    const s = await seedTenant();
    expect(s.read_contract_sha256).toBe(digestOf(READ_CONTRACT));
  });
});
