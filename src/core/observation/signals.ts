/**
 * Deterministic instruction-like, authority-claim, credential-like and hidden-character signals
 * over an observed payload (spec ch. 12, "Signal suspicious content without deleting evidence").
 *
 * Guarantees: the same text always yields the same sorted, de-duplicated hits; the payload is
 * never modified: every rule runs on normalized copies (NFKC with a bounded expansion, lowercase,
 * Unicode format/zero-width characters removed, tag characters revealed, common Latin
 * look-alikes folded, separators collapsed or squeezed out), and on bounded decodings of
 * base64, hex, percent, HTML-entity and backslash-escaped segments. With `credentialsAsWritten`
 * (release `writ-signals/5`) the credential rules also run over each text as written, where it
 * differs from its normalized copy: an invisible character is then a boundary, as it is to the
 * redactor (`credentialSpans`), so whatever the redactor locates is signalled; with
 * `invisiblesAsBoundaries` (same release) every rule also runs over views of a text with invisible
 * characters read as spaces, where it has any. Release `writ-signals/6` adds `ignorablesWide`
 * (every Default_Ignorable_Code_Point and format character is invisible: extra views where the
 * text has one the earlier set keeps, and `hidden.format_character`, which flags the soft hyphen
 * and the rest of that set) and `credentialsReadThrough` (the credential rules over each text read
 * as the `writ-redactor/4` redactor reads it: invisible characters removed, tag characters
 * revealed, compatibility forms folded, and a line break inside a token joined; see
 * `credentialSpansReadThrough`). Work is linear in the input:
 * every pattern is a literal-led alternation whose quantifiers are fixed or bounded by a small
 * constant, tokens are capped before word rules see them, and decoding has a total budget.
 * A hit names its rule and encoding, never the matched text.
 * Never: deletes, rewrites or "sanitizes" evidence, treats the absence of a hit as safety, or
 * treats a hit as proof of intent (a security document may legitimately quote these strings).
 */
import { SIGNAL_ENCODINGS, type ObservationSignal, type SignalEncoding, type SignalHit } from './schema.js';
import { GENERIC_SHAPE_RULES, scanSecrets, SHAPE_RULES, type SecretWork } from './signals/credentials.js';
import { FORMAT_CHARACTER_RULE, SCRIPT_GATES, STOPWORDS, WORDING_RULES } from './signals/injection.js';
import { CONFUSABLE_RE, CONFUSABLES, type Rule } from './signals/rule.js';

export const SIGNAL_LIMITS = {
  /** Longest text scanned at all; validation bounds payloads far below this. */
  maxScanChars: 4 * 1024 * 1024,
  /** Total characters produced by all decodings of one payload. */
  maxDecodedChars: 256 * 1024,
  /** Encoded segments decoded per payload. */
  maxDecodedSegments: 128,
  /** Longest single base64/hex segment decoded. */
  maxSegmentChars: 64 * 1024,
  /** Decoding nests at most this deep (base64 inside percent-encoding, say). */
  maxDecodeDepth: 2,
  /** Word tokens longer than this are replaced before word rules run. */
  maxTokenChars: 64,
} as const;

/**
 * A hit with what a reader needs to see why it fired: the family of wording or the credential
 * rule, and the languages of the wording rules that matched. Not bound into receipts (see
 * docs/observations.md, "Signals and receipts").
 */
export interface SignalDetail extends SignalHit {
  readonly family: string;
  readonly languages: string[];
}

export interface SignalReport {
  readonly signals: ObservationSignal[];
  /** What receipts bind: signal, rule id (which names the family or provider rule) and encoding. */
  readonly hits: SignalHit[];
  readonly details: SignalDetail[];
  readonly work: SignalWork;
  /** False when part of the text (a tail past `maxScanChars`, an encoded segment past the budget) was not scanned. */
  readonly complete: boolean;
}

const RULES: readonly Rule[] = [...WORDING_RULES, ...SHAPE_RULES, ...GENERIC_SHAPE_RULES];
/** The rules `credentialSpans` runs (every credential rule, in `RULES` order). */
const CREDENTIAL_RULES: readonly Rule[] = RULES.filter((r) => r.signal === 'credential_like_text');
/** Their patterns compiled once with the `g` and `d` flags (spans need every match's indices). */
const CREDENTIAL_SPAN_RES: readonly RegExp[] = CREDENTIAL_RULES.map((rule) => {
  const flags = rule.pattern.flags.includes('g') ? rule.pattern.flags : `${rule.pattern.flags}g`;
  return new RegExp(rule.pattern.source, flags.includes('d') ? flags : `${flags}d`);
});

