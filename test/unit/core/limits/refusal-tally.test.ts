// Counts of rate-limit refusals for the security metrics: every refusal counted once, in its
// minute, under its principal (or `*` beyond the per-minute bound), and summaries that add up.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_PRINCIPALS_PER_MINUTE,
  OTHER_PRINCIPALS,
  REFUSAL_MINUTE_MS,
  type RefusalCount,
  RefusalTally,
  type RefusingBucket,
  summarizeRefusals,
} from '../../../../src/core/limits/refusal-tally.js';

const T0 = 1_794_906_000_000; // a whole minute

describe('RefusalTally', () => {
  it('counts each refusal in its minute, by principal and bucket', () => {
    const t = new RefusalTally();
    t.record('prn-a', 'principal', T0 + 1);
    t.record('prn-a', 'principal', T0 + 59_999);
    t.record('prn-a', 'tenant', T0 + 2);
    t.record('prn-b', 'principal', T0 + REFUSAL_MINUTE_MS);
    expect(new Set(t.pending())).toEqual(
      new Set([
        { minute: T0, principal_id: 'prn-a', limited_by: 'principal', n: 2 },
        { minute: T0, principal_id: 'prn-a', limited_by: 'tenant', n: 1 },
        { minute: T0 + REFUSAL_MINUTE_MS, principal_id: 'prn-b', limited_by: 'principal', n: 1 },
      ]),
    );
  });

  it('a clock that goes back counts in the latest minute seen', () => {
    const t = new RefusalTally();
    t.record('prn-a', 'principal', T0 + 2 * REFUSAL_MINUTE_MS);
    t.record('prn-a', 'principal', T0);
    expect(t.pending()).toEqual([
      { minute: T0 + 2 * REFUSAL_MINUTE_MS, principal_id: 'prn-a', limited_by: 'principal', n: 2 },
    ]);
  });

  it('names at most the bound of principals in a minute, and counts the rest under *', () => {
    const t = new RefusalTally();
    for (let i = 0; i < MAX_PRINCIPALS_PER_MINUTE + 5; i++) t.record(`prn-${i}`, 'principal', T0 + i);
    // A principal named before the bound was reached keeps its name.
    t.record('prn-0', 'principal', T0 + 999);
    const named = new Set(t.pending().map((c) => c.principal_id));
    expect(named.size).toBe(MAX_PRINCIPALS_PER_MINUTE + 1);
    expect(t.pending().find((c) => c.principal_id === OTHER_PRINCIPALS)?.n).toBe(5);
    expect(t.pending().find((c) => c.principal_id === 'prn-0')?.n).toBe(2);
    // The next minute starts over.
    t.record('prn-new', 'principal', T0 + REFUSAL_MINUTE_MS);
    expect(t.pending().some((c) => c.principal_id === 'prn-new')).toBe(true);
  });

  it('keeps refusals recorded after a flush read them', () => {
    const t = new RefusalTally();
    t.record('prn-a', 'principal', T0);
    const read = t.pending();
    t.record('prn-a', 'principal', T0 + 1);
    t.record('prn-b', 'tenant', T0 + 2);
    t.flushed(read);
    expect(new Set(t.pending())).toEqual(
      new Set([
        { minute: T0, principal_id: 'prn-a', limited_by: 'principal', n: 1 },
        { minute: T0, principal_id: 'prn-b', limited_by: 'tenant', n: 1 },
      ]),
    );
    t.flushed(t.pending());
    expect(t.hasPending).toBe(false);
  });
});

describe('summarizeRefusals', () => {
  const counts: RefusalCount[] = [
    { minute: T0 - REFUSAL_MINUTE_MS, principal_id: 'prn-old', limited_by: 'principal', n: 50 },
    { minute: T0, principal_id: 'prn-a', limited_by: 'principal', n: 3 },
    { minute: T0, principal_id: 'prn-b', limited_by: 'tenant', n: 3 },
    { minute: T0 + REFUSAL_MINUTE_MS, principal_id: 'prn-a', limited_by: 'tenant', n: 4 },
    { minute: T0 + 2 * REFUSAL_MINUTE_MS, principal_id: 'prn-late', limited_by: 'principal', n: 9 },
  ];

  it('sums the whole minutes from the window start’s to its end’s', () => {
    const s = summarizeRefusals(counts, T0 + 30_000, T0 + REFUSAL_MINUTE_MS + 1, 20);
    expect(s).toEqual({
      total: 10,
      limited_by: { principal: 3, tenant: 7 },
      by_principal: [
        { principal_id: 'prn-a', n: 7 },
        { principal_id: 'prn-b', n: 3 },
      ],
      principals_left_out: 0,
      from_minute_unix_ms: T0,
    });
  });

  it('lists the most refused first, ties by id, and says how many it left out', () => {
    const s = summarizeRefusals(
      [
        { minute: T0, principal_id: 'prn-c', limited_by: 'principal', n: 2 },
        { minute: T0, principal_id: 'prn-b', limited_by: 'principal', n: 2 },
        { minute: T0, principal_id: 'prn-a', limited_by: 'principal', n: 1 },
      ],
      T0,
      T0,
      2,
    );
    expect(s.by_principal).toEqual([
      { principal_id: 'prn-b', n: 2 },
      { principal_id: 'prn-c', n: 2 },
    ]);
    expect(s.principals_left_out).toBe(1);
    expect(s.total).toBe(5);
  });

  it('property: every recorded refusal is in exactly one total, whatever the order and bound', () => {
    const refusal = fc.record({
      principal: fc.integer({ min: 0, max: MAX_PRINCIPALS_PER_MINUTE + 20 }),
      bucket: fc.constantFrom<RefusingBucket>('principal', 'tenant'),
      at: fc.integer({ min: 0, max: 5 * REFUSAL_MINUTE_MS }),
    });
    fc.assert(
      fc.property(fc.array(refusal, { maxLength: 400 }), fc.integer({ min: 0, max: 400 }), (rs, cut) => {
        const t = new RefusalTally();
        const stored: RefusalCount[] = [];
        rs.forEach((r, i) => {
          t.record(`prn-${r.principal}`, r.bucket, T0 + r.at);
          if (i === cut) {
            const read = t.pending();
            stored.push(...read);
            t.flushed(read);
          }
        });
        const all = [...stored, ...t.pending()];
        const s = summarizeRefusals(all, T0, T0 + 10 * REFUSAL_MINUTE_MS, 1_000);
        expect(s.total).toBe(rs.length);
        expect(s.limited_by.principal + s.limited_by.tenant).toBe(rs.length);
        expect(s.by_principal.reduce((n, p) => n + p.n, 0)).toBe(rs.length);
        const perMinute = new Map<number, Set<string>>();
        for (const c of all) {
          if (c.principal_id === OTHER_PRINCIPALS) continue;
          perMinute.set(c.minute, (perMinute.get(c.minute) ?? new Set()).add(c.principal_id));
        }
        for (const named of perMinute.values())
          expect(named.size).toBeLessThanOrEqual(MAX_PRINCIPALS_PER_MINUTE);
      }),
    );
  });
});
