/**
 * JSON content as a model reads it. In JSON text a quote inside a string is `\"`, a newline `\n`,
 * a form feed `\f`: rules that read quotes, line starts or word breaks (`password = "…"`,
 * `{"client_secret": "…"}` returned as a string) do not see them there, although a model reads
 * every string unescaped. Receipts of version 4 (`writ-signals/3`) scanned JSON content twice, as
 * it is and as read one level deep (`jsonStringsAsRead`); receipts of version 5 (`writ-signals/4`)
 * and the Docker MCP Gateway's `after` screening scan it as it is and at each level of JSON text
 * held in its strings (`jsonStringLevelsAsRead`, the levels the `writ-redactor/3` redactor
 * reads); both keep the union of the scans (`mergeScans`).
 *
 * Guarantees: `jsonStringsAsRead` is a total function of the text (malformed JSON included), one
 * linear pass, and its result is never longer than its input (so it never reaches a scan bound
 * the text itself does not); each level of `jsonStringLevelsAsRead`, its strings joined by
 * newlines, is never longer than the text either. `mergeScans` keeps every hit of every scan
 * once, in the detector's order, so a merged scan is always a superset of each of its parts.
 * Never: parses numbers or structure, follows anything the content says, or reads a clock.
 */
import type { SignalHit } from '../schema.js';
import { compareHits } from '../signals.js';
import type { SignalScan } from './releases.js';

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};
const HEX4 = /^[0-9A-Fa-f]{4}$/;

/**
 * Every JSON string literal in `text` (member names and values alike) with its escapes decoded,
 * in document order, one per line. Read lexically: outside a string a `"` opens one, and it ends
 * at the next unescaped `"` (or at the end of the text). `\uXXXX` is one UTF-16 code unit (a pair
 * is two escapes, as in JSON); an escape JSON does not define is kept as written. For a valid
 * JSON text this is exactly its strings, whatever the nesting depth or duplicate member names.
 */
export function jsonStringsAsRead(text: string): string {
  return jsonStringLiteralTexts(text).join('\n');
}

/** The decoded texts of `text`'s string literals, in order: `jsonStringsAsRead` before the join. */
function jsonStringLiteralTexts(text: string): string[] {
  const out: string[] = [];
  let i = text.indexOf('"');
  while (i >= 0) {
    let s = '';
    let start = i + 1;
    let j = start;
    for (; j < text.length; j++) {
      const c = text.charCodeAt(j);
      if (c === 0x22) break;
      if (c !== 0x5c) continue;
      s += text.slice(start, j);
      const e = text.charAt(j + 1);
      const hex = text.slice(j + 2, j + 6);
      if (Object.hasOwn(ESCAPES, e)) {
        s += ESCAPES[e] as string;
        j += 1;
      } else if (e === 'u' && HEX4.test(hex)) {
        s += String.fromCharCode(parseInt(hex, 16));
        j += 5;
      } else {
        // Not a JSON escape: kept as written (the backslash; what follows is read on).
        s += '\\';
      }
      start = j + 1;
    }
    out.push(s + text.slice(start, j));
    i = j < text.length ? text.indexOf('"', j + 1) : -1;
  }
  return out;
}

/** One JSON string literal as read: its decoded text, and where each decoded code unit came from. */
export interface StringLiteralAsRead {
  readonly text: string;
  /**
   * `raw[k]` is the offset in the JSON text of the first character of the escape (or character)
   * that decoded code unit `k` was read from, and `raw[text.length]` the offset just after the
   * last one: decoded `[s, e)` was read from the text's `[raw[s], raw[e])`, whole escapes included.
   */
  readonly raw: Uint32Array;
}

/**
 * The string literals of `text` as `jsonStringsAsRead` reads them (the same lexical reading:
 * joined by newlines, their texts are exactly its result; property-tested), each with the map back
 * to the offsets it was read from, so a span found in what a model reads can be located in the text.
 * One pass; the maps share one buffer of four bytes per character of the text.
 */
export function jsonStringLiteralsAsRead(text: string): StringLiteralAsRead[] {
  const out: StringLiteralAsRead[] = [];
  // One buffer for every map: a literal's units and end offset never outnumber its characters
  // with its opening quote, so all of them fit in the text's length plus one.
  const buffer = new Uint32Array(text.length + 1);
  let n = 0;
  let i = text.indexOf('"');
  while (i >= 0) {
    const first = n;
    let parts: string[] | null = null;
    let start = i + 1;
    let j = start;
    for (; j < text.length; j++) {
      const c = text.charCodeAt(j);
      if (c === 0x22) break;
      if (c !== 0x5c) continue;
      parts ??= [];
      if (j > start) parts.push(text.slice(start, j));
      for (let k = start; k < j; k++) buffer[n++] = k;
      const e = text.charAt(j + 1);
      const hex = text.slice(j + 2, j + 6);
      buffer[n++] = j;
      if (Object.hasOwn(ESCAPES, e)) {
        parts.push(ESCAPES[e] as string);
        j += 1;
      } else if (e === 'u' && HEX4.test(hex)) {
        parts.push(String.fromCharCode(parseInt(hex, 16)));
        j += 5;
      } else {
        // Not a JSON escape: kept as written (the backslash; what follows is read on).
        parts.push('\\');
      }
      start = j + 1;
    }
    for (let k = start; k < j; k++) buffer[n++] = k;
    buffer[n++] = j;
    const rest = text.slice(start, j);
    out.push({
      text: parts === null ? rest : (parts.push(rest), parts.join('')),
      raw: buffer.subarray(first, n),
    });
    i = j < text.length ? text.indexOf('"', j + 1) : -1;
  }
  return out;
}

