/**
 * Rate-limit refusals in the security metrics: a `429 rate_limited` stores no receipt, so the
 * tenant's limiter object counts each refusal per minute, by principal and by the bucket that
 * refused (src/core/limits/refusal-tally.ts), and `GET /v1/metrics` reads them back as
 * `rate_limited`. Counts are flushed to the object's storage by an alarm; they survive an eviction
 * once flushed, expire after `REFUSAL_RETENTION_MS`, and one tenant's counts are never another's.
 * Time is frozen with fake `Date`, so nothing depends on how fast the machine is.
 */
import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  REFUSAL_RETENTION_MS,
  REFUSAL_SUMMARY_TOP,
  type RateLimitRequest,
  type RateLimiterObject,
  rateLimiterStub,
} from '../../../durable-objects/rate-limiter.js';
import { render } from '../../../src/cli/metrics.js';
import {
  REFUSAL_MINUTE_MS,
  type RefusalCount,
  summarizeRefusals,
} from '../../../src/core/limits/refusal-tally.js';
import { app } from '../../../src/http/app.js';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import { seedTenant, uniqueName } from '../platform/harness.js';

const BASE = 'https://writ.test';
/** The Worker's vars with a tiny limit: 2 writes at once, 1 a second. */
const tiny = { ...env, WRIT_RATE_LIMIT_BURST: '2', WRIT_RATE_LIMIT_PER_SECOND: '1' } as unknown as Env;
const RUN = { max_calls: 5, max_external_writes: 1, max_duration_ms: 600_000 };

afterEach(() => {
  vi.useRealTimers();
});

async function send(e: Env, method: string, path: string, key: string, body?: unknown) {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { ...init.headers, 'content-type': 'application/json' };
  }
  const res = await app.request(`${BASE}${path}`, init, e);
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? JSON.parse(text) : null };
}

