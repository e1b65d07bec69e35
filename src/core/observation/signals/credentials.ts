/**
 * Credential-format detection: gitleaks' maintained rule set (`gitleaks-rules.ts`, data) run by a
 * keyword-windowed engine, plus Writ's own rules for shapes that need no provider (assignments,
 * URL user-info, bearer and basic headers, PEM headers), and recognition of placeholders.
 *
 * Guarantees: a rule's regex only runs on windows around occurrences of its keywords (as gitleaks
 * does), windows of one rule never overlap by more than a fixed margin, and every quantifier in the
 * data is bounded, so the work is linear in the text with a constant per rule; the characters each
 * rule scans are counted. A hit names the rule (`credential.<gitleaks id>`), never the value. A
 * value that reads as a placeholder (`EXAMPLE`, `xxxx`, `your_api_key`, `<token>`, `${VAR}`,
 * `1234567890`) is not a hit; anything else in a real format is, wherever it appears (a README's
 * prose does not hide a real-looking key).
 * Never: decides a value is live, or contacts a provider.
 */
import { GITLEAKS_RULES } from './gitleaks-rules.js';
import type { Rule } from './rule.js';

export interface SecretRuleData {
  readonly id: string;
  readonly source: string;
  readonly flags: string;
  readonly keywords: readonly string[];
  readonly entropy?: number;
  readonly secretGroup?: number;
  readonly allow?: readonly {
    readonly target: string;
    readonly regexes?: readonly { readonly source: string; readonly flags: string }[];
    readonly stopwords?: readonly string[];
  }[];
}

interface SecretRule {
  readonly id: string;
  readonly re: RegExp;
  readonly keywords: readonly string[];
  readonly entropy: number;
  readonly secretGroup: number | null;
  readonly allowSecret: readonly RegExp[];
  readonly allowMatch: readonly RegExp[];
  readonly stopwords: Stopwords;
}

/**
 * Stopwords indexed by their first two characters: whether a secret contains one costs one
 * lookup per position of the secret, not one search per stopword (generic-api-key has ~1,500).
 */
type Stopwords = ReadonlyMap<string, readonly string[]>;

function indexStopwords(words: readonly string[]): Stopwords {
  const m = new Map<string, string[]>();
  for (const w of words) {
    const k = w.slice(0, 2);
    m.set(k, [...(m.get(k) ?? []), w]);
  }
  return m;
}

function containsStopword(lower: string, stopwords: Stopwords): boolean {
  if (stopwords.size === 0) return false;
  for (let i = 0; i + 1 < lower.length; i++) {
    const list = stopwords.get(lower.slice(i, i + 2));
    if (list !== undefined && list.some((w) => lower.startsWith(w, i))) return true;
  }
  return false;
}

/** How far before and after a keyword a rule's regex looks (gitleaks' patterns reach ~50 back). */
const WINDOW_BEFORE = 192;
const WINDOW_AFTER = 2048;
/** A merged window longer than this is cut; the next starts at its keyword again. */
const WINDOW_MAX = 16 * 1024;

/**
 * gitleaks' semi-generic rules open with `[\w.-]{0,50}?` (the identifier before the keyword). A
 * backtracking engine would try that lazy prefix at every position; starting it only where an
 * identifier starts finds the same assignments (the match now holds the whole identifier, which
 * the match allowlists inspect) at a fraction of the attempts.
 */
function anchorIdentifier(source: string): string {
  const prefix = '[\\w.-]{0,50}?';
  return source.startsWith(prefix) ? `(?<![\\w.-])${source}` : source;
}

function compile(d: SecretRuleData): SecretRule {
  const allowSecret: RegExp[] = [];
  const allowMatch: RegExp[] = [];
  const stopwords: string[] = [];
  for (const a of d.allow ?? []) {
    for (const r of a.regexes ?? [])
      (a.target === 'match' ? allowMatch : allowSecret).push(new RegExp(r.source, r.flags));
    stopwords.push(...(a.stopwords ?? []).map((s) => s.toLowerCase()));
  }
  return {
    id: `credential.${d.id.replace(/[^a-z0-9]+/g, '_')}`,
    re: new RegExp(anchorIdentifier(d.source), `${d.flags}gd`),
    keywords: d.keywords,
    entropy: d.entropy ?? 0,
    secretGroup: d.secretGroup ?? null,
    allowSecret,
    allowMatch,
    stopwords: indexStopwords(stopwords),
  };
}