/** How a scan reads (a release's choices; the default is `writ-signals/2`'s rules). */
export interface DetectOptions {
  /**
   * Also run every rule over each text's normalized copy with invisible characters read as spaces
   * instead of removed, where it has any (`writ-signals/5`): a soft hyphen or zero-width space
   * between words separates them to a reader; removed, `ignore all previous instructions` written
   * with soft hyphens for spaces is one token to the word rules.
   */
  readonly invisiblesAsBoundaries?: boolean;
  /**
   * Also run the credential rules over each text as written (the payload, each decoding), where
   * it differs from its normalized copy (`writ-signals/5`). The normalized copy removes invisible
   * characters, folds compatibility forms and reveals tag characters; the redactor reads the text
   * as written, where a soft hyphen, a zero-width space or a tag character ends a key. Without
   * this, `AKIA` and 16 characters, a soft hyphen and a letter is a 17-character token to the
   * rules (no boundary) and a key to the redactor: redacted, yet not signalled.
   */
  readonly credentialsAsWritten?: boolean;
  /**
   * Every Default_Ignorable_Code_Point and format character counts as invisible
   * (`INVISIBLE_WIDE_RE`; `writ-signals/6`): where a text holds one the default set keeps (a
   * variation selector past U+FE0F, U+17B4, U+2065, an unassigned tag-block code point ...), its
   * views with the wider set removed, and read as spaces, are scanned too (extra views: what the
   * default views find is still found); and `hidden.format_character` runs over each text as
   * written, so the soft hyphen and the rest of that set raise `hidden_characters`.
   */
  readonly ignorablesWide?: boolean;
  /**
   * Also run the credential rules over each text as the `writ-redactor/4` redactor reads it
   * (`credentialSpansReadThrough`; `writ-signals/6`): every span it locates raises
   * `credential_like_text` under its rule, so whatever that redactor redacts is signalled.
   */
  readonly credentialsReadThrough?: boolean;
  /**
   * Offsets of line breaks in the text that separate texts rather than wrap one (the newlines
   * joining a level's JSON strings, `jsonStringLevelTextsWithSeparators`): the read-through
   * credential pass never joins them. Applies to the text itself, not to its decodings.
   */
  readonly readThroughBoundaries?: readonly number[];
}

// ---------------------------------------------------------------------------------------------
// Normalization

const LEET: ReadonlyArray<readonly [string, string]> = [
  ['0', 'o'],
  ['1', 'i'],
  ['3', 'e'],
  ['4', 'a'],
  ['5', 's'],
  ['7', 't'],
];
const NON_ASCII_RE = /[^\u0000-\u007f]/;
const LETTER_OR_DIGIT_RE = /^[\p{L}\p{N}]$/u;

/** Maximal runs of letters and digits, in order: one linear pass, no per-separator allocation. */
function tokenize(text: string): string[] {
  const tokens: string[] = [];
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    let alnum: boolean;
    let width = 1;
    if (c < 0x80) alnum = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a);
    else {
      const cp = text.codePointAt(i) as number;
      width = cp > 0xffff ? 2 : 1;
      alnum = LETTER_OR_DIGIT_RE.test(String.fromCodePoint(cp));
    }
    if (alnum) {
      if (start < 0) start = i;
    } else if (start >= 0) {
      tokens.push(text.slice(start, i));
      start = -1;
    }
    i += width - 1;
  }
  if (start >= 0) tokens.push(text.slice(start));
  return tokens;
}

// Format characters (zero-width, bidi, soft hyphen, tags after reveal), fillers and variation selectors.
// Combining invisibles (grapheme joiner, variation selectors) are alternatives, not class members,
// so no character class mixes them with base characters.
const INVISIBLE_RE = /[\p{Cf}\u115F\u1160\u3164\uFFA0]|\u034F|[\u180B-\u180D]|[\uFE00-\uFE0F]/gu;
const TAG_RE = /[\u{E0020}-\u{E007E}]/gu;
/**
 * `writ-signals/6` and `writ-redactor/4`: every Default_Ignorable_Code_Point and every format
 * character. A superset of `INVISIBLE_RE` (property-tested over the code space), and the set
 * `hidden.format_character` flags, less what other hidden rules name and what renders visibly.
 */
export const INVISIBLE_WIDE_RE = /[\p{Cf}\p{Default_Ignorable_Code_Point}]/gu;
/** Invisible to `writ-signals/6` but kept by `INVISIBLE_RE`: where a text has one, extra views. */
// Combining invisibles are alternatives, not class members, as in `INVISIBLE_RE`.
const WIDE_ONLY_RE =
  /(?![\p{Cf}\u115F\u1160\u3164\uFFA0]|\u034F|[\u180B-\u180D]|[\uFE00-\uFE0F])\p{Default_Ignorable_Code_Point}/u;

/**
 * NFKC with a bounded expansion. A few compatibility characters expand to 18 characters; a
 * payload of them must not multiply the scanning cost, so a chunk that grows more than 3x is
 * normalized per code point with large expansions replaced by a space. Chunks end before an ASCII
 * character, where composition cannot cross.
 */
function boundedNfkc(text: string): string {
  const out: string[] = [];
  const CHUNK = 4096;
  let i = 0;
  while (i < text.length) {
    let end = Math.min(text.length, i + CHUNK);
    if (end < text.length) {
      let j = end;
      while (j < text.length && j < end + 256 && text.charCodeAt(j) >= 0x80) j++;
      end = j < text.length && text.charCodeAt(j) < 0x80 ? j : end;
      // Never split a surrogate pair.
      const c = text.charCodeAt(end - 1);
      if (c >= 0xd800 && c <= 0xdbff) end++;
    }
    const chunk = text.slice(i, end);
    const n = chunk.normalize('NFKC');
    if (n.length <= chunk.length * 3 + 16) out.push(n);
    else {
      for (const ch of chunk) {
        const m = ch.normalize('NFKC');
        out.push(m.length <= 4 ? m : ' ');
      }
    }
    i = end;
  }
  return out.join('');
}

