/**
 * FROZEN: release `writ-signals/1`, the signal detector that observation receipts of version 1
 * bind. Kept only so those receipts still replay (docs/observations.md, "Receipt versions").
 *
 * This is `src/core/observation/signals.ts` as of commit 033c877 (the last revision before the
 * rewrite in 23da5c1), byte for byte below this note except for the import path. Do not edit a
 * rule, a limit or a normalization step here: any change alters what a stored version 1 receipt
 * recomputes to and makes it fail replay. New rules go in `../signals.ts` under a new release.
 * Never: used to issue a receipt (validation issues the current version), reads a clock, does I/O.
 *
 * The original header follows.
 */
/**
 * Deterministic instruction-like, authority-claim, credential-like and hidden-character signals
 * over an observed payload (spec ch. 12, "Signal suspicious content without deleting evidence").
 *
 * Guarantees: the same text always yields the same sorted, de-duplicated hits; the payload is
 * never modified: every rule runs on normalized copies (NFKC with a bounded expansion, lowercase,
 * Unicode format/zero-width characters removed, tag characters revealed, common Latin
 * look-alikes folded, separators collapsed or squeezed out), and on bounded decodings of
 * base64, hex, percent, HTML-entity and backslash-escaped segments. Work is linear in the input:
 * every pattern is a literal-led alternation whose quantifiers are fixed or bounded by a small
 * constant, tokens are capped before word rules see them, and decoding has a total budget.
 * A hit names its rule and encoding, never the matched text.
 * Never: deletes, rewrites or "sanitizes" evidence, treats the absence of a hit as safety, or
 * treats a hit as proof of intent (a security document may legitimately quote these strings).
 */
import type { ObservationSignal, SignalEncoding, SignalHit } from '../schema.js';

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

export interface SignalReport {
  readonly signals: ObservationSignal[];
  readonly hits: SignalHit[];
  /** False when part of the text (a tail past `maxScanChars`, an encoded segment past the budget) was not scanned. */
  readonly complete: boolean;
}

type ViewName = 'lower' | 'words' | 'squeezed' | 'cased' | 'raw';

interface Rule {
  readonly id: string;
  readonly signal: ObservationSignal;
  readonly view: ViewName;
  readonly pattern: RegExp;
  /** For rules that must look at the captured value (placeholder exclusion); pattern has the `g` flag. */
  readonly accept?: (m: RegExpMatchArray) => boolean;
}

// ---------------------------------------------------------------------------------------------
// Rules. Views: `lower` keeps punctuation (JSON shapes), `words` is letters and digits separated
// by single spaces (bounded-gap phrases), `squeezed` has every separator removed (defeats
// letter-spacing and punctuation evasions; it is also run with digits folded as leetspeak),
// `cased` keeps case for credential formats, `raw` is the payload itself (hidden characters).

const OVERRIDE_VERBS = '(?:ignore|disregard|forget|override|bypass)';
const OVERRIDE_QUALIFIERS =
  '(?:previous|prior|preceding|above|earlier|original|initial|existing|system|developer|safety|security)';
const OVERRIDE_TARGETS =
  '(?:instruction|prompt|message|rule|direction|guideline|guardrail|polic|context|constraint|command|order)';

