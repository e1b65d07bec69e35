/**
 * The demo seed (`npm run dev`, the HTTP benchmark) against a database that already has the name:
 * it takes the next free name with fresh keys instead of failing.
 */
import { describe, expect, it } from 'vitest';
import { seedDemo, seedEnvLines } from '../../../scripts/seed.js';
import { ADMIN_TOKEN, BASE, call, uniqueName, workerFetch } from './harness.js';

describe('demo seed', () => {
  it('is re-runnable: a taken name gets a -2 suffix and fresh keys', async () => {
    const name = uniqueName('seed');
    const opts = {
      baseUrl: BASE,
      adminToken: ADMIN_TOKEN,
      fetch: workerFetch,
      now: Date.now(),
      name,
    };
    const first = await seedDemo(opts);
    const second = await seedDemo(opts);
    expect(first.tenant_name).toBe(name);
    expect(second.tenant_name).toBe(`${name}-2`);
    expect(second.agent.api_key).not.toBe(first.agent.api_key);
    for (const s of [first, second]) {
      const r = await call('GET', `/v1/grants/${s.grant_id}`, { key: s.admin.api_key });
      expect(r.body.grant.principal_id).toBe(s.agent.principal_id);
    }
    expect(seedEnvLines(BASE, first)).toContain(`export AGENT_KEY=${first.agent.api_key}`);
  });
});