const SECRET_RULES: readonly SecretRule[] = GITLEAKS_RULES.map(compile);

/**
 * Every keyword of every rule, indexed by its first two characters: one pass over the text finds
 * all keyword occurrences (the data has no keyword shorter than two characters) instead of one
 * `indexOf` pass per keyword.
 */
const KEYWORD_INDEX: ReadonlyMap<
  number,
  readonly { readonly keyword: string; readonly rules: readonly number[] }[]
> = (() => {
  const byKeyword = new Map<string, number[]>();
  SECRET_RULES.forEach((r, i) => {
    for (const k of r.keywords) {
      if (k.length < 2) throw new Error(`secret rule ${r.id}: keyword shorter than two characters`);
      const list = byKeyword.get(k) ?? [];
      list.push(i);
      byKeyword.set(k, list);
    }
  });
  const index = new Map<number, { keyword: string; rules: number[] }[]>();
  for (const [keyword, rules] of byKeyword) {
    const key = (keyword.charCodeAt(0) << 16) | keyword.charCodeAt(1);
    const list = index.get(key) ?? [];
    list.push({ keyword, rules });
    index.set(key, list);
  }
  return index;
})();

/** The same two-character keys as a bitmap over ASCII pairs: one array read per position. */
const KEYWORD_PAIRS: Uint8Array = (() => {
  const bits = new Uint8Array(1 << 14);
  for (const key of KEYWORD_INDEX.keys()) bits[(((key >>> 16) & 0x7f) << 7) | (key & 0x7f)] = 1;
  return bits;
})();

/** Positions of keyword occurrences per rule, in text order: one linear pass. */
function keywordPositions(lower: string): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (let i = 0; i + 1 < lower.length; i++) {
    const c0 = lower.charCodeAt(i);
    const c1 = lower.charCodeAt(i + 1);
    // Keywords are ASCII: a pair with a non-ASCII character, or not in the bitmap, starts none.
    if (c0 > 0x7f || c1 > 0x7f || KEYWORD_PAIRS[(c0 << 7) | c1] === 0) continue;
    const candidates = KEYWORD_INDEX.get((c0 << 16) | c1);
    if (candidates === undefined) continue;
    for (const c of candidates) {
      if (!lower.startsWith(c.keyword, i)) continue;
      for (const r of c.rules) {
        const list = out.get(r);
        if (list === undefined) out.set(r, [i]);
        else if (list[list.length - 1] !== i) list.push(i);
      }
    }
  }
  return out;
}

/** Every credential rule id this module can report, for readers of receipts. */
export const SECRET_RULE_IDS: readonly string[] = SECRET_RULES.map((r) => r.id);

