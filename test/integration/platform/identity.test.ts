/**
 * Identity: the platform admin token, tenants, principals, API keys and roles.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { apiKeyDigest } from '../../../src/core/identity/identity.js';
import { ADMIN_TOKEN, call, seedTenant, uniqueName, d1Of } from './harness.js';

describe('POST /v1/tenants (platform admin)', () => {
  it('creates a tenant, its default policy and its first admin, whose key is shown once', async () => {
    const name = uniqueName('acme');
    const r = await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } });
    expect(r.status).toBe(201);
    expect(r.body.tenant).toMatchObject({ name, tenant_id: expect.stringMatching(/^ten-[a-z2-7]{26}$/) });
    expect(r.body.tenant.policy_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(r.body.admin.api_key).toMatch(/^writ_(0|1)_[A-Za-z0-9_-]{43}$/);
    expect(r.body.admin.roles).toEqual(['tenant_admin']);

    // Only the key's SHA-256 is stored.
    const d1 = await d1Of(r.body.tenant.tenant_id);
    const row = await d1
      .prepare('SELECT key_sha256 FROM principals WHERE principal_id = ?')
      .bind(r.body.admin.principal_id)
      .first<{ key_sha256: string }>();
    expect(row?.key_sha256).toBe(apiKeyDigest(r.body.admin.api_key));
    const dump = await d1
      .prepare('SELECT * FROM principals WHERE tenant_id = ?')
      .bind(r.body.tenant.tenant_id)
      .all();
    expect(JSON.stringify(dump.results)).not.toContain(r.body.admin.api_key);

    // The tenant's policy is readable and is the one receipts will bind.
    const p = await call('GET', '/v1/policy', { key: r.body.admin.api_key });
    expect(p.status).toBe(200);
    expect(p.body.policy_sha256).toBe(r.body.tenant.policy_sha256);
  });

  it('a taken name is a 409 and writes nothing', async () => {
    const name = uniqueName('dup');
    expect((await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } })).status).toBe(201);
    const again = await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name } });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
    // One tenant of that name over every shard, and one directory row.
    let n = 0;
    for (const d1 of [env.DB, env.DB_SHARD_1]) {
      const row = await d1
        .prepare('SELECT count(*) AS n FROM tenants WHERE name = ?')
        .bind(name)
        .first<{ n: number }>();
      n += row?.n ?? 0;
    }
    expect(n).toBe(1);
    const dir = await env.DB.prepare('SELECT count(*) AS n FROM tenant_shards WHERE name = ?')
      .bind(name)
      .first<{ n: number }>();
    expect(dir?.n).toBe(1);
  });

  it('refuses a missing or wrong admin token, and a principal key', async () => {
    const s = await seedTenant();
    for (const key of [undefined, 'wrong', `${ADMIN_TOKEN}x`, s.admin.api_key]) {
      const r = await call('POST', '/v1/tenants', {
        ...(key === undefined ? {} : { key }),
        body: { name: uniqueName('x') },
      });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('unauthenticated');
    }
  });

  it('the admin token can do nothing but create tenants', async () => {
    for (const [method, path] of [
      ['POST', '/v1/principals'],
      ['PUT', '/v1/policy'],
      ['POST', '/v1/contracts'],
      ['POST', '/v1/grants'],
      ['GET', '/v1/approval-requests'],
      ['POST', '/v1/authorize'],
    ] as const) {
      const r = await call(
        method,
        path,
        method === 'GET' ? { key: ADMIN_TOKEN } : { key: ADMIN_TOKEN, body: {} },
      );
      expect(r.status, `${method} ${path}`).toBe(401);
    }
  });

  it('rejects bad tenant names with a typed 400', async () => {
    const r = await call('POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name: 'Not A Slug' } });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.issues[0].path).toBe('name');
  });
});

describe('principals', () => {
  it('a tenant admin creates principals with roles; an executor carries its release', async () => {
    const s = await seedTenant();
    const r = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'exec-2', roles: ['executor', 'agent'], executor_release: 'rollback-executor 2.0.0' },
    });
    expect(r.status).toBe(201);
    expect(r.body.roles).toEqual(['agent', 'executor']);
    expect(r.body.executor_release).toBe('rollback-executor 2.0.0');
    expect(r.body.tenant_id).toBe(s.tenant_id);
    const g = await call('GET', `/v1/principals/${r.body.principal_id}`, { key: s.admin.api_key });
    expect(g.status).toBe(200);
    expect(g.body).not.toHaveProperty('api_key');

    const noRelease = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'e', roles: ['executor'] },
    });
    expect(noRelease.status).toBe(400);
    expect(noRelease.body.error.issues).toEqual([
      { path: 'executor_release', message: 'is required for an executor' },
    ]);
    const stray = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'a', roles: ['agent'], executor_release: 'x' },
    });
    expect(stray.status).toBe(400);
    const badRole = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'a', roles: ['root'] },
    });
    expect(badRole.status).toBe(400);
  });

  it('a tenant named in the body must be the caller’s (403 tenant_mismatch, nothing written)', async () => {
    const s = await seedTenant();
    const other = await seedTenant();
    const r = await call('POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'sneaky', roles: ['agent'], tenant_id: other.tenant_id },
    });
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('tenant_mismatch');
    for (const d1 of [env.DB, env.DB_SHARD_1]) {
      const n = await d1.prepare("SELECT count(*) AS n FROM principals WHERE name = 'sneaky'").first<{
        n: number;
      }>();
      expect(n?.n).toBe(0);
    }
  });

  it('only a tenant admin manages principals (403 forbidden_role)', async () => {
    const s = await seedTenant();
    for (const key of [s.agent.api_key, s.approver.api_key, s.executor.api_key]) {
      const r = await call('POST', '/v1/principals', { key, body: { name: 'x', roles: ['agent'] } });
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe('forbidden_role');
    }
  });

  it('revocation is immediate, final and idempotent', async () => {
    const s = await seedTenant();
    expect((await call('GET', '/v1/policy', { key: s.agent.api_key })).status).toBe(200);
    const r = await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, { key: s.admin.api_key });
    expect(r.status).toBe(200);
    const at = r.body.revoked_at_unix_ms as number;
    expect(at).toEqual(expect.any(Number));
    const denied = await call('GET', '/v1/policy', { key: s.agent.api_key });
    expect(denied.status).toBe(401);
    const again = await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, {
      key: s.admin.api_key,
    });
    expect(again.status).toBe(200);
    expect(again.body.revoked_at_unix_ms).toBe(at);
  });
});

describe('authentication', () => {
  it('an unknown, malformed or missing key is a 401 with the same answer', async () => {
    const bodies = [];
    for (const headers of [
      {},
      { authorization: 'Bearer writ_' + 'A'.repeat(43) },
      { authorization: 'Bearer not-a-key' },
      { authorization: 'Basic abc' },
    ]) {
      const r = await call('GET', '/v1/policy', { headers });
      expect(r.status).toBe(401);
      bodies.push({ code: r.body.error.code, message: r.body.error.message });
    }
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
  });

  it('every response carries a request id', async () => {
    const r = await call('GET', '/v1/healthz');
    expect(r.headers.get('x-request-id')).toMatch(/^req-[a-z2-7]{26}$/);
  });

  it('an unknown route is a typed 404', async () => {
    const s = await seedTenant();
    const r = await call('GET', '/v1/nope', { key: s.admin.api_key });
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe('not_found');
  });
});
