/**
 * The per-principal write limit holds at every door, not only `/v1`: an AuthZEN evaluation and an
 * MCP authorization store receipts and spend budgets, so an empty bucket answers 429 with
 * `Retry-After` before the body is read.
 */
import { env } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { app } from '../../../src/http/app.js';
import { BASE, seedTenant } from '../platform/harness.js';

/** The Worker's vars with a tiny limit: 2 writes at once, 1 a second. */
const tiny = { ...env, WRIT_RATE_LIMIT_BURST: '2', WRIT_RATE_LIMIT_PER_SECOND: '1' } as unknown as Env;

async function post(path: string, key: string, body: unknown) {
  const res = await app.request(
    `${BASE}${path}`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    },
    tiny,
  );
  return { status: res.status, headers: res.headers };
}

const RUN = { max_calls: 5, max_external_writes: 1, max_duration_ms: 600_000 };

afterEach(() => vi.useRealTimers());

describe('the write limit at the AuthZEN and MCP doors', () => {
  it('an AuthZEN evaluation past the burst is 429 with Retry-After', async () => {
    const s = await seedTenant('rl-doors');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    await post('/v1/runs', s.agent.api_key, RUN);
    await post('/v1/runs', s.agent.api_key, RUN);
    // A malformed evaluation would be a 400 if it were read: the limit answers first.
    const r = await post('/access/v1/evaluation', s.agent.api_key, { not: 'an evaluation' });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
  });

  it('an MCP authorization past the burst is 429 with Retry-After', async () => {
    const s = await seedTenant('rl-doors');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    await post('/v1/runs', s.agent.api_key, RUN);
    await post('/v1/runs', s.agent.api_key, RUN);
    const r = await post('/mcp/v1/authorize', s.agent.api_key, {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
    });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
  });
});
