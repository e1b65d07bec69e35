/**
 * The signal detector of each observation receipt version: version 1 receipts were issued with
 * release `writ-signals/1` (the frozen `legacy-v1.ts`), versions 2 and 3 with `writ-signals/2` (the
 * current `../signals.ts` over the content's text), version 4 with `writ-signals/3` (the same
 * rules, over the text and, for JSON content, also over its strings as a model reads them:
 * `as-read.ts`), version 5 with `writ-signals/4` (the same rules, over the text and, for JSON
 * content, over the strings read at each level of JSON text held in strings, `AS_READ_DEPTH`
 * levels deep, as the `writ-redactor/3` redactor reads them), version 6 with `writ-signals/5`
 * (version 5's scan, with the credential rules also run over each text as written, where
 * invisible characters are boundaries as they are to the redactor, and every rule also over its
 * normalized copy with invisible characters read as spaces: `WRIT_SIGNALS_5_READING`), version 7
 * with `writ-signals/6` (version 6's scan, with every Default_Ignorable_Code_Point and format
 * character invisible, the soft hyphen and the rest of that set flagged by
 * `hidden.format_character`, and the credential rules also over each text as the
 * `writ-redactor/4` redactor reads it: through invisible characters, tag characters and
 * compatibility forms, and across a line break inside a token: `WRIT_SIGNALS_6_READING`).
 *
 * Guarantees: a receipt is only ever recomputed with the detector of the version written in it, so
 * a detector change never turns an honest stored receipt into a replay failure, and a receipt
 * whose version was edited is recomputed under other rules and fails. Version 4's scan of any
 * content is a superset of version 3's (the union of the text's scan and the strings' scan), and
 * version 5's a superset of version 4's (its first level is version 4's strings), and version 6's
 * a superset of version 5's (the same scans, each with more passes of the same rules), and
 * version 7's a superset of version 6's (the same passes, plus extra views, one more rule and the
 * read-through credential passes); in a version 6 scan, content in which
 * `credentialSpansAsRead(…, 'writ-redactor/3')` locates a span always raises
 * `credential_like_text`, and in a version 7 scan, content in which `credentialSpansAsRead` (the
 * `writ-redactor/4` reading) does (each text it reads is a text the scan reads, with the same
 * rules over it read the same ways).
 * Never: picks a detector from anything but the receipt version and the content's media type,
 * reads a clock, or does I/O.
 */
import {
  isJsonMediaType,
  type ObservationReceiptVersion,
  type ObservationSignal,
  type SignalHit,
} from '../schema.js';
import { type DetectOptions, detectSignals } from '../signals.js';
import { credentialSpans as credentialSpansV1, detectSignals as detectSignalsV1 } from './legacy-v1.js';
import { credentialSpans, type CredentialSpan, credentialSpansV4, mergeCredentialSpans } from '../signals.js';
import {
  AS_READ_DEPTH,
  joinedWithSeparators,
  jsonStringLevelTextsWithSeparators,
  jsonStringLevelsAsRead,
  jsonStringsAsRead,
  mergeScans,
  type StringLiteralAsRead,
} from './as-read.js';

/** How many levels of JSON text inside JSON strings `credentialSpansAsRead` and version 5 read. */
export { AS_READ_DEPTH };

/** What a receipt binds of a scan: the signals and the hits, nothing else. */
export interface SignalScan {
  readonly signals: ObservationSignal[];
  readonly hits: SignalHit[];
}

/**
 * How release `writ-signals/5` reads each text beyond `writ-signals/2`'s rules: the credential
 * rules also over the text as written, every rule also over its normalized copy with invisible
 * characters read as spaces.
 */
export const WRIT_SIGNALS_5_READING: DetectOptions = {
  credentialsAsWritten: true,
  invisiblesAsBoundaries: true,
};

/**
 * How release `writ-signals/6` reads each text: `writ-signals/5`'s reading, with every
 * Default_Ignorable_Code_Point and format character invisible (`hidden.format_character` flags
 * them) and the credential rules also over the text as `writ-redactor/4` reads it
 * (`credentialSpansReadThrough`).
 */
