/**
 * The `Writ-D1-Bookmark` header check (src/db/client.ts `isBookmark`): only D1's bookmark shape,
 * bounded, is ever handed to `withSession`; anything else is refused (a 400 at the door).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_BOOKMARK_LENGTH, isBookmark } from '../../../src/db/client.js';

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
