/**
 * Per-principal write limits inside workerd: the tenant's rate-limiter object through its RPC
 * surface with explicit limits and `now`, then the HTTP door with a tiny configured burst (the app
 * called with the test's own vars, so vitest.config.ts stays untouched) and with a limiter that
 * cannot answer. Time is frozen with fake `Date`, so nothing depends on how fast the machine is.
 */
import { evictDurableObject, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  type RateLimiterObject,
  rateLimiterStub,
  type RateLimitRequest,
} from '../../../durable-objects/rate-limiter.js';
import { app } from '../../../src/http/app.js';
import { METRICS_READ_TOKENS } from '../../../src/http/rate-limit.js';
import {
  DEFAULT_RATE_LIMIT,
  DEFAULT_TENANT_RATE_LIMIT,
  rateLimit,
  tenantRateLimit,
} from '../../../src/platform/bindings.js';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import type { Seeded } from '../../../scripts/seed.js';
import { call, consoleAs, createRun, seedTenant, uniqueName, d1Of, READ_INPUT } from '../platform/harness.js';

const T0 = 1_794_906_000_000;
const BASE = 'https://writ.test';

afterEach(() => {
  vi.useRealTimers();
});

describe('RateLimiterObject (RPC)', () => {
  const req = (tenant_id: string, over: Partial<RateLimitRequest> = {}): RateLimitRequest => ({
    tenant_id,
    principal_id: 'agent',
    now: T0,
    per_second: 1,
    burst: 3,
    ...over,
  });

  it('admits a burst per principal, then denies with Retry-After; principals and tenants are apart', async () => {
    const tenant = uniqueName('rl');
    const stub = rateLimiterStub(env, tenant);
    const first = [];
    for (let i = 0; i < 4; i++) first.push(await stub.take(req(tenant)));
    expect(first).toEqual([
      { allowed: true, remaining: 2, retry_after_seconds: 0 },
      { allowed: true, remaining: 1, retry_after_seconds: 0 },
      { allowed: true, remaining: 0, retry_after_seconds: 0 },
      { allowed: false, remaining: 0, retry_after_seconds: 1 },
    ]);
    // Another principal of the tenant, and the same principal id in another tenant, are full.
    expect(await stub.take(req(tenant, { principal_id: 'other' }))).toMatchObject({
      allowed: true,
      remaining: 2,
    });
    const elsewhere = uniqueName('rl');
    expect(await rateLimiterStub(env, elsewhere).take(req(elsewhere))).toMatchObject({ allowed: true });
    // Exactly one second later the bucket has one token again.
    expect(await stub.take(req(tenant, { now: T0 + 999 }))).toMatchObject({ allowed: false });
    expect(await stub.take(req(tenant, { now: T0 + 1_000 }))).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('serializes concurrent takes: of 10 at once with a burst of 3, exactly 3 pass', async () => {
    const tenant = uniqueName('rl');
    const stub = rateLimiterStub(env, tenant);
    const out = await Promise.all(Array.from({ length: 10 }, () => stub.take(req(tenant))));
    expect(out.filter((d) => d.allowed)).toHaveLength(3);
  });

  // Refusals are asserted on the object itself (a throw across RPC is also reported as an
  // unhandled rejection by the test pool); the Worker's side of a throw is the fail-closed test.
  const refuses = (tenant: string, request: RateLimitRequest, message: RegExp) =>
    runInDurableObject(rateLimiterStub(env, tenant), async (o: RateLimiterObject) => {
      await expect(o.take(request)).rejects.toThrow(message);
    });

  it('takes a count at once from both buckets, and refuses a count no bucket can hold', async () => {
    const tenant = uniqueName('rl');
    const stub = rateLimiterStub(env, tenant);
    const joint = { tenant_per_second: 1, tenant_burst: 5 };
    expect(await stub.take(req(tenant, { ...joint, count: 3 }))).toEqual({
      allowed: true,
      remaining: 0,
      retry_after_seconds: 0,
    });
    // The principal's bucket is empty; the tenant's still holds two.
    expect(await stub.take(req(tenant, { ...joint, principal_id: 'other', count: 2 }))).toMatchObject({
      allowed: true,
    });
    expect(await stub.take(req(tenant, { ...joint, principal_id: 'third', count: 1 }))).toMatchObject({
      allowed: false,
      limited_by: 'tenant',
    });
    // More than the principal's burst of 3, or than the tenant's: an invalid request, not a wait.
    for (const over of [
      { count: 4 },
      { ...joint, tenant_burst: 2, count: 3 },
      { count: 0 },
      { count: 1.5 },
    ]) {
      const elsewhere = uniqueName('rl');
      await refuses(elsewhere, req(elsewhere, over), /invalid rate limit request/);
    }
  });

  it('refuses a request for another tenant than the object holds', async () => {
    const tenant = uniqueName('rl');
    await refuses(tenant, req(uniqueName('rl')), /another tenant/);
  });

  it.each([
    ['a zero burst', { burst: 0 }],
    ['a fractional rate', { per_second: 0.5 }],
    ['a negative time', { now: -1 }],
    ['an empty principal', { principal_id: '' }],
  ])('refuses %s rather than admitting', async (_, over) => {
    const tenant = uniqueName('rl');
    await refuses(tenant, req(tenant, over), /invalid/);
  });

  it("the tenant's aggregate bucket bounds all its principals together (issue 10)", async () => {
    const tenant = uniqueName('rl');
    const stub = rateLimiterStub(env, tenant);
    const joint = (principal_id: string) =>
      stub.take(req(tenant, { principal_id, burst: 5, tenant_per_second: 1, tenant_burst: 3 }));
    const out = [];
    for (const p of ['a', 'b', 'c', 'a', 'b']) out.push(await joint(p));
    expect(out.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
    expect(out[3]).toEqual({ allowed: false, remaining: 0, retry_after_seconds: 1, limited_by: 'tenant' });
    // Another tenant's object is untouched.
    const elsewhere = uniqueName('rl');
    expect(
      await rateLimiterStub(env, elsewhere).take(req(elsewhere, { tenant_per_second: 1, tenant_burst: 3 })),
    ).toMatchObject({ allowed: true });
  });

  it.each([
    ['half a tenant limit', { tenant_per_second: 5 }],
    ['a zero tenant burst', { tenant_per_second: 5, tenant_burst: 0 }],
  ])('refuses %s rather than admitting without it', async (_, over) => {
    const tenant = uniqueName('rl');
    await refuses(tenant, req(tenant, over), /invalid/);
  });

  it('an evicted object starts with full buckets (documented trade-off)', async () => {
    const tenant = uniqueName('rl');
    const stub = rateLimiterStub(env, tenant);
    for (let i = 0; i < 3; i++) await stub.take(req(tenant));
    expect(await stub.take(req(tenant))).toMatchObject({ allowed: false });
    await evictDurableObject(stub);
    expect(await rateLimiterStub(env, tenant).take(req(tenant))).toMatchObject({ allowed: true });
  });
});

describe('configuration', () => {
  const withVars = (per_second: string, burst: string) =>
    ({ ...env, WRIT_RATE_LIMIT_PER_SECOND: per_second, WRIT_RATE_LIMIT_BURST: burst }) as unknown as Env;

  it('reads the Worker vars', () => {
    expect(rateLimit(env)).toEqual({ per_second: 20, burst: 100 });
    expect(rateLimit(withVars('5', '7'))).toEqual({ per_second: 5, burst: 7 });
  });

  it.each([
    ['empty', ''],
    ['zero', '0'],
    ['not a number', 'lots'],
    ['fractional', '1.5'],
  ])('an unusable value (%s) keeps the default limit, never "no limit"', (_, v) => {
    expect(rateLimit(withVars(v, '7'))).toEqual(DEFAULT_RATE_LIMIT);
    expect(rateLimit(withVars('5', v))).toEqual(DEFAULT_RATE_LIMIT);
    const tenantVars = (per_second: string, burst: string) =>
      ({
        ...env,
        WRIT_TENANT_RATE_LIMIT_PER_SECOND: per_second,
        WRIT_TENANT_RATE_LIMIT_BURST: burst,
      }) as unknown as Env;
    expect(tenantRateLimit(tenantVars(v, '7'))).toEqual(DEFAULT_TENANT_RATE_LIMIT);
    expect(tenantRateLimit(tenantVars('5', v))).toEqual(DEFAULT_TENANT_RATE_LIMIT);
  });

  it("reads the tenant's aggregate limit from the Worker vars", () => {
    expect(tenantRateLimit(env)).toEqual({ per_second: 50, burst: 200 });
  });
});

// ---------------------------------------------------------------------------------------------
// The HTTP door

/** The Worker's vars with a tiny limit: 2 writes at once, 1 a second. */
const tiny = { ...env, WRIT_RATE_LIMIT_BURST: '2', WRIT_RATE_LIMIT_PER_SECOND: '1' } as unknown as Env;

/** The Worker's vars with a rate limiter that cannot be reached. */
const unreachable = {
  ...env,
  RATE_LIMITER: {
    idFromName: () => {
      throw new Error('limiter unreachable');
    },
    get: () => {
      throw new Error('limiter unreachable');
    },
  },
} as unknown as Env;

async function send(e: Env, method: string, path: string, key: string, body?: unknown) {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { ...init.headers, 'content-type': 'application/json' };
  }
  const res = await app.request(`${BASE}${path}`, init, e);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.length > 0 ? JSON.parse(text) : null };
}

async function runCount(tenant_id: string): Promise<number> {
  const r = await (
    await d1Of(tenant_id)
  )
    .prepare('SELECT count(*) AS n FROM runs WHERE tenant_id = ?')
    .bind(tenant_id)
    .first<{ n: number }>();
  return r?.n ?? -1;
}

const RUN = { max_calls: 5, max_external_writes: 1, max_duration_ms: 600_000 };

describe('HTTP: 429 rate_limited on every write', () => {
  it('burst + 1 writes: the last is a 429 with Retry-After, writes nothing; reads still pass', async () => {
    const s = await seedTenant('rl');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    const before = await runCount(s.tenant_id);
    const ok1 = await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN);
    const ok2 = await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN);
    const limited = await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN);
    expect([ok1.status, ok2.status]).toEqual([201, 201]);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await runCount(s.tenant_id)).toBe(before + 2);
    // Reads are not limited; another principal of the tenant has its own bucket.
    const read = await send(tiny, 'GET', `/v1/runs/${ok1.body.run_id as string}`, s.agent.api_key);
    expect(read.status).toBe(200);
    const other = await send(tiny, 'POST', '/v1/runs', s.admin.api_key, RUN);
    expect(other.status).not.toBe(429);
    // After Retry-After, the principal writes again.
    vi.setSystemTime(Date.now() + 1_000);
    expect((await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(201);
  });

  it('POST /v1/authorize is limited too, before the body is read', async () => {
    const s = await seedTenant('rl');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN);
    await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN);
    // A malformed body would be a 400 if it were read: the limit answers first.
    const r = await send(tiny, 'POST', '/v1/authorize', s.agent.api_key, { not: 'an authorize body' });
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe('rate_limited');
  });

  it('an unauthenticated write is a 401: authentication comes first', async () => {
    const r = await send(tiny, 'POST', '/v1/runs', 'wk_not_a_key', RUN);
    expect(r.status).toBe(401);
  });

  it('fails closed: a limiter that cannot answer is a 429 with Retry-After, nothing written', async () => {
    const s = await seedTenant('rl');
    const before = await runCount(s.tenant_id);
    const r = await send(unreachable, 'POST', '/v1/runs', s.agent.api_key, RUN);
    expect(r.status).toBe(429);
    expect(r.body.error.code).toBe('rate_limited');
    expect(r.headers.get('retry-after')).toBe('1');
    expect(JSON.stringify(r.body)).not.toContain('unreachable');
    expect(await runCount(s.tenant_id)).toBe(before);
    // Reads do not ask the limiter.
    expect((await send(unreachable, 'GET', '/v1/runs/run-none', s.agent.api_key)).status).toBe(404);
  });

  it("the tenant's aggregate budget refuses a write of any principal: typed 429, nothing written", async () => {
    const s = await seedTenant('rl');
    // Each principal could write 100 at once; the tenant together only 2.
    const budget = {
      ...env,
      WRIT_TENANT_RATE_LIMIT_BURST: '2',
      WRIT_TENANT_RATE_LIMIT_PER_SECOND: '1',
    } as unknown as Env;
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    const before = await runCount(s.tenant_id);
    expect((await send(budget, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(201);
    // Another principal of the tenant, with a write of its own role.
    expect((await send(budget, 'PUT', '/v1/policy', s.admin.api_key, DEMO_POLICY)).status).toBe(200);
    const limited = await send(budget, 'POST', '/v1/runs', s.agent.api_key, RUN);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
    expect(limited.body.error.message).toMatch(/tenant/);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(await runCount(s.tenant_id)).toBe(before + 1);
    // Authorization is a write too: refused before the decision, no receipt stored.
    const receipts = async () =>
      (
        await (
          await d1Of(s.tenant_id)
        )
          .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
          .bind(s.tenant_id)
          .first<{ n: number }>()
      )?.n;
    const stored = await receipts();
    const authz = await send(budget, 'POST', '/v1/authorize', s.agent.api_key, {
      tool_contract_sha256: 'a'.repeat(64),
      input: {},
    });
    expect(authz.status).toBe(429);
    expect(authz.body.error.code).toBe('rate_limited');
    expect(await receipts()).toBe(stored);
    // Another tenant is not limited by this one's budget.
    const other = await seedTenant('rl');
    expect((await send(budget, 'POST', '/v1/runs', other.agent.api_key, RUN)).status).toBe(201);
  });

  it('with the configured defaults, ordinary use is never limited', async () => {
    const s = await seedTenant('rl');
    const r = await call('POST', '/v1/runs', { key: s.agent.api_key, body: RUN });
    expect(r.status).toBe(201);
  });
});

describe('HTTP: an AuthZEN batch pays one write token per evaluation', () => {
  const evaluation = (s: Seeded, run_id: string) => ({
    subject: { type: 'agent', id: s.agent.principal_id },
    action: { name: 'get_deployment' },
    resource: { type: 'deployment', id: 'production/api' },
    context: { input: READ_INPUT, run_id },
  });
  const batch = (s: Seeded, run_id: string, n: number) => ({
    evaluations: Array.from({ length: n }, () => evaluation(s, run_id)),
  });
  async function receiptCount(tenant_id: string): Promise<number> {
    const r = await (
      await d1Of(tenant_id)
    )
      .prepare('SELECT count(*) AS n FROM receipts WHERE tenant_id = ?')
      .bind(tenant_id)
      .first<{ n: number }>();
    return r?.n ?? -1;
  }

  it('a batch of burst evaluations empties the bucket: the next write is a 429', async () => {
    const s = await seedTenant('rl-batch');
    const run_id = await createRun(s);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000); // every bucket full again
    const r = await send(tiny, 'POST', '/access/v1/evaluations', s.agent.api_key, batch(s, run_id, 2));
    expect(r.status).toBe(200);
    expect(r.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, true]);
    // One token for the request would have left one: the batch took both.
    const next = await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN);
    expect(next.status).toBe(429);
    expect(next.body.error.code).toBe('rate_limited');
  });

  it('a batch whose further tokens are refused is a 429 and evaluates nothing', async () => {
    const s = await seedTenant('rl-batch');
    const run_id = await createRun(s);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    expect((await send(tiny, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(201);
    const before = await receiptCount(s.tenant_id);
    // One token left: the request's own, then one more for the second evaluation, refused.
    const r = await send(tiny, 'POST', '/access/v1/evaluations', s.agent.api_key, batch(s, run_id, 2));
    // AuthZEN error bodies are a message string (§10.1.2); the code is in a header.
    expect(r.status).toBe(429);
    expect(r.headers.get('writ-error-code')).toBe('rate_limited');
    // One second for the further token, one for the token the retry pays first (at 1 a second).
    expect(r.headers.get('retry-after')).toBe('2');
    expect(await receiptCount(s.tenant_id)).toBe(before);
  });

  // The retry pays its own token again before the batch's further ones, so a Retry-After that
  // covered only the further ones would be refused again: at 1 a second, forever.
  for (const [bucket, vars] of [
    ['principal', tiny],
    [
      'tenant',
      { ...env, WRIT_TENANT_RATE_LIMIT_BURST: '2', WRIT_TENANT_RATE_LIMIT_PER_SECOND: '1' } as unknown as Env,
    ],
  ] as const) {
    it(`a refused batch retried after its Retry-After is admitted (${bucket} bucket)`, async () => {
      const s = await seedTenant('rl-batch');
      const run_id = await createRun(s);
      vi.useFakeTimers({ toFake: ['Date'] });
      const t0 = Date.now() + 60_000;
      vi.setSystemTime(t0);
      expect((await send(vars, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(201);
      const refused = await send(
        vars,
        'POST',
        '/access/v1/evaluations',
        s.agent.api_key,
        batch(s, run_id, 2),
      );
      expect(refused.status).toBe(429);
      const wait = Number(refused.headers.get('retry-after'));
      expect(wait).toBeGreaterThan(0);
      vi.setSystemTime(t0 + wait * 1000);
      const again = await send(vars, 'POST', '/access/v1/evaluations', s.agent.api_key, batch(s, run_id, 2));
      expect(again.status).toBe(200);
      expect(again.body.evaluations.map((e: { decision: boolean }) => e.decision)).toEqual([true, true]);
    });
  }

  it('a batch larger than the burst is a 400 that says how many fit, and evaluates nothing', async () => {
    const s = await seedTenant('rl-batch');
    const run_id = await createRun(s);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    const before = await receiptCount(s.tenant_id);
    const r = await send(tiny, 'POST', '/access/v1/evaluations', s.agent.api_key, batch(s, run_id, 3));
    expect(r.status).toBe(400);
    expect(r.headers.get('writ-error-code')).toBe('invalid_request');
    expect(r.body).toMatch(/holds 3 evaluations.*at most 2 fit/);
    expect(await receiptCount(s.tenant_id)).toBe(before);
    // Under the tenant's burst too: the smaller of the two bursts bounds a batch.
    const narrow = { ...env, WRIT_TENANT_RATE_LIMIT_BURST: '1' } as unknown as Env;
    const t = await send(narrow, 'POST', '/access/v1/evaluations', s.agent.api_key, batch(s, run_id, 2));
    expect(t.status).toBe(400);
    expect(t.body).toMatch(/at most 1 fit/);
  });
});

describe('HTTP: a security metrics read pays METRICS_READ_TOKENS write tokens', () => {
  // Each metrics read walks up to seven bounded index ranges on the tenant's shard: it pays as
  // ten writes, so a tenant admin polling it cannot load the shard its neighbours share.
  const roomy = { ...env, WRIT_RATE_LIMIT_BURST: '25', WRIT_RATE_LIMIT_PER_SECOND: '1' } as unknown as Env;

  it('costs 10 tokens: two reads fit in a burst of 25, the third is a 429 with Retry-After', async () => {
    expect(METRICS_READ_TOKENS).toBe(10);
    const s = await seedTenant('rl-metrics');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000); // every bucket full again
    expect((await send(roomy, 'GET', '/v1/metrics', s.admin.api_key)).status).toBe(200);
    expect((await send(roomy, 'GET', '/v1/metrics?window_ms=60000', s.admin.api_key)).status).toBe(200);
    const third = await send(roomy, 'GET', '/v1/metrics', s.admin.api_key);
    expect(third.status).toBe(429);
    expect(third.body.error.code).toBe('rate_limited');
    // Five tokens left of ten needed, at one a second.
    expect(third.headers.get('retry-after')).toBe('5');
    // The same bucket as the principal's writes; another principal's is untouched.
    expect((await send(roomy, 'PUT', '/v1/policy', s.admin.api_key, DEMO_POLICY)).status).toBe(200);
    expect((await send(roomy, 'POST', '/v1/runs', s.agent.api_key, RUN)).status).toBe(201);
  });

  it('a burst smaller than the cost is paid whole: a read empties it and the next write is a 429', async () => {
    const s = await seedTenant('rl-metrics');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    expect((await send(tiny, 'GET', '/v1/metrics', s.admin.api_key)).status).toBe(200);
    const next = await send(tiny, 'PUT', '/v1/policy', s.admin.api_key, DEMO_POLICY);
    expect(next.status).toBe(429);
    expect(next.body.error.code).toBe('rate_limited');
  });

  it('a malformed query is still a 400 before any token is taken; a limiter that cannot answer is a 429', async () => {
    const s = await seedTenant('rl-metrics');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    expect((await send(tiny, 'GET', '/v1/metrics?window_ms=1', s.admin.api_key)).status).toBe(400);
    expect((await send(tiny, 'GET', '/v1/metrics?window_ms=1', s.admin.api_key)).status).toBe(400);
    // Both 400s left the bucket full: one read, then the write it empties the bucket for.
    expect((await send(tiny, 'GET', '/v1/metrics', s.admin.api_key)).status).toBe(200);
    expect((await send(tiny, 'PUT', '/v1/policy', s.admin.api_key, DEMO_POLICY)).status).toBe(429);
    const r = await send(unreachable, 'GET', '/v1/metrics', s.admin.api_key);
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('1');
    // Roles come first: an agent is refused 403 and pays nothing.
    expect((await send(unreachable, 'GET', '/v1/metrics', s.agent.api_key)).status).toBe(403);
  });

  it("the console's Security page pays the same: a 429 page once the bucket is empty", async () => {
    const s = await seedTenant('rl-metrics');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    const get = await consoleAs(s.admin.api_key, roomy);
    expect((await get('/console/security')).status).toBe(200);
    expect((await get('/console/security?window=1h')).status).toBe(200);
    const third = await get('/console/security?window=7d');
    expect(third.status).toBe(429);
    expect(third.text).not.toContain('Security decisions</h1>');
    // Pages that read no metrics are not limited.
    expect((await get('/console/pending')).status).toBe(200);
  });
});
