/**
 * The `Writ-D1-Bookmark` header check (src/db/client.ts `isBookmark`): only D1's bookmark shape,
 * bounded, is ever handed to `withSession`; anything else is refused (a 400 at the door).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_BOOKMARK_HEADER_LENGTH,
  MAX_BOOKMARK_LENGTH,
  formatBookmarkHeader,
  isBookmark,
  parseBookmarkHeader,
  sessionConstraint,
} from '../../../src/db/client.js';

const hex = (n: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: n, maxLength: n });
const bookmark = fc.tuple(hex(8), hex(8), hex(8), hex(32)).map((parts) => parts.join('-'));

describe('isBookmark', () => {
  it('accepts every bookmark of D1 shape', () => {
    fc.assert(fc.property(bookmark, (b) => isBookmark(b)));
  });

  it('accepts nothing longer than the bound, or outside lowercase hex and dashes', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (s) => {
        if (isBookmark(s)) {
          expect(s.length).toBeLessThanOrEqual(MAX_BOOKMARK_LENGTH);
          expect(s).toMatch(/^[0-9a-f-]+$/);
        }
      }),
    );
  });

  it('refuses a bookmark with any character changed to one outside its alphabet', () => {
    fc.assert(
      fc.property(
        bookmark,
        fc.nat(),
        fc.string({ minLength: 1, maxLength: 1 }).filter((c) => !/[0-9a-f]/.test(c)),
        (b, at, c) => {
          const i = at % b.length;
          if (b[i] === '-' && c === '-') return;
          expect(isBookmark(b.slice(0, i) + c + b.slice(i + 1))).toBe(false);
        },
      ),
    );
  });

  it('refuses the empty value, padding, upper case and extra fields', () => {
    const ok = '0000007b-0000b26e-00001538-0c3e87bb37b3db5cc52eedb93cd3b96b';
    expect(isBookmark(ok)).toBe(true);
    for (const bad of ['', ` ${ok}`, `${ok} `, ok.toUpperCase(), `${ok}-00`, `${ok}\n`, 'x'.repeat(10_000)]) {
      expect([bad.slice(0, 20), isBookmark(bad)]).toEqual([bad.slice(0, 20), false]);
    }
  });
});

describe('shard-qualified bookmarks (Writ-D1-Bookmark)', () => {
  const SHARDS = 4;
  const byShard = fc
    .uniqueArray(fc.tuple(fc.nat({ max: SHARDS - 1 }), bookmark), {
      minLength: 1,
      maxLength: SHARDS,
      selector: ([shard]) => shard,
    })
    .map((entries) => new Map(entries));

  it('what a response carries parses back to the same bookmarks by shard', () => {
    fc.assert(
      fc.property(byShard, (m) => {
        const header = formatBookmarkHeader(m);
        expect(header).not.toBeNull();
        const parsed = parseBookmarkHeader(header as string, SHARDS);
        expect(parsed).toEqual({ kind: 'qualified', bookmarks: m });
      }),
    );
  });

  it('a shard session starts from its own bookmark only; one the client sent none for is at the primary', () => {
    fc.assert(
      fc.property(byShard, fc.nat({ max: SHARDS - 1 }), (m, shard) => {
        const start = { at: 'nearest', bookmarks: m } as const;
        // Never another shard's bookmark, never unconstrained once the client sent any.
        expect(sessionConstraint(start, shard)).toBe(m.get(shard) ?? 'first-primary');
        expect(sessionConstraint(start, null)).toBe('first-primary');
      }),
    );
    expect(sessionConstraint({ at: 'nearest', bookmarks: null }, 0)).toBe('first-unconstrained');
    expect(sessionConstraint({ at: 'primary' }, 0)).toBe('first-primary');
  });

  it('accepts nothing but D1 bookmarks under known shards, each shard once, within the bounds', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (s) => {
        const parsed = parseBookmarkHeader(s, SHARDS);
        if (parsed === null || parsed.kind === 'unqualified') return;
        for (const [shard, b] of parsed.bookmarks) {
          expect(shard).toBeLessThan(SHARDS);
          expect(isBookmark(b)).toBe(true);
        }
      }),
    );
    const ok = '0000007b-0000b26e-00001538-0c3e87bb37b3db5cc52eedb93cd3b96b';
    expect(parseBookmarkHeader(ok, SHARDS)).toEqual({ kind: 'unqualified' });
    for (const bad of [
      `0:${ok},0:${ok}`,
      `${SHARDS}:${ok}`,
      `00:${ok}`,
      `-1:${ok}`,
      `0:${ok},`,
      `,0:${ok}`,
      `0:${ok} `,
      `0:${ok},1:${ok.toUpperCase()}`,
      `0:${ok}`.padEnd(MAX_BOOKMARK_HEADER_LENGTH + 1, '0'),
      Array.from({ length: 9 }, (_, i) => `${i}:${ok}`).join(','),
    ]) {
      expect([bad.slice(0, 30), parseBookmarkHeader(bad, SHARDS)]).toEqual([bad.slice(0, 30), null]);
    }
    // The part count is bounded on its own, whatever the shard count.
    const eight = Array.from({ length: 8 }, (_, i) => `${i}:${ok}`);
    expect(parseBookmarkHeader(eight.join(','), 1000)).not.toBeNull();
    expect(parseBookmarkHeader([...eight, `8:${ok}`].join(','), 1000)).toBeNull();
  });
});