export const WRIT_SIGNALS_6_READING: DetectOptions = {
  ...WRIT_SIGNALS_5_READING,
  ignorablesWide: true,
  credentialsReadThrough: true,
};

/** The reading of the release new receipts bind (`writ-signals/6`), for other screens (egress). */
export const CURRENT_SIGNALS_READING: DetectOptions = WRIT_SIGNALS_6_READING;

/** A version's detector over one text; `separators`: newlines joining strings (version 7 reads them). */
type Detector = (text: string, separators?: readonly number[]) => SignalScan;

const DETECTORS: Readonly<Record<ObservationReceiptVersion, Detector>> = {
  1: (text) => detectSignalsV1(text),
  2: (text) => detectSignals(text),
  // Version 3 changed what a receipt binds of the content, not the signal rules.
  3: (text) => detectSignals(text),
  // Versions 4 and 5 run the same rules over more text (`scanContentUnder`), not other rules.
  4: (text) => detectSignals(text),
  5: (text) => detectSignals(text),
  // Version 6: the same rules, read as `WRIT_SIGNALS_5_READING` says.
  6: (text) => detectSignals(text, WRIT_SIGNALS_5_READING),
  // Version 7: the same rules and one more, read as `WRIT_SIGNALS_6_READING` says.
  7: (text, separators = []) =>
    detectSignals(text, { ...WRIT_SIGNALS_6_READING, readThroughBoundaries: separators }),
};

/**
 * How many levels of JSON content's strings a version also scans: none before `writ-signals/3`,
 * one for `writ-signals/3` (`jsonStringsAsRead`), four for `writ-signals/4` to `writ-signals/6`.
 */
const JSON_LEVELS_READ: Readonly<Record<ObservationReceiptVersion, number>> = {
  1: 0,
  2: 0,
  3: 0,
  4: 1,
  // Frozen: what version 5 receipts bind. It equals `AS_READ_DEPTH` (the redactor's depth) today;
  // a change to that constant must not change how stored version 5 receipts replay.
  5: 4,
  // Frozen as well, for version 6 and version 7 receipts.
  6: 4,
  7: 4,
};

/** Scan `text` with the rule set that receipts of `version` bind (the text alone, as it is). */
export function scanUnder(
  version: ObservationReceiptVersion,
  text: string,
  separators: readonly number[] = [],
): SignalScan {
  const r = DETECTORS[version](text, separators);
  // Only the bound fields: a report's extra detail (families, work counters) is not receipt data.
  return { signals: r.signals, hits: r.hits };
}

/**
 * Scan content of `mediaType` as receipts of `version` do: its text; for a JSON media type, in
 * version 4 also every string in it as a model reads it (`jsonStringsAsRead`), in version 5 the
 * strings read at each level of JSON text held in strings, `AS_READ_DEPTH` levels deep
 * (`jsonStringLevelTexts`, the levels the redactor reads: one scan per level, its strings joined
 * by newlines), in version 6 the same texts with `writ-signals/5`'s rules, in version 7 with
 * `writ-signals/6`'s; the hits being the
 * union of the scans. Versions 1 to 3 scan the text alone, and every version exactly as it was
 * issued.
 */
export function scanContentUnder(
  version: ObservationReceiptVersion,
  text: string,
  mediaType: string,
): SignalScan {
  const plain = scanUnder(version, text);
  const depth = JSON_LEVELS_READ[version];
  if (depth === 0 || !isJsonMediaType(mediaType)) return plain;
  // Version 4 as issued: one scan of every string, one level deep.
  if (depth === 1) return mergeScans([plain, scanUnder(version, jsonStringsAsRead(text))]);
  // The levels' texts only (no offset maps: a scan binds no offsets), one scan each; the newlines
  // joining a level's strings are separators (only the version 7 read-through pass tells them apart).
  return mergeScans([
    plain,
    ...jsonStringLevelTextsWithSeparators(text, depth).map((l) => scanUnder(version, l.text, l.separators)),
  ]);
}