interface View {
  readonly raw: string;
  readonly cased: string;
  readonly lower: string;
  readonly folded: string;
  readonly words: string;
  readonly squeezed: string;
  readonly leet: string;
  /** Languages the text shows (script or function words): their wording rules run. */
  readonly langs: ReadonlySet<string>;
}

function languagesOf(lower: string, tokens: readonly string[]): Set<string> {
  const langs = new Set<string>();
  for (const t of tokens) {
    const l = STOPWORDS.get(t);
    if (l !== undefined) for (const x of l) langs.add(x);
  }
  if (NON_ASCII_RE.test(lower))
    for (const [lang, gate] of SCRIPT_GATES) if (gate.test(lower)) langs.add(lang);
  return langs;
}

/** `text` with tag characters revealed as the ASCII they smuggle, then NFKC (bounded). */
function revealedNfkc(text: string): string {
  // Tag characters are all behind the high surrogate U+DB40.
  const revealed = text.includes('\uDB40')
    ? text.replace(TAG_RE, (c) => String.fromCharCode((c.codePointAt(0) as number) - 0xe0000))
    : text;
  return boundedNfkc(revealed);
}

const HAS_INVISIBLE_RE = new RegExp(INVISIBLE_RE.source, 'u');

/**
 * The views of `text` with invisible characters removed (what a reader cannot see) and, when it
 * has any and `boundaries` is set (`writ-signals/5`), the views with each one read as a space
 * instead: removal joins a word split by a zero-width space (`ig<ZWSP>nore`), a space keeps apart
 * words an invisible character separates (`ignore<soft hyphen>all<soft hyphen>previous`), which
 * removal runs together into one token.
 */
function makeViews(text: string, boundaries: boolean, wide = false): View[] {
  const n = revealedNfkc(text);
  const removed = viewOf(text, n.replace(INVISIBLE_RE, ''));
  const views = [removed];
  if (boundaries && HAS_INVISIBLE_RE.test(n)) views.push(viewOf(text, n.replace(INVISIBLE_RE, ' ')));
  // `writ-signals/6`: the wider set, as extra views, only where the text holds one of the characters
  // it adds (so the views above, and what they find, are unchanged).
  if (wide && WIDE_ONLY_RE.test(n)) {
    views.push(viewOf(text, n.replace(INVISIBLE_WIDE_RE, '')));
    if (boundaries) views.push(viewOf(text, n.replace(INVISIBLE_WIDE_RE, ' ')));
  }
  return views;
}

function viewOf(text: string, cased: string): View {
  let folded = cased.toLowerCase();
  if (NON_ASCII_RE.test(folded)) folded = folded.replace(CONFUSABLE_RE, (c) => CONFUSABLES[c] ?? c);
  // `\n`, `\t` inside escaped JSON separate words; other backslashes only escape quotes.
  if (folded.includes('\\'))
    folded = folded
      .replace(/\\[nr]/g, '\n')
      .replace(/\\t/g, ' ')
      .replaceAll('\\', '');
  const lower = folded.replace(/\s+/g, ' ');
  const tokens = tokenize(lower);
  const squeezed = tokens.join('');
  // Cap tokens so bounded-gap word rules do bounded work per start position.
  const words = ` ${tokens.map((t) => (t.length > SIGNAL_LIMITS.maxTokenChars ? 'longtoken' : t)).join(' ')} `;
  let leet =
    lower.includes('@') || lower.includes('$')
      ? tokenize(lower.replaceAll('@', 'a').replaceAll('$', 's')).join('')
      : squeezed;
  for (const [digit, letter] of LEET) leet = leet.replaceAll(digit, letter);
  return { raw: text, cased, lower, folded, words, squeezed, leet, langs: languagesOf(lower, tokens) };
}

// ---------------------------------------------------------------------------------------------
// Decoding (bounded, one level of nesting below the payload by default)

interface Budget {
  chars: number;
  segments: number;
  /** Set when a decoding was refused for budget: some encoded content went unscanned. */
  exhausted: boolean;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lenientUtf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Decoded bytes count as text only if they are valid UTF-8, mostly printable, with some letters. */
function asText(bytes: Uint8Array): string | null {
  if (bytes.length < 4) return null;
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    return null;
  }
  let printable = 0;
  let letters = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x09 || c === 0x0a || c === 0x0d || (c >= 0x20 && c !== 0x7f && !(c >= 0x80 && c < 0xa0)))
      printable++;
    if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) letters++;
  }
  return printable >= text.length * 0.9 && letters >= 3 ? text : null;
}

const B64 = new Int16Array(128).fill(-1);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'.split('').forEach((c, i) => {
  B64[c.charCodeAt(0)] = i;
});
B64[0x2b] = 62; // +
B64[0x2f] = 63; // /
B64[0x2d] = 62; // - (base64url)
B64[0x5f] = 63; // _ (base64url)

