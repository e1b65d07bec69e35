/**
 * The console's rendering claims, as properties: whatever string or JSON value a request holds,
 * the HTML written for it contains no hidden or direction-changing character and no markup of
 * its own, and every hidden character is counted and named by a marker.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import {
  Findings,
  codepointLabel,
  hasSuspicious,
  jsonHtml,
  shown,
} from '../../../src/http/console/render.js';

const HIDDEN = [
  '\u202e',
  '\u202d',
  '\u2066',
  '\u2067',
  '\u2068',
  '\u2069',
  '\u200b',
  '\u200d',
  '\ufeff',
  '\u00ad',
  '\u2028',
  '\u00a0',
  '\ufe0f',
  '\u{e0041}',
  '\u0000',
  '\u007f',
  '\u0085',
  '\u3164',
];

/** Strings mixing ordinary text, markup characters and hidden characters. */
const text = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'grapheme' }),
      fc.constantFrom(...HIDDEN),
      fc.constantFrom('<', '>', '&', '"', "'"),
    ),
    {
      maxLength: 12,
    },
  )
  .map((parts) => parts.join(''));

const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    text,
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(text, tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** The page text with the markers' own markup removed. */
function visibleText(html: string): string {
  return html
    .replace(/<mark class="inv" title="[^"]*">⟨U\+[0-9A-F]{4,6}⟩<\/mark>/g, '')
    .replace(/<\/?span[^>]*>/g, '');
}

describe('console rendering (properties)', () => {
  it('every default-ignorable code point (drawn as nothing) is marked, tag characters U+E0000-E007F included', () => {
    // Unicode's Default_Ignorable_Code_Point: what a renderer draws as nothing, assigned or not
    // (U+E0000, U+E0002-E001F, U+2065 and U+FFF0-FFF8 are reserved, and still drawn as nothing).
    const ignorable = /\p{Default_Ignorable_Code_Point}/u;
    const missed: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      if (ignorable.test(ch) && !hasSuspicious(ch)) missed.push(codepointLabel(ch));
    }
    expect(missed.slice(0, 12)).toEqual([]);
    for (let cp = 0xe0000; cp <= 0xe007f; cp++) {
      expect(hasSuspicious(String.fromCodePoint(cp)), codepointLabel(String.fromCodePoint(cp))).toBe(true);
    }
    const f = new Findings();
    expect(String(shown('rm /tmp/a\u{e0002}', f))).toContain('⟨U+E0002⟩');
    expect(f.count).toBe(1);
  });

  it('a shown string has no hidden character and no markup; each hidden one is a counted marker', () => {
    fc.assert(
      fc.property(text, (s) => {
        const f = new Findings();
        const out = String(shown(s, f));
        expect(hasSuspicious(out)).toBe(false);
        expect(visibleText(out)).not.toMatch(/[<>"']/);
        const expected = [...s].filter((ch) => hasSuspicious(ch));
        expect(f.count).toBe(expected.length);
        for (const ch of expected) expect(out).toContain(`⟨${codepointLabel(ch)}⟩`);
      }),
      { numRuns: 500 },
    );
  });

  it('rendered JSON is the canonical text, indented: RFC 8785 key order, integer-like keys included', () => {
    // JavaScript lists integer-like keys first, in numeric order ("9" before "10"); RFC 8785 sorts
    // every key by UTF-16 code units ("10" before "9" before "b").
    const plain = (html: string) =>
      html
        .replace(/<[^>]*>/g, '')
        .replace(/\s+/g, '')
        .replaceAll('&quot;', '"')
        .replaceAll('&#39;', "'")
        .replaceAll('&lt;', '<')
        .replaceAll('&gt;', '>')
        .replaceAll('&amp;', '&');
    const value = JSON.parse(
      canonicalize({ b: 1, '10': { z: 0, '2': 0, '11': 0 }, '9': [{ '1': 0, a: 0 }] }),
    );
    expect(plain(jsonHtml(value, new Findings()))).toBe(canonicalize(value));
    const keyed = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.integer(),
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(
          fc.constantFrom('0', '1', '2', '9', '10', '11', '100', 'a', 'B', '_', '~'),
          tie('value'),
          {
            maxKeys: 6,
          },
        ),
      ),
    })).value;
    fc.assert(
      fc.property(keyed, (v) => {
        const parsed = JSON.parse(canonicalize(v)) as unknown;
        expect(plain(jsonHtml(parsed, new Findings()))).toBe(canonicalize(v));
      }),
      { numRuns: 200 },
    );
  });

  it('rendered JSON has no hidden character and no markup but its own classes', () => {
    fc.assert(
      fc.property(json, (v) => {
        const f = new Findings();
        const out = jsonHtml(v, f);
        expect(hasSuspicious(out.replaceAll('\n', ''))).toBe(false);
        expect(visibleText(out)).not.toMatch(/[<>]/);
      }),
      { numRuns: 300 },
    );
  });
});
