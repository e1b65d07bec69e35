// Observation receipt version 7 (release `writ-signals/6`) and the `writ-redactor/4` redactor.
// Before them (review 22): a key with a zero-width space, word joiner or soft hyphen inside it, or
// a fullwidth letter, was signalled by the detector (its normalized copy removes invisibles and
// folds compatibility forms) and classified `secret` by egress, yet `writ-redactor/3` located no
// span, so the redacted view kept it in the clear; a key wrapped by a newline was seen by none of
// them; and a soft hyphen (or a variation selector, U+2065, a Hangul filler ...) between letters
// raised no `hidden_characters`. The supported splits (docs/observations.md, "Split credentials"):
// a run of invisible characters (every Default_Ignorable_Code_Point and format character) anywhere
// in a credential, and a single LF, CR or CRLF with a token character (`[A-Za-z0-9_+/=-]`) on both
// sides, inside the value of a rule whose value has a shape of its own (not the label-led
// free-form rules: for those a line break ends the value).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SignalHit } from '../../../../src/core/observation/schema.js';
import {
  credentialSpans,
  credentialSpansReadThrough,
  detectSignals,
  INVISIBLE_WIDE_RE,
  LINE_ENDS_VALUE_RULES,
} from '../../../../src/core/observation/signals.js';
import {
  type AsReadRedactor,
  credentialSpansAsRead,
  scanContentUnder,
  WRIT_SIGNALS_6_READING,
} from '../../../../src/core/observation/signals/releases.js';
import { suspiciousCodepoints } from '../../../../src/core/text.js';
import { classifyReadOutput } from '../../../../src/library/egress.js';

const JSON_TYPE = 'application/json';
const KEY = 'AKIAZ7Q4WJ2M5NXR8K3T';

const credentialRules = (hits: readonly SignalHit[]) =>
  hits.filter((h) => h.signal === 'credential_like_text').map((h) => `${h.rule} ${h.encoding}`);

/** `text` with `spans` replaced by markers, as the redactor writes its view. */
function redacted(text: string, spans: readonly { start: number; end: number }[]): string {
  let out = '';
  let at = 0;
  for (const s of spans) {
    out += text.slice(at, s.start) + '[redacted]';
    at = s.end;
  }
  return out + text.slice(at);
}

/** What a reader sees of a text: invisible characters and line breaks gone. */
const seen = (t: string) => t.replace(INVISIBLE_WIDE_RE, '').replace(/[\r\n]/g, '');

