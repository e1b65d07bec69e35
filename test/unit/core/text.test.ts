/**
 * Text shown to people (issue 9): C1 controls are refused wherever C0 controls are (labels,
 * attribute values, derived targets); bidi controls and invisible characters are found and
 * located; every quoted input in an error message is escaped; issue lists are bounded.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateGrant } from '../../../src/core/authorization/authorize.js';
import { deriveTarget } from '../../../src/core/contracts/contract.js';
import { resolveTarget } from '../../../src/core/contracts/target.js';
import {
  boundIssues,
  fromJsonError,
  MAX_ISSUES,
  quoted,
  safeText,
  type FieldIssue,
} from '../../../src/core/errors.js';
import { decodeJsonText } from '../../../src/core/canonical/json.js';
import { AttributeValue, ATTRIBUTE_VALUE_PATTERN, ToolGrant } from '../../../src/core/model.js';
import { Label } from '../../../src/core/schema.js';
import { escapeText, MAX_TEXT_WARNINGS, textWarnings } from '../../../src/core/text.js';
import { parseToolInvocation } from '../../../src/library/invocation.js';
import { buildContract, buildGrant, buildInvocation, rollbackInput } from './fixtures.js';

/** Raw characters that must never reach an error body. */
const RAW_UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\u{e0000}-\u{e007f}]/u;

const isSafe = (text: string) => text.isWellFormed() && !RAW_UNSAFE.test(text);

/** Hostile strings: controls of every kind, bidi overrides, invisibles, tags, lone surrogates. */
const hostileChar = fc.constantFrom(
  '\u0000',
  '\u001b',
  '\n',
  '\u007f',
  '\u0080',
  '\u009b',
  '\u061c',
  '\u200b',
  '\u200e',
  '\u202e',
  '\u2028',
  '\u2066',
  '\u2069',
  '\ufeff',
  '\u180e',
  '\u{e0041}',
  '\ud800',
  '\udc00',
);
const hostile = fc
  .array(fc.oneof(hostileChar, fc.string({ unit: 'binary', maxLength: 4 })), { minLength: 1, maxLength: 40 })
  .map((parts) => parts.join(''));

describe('C1 controls are refused like C0 controls', () => {
  for (const c of ['\u0080', '\u0085', '\u009b', '\u009f']) {
    const code = c.charCodeAt(0).toString(16);
    it(`U+00${code} in a label, an attribute value and a derived target`, () => {
      expect(Label.safeParse(`release ${c}31m`).success).toBe(false);
      expect(AttributeValue.safeParse(`api${c}`).success).toBe(false);
      expect(ATTRIBUTE_VALUE_PATTERN.test(`api${c}`)).toBe(false);
      const t = deriveTarget(buildContract(), { ...rollbackInput(), service: `api${c}[2J` });
      expect(t.ok).toBe(false);
      if (!t.ok) expect(t.error.issues.map((i) => i.path)).toEqual(['input/service']);
    });
  }

  it('the hot-path invocation parser refuses a CSI in the target as zod does', () => {
    const inv = buildInvocation();
    const bad = {
      ...inv,
      target: { ...inv.target, attributes: { ...inv.target.attributes, service: 'a\u009b' } },
    };
    expect(parseToolInvocation(bad).ok).toBe(false);
  });

  it('text around C1 is unchanged: Latin-1 letters, bidi and invisible characters are accepted', () => {
    for (const v of ['Zürich', 'a\u00a0b', '\u00ff', 'a\u202eb', 'a\u200bb']) {
      expect(AttributeValue.safeParse(v).success).toBe(true);
      expect(Label.safeParse(v).success).toBe(true);
    }
  });
});

