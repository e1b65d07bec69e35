/**
 * Issue 10, bench:edge: `POST /v1/authorize` asks the tenant's rate limiter alongside the keyed
 * read once the isolate has seen the key (src/services/authorize.ts, "Who a key belongs to").
 * The events are recorded in the order the Worker starts and finishes them (a routed D1 binding
 * and a wrapped limiter namespace), never timed. What must hold: the limiter is asked once per
 * request; a limiter that refuses or fails is a 429 with nothing written; the read's verdict (401,
 * 403) still comes first; and a remembered key is asked for its token before the read is back.
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import worker from '../../../src/worker.js';
import { allShards } from '../../../src/platform/shards.js';
import { withRoutedShards } from '../../support/d1-routing.js';
import { BASE, call, createRun, READ_INPUT, seedTenant, tenantD1 } from '../platform/harness.js';
import type { Seeded } from '../../../scripts/seed.js';

type Limiter = 'working' | 'broken';

/** One request through the Worker, recording storage round trips and limiter calls in order. */
async function send(key: string, body: unknown, o: { limiter?: Limiter; vars?: object } = {}) {
  const events: string[] = [];
  const routed = withRoutedShards(env, allShards(env), () => ({
    onRoundTrip: (t) => void events.push(`${t.write ? 'write' : 'read'}>`),
    afterRoundTrip: (t) => void events.push(`${t.write ? 'write' : 'read'}<`),
  }));
  const ns = env.RATE_LIMITER;
  const limiter =
    o.limiter === 'broken'
      ? {
          idFromName: () => {
            throw new Error('limiter unreachable');
          },
          get: () => {
            throw new Error('limiter unreachable');
          },
        }
      : {
          idFromName: (name: string) => ns.idFromName(name),
          get: (id: DurableObjectId) => {
            const stub = ns.get(id);
            return {
              take: (r: Parameters<typeof stub.take>[0]) => {
                events.push('limiter>');
                return stub.take(r);
              },
            };
          },
        };
  const e = { ...routed, ...o.vars, RATE_LIMITER: limiter } as unknown as Env;
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`${BASE}/v1/authorize`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
    e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  const json = (await res.json()) as { error?: { code: string } };
  return { status: res.status, code: json.error?.code ?? null, events };
}

async function receipts(s: Seeded): Promise<number> {
  const r = await tenantD1(s)
    .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
    .bind(s.tenant_id)
    .first<{ n: number }>();
  return r?.n ?? -1;
}

const read = (s: Seeded, run_id: string) => ({
  tool_contract_sha256: s.read_contract_sha256,
  input: READ_INPUT,
  run_id,
});

afterEach(() => {
  vi.useRealTimers();
});

describe('authorize: the rate limiter alongside the keyed read', () => {
  it('first sight: after the read; a remembered key: before the read is back, once per request', async () => {
    const s = await seedTenant('rlo');
    const run = await createRun(s);
    const first = await send(s.agent.api_key, read(s, run));
    expect(first.status).toBe(200);
    expect(first.events.slice(0, 3)).toEqual(['read>', 'read<', 'limiter>']);
    const second = await send(s.agent.api_key, read(s, run));
    expect(second.status).toBe(200);
    expect(second.events.indexOf('limiter>')).toBeLessThan(second.events.indexOf('read<'));
    // One token per request, whichever way it was taken; the commit after both.
    for (const r of [first, second]) {
      expect(r.events.filter((x) => x === 'limiter>')).toHaveLength(1);
      expect(r.events.indexOf('write>')).toBeGreaterThan(r.events.indexOf('limiter>'));
    }
  });

  it('a remembered key and a limiter that fails: 429, nothing written', async () => {
    const s = await seedTenant('rlo');
    const run = await createRun(s);
    expect((await send(s.agent.api_key, read(s, run))).status).toBe(200);
    const before = await receipts(s);
    const r = await send(s.agent.api_key, read(s, run), { limiter: 'broken' });
    expect([r.status, r.code]).toEqual([429, 'rate_limited']);
    expect(r.events).not.toContain('write>');
    expect(await receipts(s)).toBe(before);
  });

  it('a remembered key and a limiter that refuses: 429, nothing written; the token is taken once', async () => {
    const s = await seedTenant('rlo');
    const run = await createRun(s);
    // Tokens for two requests, the clock frozen (no refill); a second take per request would
    // refuse the second.
    const vars = { WRIT_RATE_LIMIT_BURST: '2', WRIT_RATE_LIMIT_PER_SECOND: '1' };
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    const statuses = [];
    for (let i = 0; i < 2; i++) statuses.push((await send(s.agent.api_key, read(s, run), { vars })).status);
    expect(statuses).toEqual([200, 200]);
    const before = await receipts(s);
    const r = await send(s.agent.api_key, read(s, run), { vars });
    expect([r.status, r.code]).toEqual([429, 'rate_limited']);
    expect(await receipts(s)).toBe(before);
  });

  it("a remembered key that was revoked: 401 before the limiter's answer, even a failing one", async () => {
    const s = await seedTenant('rlo');
    const run = await createRun(s);
    expect((await send(s.agent.api_key, read(s, run))).status).toBe(200);
    const revoked = await call('POST', `/v1/principals/${s.agent.principal_id}/revoke`, {
      key: s.admin.api_key,
    });
    expect(revoked.status).toBe(200);
    const before = await receipts(s);
    for (const limiter of ['working', 'broken'] as const) {
      const r = await send(s.agent.api_key, read(s, run), { limiter });
      expect([r.status, r.code]).toEqual([401, 'unauthenticated']);
    }
    expect(await receipts(s)).toBe(before);
  });

  it('a key without the agent role is never remembered: 403, and the limiter is never asked', async () => {
    const s = await seedTenant('rlo');
    const run = await createRun(s);
    for (let i = 0; i < 2; i++) {
      const r = await send(s.approver.api_key, read(s, run));
      expect([r.status, r.code]).toEqual([403, 'forbidden_role']);
      expect(r.events).not.toContain('limiter>');
    }
  });
});