describe('concrete strings (the reproduced gaps)', () => {
  const splits: [string, string][] = [
    ['zero-width space', `deployed by ${KEY.slice(0, 8)}\u200b${KEY.slice(8)} today`],
    ['soft hyphen', `deployed by ${KEY.slice(0, 8)}\u00ad${KEY.slice(8)} today`],
    ['word joiner', `deployed by ${KEY.slice(0, 8)}\u2060${KEY.slice(8)} today`],
    ['variation selector 17', `deployed by ${KEY.slice(0, 8)}\u{e0100}${KEY.slice(8)} today`],
    ['fullwidth letter', `deployed by ${KEY.slice(0, 8)}\uff37${KEY.slice(9)} today`],
    ['LF', `deployed by ${KEY.slice(0, 8)}\n${KEY.slice(8)} today`],
    ['CRLF', `deployed by ${KEY.slice(0, 8)}\r\n${KEY.slice(8)} today`],
    ['CR', `deployed by ${KEY.slice(0, 8)}\r${KEY.slice(8)} today`],
  ];

  it.each(splits)(
    'a key split by a %s: located by writ-redactor/4, signalled by version 7, secret to egress',
    (_n, text) => {
      const spans = credentialSpansAsRead(text, 'text/plain');
      expect(spans.map((s) => s.rule)).toEqual(['credential.aws_access_key_id']);
      // The span covers the whole key with its split, nothing of the prose around it.
      expect(text.slice(0, spans[0]?.start)).toBe('deployed by ');
      expect(text.slice(spans[0]?.end)).toBe(' today');
      expect(scanContentUnder(7, text, 'text/plain').hits).toContainEqual({
        signal: 'credential_like_text',
        rule: 'credential.aws_access_key_id',
        encoding: 'plain',
      });
      expect(classifyReadOutput(text, 'public').data_class).toBe('secret');
    },
  );

  it('writ-redactor/3 left each of them in the clear; version 6 signalled the invisible splits only', () => {
    for (const [name, text] of splits) {
      expect(credentialSpansAsRead(text, 'text/plain', 'writ-redactor/3'), name).toEqual([]);
      const wrapped = /^(?:LF|CRLF|CR|variation selector 17)$/.test(name);
      expect(scanContentUnder(6, text, 'text/plain').signals.includes('credential_like_text'), name).toBe(
        !wrapped,
      );
    }
  });

  it('a key wrapped inside a JSON string (an escaped newline) is redacted there and the view is still JSON', () => {
    const text = JSON.stringify({ log: `rolled back by ${KEY.slice(0, 12)}\n${KEY.slice(12)} at 12:00` });
    const spans = credentialSpansAsRead(text, JSON_TYPE);
    expect(spans.map((s) => s.rule)).toEqual(['credential.aws_access_key_id']);
    expect(JSON.parse(redacted(text, spans))).toEqual({ log: 'rolled back by [redacted] at 12:00' });
    expect(scanContentUnder(7, text, JSON_TYPE).signals).toContain('credential_like_text');
  });

  it('what is not a supported split stays unjoined: whitespace beside the break, two breaks, a label-led value', () => {
    const unsupported = [
      `deployed by ${KEY.slice(0, 8)} \n${KEY.slice(8)} today`,
      `deployed by ${KEY.slice(0, 8)}\n  ${KEY.slice(8)} today`,
      `deployed by ${KEY.slice(0, 8)}\n\n${KEY.slice(8)} today`,
      // A value runs to the end of its line: two .env lines are two values.
      'MASTER_API_KEY=12345\nBILLING_RATE_INT_10K=<your_billing_rate>',
      'password=Zq8wX\nnext_line_here=1',
    ];
    for (const text of unsupported) {
      expect(credentialSpansReadThrough(text, { secretWindowChars: 0 }), text).toEqual([]);
      expect(scanContentUnder(7, text, 'text/plain').signals, text).toEqual(
        scanContentUnder(6, text, 'text/plain').signals,
      );
    }
  });

  it('ordinary multi-line output raises nothing new: logs, an .env file, a table, prose', () => {
    const ordinary = [
      'GET /healthz 200\nGET /api/v1/users 200\nPOST /api/v1/login 302',
      'NODE_ENV=production\nPORT=8080\nLOG_LEVEL=info\nDATABASE_POOL=10',
      'id  name\n1   alice\n2   bob\nTotal: 2',
      'The rollout finished\nat 12:00 and the next\nwindow opens tomorrow',
      'sha256-3b2f9c8e7d6a5b4c3d2e1f0a9b8c7d6e\n5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c',
    ];
    for (const text of ordinary) expect(scanContentUnder(7, text, 'text/plain').signals, text).toEqual([]);
  });
});