/** Credential spans as located by the release-1 rules (the `writ-redactor/1` redactor) or the current ones. */
export function credentialSpansUnder(legacy: boolean, text: string): CredentialSpan[] {
  return legacy ? credentialSpansV1(text) : credentialSpans(text);
}

/** The redactor releases `credentialSpansAsRead` reads as (`derived.ts` names the others). */
export type AsReadRedactor = 'writ-redactor/3' | 'writ-redactor/4';

/**
 * Credential spans of content as the `writ-redactor/4` redactor (the default) or the
 * `writ-redactor/3` one locates them: the text's own
 * spans and, for a JSON media type, the spans found in its string literals as a model reads them,
 * located back in the text (whole escapes included, never a literal's quotes; in text with only
 * JSON structure outside its strings a span of the text itself is cut to the strings it touches,
 * in anything else kept whole), and so on into JSON text held in those strings, `AS_READ_DEPTH`
 * levels deep; merged where they overlap. A secret quoted inside a JSON string
 * (`"{\"client_secret\": \"…\"}"`) is found only this way. In each text `writ-redactor/3` runs
 * `credentialSpans` (the text as written: an invisible character ends a key), `writ-redactor/4`
 * `credentialSpansV4` (also the text read through invisible characters, tag characters and
 * compatibility forms, and across a line break inside a token: a key split that way is one key;
 * in a level, the strings are joined by newlines, so a key split across two adjacent strings is
 * read as one too, and redacted in both).
 * Cost: one scan of the text, then one scan per level of that level's strings joined by newlines
 * (as `jsonStringsAsRead` joins them for the signals), whatever the number of strings; a string
 * read is never longer than its literal, so each level is at most the text's length.
 */
export function credentialSpansAsRead(
  text: string,
  mediaType: string,
  redactor: AsReadRedactor = 'writ-redactor/4',
): CredentialSpan[] {
  const spansOf: (t: string, separators?: readonly number[]) => CredentialSpan[] =
    redactor === 'writ-redactor/3' ? (t) => credentialSpans(t) : credentialSpansV4;
  if (!isJsonMediaType(mediaType)) return spansOf(text);
  const plain = spansOf(text);
  if (!text.includes('"')) return plain;
  // The levels the `writ-signals/4` and `writ-signals/5` scans read too (`jsonStringLevelTexts`: the same walk's texts).
  const levels = jsonStringLevelsAsRead(text, AS_READ_DEPTH);
  const top = levels[0] ?? [];
  // In JSON text, a span that touches a string keeps only its parts inside strings, each widened
  // to whole escapes: redacting a quote, a colon or half of `\"` would leave no JSON to read. In
  // text with anything but JSON structure outside its quotes (content labelled JSON that is not),
  // the span is kept whole: never less than `writ-redactor/2`.
  const spans =
    plain.length > 0 && onlyStructureOutside(text, top)
      ? plain.flatMap((s) => insideLiterals(s, top, redactor === 'writ-redactor/4'))
      : [...plain];
  // Each level: the strings read at that depth, each with its map to offsets of `text`.
  for (const level of levels) {
    const starts: number[] = [];
    let at = 0;
    for (const l of level) {
      starts.push(at);
      at += l.text.length + 1;
    }
    const joined = joinedWithSeparators(level.map((l) => l.text));
    for (const s of spansOf(joined.text, joined.separators)) {
      spans.push(...piecesIn(s, level, starts));
    }
  }
  return mergeCredentialSpans(spans);
}

/**
 * A span of strings joined by newlines (string `i` starting at `starts[i]`), as the parts of
 * each string it covers, located in the text through each string's map (whole escapes).
 */