const RULES: readonly Rule[] = [
  // --- instruction_like_text: text addressed to the model that tries to steer it.
  {
    // "ignore previous instructions" and its spaced, dotted, zero-width and leetspeak spellings.
    id: 'instruction.override',
    signal: 'instruction_like_text',
    view: 'squeezed',
    pattern: new RegExp(
      `${OVERRIDE_VERBS}[a-z0-9]{0,24}?${OVERRIDE_QUALIFIERS}[a-z0-9]{0,24}?${OVERRIDE_TARGETS}`,
    ),
  },
  {
    // "disregard your instructions", "forget everything above".
    id: 'instruction.override_direct',
    signal: 'instruction_like_text',
    view: 'squeezed',
    pattern:
      /(?:ignore|disregard|forget)(?:all|any|the|your|my|these|those|of|every){0,3}(?:instructions|systemprompt|guardrails|programming|safetyrules|whatyouweretold|everythingabove|everythingbefore|everythingyou)/,
  },
  {
    // Role reassignment: "you are now DAN", "act as root", "enable developer mode".
    id: 'instruction.role_reassignment',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:you are now|you will now act as|from now on you are|act as|pretend to be|roleplay as) (?:an? |the |my )?(?:[a-z]+ ){0,2}?(?:system|admin|administrator|root|superuser|developer|dan|jailbroken|unrestricted|unfiltered|evil|uncensored) |(?:enter|enable|activate|switch to) (?:developer|god|admin|debug|jailbreak|dan|unrestricted) mode /,
  },
  {
    // "new system instructions:", "your real task is", "hidden instructions for the AI".
    id: 'instruction.new_instructions',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:new|updated|revised|real|actual|hidden|secret) (?:system|developer) (?:instructions|prompt|directives|message) | your (?:new|real|actual|true) (?:instructions|task|goal|objective|purpose|orders) (?:is|are) | (?:new|real|actual|hidden|secret) instructions (?:for|to) (?:the |all |any )?(?:ai|assistant|agent|model|llm)s? /,
  },
  {
    // Chat-template and prompt delimiters forged inside data.
    id: 'instruction.fake_delimiter',
    signal: 'instruction_like_text',
    view: 'lower',
    pattern:
      /<\|im_start\|>|<\|im_end\|>|<\|(?:system|assistant|user|developer)\|>|\[\/?inst\]|<<\/?sys>>|<\/?(?:system|developer)(?:_prompt|_message)?>|\[(?:system|developer)(?: message| prompt)?\]|begin (?:system|developer) (?:prompt|message|instructions)|end of (?:system|user) (?:prompt|message|input)/,
  },
  {
    // Tool-call instructions: "call the tool", "invoke the delete function".
    id: 'instruction.tool_call',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:call|invoke|execute|trigger) (?:the |this |that |a |another )?(?:[a-z0-9]+ ){0,2}?(?:tool|function)s? /,
  },
  {
    // Exfiltration: "send all environment variables", "upload the api keys".
    id: 'instruction.exfiltration',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:send|post|upload|exfiltrate|forward|email|transmit|leak|dump|reveal|share|paste|output|print|include) (?:[a-z0-9]+ ){0,3}?(?:environment variables?|env vars?|env file|credentials?|secrets?|api keys?|access keys?|access tokens?|tokens|passwords?|private keys?|ssh keys?|session cookies?|cookies) /,
  },
  {
    // System-prompt extraction: "reveal your system prompt".
    id: 'instruction.prompt_extraction',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:reveal|print|show|output|repeat|leak|dump|display|tell me|give me) (?:[a-z]+ ){0,3}?(?:system prompt|system message|hidden instructions|initial instructions|original instructions|developer message|hidden prompt) /,
  },
  {
    // Concealment from the human: "do not tell the user".
    id: 'instruction.concealment',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:do not|dont|don t|never|without) (?:tell|telling|inform|informing|alert|alerting|notify|notifying|mention|mentioning|reveal|show|asking|ask)(?: [a-z]+){0,2}? (?:the )?(?:user|human|operator|admin|administrator|security team|owner)s? /,
  },
  {
    // Text addressed to the model rather than the reader: "attention AI assistant", "agents must now".
    id: 'instruction.addressed_to_model',
    signal: 'instruction_like_text',
    view: 'words',
    pattern:
      / (?:attention|note|message|instructions?|important|notice) (?:to|for) (?:the |all |any |every )?(?:ai|assistant|agent|model|llm|language model|chatbot|copilot|gpt|claude)s? | (?:ai|assistant|agent|llm|model)s? (?:must|should|shall|will) (?:now |immediately )?(?:ignore|execute|call|send|run|approve|delete|rollback|transfer|forward|upload|disable) /,
  },

  // --- authority_claim: data shaped like a control-plane object (role, approval, tool call).
  {
    // `"role": "system"` inside a tool response (spec example).
    id: 'authority.role_claim',
    signal: 'authority_claim',
    view: 'lower',
    pattern: /["']?\brole["']? ?[:=] ?["']?(?:system|developer)\b/,
  },
  {
    // `"approved": true`, `"approval_status": "granted"` (spec example).
    id: 'authority.approval_claim',
    signal: 'authority_claim',
    view: 'lower',
    pattern:
      /["']?\b(?:approved|authori[sz]ed|is_approved|pre_?approved|human_approved|user_approved|admin_approved|approval_granted|confirmed_by_user|user_confirmed)["']? ?[:=] ?["']?(?:true|yes|1|granted)\b|["']?\b(?:approval|approval_status|authori[sz]ation|authori[sz]ation_status)["']? ?[:=] ?["']?(?:approved|granted|authori[sz]ed)\b/,
  },
  {
    // Prose approval claims: "this action is pre-approved", "authorized by the administrator".
    id: 'authority.approval_prose',
    signal: 'authority_claim',
    view: 'words',
    pattern:
      / (?:pre approved|preapproved|approval (?:has been |was )?granted|you are (?:now |hereby )?authori[sz]ed|authori[sz]ed by (?:the )?(?:admin|administrator|security team|user|owner|operator|system)|(?:admin|administrator|security team|operator) (?:has )?approved) /,
  },
  {
    // Privilege flags: `"is_admin": true`, `"trusted": true`.
    id: 'authority.privilege_claim',
    signal: 'authority_claim',
    view: 'lower',
    pattern:
      /["']?\b(?:is_admin|admin|sudo|elevated|trusted|privileged|is_trusted|superuser)["']? ?[:=] ?["']?(?:true|yes|1)\b/,
  },
  {
    // A tool-call or next-action structure inside output: the output asks the harness to act.
    id: 'authority.action_structure',
    signal: 'authority_claim',
    view: 'lower',
    pattern:
      /["'](?:tool_calls|tool_call|function_call|tool_use|next_action|required_action|agent_instruction|assistant_instructions|instructions_for_agent)["'] ?:/,
  },

  // --- credential_like_text: formats of live secrets. Pattern matching is a signal, not proof.
  {
    id: 'credential.aws_access_key_id',
    signal: 'credential_like_text',
    view: 'cased',
    pattern: /(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/,
  },
  {
    id: 'credential.aws_secret_access_key',
    signal: 'credential_like_text',
    view: 'cased',
    pattern: /aws_?secret_?access_?key["']?[^A-Za-z0-9/+]{1,5}[A-Za-z0-9/+]{40}/i,
  },
  {
    id: 'credential.github_token',
    signal: 'credential_like_text',
    view: 'cased',
    pattern: /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40})/,
  },
  {
    // OpenAI / Anthropic style `sk-...`, Stripe `sk_live_...`, Slack `xoxb-...`, Google `AIza...`.
    id: 'credential.api_token',
    signal: 'credential_like_text',
    view: 'cased',
    pattern:
      /(?<![A-Za-z0-9_-])sk-(?:proj-|ant-|live-|test-|svcacct-)?[A-Za-z0-9_-]{20}|(?<![A-Za-z0-9])[rs]k_(?:live|test)_[A-Za-z0-9]{16}|(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10}|(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}/,
  },
  {
    id: 'credential.private_key',
    signal: 'credential_like_text',
    view: 'cased',
    pattern: /-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----/,
  },
  {
    id: 'credential.jwt',
    signal: 'credential_like_text',
    view: 'cased',
    pattern: /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10}[A-Za-z0-9_-]{0,2048}?\.eyJ[A-Za-z0-9_-]{10}/,
  },
  {
    id: 'credential.bearer_token',
    signal: 'credential_like_text',
    view: 'cased',
    pattern:
      /\bbearer[ \t]{1,3}[A-Za-z0-9._~+/-]{20}|\bauthorization\W{1,4}basic[ \t]{1,3}[A-Za-z0-9+/=]{12}/i,
  },
  {
    // `password=...`, `"api_key": "..."`; placeholders (`<...>`, `${...}`, `your_key`) are not hits.
    id: 'credential.assignment',
    signal: 'credential_like_text',
    view: 'cased',
    pattern:
      /(?:password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|client[_-]?secret|secret[_-]?key|private[_-]?key|x-api-key)["']?[ \t]{0,3}[:=][ \t]{0,3}["']?([^\s"'<>{}$%*&,;()[\]\\]{6,64})/gi,
    accept: (m) => !isPlaceholder(m[1] ?? ''),
  },
  {
    // Credentials embedded in a URL: `https://user:secret@host`.
    id: 'credential.url_userinfo',
    signal: 'credential_like_text',
    view: 'cased',
    pattern: /:\/\/[^\s/:@"'<>]{1,64}:([^\s/@"'<>]{3,64})@/g,
    accept: (m) => !isPlaceholder(m[1] ?? ''),
  },

  // --- hidden_characters: text a human reviewer cannot see.
  {
    // Unicode tag characters smuggle invisible ASCII ("ASCII smuggling").
    id: 'hidden.tag_characters',
    signal: 'hidden_characters',
    view: 'raw',
    pattern: /[\u{E0000}-\u{E007F}]/u,
  },
  {
    // Bidirectional overrides reorder what a reviewer sees ("Trojan Source").
    id: 'hidden.bidi_control',
    signal: 'hidden_characters',
    view: 'raw',
    pattern: /[\u202A-\u202E\u2066-\u2069]/,
  },
  {
    // Zero-width characters split words past naive filters. A leading BOM is ordinary.
    id: 'hidden.zero_width',
    signal: 'hidden_characters',
    view: 'raw',
    pattern: /[\u200B\u200C\u2060\u180E\u2061-\u2064]|(?<!^)\uFEFF/,
  },
];

