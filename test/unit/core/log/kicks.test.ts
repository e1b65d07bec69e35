/**
 * When a Worker may leave out a log kick (src/core/log/kicks.ts): only for a commit a drain it was
 * told of still covers, with the margin; the table stays bounded whatever tenants are presented.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KICK_SKIP_MARGIN_MS, KickMemo } from '../../../../src/core/log/kicks.js';

describe('KickMemo', () => {
  it('covers a commit only before the told drain time minus the margin', () => {
    const m = new KickMemo(10);
    expect(m.covered('t', 1_000)).toBe(false); // never told: kick
    m.record('t', 3_000);
    expect(m.covered('t', 1_000)).toBe(true);
    expect(m.covered('t', 3_000 - KICK_SKIP_MARGIN_MS - 1)).toBe(true);
    // Inside the margin or past the drain: the drain may already have read D1, so kick.
    expect(m.covered('t', 3_000 - KICK_SKIP_MARGIN_MS)).toBe(false);
    expect(m.covered('t', 3_000)).toBe(false);
    expect(m.covered('t', 9_000)).toBe(false);
    // Another tenant's drain never covers this one.
    expect(m.covered('u', 1_000)).toBe(false);
  });

  it('forgets a tenant whose kick failed, and ignores a due time that is not a number', () => {
    const m = new KickMemo(10);
    m.record('t', 3_000);
    m.forget('t');
    expect(m.covered('t', 1_000)).toBe(false);
    m.record('t', Number.NaN);
    m.record('t', Number.POSITIVE_INFINITY);
    expect(m.covered('t', 1_000)).toBe(false);
    expect(m.size).toBe(0);
  });

  it('refuses a table without room or a negative margin', () => {
    expect(() => new KickMemo(0)).toThrow(RangeError);
    expect(() => new KickMemo(1.5)).toThrow(RangeError);
    expect(() => new KickMemo(1, -1)).toThrow(RangeError);
  });

  it('property: a skip always has a recorded due time after now + margin, and the table is bounded', () => {
    const op = fc.oneof(
      fc.record({
        k: fc.constant('record' as const),
        t: fc.integer({ min: 0, max: 20 }),
        due: fc.integer({ min: 0, max: 10_000 }),
      }),
      fc.record({ k: fc.constant('forget' as const), t: fc.integer({ min: 0, max: 20 }) }),
      fc.record({
        k: fc.constant('covered' as const),
        t: fc.integer({ min: 0, max: 20 }),
        now: fc.integer({ min: 0, max: 10_000 }),
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(op, { maxLength: 200 }), (max, ops) => {
        const m = new KickMemo(max);
        // The model: the latest due time recorded and not forgotten, per tenant (or evicted).
        const told = new Map<string, number>();
        for (const o of ops) {
          const tenant = `t${o.t}`;
          if (o.k === 'record') {
            m.record(tenant, o.due);
            told.set(tenant, o.due);
          } else if (o.k === 'forget') {
            m.forget(tenant);
            told.delete(tenant);
          } else if (m.covered(tenant, o.now)) {
            const due = told.get(tenant);
            expect(due).toBeDefined();
            expect(o.now + KICK_SKIP_MARGIN_MS).toBeLessThan(due ?? -Infinity);
          }
          expect(m.size).toBeLessThanOrEqual(max);
        }
      }),
    );
  });
});
