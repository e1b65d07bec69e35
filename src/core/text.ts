/**
 * Text shown to people: which characters are refused, and which are flagged.
 *
 * Guarantees: `CONTROL_CHARS` is the one definition of a control character (C0, DEL and C1) that
 * every free-text and target-value pattern refuses; `textWarnings` finds every bidirectional
 * control and invisible character in a JSON value (keys and strings), with where it sits, so an
 * approver is told that what they read is not what the bytes say.
 * Never: changes, strips or normalizes text (a digest is over the exact bytes; a warning is
 * advice beside them), reads a clock, or does I/O.
 */
import type { JsonValue } from './canonical/json.js';

/**
 * C0 controls, DEL and C1 controls (U+0080-U+009F: a raw CSI, U+009B, drives a terminal just
 * like ESC [). A character class body, shared by the patterns of `schema.ts` and `model.ts`.
 */
export const CONTROL_CHARS = '\\u0000-\\u001f\\u007f-\\u009f';

/** Reorders how text is displayed: a right-to-left override can make `lmx.exe` read `exe.xml`. */
const BIDI_CONTROL = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/**
 * Renders as nothing (or as a blank) yet is part of the bytes: two values that look equal to an
 * approver can differ, or hidden text (tag characters) can ride along. Every Unicode
 * Default_Ignorable_Code_Point that is not a bidi control (reserved ones included, which a
 * renderer also draws as nothing: U+2065, U+FFF0-FFF8, U+E0080-E0FFF; and the variation
 * selectors), plus line and paragraph separators (they break a one-line preview without being a
 * control character) and the interlinear annotation characters. A unit test checks the whole
 * code space against the property.
 */
// Each escape is one code point or range listed on purpose; the combining marks among them
// (U+034F, U+17B4, the variation selectors) are the point, not a mistake.
const INVISIBLE =
  // eslint-disable-next-line no-misleading-character-class
  /[\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2028\u2029\u2060-\u2065\u206a-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e0fff}]/gu;

export type TextWarningKind = 'bidi_control' | 'invisible';

export interface TextWarning {
  /** JSON Pointer (RFC 6901) of the string, or of the key, that holds the characters. */
  readonly path: string;
  readonly kind: TextWarningKind;
  /** `U+XXXX`, unique, in order of code point. */
  readonly codepoints: readonly string[];
}

/** At most this many warnings are listed; the rest are counted. */
export const MAX_TEXT_WARNINGS = 32;

export interface TextWarnings {
  readonly warnings: readonly TextWarning[];
  /** Warnings found beyond `MAX_TEXT_WARNINGS`. */
  readonly omitted: number;
}

/** The bidi controls and invisible characters of one string, by kind. */
export function suspiciousCodepoints(text: string): { kind: TextWarningKind; codepoints: string[] }[] {
  const out: { kind: TextWarningKind; codepoints: string[] }[] = [];
  for (const [kind, pattern] of [
    ['bidi_control', BIDI_CONTROL],
    ['invisible', INVISIBLE],
  ] as const) {
    const found = text.match(pattern);
    if (found === null) continue;
    const points = [...new Set(found.map((c) => c.codePointAt(0) as number))].sort((a, b) => a - b);
    out.push({ kind, codepoints: points.map(formatCodepoint) });
  }
  return out;
}

/**
 * Every bidi control and invisible character in `value` (strings and object keys), each located
 * by a JSON Pointer under `root`. Walks in document order; `value` is already bounded (a
 * contract's `max_input_bytes`), so this is linear in its size.
 */
export function textWarnings(entries: readonly (readonly [root: string, value: JsonValue])[]): TextWarnings {
  const warnings: TextWarning[] = [];
  let omitted = 0;
  const add = (path: string, text: string) => {
    for (const w of suspiciousCodepoints(text)) {
      if (warnings.length < MAX_TEXT_WARNINGS) warnings.push({ path, ...w });
      else omitted++;
    }
  };
  const walk = (path: string, v: JsonValue) => {
    if (typeof v === 'string') add(path, v);
    else if (Array.isArray(v)) v.forEach((item, i) => walk(`${path}/${i}`, item));
    else if (v !== null && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        const p = `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
        add(p, k);
        walk(p, item);
      }
    }
  };
  for (const [root, value] of entries) walk(root, value);
  return { warnings, omitted };
}

/** Everything `escapeText` rewrites: controls, separators, lone surrogates, bidi and invisible. */
const UNSAFE_TEXT = new RegExp(
  // eslint-disable-next-line no-misleading-character-class -- as INVISIBLE
  `[${CONTROL_CHARS}\\ud800-\\udfff]|${BIDI_CONTROL.source}|${INVISIBLE.source}`,
  'gu',
);

/**
 * `text` with every control character, line or paragraph separator, lone surrogate, bidi control
 * and invisible character written as `\\uXXXX` escapes (one per UTF-16 unit): safe to show in an
 * error body or a log line, where such characters could redraw a terminal or reorder the text
 * around them. Every other character is kept. Idempotent.
 */
export function escapeText(text: string): string {
  return text.replace(UNSAFE_TEXT, (c) => {
    let out = '';
    for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return out;
  });
}

function formatCodepoint(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}