const PLACEHOLDER =
  /^(?:your|my|example|sample|placeholder|redacted|changeme|change_me|dummy|test|xxx|\.\.\.|none|null|undefined|true|false|secret|password|token|env\b|process\.|os\.|getenv|config\.|settings\.|vault:|ref:|\[redacted|\$|<|%|\{)/i;

function isPlaceholder(value: string): boolean {
  // Placeholder words, one repeated character (`xxxxxx`), and file paths (`pwd: /home/runner`).
  return PLACEHOLDER.test(value) || /^(.)\1*$/.test(value) || /^[./~]/.test(value);
}

// ---------------------------------------------------------------------------------------------
// Normalization

/** Cyrillic and Greek letters that render like Latin ones, folded on the lowercase view. */
const CONFUSABLES: Readonly<Record<string, string>> = {
  а: 'a',
  е: 'e',
  о: 'o',
  р: 'p',
  с: 'c',
  у: 'y',
  х: 'x',
  і: 'i',
  ј: 'j',
  ѕ: 's',
  ԁ: 'd',
  ɡ: 'g',
  ο: 'o',
  α: 'a',
  ε: 'e',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ρ: 'p',
  υ: 'u',
  τ: 't',
};
const CONFUSABLE_RE = new RegExp(`[${Object.keys(CONFUSABLES).join('')}]`, 'g');

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
  readonly words: string;
  readonly squeezed: string;
  readonly leet: string;
}

function makeView(text: string): View {
  // Reveal tag characters (all behind the high surrogate U+DB40) as the ASCII they smuggle.
  const revealed = text.includes('\uDB40')
    ? text.replace(TAG_RE, (c) => String.fromCharCode((c.codePointAt(0) as number) - 0xe0000))
    : text;
  // Then drop what a reader cannot see.
  const cased = boundedNfkc(revealed).replace(INVISIBLE_RE, '');
  let folded = cased.toLowerCase();
  if (NON_ASCII_RE.test(folded)) folded = folded.replace(CONFUSABLE_RE, (c) => CONFUSABLES[c] ?? c);
  // `\n`, `\t` inside escaped JSON separate words; other backslashes only escape quotes.
  if (folded.includes('\\')) folded = folded.replace(/\\[nrt]/g, ' ').replaceAll('\\', '');
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
  return { raw: text, cased, lower, words, squeezed, leet };
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

function runRules(view: View, encoding: SignalEncoding, hits: Map<string, SignalHit>): void {
  for (const rule of RULES) {
    const key = `${rule.signal}\u0000${rule.id}\u0000${encoding}`;
    if (hits.has(key)) continue;
    const texts = rule.view === 'squeezed' ? [view.squeezed, view.leet] : [view[rule.view]];
    if (texts.some((t) => matches(rule, t))) hits.set(key, { signal: rule.signal, rule: rule.id, encoding });
  }
}

function matches(rule: Rule, text: string): boolean {
  if (rule.accept === undefined) return rule.pattern.test(text);
  for (const m of text.matchAll(rule.pattern)) if (rule.accept(m)) return true;
  return false;
}

function scan(
  text: string,
  encoding: SignalEncoding,
  depth: number,
  budget: Budget,
  hits: Map<string, SignalHit>,
): void {
  runRules(makeView(text), encoding, hits);
  if (depth >= SIGNAL_LIMITS.maxDecodeDepth) return;
  for (const d of decodings(text, depth, budget)) {
    scan(d.text, encoding === 'plain' ? d.encoding : encoding, depth + 1, budget, hits);
  }
}

/** Scan `text`. Pure and deterministic: the same text always yields the same report. */
export function detectSignals(text: string): SignalReport {
  const truncated = text.length > SIGNAL_LIMITS.maxScanChars;
  const scanned = truncated ? text.slice(0, SIGNAL_LIMITS.maxScanChars) : text;
  const hits = new Map<string, SignalHit>();
  const budget: Budget = { chars: 0, segments: 0, exhausted: false };
  scan(scanned, 'plain', 0, budget, hits);
  // Content the scanner could not look at is reported, so padding cannot buy silence.
  if (truncated)
    hits.set('unscanned.truncated', {
      signal: 'unscanned_content',
      rule: 'unscanned.truncated',
      encoding: 'plain',
    });
  if (budget.exhausted) {
    hits.set('unscanned.decode_budget', {
      signal: 'unscanned_content',
      rule: 'unscanned.decode_budget',
      encoding: 'plain',
    });
  }
  const sorted = [...hits.values()].sort(compareHits);
  const signals = [...new Set(sorted.map((h) => h.signal))].sort();
  return { signals, hits: sorted, complete: !truncated && !budget.exhausted };
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
// are offsets of the evidence itself. Evasive (zero-width-split) secrets are signalled by
// `detectSignals` even where they cannot be located here.

export interface CredentialSpan {
  readonly rule: string;
  /** UTF-16 offsets into the original text, `[start, end)`. */
  readonly start: number;
  readonly end: number;
}

/** Locate credential-like spans in `text`, sorted and merged where they overlap. */
export function credentialSpans(text: string): CredentialSpan[] {
  const spans: CredentialSpan[] = [];
  for (const rule of RULES) {
    if (rule.signal !== 'credential_like_text') continue;
    const flags = rule.pattern.flags.includes('g') ? rule.pattern.flags : `${rule.pattern.flags}g`;
    const re = new RegExp(rule.pattern.source, `${flags.includes('d') ? flags : `${flags}d`}`);
    for (const m of text.matchAll(re)) {
      if (rule.accept !== undefined && !rule.accept(m)) continue;
      const whole = m.indices?.[0];
      if (whole === undefined) continue;
      // Redact the secret value only when the rule captures it; otherwise the whole match.
      const value = m.indices?.[1] ?? whole;
      spans.push({ rule: rule.id, start: value[0], end: value[1] });
    }
  }
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