describe('textWarnings: bidi controls and invisible characters, located', () => {
  it('finds them in strings and keys, with JSON Pointer paths and sorted unique code points', () => {
    const r = textWarnings([
      ['/input', { file: 'invoice\u202Efdp.exe', 'a/b~\u200b': ['ok', 'x\u2066y\u2069\u2066'] }],
      ['/target', { type: 'deployment', attributes: { service: 'api\u{e0041}\ufeff' } }],
    ]);
    expect(r.omitted).toBe(0);
    expect(r.warnings).toEqual([
      { path: '/input/file', kind: 'bidi_control', codepoints: ['U+202E'] },
      { path: '/input/a~1b~0\u200b', kind: 'invisible', codepoints: ['U+200B'] },
      { path: '/input/a~1b~0\u200b/1', kind: 'bidi_control', codepoints: ['U+2066', 'U+2069'] },
      { path: '/target/attributes/service', kind: 'invisible', codepoints: ['U+FEFF', 'U+E0041'] },
    ]);
  });

  it('flags every default-ignorable code point, as bidi control or invisible (the whole code space)', () => {
    const ignorable = /\p{Default_Ignorable_Code_Point}/u;
    const missed: string[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const ch = String.fromCodePoint(cp);
      if (!ignorable.test(ch)) continue;
      if (textWarnings([['/x', ch]]).warnings.length !== 1) missed.push(cp.toString(16));
    }
    expect(missed).toEqual([]);
  });

  it('plain text has none; the list is bounded and the rest counted', () => {
    expect(textWarnings([['/input', { a: 'Zürich — ok', b: [1, true, null] }]]).warnings).toEqual([]);
    const many = Array.from({ length: MAX_TEXT_WARNINGS + 5 }, () => 'x\u200b');
    const r = textWarnings([['/input', many]]);
    expect(r.warnings).toHaveLength(MAX_TEXT_WARNINGS);
    expect(r.omitted).toBe(5);
  });
});

describe('quoted input in error messages goes through safeText', () => {
  it('escapeText and safeText never leave a raw unsafe character (property)', () => {
    fc.assert(
      fc.property(hostile, (s) => {
        expect(isSafe(escapeText(s))).toBe(true);
        expect(isSafe(safeText(s))).toBe(true);
        expect(isSafe(quoted(s))).toBe(true);
        expect(escapeText(escapeText(s))).toBe(escapeText(s));
      }),
      { seed: 0x9c1, numRuns: 1000 },
    );
  });

  it('a duplicate or forbidden JSON key is quoted escaped and clipped', () => {
    const key = `\\u001b[31m\\u009b\\u202e${'k'.repeat(5000)}`;
    for (const text of [`{"${key}":1,"${key}":2}`]) {
      const r = decodeJsonText(text);
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      const e = fromJsonError(r.error);
      expect(e.message).toContain('duplicate key');
      expect(isSafe(e.message)).toBe(true);
      expect(e.message).toContain('\\u001b');
      expect(e.message.length).toBeLessThan(1500);
    }
  });

  it('the target_mismatch message quotes the derived target escaped', () => {
    const input = { ...rollbackInput(), service: 'api\u202e\u200b' };
    const r = resolveTarget(buildContract(), input, {
      type: 'deployment',
      attributes: { environment: 'production', service: 'api' },
    });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.reason).toBe('target_mismatch');
    for (const i of r.error.issues) expect(isSafe(i.message)).toBe(true);
    expect(r.error.issues[0]?.message).toContain('\\u202e');
  });

  it('validateGrant quotes selector types through safeText', () => {
    const g = buildGrant();
    const grant = ToolGrant.parse({
      ...g,
      capabilities: [
        { capability: 'deployment:read', resources: [{ type: 'service', attributes: { a: ['b'] } }] },
      ],
    });
    const r = validateGrant(grant);
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.error.issues[0]?.message).toBe(
        'selector type "service" does not match capability "deployment:read"',
      );
  });
});

describe('boundIssues: at most MAX_ISSUES issues, the last one counting the rest', () => {
  const issues = (n: number): FieldIssue[] =>
    Array.from({ length: n }, (_, i) => ({ path: `a[${i}]\u009b`, message: 'bad\u202e' }));

  it('keeps short lists whole (escaped) and cuts long ones with a marker; idempotent', () => {
    expect(boundIssues(issues(3))).toEqual(
      Array.from({ length: 3 }, (_, i) => ({ path: `a[${i}]\\u009b`, message: 'bad\\u202e' })),
    );
    const cut = boundIssues(issues(5000));
    expect(cut).toHaveLength(MAX_ISSUES);
    expect(cut[MAX_ISSUES - 1]).toEqual({ path: '$', message: `… and ${5000 - MAX_ISSUES + 1} more issues` });
    expect(boundIssues(cut)).toEqual(cut);
    expect(boundIssues(issues(MAX_ISSUES))).toHaveLength(MAX_ISSUES);
  });

  it('fromZodError bounds thousands of zod issues', () => {
    const inv = buildInvocation();
    const attributes = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, '*']));
    const r = parseToolInvocation({ ...inv, target: { ...inv.target, attributes } });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.issues).toHaveLength(MAX_ISSUES);
    expect(r.error.issues.at(-1)).toEqual({
      path: '$',
      message: `… and ${3000 - MAX_ISSUES + 1} more issues`,
    });
  });
});
