/**
 * The console's Security page (`GET /console/security?window=1h|24h|7d`): `GET /v1/metrics` as a
 * page for the tenant admin. An approver sees no link to it and is refused (403); an unknown
 * window is a 400 page; the counts are the tenant's own.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { rateLimiterStub } from '../../../durable-objects/rate-limiter.js';
import type { Seeded } from '../../../scripts/seed.js';
import { authorize, authorizeBody, call, consoleAs, createRun, seedTenant } from '../platform/harness.js';

async function deny(s: Seeded): Promise<string[]> {
  const r = await authorize(s, authorizeBody(s, await createRun(s)));
  expect(r.status).toBe(403);
  return r.body.violations as string[];
}

describe('console: Security page', () => {
  it("shows the tenant admin the window's decisions, denials by violation and open work", async () => {
    const s = await seedTenant('secpage');
    const violations = await deny(s);
    await deny(s);
    const q = await call('POST', `/v1/contracts/${s.read_contract_sha256}/quarantine`, {
      key: s.admin.api_key,
      body: { reason: 'drift' },
    });
    expect(q.status).toBe(200);
    // Two refusals of the agent by its limiter (a bucket of one): counted without a receipt.
    const limiter = rateLimiterStub(env, s.tenant_id);
    const take = { tenant_id: s.tenant_id, principal_id: s.agent.principal_id, per_second: 1, burst: 1 };
    const now = Date.now();
    const takes = [];
    for (let i = 0; i < 3; i++) takes.push((await limiter.take({ ...take, now })).allowed);
    expect(takes).toEqual([true, false, false]);
    const get = await consoleAs(s.admin.api_key);
    const pending = await get('/console/pending');
    expect(pending.text).toContain('href="/console/security"');

    const page = await get('/console/security');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<h1>Security decisions</h1>');
    expect(page.text).toContain('aria-current="page">Last 24 hours');
    expect(page.text).toMatch(/authorization denied<\/th>\s*<td class="num">2</);
    for (const v of violations) expect(page.text).toMatch(new RegExp(`${v}</th>\\s*<td class="num">2<`));
    expect(page.text).toContain('Violations of 2 denied authorizations');
    expect(page.text).toContain('1 quarantined contract.');
    expect(page.text).toContain('No open operation.');
    expect(page.text).not.toContain('Partial:');
    expect(page.text).toContain('<h2>Writes refused by the rate limit</h2>');
    expect(page.text).toMatch(/\b2 refused since/);
    expect(page.text).toMatch(new RegExp(`${s.agent.principal_id}</th>\\s*<td class="num">2<`));

    const hour = await get('/console/security?window=1h');
    expect(hour.status).toBe(200);
    expect(hour.text).toContain('aria-current="page">Last hour');
    expect((await get('/console/security?window=7d')).status).toBe(200);
  });

  it("shows another tenant's admin none of it", async () => {
    const s = await seedTenant('secpage');
    await deny(s);
    const other = await seedTenant('secpage');
    const page = await (await consoleAs(other.admin.api_key))('/console/security');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Receipts by kind and outcome: none.');
    expect(page.text).toContain('0 quarantined contracts.');
    expect(page.text).toMatch(/\b0 refused since/);
  });

  it('refuses an approver (no link, 403) and a window it does not offer (400)', async () => {
    const s = await seedTenant('secpage');
    const approver = await consoleAs(s.approver.api_key);
    expect((await approver('/console/pending')).text).not.toContain('href="/console/security"');
    const refused = await approver('/console/security');
    expect(refused.status).toBe(403);
    expect(refused.text).not.toContain('Security decisions');
    const admin = await consoleAs(s.admin.api_key);
    for (const w of ['30d', '1H', '', '24h&window=7d', '24h&cursor=x', '%3Cscript%3E']) {
      const r = await admin(`/console/security?window=${w}`);
      expect(r.status, w).toBe(400);
      expect(r.text, w).not.toContain('<script>');
    }
  });
});
