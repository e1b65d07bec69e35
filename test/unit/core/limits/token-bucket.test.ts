// The token bucket behind per-principal write limits: named cases, then the claims that matter as
// properties (never more than burst + rate * elapsed admitted, Retry-After exact, monotone).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type BucketState,
  isFull,
  isTakeable,
  milliTokensAt,
  parseRateLimit,
  RATE_LIMIT_MAX,
  type RateLimit,
  take,
  takeFrom,
  takeJointlyFrom,
} from '../../../../src/core/limits/token-bucket.js';

const T0 = 1_794_906_000_000;

/** Replay takes at `times` from an empty history; the outcomes in order. */
function run(limit: RateLimit, times: readonly number[]) {
  let state: BucketState | undefined;
  return times.map((now) => {
    const o = take(state, limit, now);
    state = o.state;
    return o;
  });
}

const limits = fc.record({
  per_second: fc.integer({ min: 1, max: 2_000 }),
  burst: fc.integer({ min: 1, max: 200 }),
});
/** Request times as offsets from T0, in any order (a clock may go backwards). */
const offsets = fc.array(fc.integer({ min: 0, max: 60_000 }), { minLength: 1, maxLength: 300 });

describe('parseRateLimit', () => {
  it('accepts integers from 1 to the bound', () => {
    expect(parseRateLimit({ per_second: 1, burst: RATE_LIMIT_MAX }).ok).toBe(true);
  });

  it.each([
    ['zero rate', { per_second: 0, burst: 10 }],
    ['zero burst', { per_second: 10, burst: 0 }],
    ['negative', { per_second: -1, burst: 10 }],
    ['fraction', { per_second: 0.5, burst: 10 }],
    ['NaN (an unparsable var)', { per_second: Number.NaN, burst: 10 }],
    ['infinite', { per_second: 10, burst: Number.POSITIVE_INFINITY }],
    ['over the bound', { per_second: RATE_LIMIT_MAX + 1, burst: 10 }],
    ['a string', { per_second: '10', burst: 10 }],
  ])('refuses %s: a limit that cannot be enforced is an error, not "no limit"', (_, value) => {
    const r = parseRateLimit(value);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.reason).toBe('invalid_request');
  });
});

describe('take', () => {
  const limit = { per_second: 1, burst: 3 };

  it('admits a full burst at one instant, then denies with the exact wait', () => {
    const out = run(limit, [T0, T0, T0, T0]);
    expect(out.map((o) => o.allowed)).toEqual([true, true, true, false]);
    expect(out.map((o) => (o.allowed ? o.remaining : -1))).toEqual([2, 1, 0, -1]);
    const denied = out[3];
    expect(denied).toMatchObject({ allowed: false, retry_after_ms: 1_000, retry_after_seconds: 1 });
  });

  it('admits again exactly when Retry-After says, not a millisecond earlier', () => {
    let state = run(limit, [T0, T0, T0]).at(-1)?.state;
    const early = take(state, limit, T0 + 999);
    expect(early.allowed).toBe(false);
    state = early.state;
    expect(early).toMatchObject({ retry_after_ms: 1, retry_after_seconds: 1 });
    expect(take(state, limit, T0 + 1_000).allowed).toBe(true);
  });

  it('rounds Retry-After up to whole seconds', () => {
    const slow = { per_second: 1, burst: 1 };
    const [, denied] = run(slow, [T0, T0 + 1]);
    expect(denied).toMatchObject({ allowed: false, retry_after_ms: 999, retry_after_seconds: 1 });
    const fast = { per_second: 3, burst: 1 };
    const [, d2] = run(fast, [T0, T0]);
    // 1000 milli-tokens at 3 per ms: 334 ms, still a whole second on the wire.
    expect(d2).toMatchObject({ allowed: false, retry_after_ms: 334, retry_after_seconds: 1 });
  });

  it('a denial takes nothing', () => {
    const empty = run(limit, [T0, T0, T0]).at(-1)?.state;
    const d = take(empty, limit, T0 + 500);
    expect(d.allowed).toBe(false);
    expect(d.state.milli_tokens).toBe(500);
  });

  it('refills to the burst and no further, however long the gap', () => {
    const empty = run(limit, [T0, T0, T0]).at(-1)?.state;
    expect(milliTokensAt(empty, limit, T0 + 10 * 365 * 86_400_000)).toBe(3_000);
    expect(
      milliTokensAt(empty, { per_second: RATE_LIMIT_MAX, burst: RATE_LIMIT_MAX }, Number.MAX_SAFE_INTEGER),
    ).toBe(RATE_LIMIT_MAX * 1_000);
  });

  it('a clock that goes backwards refills nothing and cannot rewind the bucket', () => {
    const state = run(limit, [T0, T0, T0]).at(-1)?.state;
    const back = take(state, limit, T0 - 60_000);
    expect(back.allowed).toBe(false);
    // The bucket keeps its later time: the minute "gained" going back is not refilled twice.
    expect(back.state.at_unix_ms).toBe(T0);
    expect(back).toMatchObject({ retry_after_ms: 61_000, retry_after_seconds: 61 });
  });

  it('a smaller burst than the bucket was filled under caps what it holds', () => {
    const big = take(undefined, { per_second: 1, burst: 100 }, T0).state;
    expect(milliTokensAt(big, { per_second: 1, burst: 2 }, T0)).toBe(2_000);
  });
});