describe('hidden characters: one set for the detector, the redactor and the signal', () => {
  /** Every code point of `re` (single code point texts). */
  function codePointsOf(re: RegExp): number[] {
    const one = new RegExp(re.source, 'u');
    const out: number[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      if (one.test(String.fromCodePoint(cp))) out.push(cp);
    }
    return out;
  }
  const WIDE = codePointsOf(INVISIBLE_WIDE_RE);
  /** Format characters that render visibly (prepended concatenation marks). */
  const VISIBLE = new Set([
    0x600, 0x601, 0x602, 0x603, 0x604, 0x605, 0x6dd, 0x70f, 0x890, 0x891, 0x8e2, 0x110bd, 0x110cd,
  ]);

  it('the wide set is every Default_Ignorable_Code_Point and format character, a superset of the old one', () => {
    const oldSet = /[\p{Cf}\u115F\u1160\u3164\uFFA0]|\u034F|[\u180B-\u180D]|[\uFE00-\uFE0F]/u;
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      if (oldSet.test(String.fromCodePoint(cp))) expect(WIDE).toContain(cp);
    }
    expect(WIDE).toContain(0xad);
    expect(WIDE).toContain(0xe0100);
    expect(WIDE).toContain(0x17b4);
  });

  it('every character of that set between two letters raises hidden_characters in version 7, unless it renders visibly', () => {
    const missed: string[] = [];
    for (const cp of WIDE) {
      const text = `ig${String.fromCodePoint(cp)}nore`;
      const flagged = detectSignals(text, WRIT_SIGNALS_6_READING).signals.includes('hidden_characters');
      if (flagged === VISIBLE.has(cp)) missed.push(cp.toString(16));
    }
    expect(missed).toEqual([]);
  });

  it('every character an approver is warned of (text.ts) is flagged too, but line and paragraph separators', () => {
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      if (suspiciousCodepoints(c).length === 0 || cp === 0x2028 || cp === 0x2029) continue;
      expect(detectSignals(`ig${c}nore`, WRIT_SIGNALS_6_READING).signals, cp.toString(16)).toContain(
        'hidden_characters',
      );
    }
  });

  it('the soft hyphen was not flagged before version 7', () => {
    expect(scanContentUnder(6, 'roll\u00adback', 'text/plain').signals).toEqual([]);
    expect(scanContentUnder(7, 'roll\u00adback', 'text/plain').hits).toEqual([
      { signal: 'hidden_characters', rule: 'hidden.format_character', encoding: 'plain' },
    ]);
  });

  it('ordinary uses stay quiet: emoji presentation, Persian and Indic joiners, a leading BOM, RTL marks, Mongolian, ideographic variants', () => {
    const ordinary = [
      'Overview \u{1F3D5}\uFE0F and \u2764\uFE0F',
      '\u{1F468}\u200D\u{1F469}\u200D\u{1F467} family',
      'نامزد می\u200Cشوند',
      'क्\u200Dष',
      '\uFEFFhello',
      'שלום\u200Fעולם',
      'מחיר: 100\u200F ₪',
      'ᠮᠣ\u180Bᠩᠭᠣᠯ',
      '葛\u{E0100}飾区',
      '1\uFE0F\u20E3 first',
    ];
    for (const t of ordinary) expect(scanContentUnder(7, t, 'text/plain').signals, t).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

const alnum = (
  min: number,
  max: number,
  chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
) => fc.array(fc.constantFrom(...chars.split('')), { minLength: min, maxLength: max }).map((a) => a.join(''));
const UPPER_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** A credential as it is written, and the secret in it that must not survive redaction. */
interface Credential {
  readonly text: string;
  readonly secret: string;
  /** A value of its own shape (not label-led): a line break inside it is a supported split. */
  readonly shaped: boolean;
}
const shaped = (text: string): Credential => ({ text, secret: text, shaped: true });
const credential: fc.Arbitrary<Credential> = fc.oneof(
  alnum(16, 16, UPPER_DIGITS).map((t) => shaped(`AKIA${t}`)),
  alnum(36, 36).map((t) => shaped(`ghp_${t}`)),
  alnum(40, 40).map((t) => shaped(`sk-proj-${t}`)),
  alnum(24, 24).map((t) => shaped(`sk_live_${t}`)),
  alnum(24, 40).map((t) => shaped(`xoxb-${t}`)),
  alnum(35, 35).map((t) => shaped(`AIza${t}`)),
  alnum(20, 20).map((t) => shaped(`glpat-${t}`)),
  alnum(43, 43).map((t) => shaped(`eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.${t}`)),
  alnum(8, 24).map((t) => ({ text: `password=${t}7q`, secret: `${t}7q`, shaped: false })),
  alnum(30, 40).map((t) => ({ text: `Authorization: Bearer ${t}`, secret: t, shaped: false })),
  alnum(12, 16).map((t) => ({
    text: `postgres://deploy:${t}@db.internal:5432/app`,
    secret: t,
    shaped: false,
  })),
);

/** Invisible characters a split may use (tag characters are not splits: they reveal as letters). */
const INVISIBLE_SPLITS = [
  '\u00ad', // soft hyphen
  '\u200b', // zero-width space
  '\u200c', // zero-width non-joiner
  '\u200d', // zero-width joiner
  '\u2060', // word joiner
  '\ufeff', // zero-width no-break space
  '\u180e', // Mongolian vowel separator
  '\u061c', // Arabic letter mark
  '\u202e', // right-to-left override
  '\u034f', // combining grapheme joiner
  '\ufe0f', // variation selector 16
  '\u{e0100}', // variation selector 17
  '\u17b4', // Khmer vowel inherent aq
  '\u2065', // unassigned default-ignorable
  '\u3164', // Hangul filler
  '\u{1d173}', // musical symbol begin beam
  '\u{e0001}', // language tag
] as const;
const TOKEN = /^[A-Za-z0-9_+/=-]$/;

type Split = { kind: 'invisible'; run: string } | { kind: 'break'; br: string };
const split: fc.Arbitrary<Split> = fc.oneof(
  fc
    .array(fc.constantFrom(...INVISIBLE_SPLITS), { minLength: 1, maxLength: 3 })
    .map((a) => ({ kind: 'invisible' as const, run: a.join('') })),
  fc.constantFrom('\n', '\r\n', '\r').map((br) => ({ kind: 'break' as const, br })),
);

/**
 * A credential in prose, split once at a position inside it by a supported split (a line break
 * only inside a shaped value, between two token characters), maybe held in a JSON string once or
 * twice.
 */
const splitContent = fc
  .record({
    cred: credential,
    split,
    at: fc.nat(),
    before: fc.constantFrom('deployed by ', 'token: ', '', 'log\n'),
    after: fc.constantFrom(' today', '', '.', '\nnext line'),
    wrap: fc.constantFrom(0, 1, 2),
  })
  .map(({ cred, split: sp, at, before, after, wrap }) => {
    const c = cred.text;
    const secretAt = c.indexOf(cred.secret);
    // Where a split may go: inside the credential for an invisible run; inside the secret,
    // between token characters, for a line break (and only in a shaped value).
    const positions: number[] = [];
    for (let i = 1; i < c.length; i++) {
      if (sp.kind === 'invisible') positions.push(i);
      else if (
        cred.shaped &&
        i > secretAt &&
        i < secretAt + cred.secret.length &&
        TOKEN.test(c.charAt(i - 1)) &&
        TOKEN.test(c.charAt(i))
      )
        positions.push(i);
    }
    const i = positions.length === 0 ? null : (positions[at % positions.length] as number);
    const written =
      i === null ? null : c.slice(0, i) + (sp.kind === 'invisible' ? sp.run : sp.br) + c.slice(i);
    let text = before + (written ?? c) + after;
    for (let k = 0; k < wrap; k++) text = JSON.stringify({ log: text });
    return {
      unsplit: before + c + after,
      split: written !== null,
      text,
      mediaType: wrap === 0 ? 'text/plain' : JSON_TYPE,
      wrap,
      secret: cred.secret,
    };
  });

/** The texts a model reads of redacted content: unwrapped from its JSON strings. */
function readBack(view: string, wrap: number): string {
  let t = view;
  for (let k = 0; k < wrap; k++) t = (JSON.parse(t) as { log: string }).log;
  return t;
}

describe('properties', () => {
  it('any credential the redactor locates unsplit is still redacted whole, and signalled, when split by a supported split', () => {
    let split = 0;
    fc.assert(
      fc.property(splitContent, (c) => {
        fc.pre(c.split && credentialSpans(c.unsplit).length > 0);
        split++;
        const spans = credentialSpansAsRead(c.text, c.mediaType);
        expect(spans.length).toBeGreaterThan(0);
        const view = redacted(c.text, spans);
        // Still JSON where it was, and nothing of the secret left to read.
        expect(seen(readBack(view, c.wrap))).not.toContain(c.secret);
        expect(scanContentUnder(7, c.text, c.mediaType).signals).toContain('credential_like_text');
        expect(classifyReadOutput(c.text, 'public').data_class).toBe('secret');
      }),
      { numRuns: 300 },
    );
    expect(split).toBeGreaterThan(150);
  });

  it('writ-redactor/3 breaks the same property (the gap writ-redactor/4 closes)', () => {
    const r = fc.check(
      fc.property(splitContent, (c) => {
        fc.pre(c.split && credentialSpans(c.unsplit).length > 0);
        const view = redacted(c.text, credentialSpansAsRead(c.text, c.mediaType, 'writ-redactor/3'));
        expect(seen(readBack(view, c.wrap))).not.toContain(c.secret);
      }),
      { numRuns: 200 },
    );
    expect(r.failed).toBe(true);
  });

  /** Texts mixing words, line breaks, credentials, splits and other characters. */
  const mixed = fc
    .array(
      fc.oneof(
        fc.constantFrom('ignore', 'the', 'key', ' ', '\n', '\r\n', 'AKIA', 'ghp_', '=', 'x9'),
        credential.map((c) => c.text),
        fc.constantFrom(...INVISIBLE_SPLITS, '\u{e0041}', '\uff21'),
        fc.string({ maxLength: 8 }),
      ),
      { maxLength: 16 },
    )
    .map((parts) => parts.join(''));

  function signalsWhatIsRedacted(version: 6 | 7, redactor: AsReadRedactor) {
    return fc.property(mixed, fc.constantFrom(0, 1), (text, wrap) => {
      const t = wrap === 1 ? JSON.stringify({ log: text }) : text;
      const mediaType = wrap === 1 ? JSON_TYPE : 'text/plain';
      const spans = credentialSpansAsRead(t, mediaType, redactor);
      if (spans.length === 0) return;
      const scan = scanContentUnder(version, t, mediaType);
      for (const s of spans) expect(credentialRules(scan.hits)).toContain(`${s.rule} plain`);
    });
  }

  it('whatever writ-redactor/4 locates, the version 7 scan signals under the same rule', () => {
    fc.assert(signalsWhatIsRedacted(7, 'writ-redactor/4'), { numRuns: 400 });
  });

  it('the version 6 scan does not signal all writ-redactor/4 locates (the gap version 7 closes: wrapped keys)', () => {
    const r = fc.check(
      fc.property(splitContent, (c) => {
        if (credentialSpansAsRead(c.text, c.mediaType).length === 0) return;
        expect(scanContentUnder(6, c.text, c.mediaType).signals).toContain('credential_like_text');
      }),
      { numRuns: 300 },
    );
    expect(r.failed).toBe(true);
  });

  it('writ-redactor/4 redacts a prefixed token whole; writ-redactor/3 left its random tail', () => {
    const text = 'x zzq_Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Aq8 end';
    const tail = 'Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Aq8';
    expect(redacted(text, credentialSpansAsRead(text, 'text/plain', 'writ-redactor/3'))).toContain(tail);
    expect(redacted(text, credentialSpansAsRead(text, 'text/plain'))).toBe('x [redacted] end');
  });

  it('version 7 raises every hit version 6 raises', () => {
    const k = (h: SignalHit) => `${h.signal} ${h.rule} ${h.encoding}`;
    fc.assert(
      fc.property(mixed, fc.constantFrom('text/plain', JSON_TYPE), (text, mediaType) => {
        const v7 = scanContentUnder(7, text, mediaType).hits.map(k);
        for (const h of scanContentUnder(6, text, mediaType).hits) expect(v7).toContain(k(h));
      }),
      { numRuns: 300 },
    );
  });

  it('a wrapped-line span is never under a label-led rule, and always holds the break it joined', () => {
    fc.assert(
      fc.property(mixed, (text) => {
        for (const s of credentialSpansReadThrough(text, { secretWindowChars: 0 })) {
          const part = text.slice(s.start, s.end);
          if (/[\r\n]/.test(part)) expect(LINE_ENDS_VALUE_RULES.has(s.rule), s.rule).toBe(false);
          expect(s.start).toBeLessThan(s.end);
          expect(s.end).toBeLessThanOrEqual(text.length);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('bounded work', () => {
  it('the read-through passes cost a bounded multiple of the text, wrapped lines or not', () => {
    const lines = Array.from({ length: 4000 }, (_, i) => `k${i}x\u00ad=v${i}`).join('\n');
    const work = { secretWindowChars: 0 };
    credentialSpansReadThrough(lines, work);
    // Two readings at most, each windowed by the maintained rules' keywords.
    expect(work.secretWindowChars).toBeLessThan(lines.length * 64);
    const r = detectSignals(lines, WRIT_SIGNALS_6_READING);
    expect(r.complete).toBe(true);
  });
});
