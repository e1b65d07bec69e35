/**
 * `fromZodError` turns zod issues into field issues that are safe to return and to log: zod names
 * offending keys (in paths and in "unrecognized key" messages), and a key is attacker-chosen text.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromZodError, MAX_ISSUE_TEXT, safeText } from '../../../src/core/errors.js';
import { parseToolInvocation } from '../../../src/library/invocation.js';
import { ToolInvocation } from '../../../src/core/model.js';
import { buildInvocation } from './fixtures.js';

// Controls and separators, and (issue 9) bidi controls and invisible characters: every Unicode
// default-ignorable code point (src/core/text.ts), and the interlinear annotation characters.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\ufff9-\ufffb\p{Default_Ignorable_Code_Point}]/u;

/** Clipped to MAX_ISSUE_TEXT input units (plus "…"), each of which may become a 6-unit escape. */
function isSafe(text: string): boolean {
  return text.isWellFormed() && !UNSAFE.test(text) && text.length <= MAX_ISSUE_TEXT * 6 + 1;
}

describe('fromZodError: issues never carry raw control characters, lone surrogates or long input', () => {
  it('an unrecognized key with control characters, a lone surrogate and 1,000 characters', () => {
    const hostile = `x\u0000\u001b[31m\n\u2028\ud800${'k'.repeat(1000)}`;
    const r = parseToolInvocation({ ...buildInvocation(), [hostile]: 1 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.reason).toBe('invalid_invocation');
    expect(r.error.issues.length).toBeGreaterThan(0);
    for (const i of r.error.issues) {
      expect(isSafe(i.path)).toBe(true);
      expect(isSafe(i.message)).toBe(true);
    }
    const message = r.error.issues.map((i) => i.message).join(' ');
    expect(message).toContain('unrecognized key');
    expect(message).toContain('\\u0000');
    expect(message).toContain('\\ud800');
    expect(message).toContain('…');
  });

  it('a hostile key inside a record shows up in the path, escaped', () => {
    const inv = buildInvocation();
    const r = ToolInvocation.safeParse({
      ...inv,
      target: { ...inv.target, attributes: { ...inv.target.attributes, 'bad\u0007name\udfff': 'x' } },
    });
    expect(r.success).toBe(false);
    if (r.success) return;
    const e = fromZodError('invalid_invocation', 'invocation', r.error);
    expect(e.issues.some((i) => i.path.includes('\\u0007') && i.path.includes('\\udfff'))).toBe(true);
    for (const i of e.issues) expect(isSafe(i.path) && isSafe(i.message)).toBe(true);
  });

  it('ordinary messages and paths are unchanged', () => {
    const r = parseToolInvocation({ ...buildInvocation(), tenant_id: 'has space' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.issues).toStrictEqual([
      {
        path: 'invocation.tenant_id',
        message: 'must be an identifier ([a-za-z0-9._:@/+=-], 1-128 chars)',
      },
    ]);
  });

  it('safeText: any string comes out well-formed, control-free and bounded; safe text is kept', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (s) => {
        const out = safeText(s);
        expect(isSafe(out)).toBe(true);
        if (s.length <= MAX_ISSUE_TEXT && isSafe(s)) expect(out).toBe(s);
      }),
      { seed: 0xe77, numRuns: 2000 },
    );
    // A pair split by the clip is escaped, not left lone.
    const split = safeText(`${'a'.repeat(MAX_ISSUE_TEXT - 1)}😀`);
    expect(split.isWellFormed()).toBe(true);
    expect(split.endsWith('\\ud83d…')).toBe(true);
  });
});