describe('takeFrom: a bounded table', () => {
  const limit = { per_second: 10, burst: 2 };

  it('keeps one bucket per key', () => {
    const table = new Map<string, BucketState>();
    expect(takeFrom(table, 'a', limit, T0, 4).allowed).toBe(true);
    expect(takeFrom(table, 'a', limit, T0, 4).allowed).toBe(true);
    expect(takeFrom(table, 'a', limit, T0, 4).allowed).toBe(false);
    expect(takeFrom(table, 'b', limit, T0, 4).allowed).toBe(true);
    expect(table.size).toBe(2);
  });

  it('drops full buckets first, which loses nothing', () => {
    const table = new Map<string, BucketState>();
    takeFrom(table, 'idle', limit, T0, 2);
    takeFrom(table, 'busy', limit, T0 + 1_000, 2);
    takeFrom(table, 'busy', limit, T0 + 1_000, 2);
    // At T0 + 1000 `idle` has refilled; `busy` is empty.
    takeFrom(table, 'new', limit, T0 + 1_000, 2);
    expect([...table.keys()].sort()).toEqual(['busy', 'new']);
    expect(takeFrom(table, 'busy', limit, T0 + 1_000, 2).allowed).toBe(false);
  });

  it('when every bucket is active, drops the fullest and never grows past the bound', () => {
    const table = new Map<string, BucketState>();
    takeFrom(table, 'a', limit, T0, 2);
    takeFrom(table, 'a', limit, T0, 2);
    takeFrom(table, 'b', limit, T0, 2);
    takeFrom(table, 'c', limit, T0, 2);
    expect([...table.keys()].sort()).toEqual(['a', 'c']);
    expect(table.size).toBe(2);
  });

  it('never holds more than max_buckets (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 5_000 })), {
          maxLength: 200,
        }),
        fc.integer({ min: 1, max: 8 }),
        (calls, max) => {
          const table = new Map<string, BucketState>();
          for (const [k, t] of calls) {
            takeFrom(table, `p${k}`, limit, T0 + t, max);
            expect(table.size).toBeLessThanOrEqual(max);
          }
        },
      ),
    );
  });
});