describe('GET /v1/metrics counts rate-limit refusals', () => {
  it('each 429 is counted once under its principal and bucket; another tenant sees none of them', async () => {
    const s = await seedTenant('rl-count');
    const other = await seedTenant('rl-count-other');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000); // every bucket full again
    const statuses = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN)).status);
    expect(statuses).toEqual([201, 201, 429, 429, 429]);

    const m = await send(tiny, 'GET', '/v1/metrics', s.admin.api_key);
    expect(m.status).toBe(200);
    expect(m.body.rate_limited).toEqual({
      total: 3,
      limited_by: { principal: 3, tenant: 0 },
      by_principal: [{ principal_id: s.agent.principal_id, n: 3 }],
      principals_left_out: 0,
      from_minute_unix_ms: Math.floor((Date.now() - 86_400_000) / REFUSAL_MINUTE_MS) * REFUSAL_MINUTE_MS,
    });
    // The CLI prints the section.
    expect(render(m.body)).toContain('writes refused by the rate limit since');
    expect(render(m.body)).toContain(`${s.agent.principal_id}  3`);

    const elsewhere = await send(tiny, 'GET', '/v1/metrics', other.admin.api_key);
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.rate_limited.total).toBe(0);
    expect(elsewhere.body.rate_limited.by_principal).toEqual([]);

    // A window that ends before the refusals' minute does not count them (whole minutes).
    vi.setSystemTime(Date.now() + 3 * REFUSAL_MINUTE_MS);
    const later = await send(tiny, 'GET', '/v1/metrics?window_ms=60000', s.admin.api_key);
    expect(later.status).toBe(200);
    expect(later.body.rate_limited.total).toBe(0);
  });

  it("a refusal by the tenant's aggregate bucket is counted as the tenant's", async () => {
    const s = await seedTenant('rl-count-tenant');
    const jointly = {
      ...env,
      WRIT_RATE_LIMIT_BURST: '5',
      WRIT_RATE_LIMIT_PER_SECOND: '1',
      WRIT_TENANT_RATE_LIMIT_BURST: '2',
      WRIT_TENANT_RATE_LIMIT_PER_SECOND: '1',
    } as unknown as Env;
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    expect((await send(jointly, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(201);
    expect((await send(jointly, 'PUT', '/v1/policy', s.admin.api_key, DEMO_POLICY)).status).toBe(200);
    expect((await send(jointly, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(429);
    // The metrics read itself is refused by the tenant's bucket too: a refusal, counted.
    expect((await send(jointly, 'GET', '/v1/metrics', s.admin.api_key)).status).toBe(429);
    vi.setSystemTime(Date.now() + 10_000);
    const m = await send(jointly, 'GET', '/v1/metrics', s.admin.api_key);
    expect(m.status).toBe(200);
    expect(m.body.rate_limited.total).toBe(2);
    expect(m.body.rate_limited.limited_by).toEqual({ principal: 0, tenant: 2 });
  });
});

describe('GET /v1/metrics when the limiter cannot give its counts', () => {
  it('is the 429 of a limiter that cannot answer (Retry-After: 1), not a 500 and not metrics without them', async () => {
    const s = await seedTenant('rl-count-down');
    // The tokens of the read are taken; the counts' call fails (an overloaded or restarting object).
    const failing = {
      ...env,
      RATE_LIMITER: {
        idFromName: (name: string) => env.RATE_LIMITER.idFromName(name),
        get: (id: DurableObjectId) => {
          const real = env.RATE_LIMITER.get(id);
          return {
            take: (r: RateLimitRequest) => real.take(r),
            refusals: () => Promise.reject(new Error('limiter overloaded: internal detail')),
          };
        },
      },
    } as unknown as Env;
    const res = await app.request(
      `${BASE}/v1/metrics`,
      { headers: { authorization: `Bearer ${s.admin.api_key}` } },
      failing,
    );
    const text = await res.text();
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(JSON.parse(text).error.code).toBe('rate_limited');
    expect(text).not.toContain('internal detail');
  });
});

describe('RateLimiterObject refusal counts', () => {
  const req = (tenant_id: string, now: number): RateLimitRequest => ({
    tenant_id,
    principal_id: 'agent',
    now,
    per_second: 1,
    burst: 1,
  });

  it('are flushed by the alarm, survive an eviction once flushed, and expire after the retention', async () => {
    const tenant = uniqueName('rl-flush');
    const stub = rateLimiterStub(env, tenant);
    const now = Date.now();
    const old = now - REFUSAL_RETENTION_MS - 2 * REFUSAL_MINUTE_MS;
    for (const t of [old, old, old, now, now, now]) await stub.take(req(tenant, t));
    // One admitted at each time, two refused at each.
    const window = { tenant_id: tenant, from: now - 86_400_000, to: now };
    expect((await stub.refusals(window)).total).toBe(2);
    const alarm = await runInDurableObject(stub, (_o: RateLimiterObject, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();

    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const rows = await runInDurableObject(stub, (_o: RateLimiterObject, state) =>
      state.storage.sql.exec<{ minute: number; n: number }>('SELECT minute, n FROM refusals').toArray(),
    );
    // The recent minute is stored; the minute past the retention was deleted in the same flush.
    expect(rows).toEqual([{ minute: Math.floor(now / REFUSAL_MINUTE_MS) * REFUSAL_MINUTE_MS, n: 2 }]);

    await evictDurableObject(stub);
    expect(await stub.refusals(window)).toMatchObject({
      total: 2,
      by_principal: [{ principal_id: 'agent', n: 2 }],
    });
    // Refusals after the flush add to the stored minute, through the next flush (the evicted
    // object's buckets start full: the first take is admitted, the second refused).
    expect(await stub.take(req(tenant, now))).toMatchObject({ allowed: true });
    expect(await stub.take(req(tenant, now))).toMatchObject({ allowed: false });
    expect((await stub.refusals(window)).total).toBe(3);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await evictDurableObject(stub);
    expect((await stub.refusals(window)).total).toBe(3);
  });

  it('answers for its own tenant only, and refuses an invalid window', async () => {
    const tenant = uniqueName('rl-own');
    const stub = rateLimiterStub(env, tenant);
    await runInDurableObject(stub, async (o: RateLimiterObject) => {
      await expect(o.refusals({ tenant_id: uniqueName('rl-other'), from: 0, to: 1 })).rejects.toThrow(
        /another tenant/,
      );
      await expect(o.refusals({ tenant_id: tenant, from: 2, to: 1 })).rejects.toThrow(
        /invalid refusals request/,
      );
      await expect(o.refusals({ tenant_id: tenant, from: -1, to: 1 })).rejects.toThrow(
        /invalid refusals request/,
      );
      await expect(o.refusals({ tenant_id: 'a b', from: 0, to: 1 })).rejects.toThrow(
        /invalid refusals request/,
      );
    });
  });

  it('a summary hands JavaScript at most the top rows, however many minutes and principals the window holds', async () => {
    const tenant = uniqueName('rl-bounded');
    const stub = rateLimiterStub(env, tenant);
    const T0 = Math.floor(Date.now() / REFUSAL_MINUTE_MS) * REFUSAL_MINUTE_MS - 10 * REFUSAL_MINUTE_MS;
    const stored: RefusalCount[] = [];
    for (let m = 0; m < 4; m++)
      for (let p = 0; p < 60; p++)
        for (const limited_by of ['principal', 'tenant'] as const)
          stored.push({ minute: T0 + m * REFUSAL_MINUTE_MS, principal_id: `prn-${p}`, limited_by, n: 1 + p });
    await runInDurableObject(stub, async (o: RateLimiterObject, state) => {
      for (const c of stored)
        state.storage.sql.exec(
          'INSERT INTO refusals (minute, principal_id, limited_by, n) VALUES (?, ?, ?, ?)',
          c.minute,
          c.principal_id,
          c.limited_by,
          c.n,
        );
      // Count the rows SQL hands to JavaScript while the summary is made (480 stored here; up to
      // two million in a seven-day window of a flooded tenant, which would exhaust the object).
      const sql = state.storage.sql;
      const exec = sql.exec.bind(sql);
      let handed = 0;
      sql.exec = ((query: string, ...bindings: unknown[]) => {
        const cursor = exec(query, ...bindings);
        return {
          toArray: () => {
            const rows = cursor.toArray();
            handed += rows.length;
            return rows;
          },
        };
      }) as typeof sql.exec;
      try {
        const s = await o.refusals({ tenant_id: tenant, from: T0, to: T0 + 10 * REFUSAL_MINUTE_MS });
        expect(s).toEqual(summarizeRefusals(stored, T0, T0 + 10 * REFUSAL_MINUTE_MS, REFUSAL_SUMMARY_TOP));
        expect(s.principals_left_out).toBe(60 - REFUSAL_SUMMARY_TOP);
      } finally {
        sql.exec = exec;
      }
      expect(handed).toBeLessThanOrEqual(REFUSAL_SUMMARY_TOP);
    });
  });

  it('property: the summary is summarizeRefusals over the stored and the unflushed counts', async () => {
    const tenant = uniqueName('rl-differential');
    const stub = rateLimiterStub(env, tenant);
    const row = fc.record({
      minute: fc.integer({ min: 0, max: 5 }),
      principal: fc.constantFrom('a', 'b', 'c', 'A', 'b.1', 'z:9'),
      limited_by: fc.constantFrom('principal' as const, 'tenant' as const),
      n: fc.integer({ min: 1, max: 5 }),
    });
    await runInDurableObject(stub, async (o: RateLimiterObject, state) => {
      // Each run an hour after the last: the object's tally and buckets only move forward.
      let base = minuteFloor(Date.now()); // within the retention: a flush deletes older minutes
      await fc.assert(
        fc.asyncProperty(
          fc.array(row, { maxLength: 30 }),
          fc.array(row, { maxLength: 10 }),
          fc.integer({ min: 0, max: 7 }),
          fc.integer({ min: 0, max: 7 }),
          async (stored, unflushed, a, b) => {
            base += 60 * REFUSAL_MINUTE_MS;
            state.storage.sql.exec('DELETE FROM refusals');
            const counts: RefusalCount[] = [];
            for (const r of stored) {
              const c = {
                minute: base + r.minute * REFUSAL_MINUTE_MS,
                principal_id: r.principal,
                limited_by: r.limited_by,
                n: r.n,
              };
              state.storage.sql.exec(
                `INSERT INTO refusals (minute, principal_id, limited_by, n) VALUES (?, ?, ?, ?)
                 ON CONFLICT (minute, principal_id, limited_by) DO UPDATE SET n = n + excluded.n`,
                c.minute,
                c.principal_id,
                c.limited_by,
                c.n,
              );
              counts.push(c);
            }
            // Unflushed refusals, through take: burst 1, so the first take of each group is
            // admitted (2 s after the last, its bucket is full) and the next n are refused.
            const groups = [...unflushed].sort((x, y) => x.minute - y.minute);
            for (const [i, r] of groups.entries()) {
              const now = base + (r.minute + 2) * REFUSAL_MINUTE_MS + i * 2_000;
              for (let k = 0; k <= r.n; k++)
                await o.take({ tenant_id: tenant, principal_id: r.principal, now, per_second: 1, burst: 1 });
              counts.push({
                minute: minuteFloor(now),
                principal_id: r.principal,
                limited_by: 'principal',
                n: r.n,
              });
            }
            const from = base + Math.min(a, b) * REFUSAL_MINUTE_MS + 1;
            const to = base + Math.max(a, b) * REFUSAL_MINUTE_MS + 59_999;
            expect(await o.refusals({ tenant_id: tenant, from, to })).toEqual(
              summarizeRefusals(counts, from, to, REFUSAL_SUMMARY_TOP),
            );
          },
        ),
        { numRuns: 40 },
      );
    });
  });

  it('a failed alarm write does not stop later refusals from scheduling their flush', async () => {
    const tenant = uniqueName('rl-alarm-fail');
    const stub = rateLimiterStub(env, tenant);
    const now = Date.now();
    await runInDurableObject(stub, async (o: RateLimiterObject, state) => {
      const storage = state.storage;
      const setAlarm = storage.setAlarm.bind(storage);
      storage.setAlarm = () => Promise.reject(new Error('storage unavailable'));
      try {
        expect(await o.take(req(tenant, now))).toMatchObject({ allowed: true });
        await expect(o.take(req(tenant, now))).rejects.toThrow(/storage unavailable/);
      } finally {
        storage.setAlarm = setAlarm;
      }
      expect(await storage.getAlarm()).toBeNull();
      expect(await o.take(req(tenant, now))).toMatchObject({ allowed: false });
      // Scheduled now, so the counts (both refusals) reach storage.
      expect(await storage.getAlarm()).not.toBeNull();
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await evictDurableObject(stub);
    expect((await stub.refusals({ tenant_id: tenant, from: now - 60_000, to: now })).total).toBe(2);
  });
});

const minuteFloor = (t: number) => Math.floor(t / REFUSAL_MINUTE_MS) * REFUSAL_MINUTE_MS;