/**
 * How many levels of JSON text held in JSON strings are read: level 1 is the text's own string
 * literals, level k+1 the literals found inside level k's strings. The `writ-redactor/3`
 * redactor and the `writ-signals/4` scan read this many.
 */
export const AS_READ_DEPTH = 4;

/**
 * The string literals of `text` read level by level, as `jsonStringLiteralsAsRead` reads each:
 * level 1 is the literals of `text`, level k+1 the literals inside the strings of level k that
 * hold a quote, up to `depth` levels; a level with no string ends the walk (only non-empty levels
 * are returned). Every literal keeps its map to offsets of `text` (whole escapes), composed
 * through the levels. Level 1's texts joined by newlines are exactly `jsonStringsAsRead(text)`.
 * Cost: a literal read is never longer than the characters between its quotes, and its quotes
 * are not read, so each level's texts joined by newlines are at most as long as the level above
 * (at most the text's length); one pass per level.
 */
export function jsonStringLevelsAsRead(text: string, depth: number = AS_READ_DEPTH): StringLiteralAsRead[][] {
  const levels: StringLiteralAsRead[][] = [];
  let level = depth >= 1 && text.includes('"') ? jsonStringLiteralsAsRead(text) : [];
  while (level.length > 0) {
    levels.push(level);
    if (levels.length >= depth) break;
    const next: StringLiteralAsRead[] = [];
    for (const l of level) {
      if (!l.text.includes('"')) continue;
      for (const inner of jsonStringLiteralsAsRead(l.text)) {
        next.push({ text: inner.text, raw: inner.raw.map((k) => l.raw[k] as number) });
      }
    }
    level = next;
  }
  return levels;
}

/**
 * The texts `levelText(level)` of every level `jsonStringLevelsAsRead(text, depth)` returns, read
 * without the offset maps (what a scan needs: the signals bind no offsets): the same levels in
 * the same order (property-tested), holding only strings, each level at most the text's length.
 */
export function jsonStringLevelTexts(text: string, depth: number = AS_READ_DEPTH): string[] {
  return jsonStringLevelStrings(text, depth).map((level) => level.join('\n'));
}

/** The strings of each level `jsonStringLevelTexts` joins, before the join. */
export function jsonStringLevelStrings(text: string, depth: number = AS_READ_DEPTH): string[][] {
  const out: string[][] = [];
  let level = depth >= 1 && text.includes('"') ? jsonStringLiteralTexts(text) : [];
  while (level.length > 0) {
    out.push(level);
    if (out.length >= depth) break;
    const next: string[] = [];
    for (const l of level) {
      if (!l.includes('"')) continue;
      for (const inner of jsonStringLiteralTexts(l)) next.push(inner);
    }
    level = next;
  }
  return out;
}

/** A level's text as `jsonStringLevelTexts` joins it, with the offsets of the newlines that join its strings. */
export interface LevelText {
  readonly text: string;
  /** Offsets of the separating newlines: boundaries between strings, never a wrapped line. */
  readonly separators: number[];
}

/** The levels of `jsonStringLevelTexts`, each with where its strings were joined. */
export function jsonStringLevelTextsWithSeparators(text: string, depth: number = AS_READ_DEPTH): LevelText[] {
  return jsonStringLevelStrings(text, depth).map(joinedWithSeparators);
}

/** Strings joined by newlines, and where the newlines are. */
export function joinedWithSeparators(strings: readonly string[]): LevelText {
  const separators: number[] = [];
  let at = 0;
  strings.forEach((s, i) => {
    if (i > 0) separators.push(at - 1);
    at += s.length + 1;
  });
  return { text: strings.join('\n'), separators };
}

/** A level's strings as one text to scan: joined by newlines, as `jsonStringsAsRead` joins them. */
export function levelText(level: readonly StringLiteralAsRead[]): string {
  return level.map((l) => l.text).join('\n');
}

/** The union of scans: every hit once, sorted as one scan's hits are; the signals of those hits. */
export function mergeScans(scans: readonly SignalScan[]): SignalScan {
  const hits: SignalHit[] = [];
  for (const s of scans) {
    for (const h of s.hits) if (!hits.some((k) => compareHits(k, h) === 0)) hits.push(h);
  }
  hits.sort(compareHits);
  return { signals: [...new Set(hits.map((h) => h.signal))].sort(), hits };
}
