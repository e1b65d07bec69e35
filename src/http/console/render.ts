/**
 * What the approval console shows, rendered on the server: escaped text, invisible characters
 * made visible, canonical JSON indented and highlighted with CSS classes, plain-language effects.
 *
 * Guarantees: every string that reaches a page goes through `esc` or `shown`; a format, control,
 * direction-changing, variation-selector, tag or unusual space character is never written as
 * itself but as a visible `⟨U+XXXX⟩` marker, and counted so the page can warn; JSON is rendered
 * from the parsed value in RFC 8785 key order, so what is shown is what was hashed.
 * Never: emits script, inline style or an event handler attribute.
 */
import { raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { ToolEffect } from '../../core/model.js';

export function esc(s: string): string {
  return s
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/**
 * Characters a reader cannot see or that reorder what they see (Trojan Source, CVE-2021-42574):
 * format characters (bidi embeddings, overrides and isolates, zero-width joiners, BOM, tags),
 * controls, line and paragraph separators, variation selectors, fillers and non-ASCII spaces.
 */
// Combining marks (variation selectors, U+034F) are in the class on purpose: each one alone is
// a finding, which is what this rule warns about in ordinary classes.
/* eslint-disable no-misleading-character-class */
// `\p{Default_Ignorable_Code_Point}`: what a renderer draws as nothing, reserved code points
// included (U+E0000, U+E0002-E001F, U+2065, U+FFF0-FFF8 are not `Cf`, and are still invisible).
const SUSPICIOUS =
  /[\p{Cf}\p{Cc}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}\u00a0\u034f\u115f\u1160\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200a\u202f\u205f\u2800\u3000\u3164\ufe00-\ufe0f\uffa0\u{e0100}-\u{e01ef}]/u;
const SUSPICIOUS_ALL = new RegExp(SUSPICIOUS.source, 'gu');
/* eslint-enable no-misleading-character-class */

/** Counts the characters made visible while rendering one page. */
export class Findings {
  count = 0;
  readonly codepoints = new Set<string>();
}

export function codepointLabel(ch: string): string {
  return `U+${(ch.codePointAt(0) as number).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** `s` escaped, each suspicious character replaced by a visible, flagged marker. */
export function shown(s: string, f: Findings): HtmlEscapedString {
  let out = '';
  let last = 0;
  for (const m of s.matchAll(SUSPICIOUS_ALL)) {
    const at = m.index;
    out += esc(s.slice(last, at));
    const label = codepointLabel(m[0]);
    f.count += 1;
    f.codepoints.add(label);
    out += `<mark class="inv" title="invisible or direction-changing character">⟨${label}⟩</mark>`;
    last = at + m[0].length;
  }
  out += esc(s.slice(last));
  return raw(out);
}

export function hasSuspicious(s: string): boolean {
  return SUSPICIOUS.test(s);
}

/** A JSON string literal as `JSON.stringify` writes it, with suspicious characters marked. */
function jsonString(s: string, cls: string, f: Findings): string {
  return `<span class="${cls}">${shown(JSON.stringify(s), f)}</span>`;
}

/**
 * Indented JSON with `.k` keys, `.s` strings, `.n` numbers, `.b` booleans, `.z` null. Object keys
 * in RFC 8785 order (by UTF-16 code units, as `<` compares strings): not the order of
 * `value`, which even for a parsed canonical text lists integer-like keys first, numerically.
 */
export function jsonHtml(value: unknown, f: Findings, depth = 0): string {
  const pad = '  '.repeat(depth);
  const inner = '  '.repeat(depth + 1);
  if (value === null) return '<span class="z">null</span>';
  if (typeof value === 'string') return jsonString(value, 's', f);
  if (typeof value === 'number') return `<span class="n">${esc(JSON.stringify(value))}</span>`;
  if (typeof value === 'boolean') return `<span class="b">${String(value)}</span>`;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    const items = value.map((v) => inner + jsonHtml(v, f, depth + 1));
    return `[\n${items.join(',\n')}\n${pad}]`;
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    if (entries.length === 0) return '{}';
    const items = entries.map(([k, v]) => `${inner}${jsonString(k, 'k', f)}: ${jsonHtml(v, f, depth + 1)}`);
    return `{\n${items.join(',\n')}\n${pad}}`;
  }
  // Parsed JSON holds nothing else; anything that does is not shown as if it were data.
  return '<span class="z">(not json)</span>';
}

export const EFFECT_EXPLANATION: Record<ToolEffect, string> = {
  read_only: 'Reads data and changes nothing.',
  creates_draft: 'Creates a draft that has no effect until someone publishes or sends it.',
  external_write:
    'Changes something in an outside system (deploys, updates, sends). The contract says whether it can be undone.',
  irreversible:
    'Changes something in an outside system that cannot be undone: deleted data, money sent or messages delivered stay so.',
};

export function effectExplanation(effect: string): string {
  return (EFFECT_EXPLANATION as Record<string, string>)[effect] ?? 'An effect this console does not know.';
}

export function isoTime(unixMs: number): string {
  return new Date(unixMs).toISOString().replace('.000Z', 'Z');
}

export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} days`;
}