describe('properties', () => {
  it('no span of time admits more than burst + rate * elapsed (any order of times)', () => {
    fc.assert(
      fc.property(limits, offsets, (limit, offs) => {
        const times = offs.map((o) => T0 + o);
        const admitted = run(limit, times).filter((o) => o.allowed).length;
        const span = Math.max(...times) - Math.min(...times);
        expect(admitted).toBeLessThanOrEqual(limit.burst + Math.floor((limit.per_second * span) / 1_000));
      }),
      { numRuns: 300 },
    );
  });

  it('also for every window inside a sorted history, from a full bucket', () => {
    fc.assert(
      fc.property(limits, offsets, (limit, offs) => {
        const times = offs.map((o) => T0 + o).sort((a, b) => a - b);
        const out = run(limit, times);
        for (let i = 0; i < times.length; i++) {
          let admitted = 0;
          for (let j = i; j < times.length; j++) {
            if (out[j]?.allowed) admitted++;
            const span = (times[j] as number) - (times[i] as number);
            expect(admitted).toBeLessThanOrEqual(limit.burst + Math.floor((limit.per_second * span) / 1_000));
          }
        }
      }),
      { numRuns: 100 },
    );
  });

  it('Retry-After is exact: the wait admits, one millisecond less does not', () => {
    fc.assert(
      fc.property(limits, offsets, fc.integer({ min: -5_000, max: 5_000 }), (limit, offs, skew) => {
        let state: BucketState | undefined;
        for (const o of offs) state = take(state, limit, T0 + o).state;
        const now = T0 + Math.max(0, Math.max(...offs) + skew);
        const d = take(state, limit, now);
        if (d.allowed) return;
        expect(d.retry_after_ms).toBeGreaterThan(0);
        expect(d.retry_after_seconds).toBe(Math.ceil(d.retry_after_ms / 1_000));
        expect(take(d.state, limit, now + d.retry_after_ms).allowed).toBe(true);
        expect(take(d.state, limit, now + d.retry_after_ms - 1).allowed).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it('monotone: later never holds fewer tokens, and never turns an admission into a denial', () => {
    fc.assert(
      fc.property(
        limits,
        offsets,
        fc.integer({ min: 0, max: 60_000 }),
        fc.integer({ min: 0, max: 60_000 }),
        (limit, offs, a, b) => {
          let state: BucketState | undefined;
          for (const o of offs) state = take(state, limit, T0 + o).state;
          const [early, late] = a <= b ? [T0 + a, T0 + b] : [T0 + b, T0 + a];
          expect(milliTokensAt(state, limit, late)).toBeGreaterThanOrEqual(
            milliTokensAt(state, limit, early),
          );
          if (take(state, limit, early).allowed) expect(take(state, limit, late).allowed).toBe(true);
          const t = milliTokensAt(state, limit, late);
          expect(t).toBeGreaterThanOrEqual(0);
          expect(t).toBeLessThanOrEqual(limit.burst * 1_000);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a bucket is full exactly when it holds the burst', () => {
    fc.assert(
      fc.property(limits, offsets, fc.integer({ min: 0, max: 120_000 }), (limit, offs, at) => {
        let state: BucketState | undefined;
        for (const o of offs) state = take(state, limit, T0 + o).state;
        if (state === undefined) return;
        expect(isFull(state, limit, T0 + at)).toBe(
          milliTokensAt(state, limit, T0 + at) === limit.burst * 1_000,
        );
      }),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// The tenant's aggregate bucket, taken jointly with the principal's (issue 10)

describe('takeJointlyFrom: a principal bucket and the tenant aggregate', () => {
  const principal: RateLimit = { per_second: 10, burst: 5 };
  const tenantLimit: RateLimit = { per_second: 2, burst: 3 };

  it('the tenant bucket bounds all principals together; a refusal names it and changes nothing', () => {
    const table = new Map<string, BucketState>();
    let tenant: BucketState | undefined;
    const outcomes = ['a', 'b', 'c', 'd'].map((k) => {
      const r = takeJointlyFrom(table, k, principal, tenant, tenantLimit, T0, 100);
      tenant = r.tenant;
      return r.outcome;
    });
    expect(outcomes.map((o) => o.allowed)).toEqual([true, true, true, false]);
    expect(outcomes[3]).toEqual({
      allowed: false,
      limited_by: 'tenant',
      retry_after_ms: 500,
      retry_after_seconds: 1,
    });
    // The refused principal's bucket was not created, let alone charged.
    expect(table.has('d')).toBe(false);
  });

  it('a principal over its own limit is refused by its bucket, and the tenant keeps its token', () => {
    const table = new Map<string, BucketState>();
    const tight: RateLimit = { per_second: 1, burst: 1 };
    const first = takeJointlyFrom(table, 'a', tight, undefined, tenantLimit, T0, 100);
    const second = takeJointlyFrom(table, 'a', tight, first.tenant, tenantLimit, T0, 100);
    expect(second.outcome).toMatchObject({ allowed: false, limited_by: 'principal', retry_after_ms: 1_000 });
    expect(second.tenant).toBe(first.tenant);
    expect(milliTokensAt(second.tenant, tenantLimit, T0)).toBe(2_000);
  });

  it('no span admits more than the tenant burst + rate * elapsed, whatever principals ask (property)', () => {
    fc.assert(
      fc.property(
        limits,
        limits,
        fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 20_000 })), {
          minLength: 1,
          maxLength: 300,
        }),
        (pl, tl, asks) => {
          const table = new Map<string, BucketState>();
          let tenant: BucketState | undefined;
          let admitted = 0;
          for (const [who, off] of asks) {
            const r = takeJointlyFrom(table, `p${who}`, pl, tenant, tl, T0 + off, 8);
            tenant = r.tenant;
            if (r.outcome.allowed) admitted++;
          }
          // As for one bucket: the tenant's refill over the whole history bounds every principal's.
          const times = asks.map(([, off]) => off);
          const span = Math.max(...times) - Math.min(...times);
          expect(admitted).toBeLessThanOrEqual(tl.burst + Math.floor((tl.per_second * span) / 1_000));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a refusal changes neither bucket (property)', () => {
    fc.assert(
      fc.property(
        limits,
        limits,
        fc.array(fc.integer({ min: 0, max: 5_000 }), { maxLength: 50 }),
        (pl, tl, offs) => {
          const table = new Map<string, BucketState>();
          let tenant: BucketState | undefined;
          for (const off of offs) {
            const before = { p: table.get('p'), t: tenant, size: table.size };
            const r = takeJointlyFrom(table, 'p', pl, tenant, tl, T0 + off, 8);
            if (!r.outcome.allowed) {
              expect(table.get('p')).toBe(before.p);
              expect(r.tenant).toBe(before.t);
              expect(table.size).toBe(before.size);
            }
            tenant = r.tenant;
          }
        },
      ),
    );
  });
});

describe('takes of several tokens at once (an AuthZEN batch)', () => {
  /** Requests as (time offset, count), counts drawn within the burst the limit has. */
  const weighted = (limit: RateLimit) =>
    fc.array(
      fc.record({ at: fc.integer({ min: 0, max: 60_000 }), count: fc.integer({ min: 1, max: limit.burst }) }),
      { minLength: 1, maxLength: 200 },
    );

  it('takeable counts are whole numbers from 1 to the burst', () => {
    const limit = { per_second: 1, burst: 5 };
    expect([1, 2, 5].map((n) => isTakeable(n, limit))).toEqual([true, true, true]);
    expect([0, -1, 6, 2.5, Number.NaN, Infinity].map((n) => isTakeable(n, limit))).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it('admits a count only when the bucket holds all of it, and then takes all of it', () => {
    const limit = { per_second: 1, burst: 5 };
    const a = take(undefined, limit, T0, 3);
    expect(a).toMatchObject({ allowed: true, remaining: 2 });
    // Two tokens held: a take of three is refused, takes nothing, and names the exact wait.
    const b = take(a.state, limit, T0, 3);
    expect(b).toMatchObject({ allowed: false, retry_after_ms: 1_000, retry_after_seconds: 1 });
    expect(milliTokensAt(b.state, limit, T0)).toBe(2_000);
    expect(take(b.state, limit, T0 + 999, 3).allowed).toBe(false);
    expect(take(b.state, limit, T0 + 1_000, 3)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('never admits a count the bucket cannot hold, however long it waits', () => {
    fc.assert(
      fc.property(
        limits,
        fc.integer({ min: 0, max: 600_000 }),
        fc.integer({ min: 1, max: 50 }),
        (limit, wait, over) => {
          for (const count of [limit.burst + over, 0, -over, over + 0.5]) {
            const d = take(undefined, limit, T0 + wait, count);
            expect(d.allowed).toBe(false);
            expect(milliTokensAt(d.state, limit, T0 + wait)).toBe(limit.burst * 1_000);
            expect(d.allowed === false && d.retry_after_ms).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('no span admits more than burst + rate * elapsed tokens, counted by weight (property)', () => {
    fc.assert(
      fc.property(
        limits.chain((limit) => fc.tuple(fc.constant(limit), weighted(limit))),
        ([limit, requests]) => {
          const sorted = [...requests].sort((a, b) => a.at - b.at);
          let state: BucketState | undefined;
          const admitted = sorted.map(({ at, count }) => {
            const o = take(state, limit, T0 + at, count);
            state = o.state;
            return o.allowed ? count : 0;
          });
          for (let i = 0; i < sorted.length; i++) {
            let tokens = 0;
            for (let j = i; j < sorted.length; j++) {
              tokens += admitted[j] as number;
              const span = (sorted[j]?.at as number) - (sorted[i]?.at as number);
              expect(tokens).toBeLessThanOrEqual(limit.burst + Math.floor((limit.per_second * span) / 1_000));
            }
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  it('Retry-After is exact for a count: the wait admits it, one millisecond less does not (property)', () => {
    fc.assert(
      fc.property(
        limits.chain((limit) =>
          fc.tuple(fc.constant(limit), weighted(limit), fc.integer({ min: 1, max: limit.burst })),
        ),
        ([limit, requests, count]) => {
          let state: BucketState | undefined;
          for (const r of requests) state = take(state, limit, T0 + r.at, r.count).state;
          const now = T0 + Math.max(...requests.map((r) => r.at));
          const d = take(state, limit, now, count);
          if (d.allowed) return;
          expect(take(d.state, limit, now + d.retry_after_ms, count).allowed).toBe(true);
          expect(take(d.state, limit, now + d.retry_after_ms - 1, count).allowed).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a joint take of a count takes it from both buckets, or from neither', () => {
    const limit = { per_second: 1, burst: 10 };
    const tenantLimit = { per_second: 1, burst: 4 };
    const table = new Map<string, BucketState>();
    const first = takeJointlyFrom(table, 'p', limit, undefined, tenantLimit, T0, 10, 3);
    expect(first.outcome).toMatchObject({ allowed: true, remaining: 1 });
    // The tenant holds one token: a count of two is refused by it and changes neither bucket.
    const second = takeJointlyFrom(table, 'p', limit, first.tenant, tenantLimit, T0, 10, 2);
    expect(second.outcome).toMatchObject({ allowed: false, limited_by: 'tenant', retry_after_ms: 1_000 });
    expect(second.tenant).toBe(first.tenant);
    expect(milliTokensAt(table.get('p'), limit, T0)).toBe(7_000);
    expect(takeFrom(table, 'p', limit, T0, 10, 7)).toMatchObject({ allowed: true, remaining: 0 });
  });
});