export function shannonEntropy(s: string): number {
  if (s.length === 0) return 0;
  const counts = new Map<string, number>();
  for (const c of s) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

// ---------------------------------------------------------------------------------------------
// Placeholders

const PLACEHOLDER_INSIDE =
  /example|placeholder|redacted|changeme|change_me|change-me|replace_?me|your[_-]?(?:api|secret|access|auth|own|token|key|password|pass|app|client|private)|x{4,}|\*{3,}|\.{3}|…|<[^>]{0,40}>|\{\{|\$\{|%s\b|dummy|sample|insert[_-]?(?:your|key|token|here)|here[_-]?is[_-]?(?:your|my)|fake[_-]?(?:key|token|secret)|not[_-]?a[_-]?real|lorem/i;
const PLACEHOLDER_START =
  /^(?:your|my|test$|secret$|password$|token$|none$|null$|undefined$|true$|false$|env\b|process\.|os\.|getenv|config\.|settings\.|vault:|ref:|\[redacted|\$|<|%|\{)/i;
/** Values made of one counting run (`1234567890…`, `abcdefgh…`) and nothing else. */
const COUNTING = /^(?:(?:0?123456789)+[0-9]{0,9}|(?:abcdefghijklmnopqrstuvwxyz)+)$/i;

/** Whether a captured secret value is a placeholder rather than a credential. */
export function isPlaceholder(value: string): boolean {
  return (
    PLACEHOLDER_START.test(value) ||
    PLACEHOLDER_INSIDE.test(value) ||
    /^(.)\1*$/.test(value) ||
    /^(..)\1+$/.test(value) ||
    /^[./~]/.test(value) ||
    COUNTING.test(value)
  );
}

/** The secret a match carries: the rule's secret group, else its first capture, else all of it. */
function secretOf(m: RegExpMatchArray, group: number | null): { value: string; index: number } {
  const indices = m.indices;
  if (group !== null && m[group] !== undefined)
    return { value: m[group], index: indices?.[group]?.[0] ?? m.index ?? 0 };
  for (let i = 1; i < m.length; i++) {
    const v = m[i];
    if (v !== undefined && v !== '') return { value: v, index: indices?.[i]?.[0] ?? m.index ?? 0 };
  }
  return { value: m[0], index: m.index ?? 0 };
}

function accepted(rule: SecretRule, m: RegExpMatchArray, secret: string): boolean {
  if (secret.length < 4) return false;
  if (rule.entropy > 0 && shannonEntropy(secret) < rule.entropy) return false;
  if (rule.allowSecret.some((r) => r.test(secret))) return false;
  if (rule.allowMatch.some((r) => r.test(m[0]))) return false;
  if (containsStopword(secret.toLowerCase(), rule.stopwords)) return false;
  return !isPlaceholder(secret);
}

// ---------------------------------------------------------------------------------------------
// The engine

export interface SecretWork {
  /** Characters handed to rule regexes (each window counted once per rule). */
  chars: number;
}

export interface SecretMatch {
  readonly rule: string;
  /** UTF-16 offsets of the secret value in the scanned text, `[start, end)`. */
  readonly start: number;
  readonly end: number;
}

/** Windows around keyword positions (sorted), merged while they overlap and stay short. */
function windows(positions: readonly number[], length: number): [number, number][] {
  const out: [number, number][] = [];
  for (const p of positions) {
    const s = Math.max(0, p - WINDOW_BEFORE);
    const e = Math.min(length, p + WINDOW_AFTER);
    const last = out[out.length - 1];
    if (last !== undefined && s <= last[1] && e - last[0] <= WINDOW_MAX) last[1] = Math.max(last[1], e);
    else if (last === undefined || e > last[1]) out.push([s, e]);
  }
  return out;
}

/**
 * Run the maintained rules over `text`. With `all` false it stops at a rule's first accepted
 * match (detection); with `all` true it returns every accepted match (redaction).
 * `skip` names rules already reported, which need not run again.
 */
export function scanSecrets(
  text: string,
  work: SecretWork,
  all: boolean,
  skip: (rule: string) => boolean = () => false,
): SecretMatch[] {
  // Lowercasing can change the length of a few characters; windows are then approximate, which
  // the margins absorb.
  const lower = text.toLowerCase();
  const out: SecretMatch[] = [];
  const positions = keywordPositions(lower);
  // Only rules whose keywords occur run at all (Map order is first occurrence; sort for a stable
  // order of spans).
  for (const index of [...positions.keys()].sort((a, b) => a - b)) {
    const rule = SECRET_RULES[index] as SecretRule;
    if (skip(rule.id)) continue;
    let found = false;
    for (const [s, e] of windows(positions.get(index) ?? [], text.length)) {
      const slice = text.slice(s, e);
      work.chars += slice.length;
      rule.re.lastIndex = 0;
      for (const m of slice.matchAll(rule.re)) {
        const secret = secretOf(m, rule.secretGroup);
        if (!accepted(rule, m, secret.value)) continue;
        out.push({ rule: rule.id, start: s + secret.index, end: s + secret.index + secret.value.length });
        found = true;
        if (!all) break;
      }
      if (found && !all) break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writ's own credential rules: shapes, not providers. They run on the `cased` view.

export const SHAPE_RULES: readonly Rule[] = [
  {
    id: 'credential.aws_access_key_id',
    signal: 'credential_like_text',
    family: 'aws',
    view: 'cased',
    pattern:
      /(?<![A-Za-z0-9])((?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16})(?![A-Za-z0-9])/g,
    accept: (m) => !isPlaceholder(m[1] ?? ''),
  },
  {
    id: 'credential.aws_secret_access_key',
    signal: 'credential_like_text',
    family: 'aws',
    view: 'cased',
    pattern: /aws_?secret_?access_?key["']?[^A-Za-z0-9/+]{1,5}([A-Za-z0-9/+]{40})/gi,
    accept: (m) => !isPlaceholder(m[1] ?? ''),
  },
  {
    id: 'credential.github_token',
    signal: 'credential_like_text',
    family: 'github',
    view: 'cased',
    pattern: /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40})/,
  },
  {
    // OpenAI / Anthropic style `sk-...`, Stripe `sk_live_...`, Slack `xoxb-...`, Google `AIza...`.
    id: 'credential.api_token',
    signal: 'credential_like_text',
    family: 'api_token',
    view: 'cased',
    pattern:
      /(?<![A-Za-z0-9_-])(sk-(?:proj-|ant-|live-|test-|svcacct-)?[A-Za-z0-9_-]{20,200})|(?<![A-Za-z0-9])([rs]k_(?:live|test)_[A-Za-z0-9]{16,200})|(?<![A-Za-z0-9])(xox[abposr]-[A-Za-z0-9-]{10,200})|(?<![A-Za-z0-9])(AIza[0-9A-Za-z_-]{35})/g,
    accept: (m) => !isPlaceholder(m[1] ?? m[2] ?? m[3] ?? m[4] ?? ''),
  },
  {
    id: 'credential.private_key',
    signal: 'credential_like_text',
    family: 'private_key',
    view: 'cased',
    pattern: /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/,
  },
  {
    id: 'credential.jwt',
    signal: 'credential_like_text',
    family: 'jwt',
    view: 'cased',
    // A JOSE header (`eyJ` is `{"`) and two more segments; the payload need not be JSON.
    pattern:
      /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10}[A-Za-z0-9_-]{0,2048}?\.(?:eyJ[A-Za-z0-9_-]{10}|[A-Za-z0-9_-]{16,4096}\.[A-Za-z0-9_-]{16})/,
  },
  {
    id: 'credential.bearer_token',
    signal: 'credential_like_text',
    family: 'http_authorization',
    view: 'cased',
    pattern:
      /\bbearer[ \t]{1,3}([A-Za-z0-9._~+/-]{20,400})|\bauthorization\W{1,4}basic[ \t]{1,3}([A-Za-z0-9+/=]{12,400})/gi,
    accept: (m) => !isPlaceholder(m[1] ?? m[2] ?? ''),
  },
  {
    // `password=...`, `"api_key": "..."`, `GITLAB_TOKEN=...`, `fulcrum_key: ...`; placeholders are not hits.
    id: 'credential.assignment',
    signal: 'credential_like_text',
    family: 'assignment',
    view: 'cased',
    pattern:
      /(?:password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret|secret[_-]?key|private[_-]?key|x-api-key|[_-]token|[_-]key|[_-]pat|[_-]secret)["']?[ \t]{0,3}(?::=|[:=])[ \t]{0,3}["']?([^\s"'<>{}$%*&,;()[\]\\]{6,200})/gi,
    accept: (m) => credibleAssignedValue(m[1] ?? ''),
  },
  {
    // `<password>...</password>` in XML settings (Maven, NuGet, ...).
    id: 'credential.xml_element',
    signal: 'credential_like_text',
    family: 'xml_element',
    view: 'cased',
    pattern:
      /<(?:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|private[_-]?key|master|passphrase|client[_-]?secret)>\s{0,3}([^<\s]{6,200})\s{0,3}<\//gi,
    accept: (m) => credibleAssignedValue(m[1] ?? ''),
  },
  {
    // Credentials embedded in a URL: `https://user:secret@host`, `postgres://app:pw@db`.
    id: 'credential.url_userinfo',
    signal: 'credential_like_text',
    family: 'url_userinfo',
    view: 'cased',
    pattern: /:\/\/[^\s/:@"'<>]{1,64}:([^\s/@"'<>]{3,64})@/g,
    accept: (m) => !isPlaceholder(m[1] ?? '') && !/^(?:pass(?:word)?|pwd|secret|\*+)$/i.test(m[1] ?? ''),
  },
  {
    // `curl -u user:secret`, `--user "user:secret"`.
    id: 'credential.cli_userinfo',
    signal: 'credential_like_text',
    family: 'cli_userinfo',
    view: 'cased',
    pattern: /(?:^|\s)(?:-u|--user)(?:=|[ \t]{1,5})["']?[^\s:"']{1,64}:([^\s"']{3,128})/g,
    accept: (m) => !isPlaceholder(m[1] ?? '') && !/^(?:pass(?:word)?|pwd|secret|\*+)$/i.test(m[1] ?? ''),
  },
];

const SECRET_WORD =
  '(?:secret|token|api[_ -]?key|apikey|access[_ -]?key|access[_ -]?token|private[_ -]?key|private|access|key|pat|password|passwd|credential|auth)';

/** Mixed letters and digits, some entropy, not a placeholder: a generated value, not a word. */
function randomLooking(v: string, minEntropy: number): boolean {
  return /[0-9]/.test(v) && /[A-Za-z]/.test(v) && shannonEntropy(v) >= minEntropy && !isPlaceholder(v);
}

/**
 * Provider-agnostic shapes. Most of the hundreds of API providers issue keys that are only
 * recognizable by their label (`<provider>_key=`, `<provider> SECRET ...`) or by a short prefix
 * followed by a long random tail (`gsk_...`, `shpat_...`); these two rules find such values for
 * providers no rule set names yet. The tail must look generated (letters and digits, entropy).
 */
export const GENERIC_SHAPE_RULES: readonly Rule[] = [
  {
    id: 'credential.labelled_secret',
    signal: 'credential_like_text',
    family: 'labelled_secret',
    view: 'cased',
    // Led by the secret word itself: the provider name before it (`cloudplanSECRET`) is not
    // needed to find the value, and an optional lead would be tried at every position.
    pattern: new RegExp(
      `${SECRET_WORD}(?:[_ -]?(?:key|token|secret))?["']?(?:[ \t]{0,3}(?:=|:|=>|:=)[ \t]{0,3}|[ \t]{1,3}|[-_])["'\`]?([A-Za-z0-9][A-Za-z0-9_+/=.-]{15,200})`,
      'gi',
    ),
    accept: (m) => randomLooking(m[1] ?? '', 3),
  },
  {
    id: 'credential.prefixed_token',
    signal: 'credential_like_text',
    family: 'prefixed_token',
    view: 'cased',
    pattern:
      /(?<![A-Za-z0-9_./+-])([a-z][a-z0-9]{1,7}[_-](?:[a-z]{2,5}[_-])?)([A-Za-z0-9_-]{30,200})(?![A-Za-z0-9_-])/g,
    accept: (m) =>
      !/^(?:sha|md5|integrity|data|base64|urn|uuid|nonce|etag|commit|build|run|job|trace|span|req|request|session|msg|id)/i.test(
        m[1] ?? '',
      ) &&
      // Mixed case, or one case with a long unseparated tail: a generated value, not a name
      // (`web-7d9f8c-x2lqp` pod names are lowercase with separators).
      ((/[A-Z]/.test(m[2] ?? '') && /[a-z]/.test(m[2] ?? '')) || /^[A-Za-z0-9]{30,}$/.test(m[2] ?? '')) &&
      randomLooking(m[2] ?? '', 3.5),
  },
];

/**
 * A value assigned to a secret-named key counts unless it is a placeholder, a bare word or
 * identifier (`password: required`, `api_key: config.key`), or too uniform to be random.
 */
function credibleAssignedValue(v: string): boolean {
  if (isPlaceholder(v)) return false;
  if (/^[A-Za-z_.-]+$/.test(v) && v.length < 24) return false;
  if (/^[a-z]+(?:[._-][a-z]+)+$/i.test(v)) return false;
  if (/^\d{1,12}$/.test(v)) return false;
  return shannonEntropy(v) >= 2.5;
}