/** Standard or URL-safe base64, padding optional; a dangling sixth bit group is dropped. */
function decodeBase64(segment: string): Uint8Array | null {
  let body = segment.replace(/=+$/, '');
  if (body.length % 4 === 1) body = body.slice(0, -1);
  const out = new Uint8Array(Math.floor((body.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < body.length; i++) {
    const v = B64[body.charCodeAt(i)] ?? -1;
    if (v < 0) return null;
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, o);
}

function decodeHex(s: string): Uint8Array {
  const out = new Uint8Array(s.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Percent-decode: runs of `%XX` become UTF-8 text; everything else is kept. */
function decodePercent(s: string): string {
  return s.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => lenientUtf8.decode(decodeHex(run.replace(/%/g, ''))));
}

const NAMED_ENTITIES: Readonly<Record<string, string>> = {
  lt: '<',
  gt: '>',
  amp: '&',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  colon: ':',
  sol: '/',
  lowbar: '_',
  lbrack: '[',
  rbrack: ']',
  vert: '|',
};

function fromCodePoint(cp: number): string {
  return cp > 0 && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? String.fromCodePoint(cp) : ' ';
}

function decodeEntities(s: string): string {
  return s.replace(/&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});?/g, (m, e: string) => {
    if (e.startsWith('#x') || e.startsWith('#X')) return fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return fromCodePoint(parseInt(e.slice(1), 10));
    return NAMED_ENTITIES[e.toLowerCase()] ?? m;
  });
}

function decodeEscapes(s: string): string {
  return s.replace(
    /\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\([nrt"'\\/])/g,
    (_m, braced?: string, u4?: string, x2?: string, short?: string) => {
      if (braced !== undefined) return fromCodePoint(parseInt(braced, 16));
      if (u4 !== undefined) return String.fromCharCode(parseInt(u4, 16));
      if (x2 !== undefined) return String.fromCharCode(parseInt(x2, 16));
      return short === 'n' || short === 'r' || short === 't' ? ' ' : (short ?? '');
    },
  );
}

interface Decoded {
  readonly encoding: Exclude<SignalEncoding, 'plain'>;
  readonly text: string;
}

/**
 * Every bounded decoding of `text` that differs from it and reads as text. Whole-text decodings
 * (percent, entities, escapes) never grow the text; at the top level they are always scanned
 * (at most three extra copies), below it they share the budget with segment decodings.
 */
function decodings(text: string, depth: number, budget: Budget): Decoded[] {
  const out: Decoded[] = [];
  const add = (encoding: Decoded['encoding'], decoded: string | null, free: boolean) => {
    if (decoded === null || decoded === text) return;
    if (!free) {
      if (
        budget.segments >= SIGNAL_LIMITS.maxDecodedSegments ||
        budget.chars + decoded.length > SIGNAL_LIMITS.maxDecodedChars
      ) {
        budget.exhausted = true;
        return;
      }
      budget.segments++;
      budget.chars += decoded.length;
    }
    out.push({ encoding, text: decoded });
  };
  const top = depth === 0;
  if (/%[0-9a-fA-F]{2}/.test(text)) add('percent', decodePercent(text), top);
  if (/&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});/.test(text))
    add('html_entity', decodeEntities(text), top);
  if (/\\(?:u[0-9a-fA-F]{4}|u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2})/.test(text))
    add('escape', decodeEscapes(text), top);
  // Segment decodings. The regex scans left to right without overlap: linear.
  for (const m of text.matchAll(/[A-Za-z0-9+/_-]{16,}={0,2}/g)) {
    const seg = m[0];
    if (seg.length > SIGNAL_LIMITS.maxSegmentChars) {
      budget.exhausted = true;
      continue;
    }
    if (/^[0-9a-fA-F]+$/.test(seg)) {
      if (seg.length % 2 === 0) add('hex', asText(decodeHex(seg)), false);
      continue;
    }
    const bytes = decodeBase64(seg);
    if (bytes !== null) add('base64', asText(bytes), false);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Scanning

/** What a scan did, counted in characters: tests bound work by these, never by time. */
export interface SignalWork {
  /** Characters of text (payload and decodings) that went through normalization and the rules. */
  scannedChars: number;
  /** Characters handed to credential-rule regexes in keyword windows. */
  secretWindowChars: number;
  /** Characters produced by decodings. */
  decodedChars: number;
}

interface ScanState {
  readonly credentialsAsWritten: boolean;
  readonly invisiblesAsBoundaries: boolean;
  readonly ignorablesWide: boolean;
  readonly credentialsReadThrough: boolean;
  readonly readThroughBoundaries: readonly number[];
  readonly hits: Map<string, SignalHit>;
  readonly details: Map<string, SignalDetail>;
  readonly budget: Budget;
  readonly work: SignalWork;
}

function record(state: ScanState, hit: SignalHit, family: string, lang: string | undefined): void {
  const key = `${hit.signal}\u0000${hit.rule}\u0000${hit.encoding}`;
  if (!state.hits.has(key)) state.hits.set(key, hit);
  const d = state.details.get(key);
  if (d === undefined)
    state.details.set(key, { ...hit, family, languages: lang === undefined ? [] : [lang] });
  else if (lang !== undefined && !d.languages.includes(lang)) d.languages.push(lang);
}

/** Map keys of each rule's hits, per encoding, computed once (a scan must not build strings per rule). */
const RULE_KEYS: ReadonlyMap<Rule, Readonly<Record<SignalEncoding, string>>> = new Map(
  [...RULES, FORMAT_CHARACTER_RULE].map((r) => [
    r,
    Object.fromEntries(SIGNAL_ENCODINGS.map((e) => [e, `${r.signal}\u0000${r.id}\u0000${e}`])) as Record<
      SignalEncoding,
      string
    >,
  ]),
);

function runRules(view: View, encoding: SignalEncoding, state: ScanState, asWritten = true): void {
  let quoted: boolean | null = null;
  for (const rule of RULES) {
    const key = (RULE_KEYS.get(rule) as Record<SignalEncoding, string>)[encoding];
    // A language rule adds its language to a hit already found; other rules need not run again.
    if (rule.lang === undefined ? state.hits.has(key) : !view.langs.has(rule.lang)) continue;
    const hit =
      rule.view === 'squeezed'
        ? matches(rule, view.squeezed) || matches(rule, view.leet)
        : matches(rule, view[rule.view]);
    if (!hit) continue;
    if (rule.quotable === true) {
      quoted ??= discussesAttacks(view.words);
      if (quoted) continue;
    }
    record(state, { signal: rule.signal, rule: rule.id, encoding }, rule.family, rule.lang);
  }
  const secretWork: SecretWork = { chars: 0 };
  runSecrets(view.cased, encoding, state, secretWork);
  // `writ-signals/5`: the text as written too, with exactly the rules `credentialSpans` runs over
  // it (no `quotable` drop: the redactor has none). Only where normalization changed the text;
  // plain ASCII text costs one comparison.
  if (asWritten && state.credentialsAsWritten && view.raw !== view.cased) {
    for (const rule of CREDENTIAL_RULES) {
      const key = (RULE_KEYS.get(rule) as Record<SignalEncoding, string>)[encoding];
      if (state.hits.has(key) || !matches(rule, view.raw)) continue;
      record(state, { signal: rule.signal, rule: rule.id, encoding }, rule.family, rule.lang);
    }
    runSecrets(view.raw, encoding, state, secretWork);
  }
  // `writ-signals/6`: the soft hyphen and the rest of the wide invisible set, over the text as written.
  if (asWritten && state.ignorablesWide) {
    const key = (RULE_KEYS.get(FORMAT_CHARACTER_RULE) as Record<SignalEncoding, string>)[encoding];
    if (!state.hits.has(key) && FORMAT_CHARACTER_RULE.pattern.test(view.raw))
      record(
        state,
        { signal: FORMAT_CHARACTER_RULE.signal, rule: FORMAT_CHARACTER_RULE.id, encoding },
        FORMAT_CHARACTER_RULE.family,
        undefined,
      );
  }
  state.work.secretWindowChars += secretWork.chars;
}

/** The maintained (gitleaks) rules over `text`, each rule not yet found under `encoding`. */
function runSecrets(text: string, encoding: SignalEncoding, state: ScanState, work: SecretWork): void {
  const prefix = `credential_like_text\u0000`;
  const suffix = `\u0000${encoding}`;
  const skip = (id: string) => state.hits.has(prefix + id + suffix);
  for (const m of scanSecrets(text, work, false, skip))
    record(
      state,
      { signal: 'credential_like_text', rule: m.rule, encoding },
      m.rule.slice('credential.'.length),
      undefined,
    );
}

function matches(rule: Rule, text: string): boolean {
  if (rule.accept === undefined) return rule.pattern.test(text);
  for (const m of text.matchAll(rule.pattern)) if (rule.accept(m)) return true;
  return false;
}

/**
 * Quoted-attack context: the text is *about* injection (a security document, a scanner's README,
 * an advisory). Only weak wordings (`quotable` rules: "call the function", "send the token") are
 * dropped there; override, forgery, role-play and every credential still fire, so a real secret
 * or a real attack inside documentation prose is still signalled. An attacker can add these words
 * too: that buys silence only for the weak wordings, which is the accepted trade-off.
 */
const ATTACK_TOPIC =
  / (?:prompt injections?|injection attacks?|jailbreaks?|jailbreaking|red team(?:ing)?|vulnerabilit(?:y|ies)|cve [0-9]{4}|security advisory|exploits?|mitigations?|attack(?:er|ers|s)?|malicious|adversarial|secret scanning|secrets? detection|detectors?|scanners?|false positives?) /g;

function discussesAttacks(words: string): boolean {
  const seen = new Set<string>();
  for (const m of words.matchAll(ATTACK_TOPIC)) {
    seen.add(m[0]);
    if (seen.size >= 2) return true;
  }
  return false;
}

function scan(text: string, encoding: SignalEncoding, depth: number, state: ScanState): void {
  state.work.scannedChars += text.length;
  const views = makeViews(text, state.invisiblesAsBoundaries, state.ignorablesWide);
  runRules(views[0] as View, encoding, state);
  // The same text as written has been read once: the other views add the rules' normalized readings.
  for (const view of views.slice(1)) {
    state.work.scannedChars += text.length;
    runRules(view, encoding, state, false);
  }
  // `writ-signals/6`: the credential rules over the text as `writ-redactor/4` reads it.
  if (state.credentialsReadThrough) {
    const boundaries = depth === 0 ? state.readThroughBoundaries : [];
    for (const span of credentialSpansReadThrough(text, state.work, boundaries)) {
      record(
        state,
        { signal: 'credential_like_text', rule: span.rule, encoding },
        span.rule.slice('credential.'.length),
        undefined,
      );
    }
  }
  if (depth >= SIGNAL_LIMITS.maxDecodeDepth) return;
  for (const d of decodings(text, depth, state.budget)) {
    state.work.decodedChars += d.text.length;
    scan(d.text, encoding === 'plain' ? d.encoding : encoding, depth + 1, state);
  }
}

/**
 * Scan `text`. Pure and deterministic: the same text and options always yield the same report.
 * Without options this is release `writ-signals/2`'s detector, which receipts of versions 2 to 5
 * bind: its output for a text never changes.
 */
export function detectSignals(text: string, options: DetectOptions = {}): SignalReport {
  const truncated = text.length > SIGNAL_LIMITS.maxScanChars;
  const scanned = truncated ? text.slice(0, SIGNAL_LIMITS.maxScanChars) : text;
  const state: ScanState = {
    credentialsAsWritten: options.credentialsAsWritten === true,
    invisiblesAsBoundaries: options.invisiblesAsBoundaries === true,
    ignorablesWide: options.ignorablesWide === true,
    credentialsReadThrough: options.credentialsReadThrough === true,
    readThroughBoundaries: options.readThroughBoundaries ?? [],
    hits: new Map(),
    details: new Map(),
    budget: { chars: 0, segments: 0, exhausted: false },
    work: { scannedChars: 0, secretWindowChars: 0, decodedChars: 0 },
  };
  scan(scanned, 'plain', 0, state);
  // Content the scanner could not look at is reported, so padding cannot buy silence.
  if (truncated)
    record(
      state,
      { signal: 'unscanned_content', rule: 'unscanned.truncated', encoding: 'plain' },
      'truncated',
      undefined,
    );
  if (state.budget.exhausted)
    record(
      state,
      { signal: 'unscanned_content', rule: 'unscanned.decode_budget', encoding: 'plain' },
      'decode_budget',
      undefined,
    );
  const sorted = [...state.hits.values()].sort(compareHits);
  const details = [...state.details.values()]
    .map((d) => ({ ...d, languages: [...d.languages].sort() }))
    .sort(compareHits);
  const signals = [...new Set(sorted.map((h) => h.signal))].sort();
  return {
    signals,
    hits: sorted,
    details,
    complete: !truncated && !state.budget.exhausted,
    work: state.work,
  };
}

export function compareHits(a: SignalHit, b: SignalHit): number {
  return cmp(a.signal, b.signal) || cmp(a.rule, b.rule) || cmp(a.encoding, b.encoding);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The length of the longest base64/hex-looking run in `text` (a single linear scan). Inline
 * payloads with a long run are binary smuggled as text and belong in an artifact.
 */
export function longestEncodedRun(text: string): number {
  let longest = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const inAlphabet =
      (c >= 0x30 && c <= 0x39) ||
      (c >= 0x41 && c <= 0x5a) ||
      (c >= 0x61 && c <= 0x7a) ||
      c === 0x2b ||
      c === 0x2f ||
      c === 0x3d ||
      c === 0x2d ||
      c === 0x5f;
    run = inAlphabet ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  return longest;
}

// ---------------------------------------------------------------------------------------------
// Redaction spans (used by `derived.ts`): credential rules over the original text, so offsets
// are offsets of the evidence itself. `credentialSpans` reads the text as written (an invisible
// character ends a key there, so a secret split by one is signalled by `detectSignals` from its
// normalized copy yet not located); with `credentialsAsWritten` the detector also signals every
// text in which it locates a span (the same rules over the same text). `credentialSpansReadThrough`
// (`writ-redactor/4`) also locates credentials split by invisible characters, compatibility forms
// or one wrapped line, and `credentialsReadThrough` (`writ-signals/6`) signals what it locates.

export interface CredentialSpan {
  readonly rule: string;
  /** UTF-16 offsets into the original text, `[start, end)`. */
  readonly start: number;
  readonly end: number;
}

/** Locate credential-like spans in `text`, sorted and merged where they overlap. */
export function credentialSpans(text: string): CredentialSpan[] {
  return mergeCredentialSpans(credentialSpansEach(text, { chars: 0 }));
}

/**
 * Every span each credential rule locates in `text` (not merged: each keeps its rule). The value
 * is the rule's first capture group (`writ-redactor/2` and `/3`), or with `allGroups`
 * (`writ-redactor/4`) everything from its first to its last matched capture group: a rule that
 * captures a value in parts (`credential.prefixed_token`: prefix, then the random tail) is
 * redacted whole, where the first group alone left the tail in the clear. No group: the whole match.
 */
function credentialSpansEach(text: string, work: SecretWork, allGroups = false): CredentialSpan[] {
  const spans: CredentialSpan[] = [];
  CREDENTIAL_RULES.forEach((rule, r) => {
    // `matchAll` copies the regex: the shared compiled one keeps no state between calls.
    for (const m of text.matchAll(CREDENTIAL_SPAN_RES[r] as RegExp)) {
      if (rule.accept !== undefined && !rule.accept(m)) continue;
      const whole = m.indices?.[0];
      if (whole === undefined) continue;
      // Redact the secret value only when the rule captures it; otherwise the whole match.
      const value = (allGroups ? capturedExtent(m) : m.indices?.[1]) ?? whole;
      spans.push({ rule: rule.id, start: value[0], end: value[1] });
    }
  });
  for (const m of scanSecrets(text, work, true)) spans.push(m);
  return spans;
}

/**
 * The credential spans `writ-redactor/4` adds to `credentialSpans`, located in `text`: credentials
 * split by a supported split. Two readings of `text`, each mapped back to offsets of `text`:
 * - read through (only where it differs from `text`): invisible characters (`INVISIBLE_WIDE_RE`)
 *   removed, tag characters revealed as the ASCII they smuggle, every other code point folded by
 *   NFKC on its own (an expansion longer than four characters read as a space, as `boundedNfkc`
 *   does). Every span found there counts, as every credential in the detector's normalized copy
 *   does: a key with a zero-width space, soft hyphen or tag character inside it, or written in
 *   fullwidth letters, is one key.
 * - a wrapped line (in that reading): each line break (LF, CR or CRLF) with a token character
 *   (`[A-Za-z0-9_+/=-]`) directly on both sides and at least `WRAP_MIN_RUN` token characters
 *   around it, removed on its own in a window of the two lines it separates (every other line
 *   break kept: the lines before and after the wrapped credential stay apart from it), each line
 *   read at most `WRAP_WINDOW` characters from the break. A span
 *   counts only if its secret value contains the removed break, lies inside the window, and its
 *   rule has a value of its own shape (a provider's prefix, length or alphabet: every rule but
 *   the label-led free-form ones in `LINE_ENDS_VALUE_RULES`, for which a value runs to the end of
 *   its line as `.env` files, YAML and HTTP headers define it: `KEY=12345` and a next line
 *   `OTHER=…` are two values, not one wrapped secret).
 * A break listed in `boundaries` (a newline joining two JSON strings of a level) is never removed.
 * Not supported: a break with whitespace (indentation, a trailing space) beside it, two breaks in
 * one credential, a break beside punctuation outside that alphabet (a JWT wrapped right at a dot),
 * a value reaching further than `WRAP_WINDOW` from its break, a label on another line than the
 * value's first part. A span covers the whole split (the
 * invisible characters, the line break) from the first character of the value to its last.
 * Cost: one more run of the credential rules over a text at most four times the length of `text`
 * (NFKC expansions are capped) where it is not plain ASCII, and windows in which each character
 * of that reading appears at most twice (a line is in the window of the break before it and of
 * the break after it): the rules read at most twice the text again, whatever its lines.
 */
export function credentialSpansReadThrough(
  text: string,
  work: { secretWindowChars: number },
  boundaries: readonly number[] = [],
): CredentialSpan[] {
  const out: CredentialSpan[] = [];
  const secretWork: SecretWork = { chars: 0 };
  const read = readThrough(text);
  if (read !== null) {
    for (const s of credentialSpansEach(read.text, secretWork, true)) out.push(mapSpan(s, read));
  }
  const t = read?.text ?? text;
  if (WRAP_RE.test(t)) {
    const base = read ?? identityReading(text);
    const hard = new Set(boundaries);
    for (let k = 1; k < t.length - 1; k++) {
      const c = t.charCodeAt(k);
      if (c !== 0x0a && c !== 0x0d) continue;
      const len = c === 0x0d && t.charCodeAt(k + 1) === 0x0a ? 2 : 1;
      const next = k + len;
      if (hard.has(base.starts[k] as number) || !isTokenAt(t, k - 1) || !isTokenAt(t, next)) {
        k += len - 1;
        continue;
      }
      // Enough token characters around the break to make a credential, counted up to the minimum.
      let run = 0;
      for (let i = k - 1; i >= 0 && run < WRAP_MIN_RUN && isTokenAt(t, i); i--) run++;
      for (let i = next; i < t.length && run < WRAP_MIN_RUN && isTokenAt(t, i); i++) run++;
      if (run < WRAP_MIN_RUN) {
        k += len - 1;
        continue;
      }
      // The two lines the break joins, each at most `WRAP_WINDOW` characters from it: every
      // character is in at most two windows.
      let ws = k;
      while (ws > 0 && k - ws < WRAP_WINDOW && !isBreakAt(t, ws - 1)) ws--;
      let we = next;
      while (we < t.length && we - next < WRAP_WINDOW && !isBreakAt(t, we)) we++;
      const cutBefore = ws > 0 && !isBreakAt(t, ws - 1);
      const cutAfter = we < t.length && !isBreakAt(t, we);
      const at = k - ws;
      const window = t.slice(ws, k) + t.slice(next, we);
      for (const s of credentialSpansEach(window, secretWork, true)) {
        // The value holds the break, and is not cut by a window edge that is no line's end.
        if (s.start >= at || s.end <= at || LINE_ENDS_VALUE_RULES.has(s.rule)) continue;
        if ((s.start === 0 && cutBefore) || (s.end === window.length && cutAfter)) continue;
        const start = ws + s.start;
        const end = ws + s.end + len;
        out.push({ rule: s.rule, start: base.starts[start] as number, end: base.ends[end - 1] as number });
      }
      k += len - 1;
    }
  }
  work.secretWindowChars += secretWork.chars;
  return out;
}

/** From the start of a match's first matched capture group to the end of its last; none: `undefined`. */
function capturedExtent(m: RegExpMatchArray): [number, number] | undefined {
  let extent: [number, number] | undefined;
  const indices = m.indices ?? [];
  for (let g = 1; g < indices.length; g++) {
    const at = indices[g];
    if (at === undefined) continue;
    extent = extent === undefined ? [at[0], at[1]] : [Math.min(extent[0], at[0]), Math.max(extent[1], at[1])];
  }
  return extent;
}

/** A text as read, with where each of its code units came from in the original. */
interface Reading {
  readonly text: string;
  /** `starts[k]`/`ends[k]`: the original offsets of the code point read as unit `k`. */
  readonly starts: readonly number[];
  readonly ends: readonly number[];
}

const INVISIBLE_WIDE_ONE_RE = new RegExp(INVISIBLE_WIDE_RE.source, 'u');
/**
 * Rules whose value is whatever follows a label, of free length: a line break ends such a value,
 * so a joined line never extends one (`credentialSpansReadThrough`).
 */
export const LINE_ENDS_VALUE_RULES: ReadonlySet<string> = new Set([
  'credential.assignment',
  'credential.labelled_secret',
  'credential.xml_element',
  'credential.bearer_token',
  'credential.url_userinfo',
  'credential.cli_userinfo',
  'credential.generic_api_key',
]);
/** A line break with a token character directly on both sides (a wrap candidate). */
const WRAP_RE = /[A-Za-z0-9_+/=-](?:\r\n|\r|\n)[A-Za-z0-9_+/=-]/;
/** How far on each side of a removed line break the credential rules read. */
export const WRAP_WINDOW = 256;
/** Token characters around a break (both sides together) below which it wraps no credential. */
const WRAP_MIN_RUN = 16;

/** Whether `t[i]` is a line break (CR or LF). */
function isBreakAt(t: string, i: number): boolean {
  const c = t.charCodeAt(i);
  return c === 0x0a || c === 0x0d;
}

/** Whether `t[i]` is a token character (`[A-Za-z0-9_+/=-]`). */
function isTokenAt(t: string, i: number): boolean {
  const c = t.charCodeAt(i);
  return (
    (c >= 0x30 && c <= 0x39) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x61 && c <= 0x7a) ||
    c === 0x5f ||
    c === 0x2b ||
    c === 0x2f ||
    c === 0x3d ||
    c === 0x2d
  );
}

/** `text` read through invisibles, tags and compatibility forms; `null` where that is `text` itself. */
function readThrough(text: string): Reading | null {
  if (!NON_ASCII_RE.test(text)) return null;
  const units: string[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i) as number;
    const w = cp > 0xffff ? 2 : 1;
    const ch = text.slice(i, i + w);
    let read: string;
    if (cp >= 0xe0020 && cp <= 0xe007e) read = String.fromCharCode(cp - 0xe0000);
    else if (cp < 0x80) read = ch;
    else if (INVISIBLE_WIDE_ONE_RE.test(ch)) read = '';
    else {
      const n = ch.normalize('NFKC');
      read = n.length <= 4 ? n : ' ';
    }
    for (let k = 0; k < read.length; k++) {
      units.push(read.charAt(k));
      starts.push(i);
      ends.push(i + w);
    }
    i += w;
  }
  const joined = units.join('');
  return joined === text ? null : { text: joined, starts, ends };
}

function identityReading(text: string): Reading {
  const starts = Array.from({ length: text.length }, (_, k) => k);
  return { text, starts, ends: starts.map((k) => k + 1) };
}

function mapSpan(s: CredentialSpan, r: Reading): CredentialSpan {
  const start = r.starts[s.start] as number;
  return { rule: s.rule, start, end: s.end > s.start ? (r.ends[s.end - 1] as number) : start };
}

/**
 * Credential spans as the `writ-redactor/4` redactor locates them in one text: `credentialSpans`
 * (each value from its first to its last capture group) and `credentialSpansReadThrough`, merged.
 */
export function credentialSpansV4(text: string, boundaries: readonly number[] = []): CredentialSpan[] {
  return mergeCredentialSpans([
    ...credentialSpansEach(text, { chars: 0 }, true),
    ...credentialSpansReadThrough(text, { secretWindowChars: 0 }, boundaries),
  ]);
}

/** Spans sorted by position and merged where they overlap (the first one's rule names a merge). */
export function mergeCredentialSpans(spans: CredentialSpan[]): CredentialSpan[] {
  spans.sort((a, b) => a.start - b.start || b.end - a.end || cmp(a.rule, b.rule));
  const merged: CredentialSpan[] = [];
  for (const s of spans) {
    const last = merged[merged.length - 1];
    if (last !== undefined && s.start < last.end) {
      if (s.end > last.end) merged[merged.length - 1] = { rule: last.rule, start: last.start, end: s.end };
    } else merged.push(s);
  }
  return merged;
}
