/**
 * The per-principal write limit holds at every door, not only `/v1`: an AuthZEN evaluation and an
 * MCP authorization store receipts and spend budgets, so an empty bucket answers 429 with
 * `Retry-After` before the body is read.
 */
import { env } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { app } from '../../../src/http/app.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import { BASE, seedTenant, uniqueName } from '../platform/harness.js';
import { mcpAuthorizedRollback } from '../executions/helpers.js';

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
  const text = await res.text();
  const json = text.length > 0 ? JSON.parse(text) : null;
  return { status: res.status, headers: res.headers, body: json as Record<string, unknown> | null };
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

  it('an MCP after-call that also records an observation stores two receipts and pays two tokens', async () => {
    const s = await seedTenant('rl-doors');
    const receipt = await mcpAuthorizedRollback(s);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    // The executor's bucket holds 2: the claim takes one.
    const claimed = await post('/v1/executions/claim', s.executor.api_key, {
      authorization_receipt_sha256: receipt.sha256,
    });
    expect(claimed.status).toBe(200);
    const started = receipt.body.evaluated_at_unix_ms as number;
    const report = {
      operation_id: claimed.body?.operation_id,
      fencing_token: claimed.body?.fencing_token,
      observation_id: `obs-${uniqueName('x')}`,
      started_at_unix_ms: started,
      completed_at_unix_ms: started + 5,
      effect_id: 'rollout-1',
      before_state_sha256: digestOf({ v: 'v42' }),
      after_state_sha256: digestOf({ v: 'v41' }),
      result: { content: [{ type: 'text', text: 'rolled back' }] },
      evidence: { observation_id: `ev-${uniqueName('x')}`, source_release: 'demo-mcp 1.0.0' },
    };
    // An execution receipt and an observation receipt: two writes, one token left. Refused, and
    // nothing is recorded (the accepted retry below is not a replay).
    const refused = await post('/mcp/v1/after-call', s.executor.api_key, report);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('2');
    vi.setSystemTime(Date.now() + 2_000);
    const r = await post('/mcp/v1/after-call', s.executor.api_key, report);
    expect(r.status).toBe(200);
    expect((r.body?.execution as { status: string }).status).toBe('verified_succeeded');
    expect(r.body?.observation).toMatchObject({ replayed: false });
  });
});