function piecesIn(
  s: CredentialSpan,
  strings: readonly StringLiteralAsRead[],
  starts: readonly number[],
): CredentialSpan[] {
  // The last string starting at or before the span.
  let lo = 0;
  let hi = strings.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if ((starts[mid] as number) <= s.start) lo = mid;
    else hi = mid - 1;
  }
  const out: CredentialSpan[] = [];
  for (let i = lo; i < strings.length && (starts[i] as number) < s.end; i++) {
    const l = strings[i] as StringLiteralAsRead;
    const base = starts[i] as number;
    const from = Math.max(0, s.start - base);
    const to = Math.min(l.text.length, s.end - base);
    if (from < to) out.push({ rule: s.rule, start: l.raw[from] as number, end: l.raw[to] as number });
  }
  return out;
}

/**
 * The parts of `s` inside string literals (between their quotes), each widened to whole escapes,
 * when `s` touches a literal (its quotes included); `s` itself when it touches none (text outside
 * any string, as in a string read from JSON that is itself no JSON). With `endBeforeEscape`
 * (`writ-redactor/4`) a part that ends inside an escape ends before it instead of after it.
 */
function insideLiterals(
  s: CredentialSpan,
  literals: readonly StringLiteralAsRead[],
  endBeforeEscape = false,
): CredentialSpan[] {
  // The first literal whose closing quote (the text's end, unterminated) is at or after the start.
  let lo = 0;
  let hi = literals.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (lastOf((literals[mid] as StringLiteralAsRead).raw) < s.start) lo = mid + 1;
    else hi = mid;
  }
  const out: CredentialSpan[] = [];
  let touched = false;
  for (let i = lo; i < literals.length; i++) {
    const raw = (literals[i] as StringLiteralAsRead).raw;
    const first = raw[0] as number;
    // The opening quote is just before the first character read.
    if (first - 1 >= s.end) break;
    touched = true;
    const from = Math.max(first, s.start);
    const to = Math.min(lastOf(raw), s.end);
    // `writ-redactor/4`: a span that ends inside an escape (a rule whose value class takes `\`,
    // gitleaks' `jwt`, ending on the backslash of `\"`) stops before it: widened, it swallowed the
    // escaped quote that closes JSON text held in the string; whatever the escape decodes to is
    // read, and redacted if it is part of a secret, by the level passes.
    const end = endBeforeEscape ? floorIn(raw, to) : ceilIn(raw, to);
    const start = floorIn(raw, from);
    if (from < to && start < end) out.push({ rule: s.rule, start, end });
  }
  return touched ? out : [s];
}

/** What JSON text holds outside its strings: whitespace, punctuation, numbers, true, false, null. */
const STRUCTURE = new Set(Array.from(' \t\n\r[]{}:,0123456789+-.eEtrufalsn', (ch) => ch.charCodeAt(0)));

/**
 * Whether `text` has nothing but JSON structure outside its string literals (one pass, nothing
 * allocated): where it has, cutting a span to the literals would leave that part in the clear.
 */
function onlyStructureOutside(text: string, literals: readonly StringLiteralAsRead[]): boolean {
  let at = 0;
  for (const literal of literals) {
    // Up to the opening quote, just before the first character read.
    for (let i = at; i < (literal.raw[0] as number) - 1; i++)
      if (!STRUCTURE.has(text.charCodeAt(i))) return false;
    at = lastOf(literal.raw) + 1;
  }
  for (let i = at; i < text.length; i++) if (!STRUCTURE.has(text.charCodeAt(i))) return false;
  return true;
}

function lastOf(raw: ArrayLike<number>): number {
  return raw[raw.length - 1] as number;
}

/** The largest offset of `raw` at or below `at`. */
function floorIn(raw: ArrayLike<number>, at: number): number {
  let lo = 0;
  let hi = raw.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if ((raw[mid] as number) <= at) lo = mid;
    else hi = mid - 1;
  }
  return raw[lo] as number;
}

/** The smallest offset of `raw` at or above `at`. */
function ceilIn(raw: ArrayLike<number>, at: number): number {
  let lo = 0;
  let hi = raw.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((raw[mid] as number) >= at) hi = mid;
    else lo = mid + 1;
  }
  return raw[lo] as number;
}
