/**
 * Equivalence of the core's fast paths with their references.
 *
 * `decodeJsonText` / `decodeJsonBytes` try `JSON.parse` and keep its value only when they can prove
 * the strict reference parser (`parseReference`) gives the same answer; `canonicalize` returns
 * `JSON.stringify` only when the value is provably already in RFC 8785 form, otherwise the
 * reference serializer (`canonicalizeReference`) decides. Both claims are "for every input", so
 * these tests compare the public function with the reference on adversarial input: the edge cases
 * each acceptance check exists for (duplicate keys, forbidden keys, surrogates, unsafe integers,
 * depth, key order, prototypes, toJSON), as named examples and as generated texts and values with
 * random whitespace, escapes and corruptions. A fast path made unsound by a later edit fails here.
 *
 * A fixed seed keeps runs reproducible; change it locally to explore.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CanonicalizationError,
  canonicalize,
  canonicalizeReference,
} from '../../../../src/core/canonical/canonical.js';
import {
  DEFAULT_JSON_LIMITS,
  decodeJsonBytes,
  decodeJsonText,
  parseReference,
  utf8ByteLength,
  utf8Encode,
} from '../../../../src/core/canonical/json.js';
import type { JsonDecodeError, JsonLimits, JsonValue } from '../../../../src/core/canonical/json.js';
import type { Result } from '../../../../src/core/result.js';

const SEED = 0x6a50;
const RUNS = { seed: SEED, endOnFailure: true } as const;

// ---------------------------------------------------------------------------------------------
// Comparing results exactly: same type, same prototype, same key order, -0 kept

/** The first difference between two decoded values (path and what differs), or undefined. */
function difference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (typeof a !== typeof b) return `${path}: ${typeof a} vs ${typeof b}`;
  if (typeof a === 'number') return Object.is(a, b) ? undefined : `${path}: ${String(a)} vs ${String(b)}`;
  if (typeof a !== 'object' || a === null || b === null) {
    return a === b ? undefined : `${path}: ${String(a)} vs ${String(b)}`;
  }
  const bo = b as object;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(bo)) return `${path}: different prototypes`;
  if (Array.isArray(a)) {
    const bb = bo as unknown[];
    if (a.length !== bb.length) return `${path}: length ${a.length} vs ${bb.length}`;
    for (let i = 0; i < a.length; i++) {
      const d = difference(a[i], bb[i], `${path}[${i}]`);
      if (d !== undefined) return d;
    }
    return undefined;
  }
  const ka = Reflect.ownKeys(a);
  const kb = Reflect.ownKeys(bo);
  if (JSON.stringify(ka.map(String)) !== JSON.stringify(kb.map(String))) {
    return `${path}: keys ${JSON.stringify(ka.map(String))} vs ${JSON.stringify(kb.map(String))}`;
  }
  for (const k of ka) {
    const d = difference(
      (a as Record<PropertyKey, unknown>)[k],
      (bo as Record<PropertyKey, unknown>)[k],
      `${path}.${String(k)}`,
    );
    if (d !== undefined) return d;
  }
  return undefined;
}

type Decoded = Result<JsonValue, JsonDecodeError>;

function expectSameResult(got: Decoded, want: Decoded, text: string): void {
  const label = `input ${JSON.stringify(text)}`;
  expect(got.ok, `${label}: ok`).toBe(want.ok);
  if (got.ok && want.ok) {
    expect(difference(got.value, want.value), label).toBeUndefined();
    expect(got.value, label).toStrictEqual(want.value);
  } else {
    expect(got, label).toStrictEqual(want);
  }
}

/** decodeJsonText(text) must be exactly the reference parser's answer after the same size bound. */
function textAgrees(text: string, limits: JsonLimits): void {
  const got = decodeJsonText(text, limits);
  if (utf8ByteLength(text) > limits.maxBytes) {
    expect(got.ok ? 'ok' : got.error.reason, JSON.stringify(text)).toBe('too_large');
    return;
  }
  expectSameResult(got, parseReference(text, limits.maxDepth), text);
}

/** decodeJsonBytes(utf8(text)): the encoder turns lone surrogates into U+FFFD, as the decoder sees. */
function bytesAgree(text: string, limits: JsonLimits): void {
  const bytes = utf8Encode(text);
  const got = decodeJsonBytes(bytes, limits);
  if (bytes.byteLength > limits.maxBytes) {
    expect(got.ok ? 'ok' : got.error.reason, JSON.stringify(text)).toBe('too_large');
    return;
  }
  expectSameResult(got, parseReference(text.toWellFormed(), limits.maxDepth), text);
}

function agrees(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): void {
  textAgrees(text, limits);
  bytesAgree(text, limits);
}

/** What the reference says about `text` (for examples that also pin the expected outcome). */
function verdict(text: string, maxDepth = DEFAULT_JSON_LIMITS.maxDepth): string {
  const r = parseReference(text, maxDepth);
  return r.ok ? 'ok' : r.error.reason;
}

// ---------------------------------------------------------------------------------------------
// JSON: named edge cases

describe('decodeJsonText fast path: named edge cases agree with the reference', () => {
  it('duplicate keys, same and different values, nested and deep', () => {
    const cases = [
      '{"a":1,"a":1}',
      '{"a":1,"a":2}',
      '{"a":1,"b":2,"a":3}',
      '{"a":{"b":1,"b":1}}',
      '[{"x":[1,{"y":true,"y":false}]}]',
      '{"a":{"a":{"a":{"a":{"a":1,"a":1}}}}}',
      '{"a":1,"\\u0061":1}', // the same key spelled with an escape
      '{"é":1,"\\u00e9":1}',
      '{"😀":1,"\\ud83d\\ude00":1}',
      '{"1":1,"1":2}',
      '{"":1,"":1}',
      '{"a":[],"a":[]}',
      // One object loses a member to a duplicate while another has an extra `:` in no string.
      '{"a":1,"a":2,"b":{"c":3}}',
    ];
    for (const text of cases) {
      expect(verdict(text), text).toBe('duplicate_key');
      agrees(text);
    }
  });

  it('__proto__, constructor and prototype keys, plain and escaped', () => {
    const cases = [
      '{"__proto__":1}',
      '{"__proto__":{"polluted":true}}',
      '{"constructor":{"prototype":{}}}',
      '{"prototype":null}',
      '{"__pro\\u0074o__":1}',
      '{"\\u005f\\u005fproto\\u005f\\u005f":[]}',
      '{"constructo\\u0072":1}',
      '{"a":{"b":[{"__proto__":1}]}}',
      '{"__proto__":1,"__proto__":2}',
    ];
    for (const text of cases) {
      expect(verdict(text), text).toBe('forbidden_key');
      agrees(text);
    }
    // Only exact names are forbidden: near misses decode.
    for (const text of ['{"__proto":1}', '{"Constructor":1}', '{"prototypes":1}', '{"a":"__proto__"}']) {
      expect(verdict(text), text).toBe('ok');
      agrees(text);
    }
  });

  it('lone surrogates raw and escaped, in values and keys', () => {
    const cases = [
      '"\\ud800"',
      '"\\uDBFF"',
      '"\\udc00"',
      '"\\uDFFF"',
      '"\ud800"',
      '"\udc00"',
      '"a\ud800b"',
      '"\udc00\ud800"', // reversed pair
      '{"\ud800":1}',
      '{"\\ud800":1}',
      '["\\ud83d\\u0041"]',
      '"\\ud83d\\ud83d"',
    ];
    for (const text of cases) {
      expect(verdict(text), text).toBe('lone_surrogate');
      agrees(text);
    }
  });

  it('escaped and raw halves mixed into a pair are refused, as the reference refuses them', () => {
    // JSON.parse joins these into a well-formed string; the reference sees each half alone.
    const cases = [
      '"\\ud83d\ude00"',
      '"\ud83d\\ude00"',
      '"\\uD83D\uDE00"',
      '{"\\ud83d\ude00":1}',
      '{"k":["x","\\ud83d\ude00"]}',
    ];
    for (const text of cases) {
      expect(JSON.parse(text)).toBeDefined();
      expect(verdict(text), text).toBe('lone_surrogate');
      agrees(text);
    }
  });

  it('escaped valid pairs, raw pairs and escaped backslashes before "u" decode', () => {
    const cases = [
      '"\\ud83d\\ude00"',
      '"\\uD83D\\uDE00"',
      '"\ud83d\ude00"',
      '{"\\ud83d\\ude00":"\ud83d\ude00"}',
      '"\\\\ud800"', // an escaped backslash then the letters ud800
      '"\\\\\\\\uDC00"',
      '"\\u20ac\\u00e9\\u0000"',
    ];
    for (const text of cases) {
      expect(verdict(text), text).toBe('ok');
      agrees(text);
    }
  });

  it('strings containing ":", quotes and backslash runs do not confuse the member count', () => {
    const cases = [
      '{"a:b":1}',
      '{"a":":"}',
      '{"a":"\\":"}',
      '{"a\\\\":1}',
      '{"a\\\\":1,"a\\\\":2}',
      '{"a\\\\\\"":1,"a\\\\\\"":1}',
      '{"\\\\":":","\\\\\\\\":"::"}',
      '{"a":"\\\\","b":"\\\\\\\\"}',
      '{"x":"\\"}\\",\\"x\\":"}',
      '{"x":"\\\\"  :  1}', // not JSON: a value then ":" (no string key can follow)
      '{"a\\"":1,"a\\"":2}',
      '[":",":",{"a":":"}]',
      '{"::":{"::":"::"},"b":"\\\\\\\\\\\\"}',
    ];
    for (const text of cases) agrees(text);
    expect(verdict('{"a\\\\":1,"a\\\\":2}')).toBe('duplicate_key');
    expect(verdict('{"\\\\":":","\\\\\\\\":"::"}')).toBe('ok');
  });

  it('integer literals around 2^53 and exponent forms', () => {
    const expected: Record<string, string> = {
      '9007199254740991': 'ok',
      '-9007199254740991': 'ok',
      '9007199254740992': 'unsafe_integer',
      '9007199254740993': 'unsafe_integer',
      '-9007199254740993': 'unsafe_integer',
      '18446744073709551616': 'unsafe_integer',
      '9007199254740993e0': 'ok',
      '9007199254740993.0': 'ok',
      '9007199254740992.5': 'ok',
      '1e300': 'ok',
      '1E21': 'ok',
      '1.0': 'ok',
      '1e0': 'ok',
      '-0': 'ok',
      '-0.0': 'ok',
      '-0e5': 'ok',
      '1e-400': 'ok',
      '-1e-400': 'ok',
      '1e400': 'non_finite_number',
      '-1e400': 'non_finite_number',
      '1.8e308': 'non_finite_number',
      '01': 'syntax',
      '1.': 'syntax',
      '.5': 'syntax',
      '+1': 'syntax',
      '-': 'syntax',
      NaN: 'syntax',
      Infinity: 'syntax',
    };
    for (const [text, want] of Object.entries(expected)) {
      for (const t of [text, `[${text}]`, `{"n":${text}}`, ` [ 1 , ${text} ] `]) {
        expect(verdict(t), t).toBe(want);
        agrees(t);
      }
    }
    // -0 survives as -0 (toStrictEqual tells them apart; JSON.parse keeps it too).
    const neg = decodeJsonText('[-0,-0.0,-1e-400]');
    expect(neg.ok && neg.value).toStrictEqual([-0, -0, -0]);
  });

  it('nesting at, below and above maxDepth', () => {
    const arrays = (n: number) => '['.repeat(n) + '0' + ']'.repeat(n);
    const objects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    const mixed = (n: number) => {
      let open = '';
      let close = '';
      for (let i = 0; i < n; i++) {
        open += i % 2 === 0 ? '[0,' : '{"k":';
        close = (i % 2 === 0 ? ']' : '}') + close;
      }
      return open + 'null' + close;
    };
    for (const maxDepth of [0, 1, 2, 3, 32]) {
      const depths = maxDepth === 32 ? [0, 1, 31, 32, 33, 40] : [0, 1, 2, 3, 4, 5];
      for (const d of depths) {
        for (const text of [
          arrays(d),
          objects(d),
          mixed(d),
          `[${arrays(d)},1]`,
          `{"x":1,"y":${objects(d)}}`,
        ]) {
          agrees(text, { maxBytes: 1 << 20, maxDepth });
        }
        expect(verdict(arrays(d), maxDepth), `${d} in ${maxDepth}`).toBe(d <= maxDepth ? 'ok' : 'too_deep');
      }
    }
    // Scalars are depth 0: even maxDepth 0 decodes them.
    for (const text of ['1', '"s"', 'null', 'true']) agrees(text, { maxBytes: 100, maxDepth: 0 });
  });

  it('integer-like keys keep the same (numeric-first) order as the reference', () => {
    const cases = [
      '{"1":"a","01":"b","10":"c","9":"d"}',
      '{"b":1,"2":2,"a":3,"1":4}',
      '{"4294967295":1,"4294967294":2,"-1":3,"1.5":4,"0":5}',
      '{"9007199254740993":1,"2":2}',
    ];
    for (const text of cases) {
      agrees(text);
      const r = decodeJsonText(text);
      expect(r.ok && Object.keys(r.value as object)).toStrictEqual(Object.keys(JSON.parse(text) as object));
    }
  });

  it('whitespace JSON does not allow, control characters and invalid escapes', () => {
    const cases = [
      '\ufeff{}',
      '{}\u00a0',
      '[1,\u20282]',
      '"a\u0000"',
      '"a\n"',
      '"\\x41"',
      '"\\u12"',
      '"\\u12G4"',
      "'a'",
      '[1,]',
      '{"a":1,}',
      '{"a" 1}',
      '{a:1}',
      '',
      ' ',
      '[1] [2]',
      'nul',
      'truee',
    ];
    for (const text of cases) agrees(text);
  });

  // Found by these tests: with a maxDepth far above what any caller uses (they pass 16 to 64),
  // nesting deep enough to exhaust the stack made the recursive walk throw out of decodeJsonText,
  // where the reference catches its own overflow and returns `syntax`. The fast path now leaves
  // a maxDepth above 256, and any overflow of its walk, to the reference.
  it("nesting deeper than the stack with a huge maxDepth is the reference's syntax error", () => {
    const limits = { maxBytes: 1 << 22, maxDepth: 1_000_000 };
    const text = '['.repeat(100_000) + ']'.repeat(100_000);
    expect(verdict(text, limits.maxDepth)).toBe('syntax');
    // The offset is where the reference's stack ran out, which depends on the caller's frames.
    const r = decodeJsonText(text, limits);
    expect(r.ok ? 'ok' : r.error.reason).toBe('syntax');
  });

  it('the size bound applies before the fast path, in UTF-8 bytes', () => {
    for (const maxBytes of [0, 1, 2, 3, 5, 8, 9, 10]) {
      for (const text of ['1', '[]', '"é"', '"😀"', '"\ud800"', '{"a":1}', '{"a":1,"a":1}']) {
        agrees(text, { maxBytes, maxDepth: 32 });
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// JSON: generated texts

const WS = ['', '', '', '', ' ', '\n', '\t', '\r\n ', '  '] as const;

/** Escape only what JSON requires (quote, backslash, C0 controls); everything else stays raw. */
function quoteRaw(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c < 0x20) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return out + '"';
}

/** Escape every UTF-16 unit accepted by `which` as \uXXXX (hex case chosen by `upper`). */
function quoteEscaping(s: string, which: (c: number) => boolean, upper: boolean): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (which(c) || c < 0x20 || c === 0x22 || c === 0x5c) {
      const hex = c.toString(16).padStart(4, '0');
      out += `\\u${upper ? hex.toUpperCase() : hex}`;
    } else out += s[i];
  }
  return out + '"';
}

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/**
 * Render a JSON value as text with choices taken from `picks`: whitespace between tokens, each
 * string's escaping (standard, raw, all escaped, only high or only low surrogate halves escaped,
 * `\/`), each number's spelling (plain, exponent, `.0`, `e0`, `-0`). With `hostile`, objects also
 * get duplicate keys (same or another value) and forbidden keys, some of them escaped.
 */
function render(value: JsonValue, picks: readonly number[], hostile: boolean): string {
  let n = 0;
  const pick = (k: number): number => ((picks[n++ % picks.length] as number) + n) % k;
  const ws = (): string => WS[pick(WS.length)] as string;
  const str = (s: string): string => {
    switch (pick(8)) {
      case 0:
        return quoteRaw(s);
      case 1:
        return quoteEscaping(s, () => true, pick(2) === 0);
      case 2:
        return quoteEscaping(s, isHigh, pick(2) === 0);
      case 3:
        return quoteEscaping(s, isLow, pick(2) === 0);
      case 4:
        return JSON.stringify(s).replaceAll('/', '\\/');
      default:
        return JSON.stringify(s);
    }
  };
  const num = (x: number): string => {
    if (Object.is(x, -0)) return ['-0', '-0.0', '-0e0', '0'][pick(4)] as string;
    const plain = JSON.stringify(x);
    switch (pick(5)) {
      case 0:
        return x.toExponential();
      case 1:
        return Number.isInteger(x) && !plain.includes('e') ? `${plain}.0` : plain;
      case 2:
        return plain.includes('e') ? plain.toUpperCase() : `${plain}e0`;
      default:
        return plain;
    }
  };
  const go = (v: JsonValue): string => {
    if (v === null) return 'null';
    if (typeof v === 'boolean') return v ? 'true' : 'false';
    if (typeof v === 'number') return num(v);
    if (typeof v === 'string') return str(v);
    if (Array.isArray(v)) return `[${ws()}${v.map((x) => `${ws()}${go(x)}${ws()}`).join(',')}${ws()}]`;
    const members = Object.entries(v).map(([k, x]) => `${ws()}${str(k)}${ws()}:${ws()}${go(x)}${ws()}`);
    if (hostile && members.length > 0) {
      const keys = Object.keys(v);
      switch (pick(6)) {
        case 0: {
          const k = keys[pick(keys.length)] as string;
          members.splice(
            pick(members.length + 1),
            0,
            `${str(k)}:${pick(2) === 0 ? go(v[k] as JsonValue) : '0'}`,
          );
          break;
        }
        case 1: {
          const forbidden = [
            '"__proto__"',
            '"constructor"',
            '"prototype"',
            '"__pro\\u0074o__"',
            '"prototyp\\u0065"',
          ];
          members.splice(pick(members.length + 1), 0, `${forbidden[pick(forbidden.length)] as string}:{}`);
          break;
        }
        default:
          break;
      }
    }
    return `{${ws()}${members.join(',')}${ws()}}`;
  };
  return `${ws()}${go(value)}${ws()}`;
}

const FRAGMENTS = [
  '"',
  '\\',
  ':',
  ',',
  '{',
  '}',
  '[',
  ']',
  '"a":1,',
  '"a":',
  '"__proto__":1,',
  '"constructor":',
  '\\u',
  '\\ud800',
  '\\udc00',
  '\\ud83d',
  '\ud800',
  '\udc00',
  '\ude00',
  '\\"',
  '\\\\"',
  '\\\\',
  '-',
  '0',
  '9007199254740993',
  '1e400',
  '-0',
  'e',
  '.',
  ' ',
  '\u00a0',
  '\ufeff',
  '\u0000',
  '\n',
  'true',
  'nul',
] as const;

type Edit =
  | { kind: 'truncate'; at: number }
  | { kind: 'delete'; at: number }
  | { kind: 'replace'; at: number; with: string }
  | { kind: 'insert'; at: number; with: string };

const editArb: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('replace' as const),
    at: fc.nat(),
    with: fc.oneof(fc.constantFrom(...FRAGMENTS), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
  }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), with: fc.constantFrom(...FRAGMENTS) }),
);

function applyEdit(text: string, e: Edit): string {
  const at = e.at % (text.length + 1);
  switch (e.kind) {
    case 'truncate':
      return text.slice(0, at);
    case 'delete':
      return text.slice(0, at) + text.slice(at + 1);
    case 'replace':
      return text.slice(0, at) + e.with + text.slice(at + 1);
    case 'insert':
      return text.slice(0, at) + e.with + text.slice(at);
  }
}

/** Short strings, often repeated, so objects collide on keys and carry the awkward characters. */
const hostileString = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom('a', 'b', 'a', '1', '01', '10', '9', '', ':', '"', '\\', '\\"', 'a\\'),
  },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', 'toJSON', '__proto') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('😀', '\ud83d\ude00x', 'é', '\uffff', '\u2028', '\ud800', '\udc00'),
  },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
);

/** Numbers whose spelling or value each acceptance check is about. */
const hostileNumber = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    1,
    -1,
    0.5,
    1e300,
    -1e-300,
    5e-324,
    Number.MAX_VALUE,
    9007199254740991,
    -9007199254740991,
    9007199254740992,
    9007199254740994,
    -9007199254740994,
    2 ** 64,
    1e21,
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

const hostileJson: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 6 },
    fc.constant(null),
    fc.boolean(),
    hostileNumber,
    hostileString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc
      .array(fc.tuple(hostileString, tie('value')), { maxLength: 5 })
      .map((entries) => Object.fromEntries(entries) as JsonValue),
  ),
})).value;

// fast-check's JsonValue allows optional members; the values it generates are plain JSON.
const jsonArb = fc.oneof(
  fc.jsonValue({ maxDepth: 5 }),
  fc.jsonValue({ maxDepth: 4, stringUnit: 'grapheme' }),
  fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }),
  hostileJson,
) as fc.Arbitrary<JsonValue>;

const picksArb = fc.array(fc.nat({ max: 1 << 16 }), { minLength: 1, maxLength: 64 });

const limitsArb: fc.Arbitrary<JsonLimits> = fc.record({
  maxBytes: fc.oneof(
    { weight: 5, arbitrary: fc.constant(1 << 20) },
    { weight: 1, arbitrary: fc.nat({ max: 200 }) },
  ),
  maxDepth: fc.constantFrom(0, 1, 2, 3, 4, 32),
});

/** A rendered text: ordinary (probably valid) or hostile (duplicates and forbidden keys). */
const textArb = fc
  .tuple(jsonArb, picksArb, fc.boolean())
  .map(([value, picks, hostile]) => render(value, picks, hostile));

describe('decodeJsonText fast path: generated texts agree with the reference', () => {
  it('on JSON values rendered with random whitespace, escapes and number spellings', () => {
    fc.assert(
      fc.property(jsonArb, picksArb, limitsArb, (value, picks, limits) => {
        textAgrees(render(value, picks, false), limits);
      }),
      { ...RUNS, numRuns: 3000 },
    );
  });

  it('on rendered values with duplicate and forbidden keys', () => {
    fc.assert(
      fc.property(jsonArb, picksArb, limitsArb, (value, picks, limits) => {
        textAgrees(render(value, picks, true), limits);
      }),
      { ...RUNS, numRuns: 3000 },
    );
  });

  it('on truncations and single-character corruptions of rendered texts', () => {
    fc.assert(
      fc.property(
        textArb,
        fc.array(editArb, { minLength: 1, maxLength: 3 }),
        limitsArb,
        (text, edits, limits) => {
          textAgrees(edits.reduce(applyEdit, text), limits);
        },
      ),
      { ...RUNS, numRuns: 4000 },
    );
  });

  it('on the canonical text of a value and JSON.stringify with indentation', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5, stringUnit: 'grapheme' }), (value) => {
        agrees(JSON.stringify(value));
        agrees(JSON.stringify(value, null, 2));
        if (typeof value === 'object' && value !== null) agrees(JSON.stringify(value, null, '\t'));
      }),
      { ...RUNS, numRuns: 500 },
    );
  });

  it('on deep nesting around every small maxDepth', () => {
    const nested = fc.letrec<{ value: JsonValue }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'large', maxDepth: 8 },
        fc.constantFrom(null, 0, 'x'),
        fc.array(tie('value'), { minLength: 1, maxLength: 2 }),
        fc.record({ a: tie('value') }, { requiredKeys: [] }) as fc.Arbitrary<JsonValue>,
      ),
    })).value;
    fc.assert(
      fc.property(nested, picksArb, fc.nat({ max: 8 }), (value, picks, maxDepth) => {
        textAgrees(render(value, picks, false), { maxBytes: 1 << 20, maxDepth });
      }),
      { ...RUNS, numRuns: 1500 },
    );
  });
});

describe('decodeJsonBytes fast path: agrees with the reference on the UTF-8 of the same texts', () => {
  it('on rendered, hostile and corrupted texts', () => {
    fc.assert(
      fc.property(textArb, fc.array(editArb, { maxLength: 2 }), limitsArb, (text, edits, limits) => {
        bytesAgree(edits.reduce(applyEdit, text), limits);
      }),
      { ...RUNS, numRuns: 2000 },
    );
  });

  it('on arbitrary bytes: invalid UTF-8 is refused, valid UTF-8 decides like the reference', () => {
    const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 40 }),
          textArb.map((t) => utf8Encode(t)),
          fc.tuple(textArb, fc.nat(), fc.nat({ max: 255 })).map(([t, at, b]) => {
            const bytes = utf8Encode(t);
            if (bytes.length > 0) bytes[at % bytes.length] = b;
            return bytes;
          }),
        ),
        (bytes) => {
          const got = decodeJsonBytes(bytes, DEFAULT_JSON_LIMITS);
          let text: string;
          try {
            text = decoder.decode(bytes);
          } catch {
            expect(got.ok ? 'ok' : got.error.reason).toBe('invalid_utf8');
            return;
          }
          expectSameResult(got, parseReference(text, DEFAULT_JSON_LIMITS.maxDepth), text);
        },
      ),
      { ...RUNS, numRuns: 1500 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Canonicalization

type Outcome = { text: string } | { throws: string; message: string };

function outcome(f: (v: unknown) => string, v: unknown): Outcome {
  try {
    return { text: f(v) };
  } catch (e) {
    const name = e instanceof CanonicalizationError ? 'CanonicalizationError' : `other: ${String(e)}`;
    return { throws: name, message: e instanceof Error ? e.message : '' };
  }
}

/** canonicalize(v) gives the reference's text, or throws exactly what the reference throws. */
function canonicalAgrees(v: unknown): Outcome {
  const want = outcome(canonicalizeReference, v);
  expect(outcome(canonicalize, v)).toStrictEqual(want);
  return want;
}

/** A deep copy with object keys inserted in UTF-16 order (the fast path's shape). */
function sortedCopy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedCopy);
  if (typeof v !== 'object' || v === null) return v;
  const keys = Object.keys(v).sort();
  const out: Record<string, unknown> = Object.getPrototypeOf(v) === null ? Object.create(null) : {};
  for (const k of keys) {
    Object.defineProperty(out, k, {
      value: sortedCopy((v as Record<string, unknown>)[k]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** A deep copy with object keys inserted in an order chosen by `picks`. */
function shuffledCopy(v: unknown, picks: readonly number[]): unknown {
  let n = 0;
  const go = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(go);
    if (typeof x !== 'object' || x === null) return x;
    const keys = Object.keys(x);
    for (let i = keys.length - 1; i > 0; i--) {
      const j = ((picks[n++ % picks.length] as number) + n) % (i + 1);
      [keys[i], keys[j]] = [keys[j] as string, keys[i] as string];
    }
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      Object.defineProperty(out, k, {
        value: go((x as Record<string, unknown>)[k]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  };
  return go(v);
}

/** A deep copy whose objects have a null prototype. */
function nullProtoCopy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(nullProtoCopy);
  if (typeof v !== 'object' || v === null) return v;
  const out = Object.create(null) as Record<string, unknown>;
  for (const k of Object.keys(v)) out[k] = nullProtoCopy((v as Record<string, unknown>)[k]);
  return out;
}

/** Run `f` with a `toJSON` installed on `proto`, removing it whatever happens. */
function withToJson<T>(proto: object, enumerable: boolean, f: () => T): T {
  Object.defineProperty(proto, 'toJSON', {
    value: () => 'hijacked',
    enumerable,
    configurable: true,
    writable: true,
  });
  try {
    return f();
  } finally {
    delete (proto as { toJSON?: unknown }).toJSON;
  }
}

class Point {
  constructor(
    readonly a: number,
    readonly b: number,
  ) {}
}

describe('canonicalize fast path: named edge cases agree with the reference', () => {
  it('sorted and unsorted objects give the same text', () => {
    expect(canonicalAgrees({ a: 1, b: [true, null, 'x'] })).toStrictEqual({
      text: '{"a":1,"b":[true,null,"x"]}',
    });
    expect(canonicalAgrees({ b: [true, null, 'x'], a: 1 })).toStrictEqual({
      text: '{"a":1,"b":[true,null,"x"]}',
    });
    expect(canonicalAgrees({ a: { d: 1, c: 2 }, b: 0 })).toStrictEqual({ text: '{"a":{"c":2,"d":1},"b":0}' });
    expect(canonicalAgrees({ a: 1, A: 2, _: 3, '': 4 })).toStrictEqual({ text: '{"":4,"A":2,"_":3,"a":1}' });
  });

  it('integer-like keys, which V8 enumerates numerically first', () => {
    expect(Object.keys({ '10': 1, '9': 2 })).toStrictEqual(['9', '10']);
    expect(canonicalAgrees({ '10': 1, '9': 2 })).toStrictEqual({ text: '{"10":1,"9":2}' });
    expect(canonicalAgrees({ '2': 1, '10': 2 })).toStrictEqual({ text: '{"10":2,"2":1}' });
    expect(canonicalAgrees({ '1': 'a', '01': 'b', '10': 'c', '9': 'd' })).toStrictEqual({
      text: '{"01":"b","1":"a","10":"c","9":"d"}',
    });
    expect(canonicalAgrees({ b: 1, '2': 2, a: 3 })).toStrictEqual({ text: '{"2":2,"a":3,"b":1}' });
    expect(canonicalAgrees({ '0': 1, '1': 2, '2': 3 })).toStrictEqual({ text: '{"0":1,"1":2,"2":3}' });
    expect(canonicalAgrees({ x: { '100': 0, '20': 0, '3': 0 } })).toStrictEqual({
      text: '{"x":{"100":0,"20":0,"3":0}}',
    });
  });

  it('keys ordered by UTF-16 code units, not code points', () => {
    // By code point U+1F600 sorts after U+FFFF and U+E000; by UTF-16 code unit its high surrogate
    // 0xD83D sorts before both, and RFC 8785 orders by code units.
    const emoji = '\ud83d\ude00';
    const want = { text: `{"${emoji}":2,"\uffff":1}` };
    expect(canonicalAgrees({ '\uffff': 1, [emoji]: 2 })).toStrictEqual(want);
    expect(canonicalAgrees({ [emoji]: 2, '\uffff': 1 })).toStrictEqual(want);
    expect(canonicalAgrees({ '\ue000': 1, [emoji]: 2 })).toStrictEqual({ text: `{"${emoji}":2,"\ue000":1}` });
    expect(canonicalAgrees({ [emoji]: 2, '\ue000': 1 })).toStrictEqual({ text: `{"${emoji}":2,"\ue000":1}` });
  });

  it('lone surrogates in keys and values throw', () => {
    for (const v of [{ '\ud800': 1 }, { a: '\udc00' }, ['\ud83d'], '\ud800x', { a: { '\ude00': 0 } }]) {
      expect(canonicalAgrees(v)).toMatchObject({ throws: 'CanonicalizationError' });
    }
  });

  it('null-prototype objects, sorted and unsorted', () => {
    const sorted = Object.assign(Object.create(null) as object, { a: 1, b: 2 });
    const unsorted = Object.assign(Object.create(null) as object, { b: 2, a: 1 });
    expect(canonicalAgrees(sorted)).toStrictEqual({ text: '{"a":1,"b":2}' });
    expect(canonicalAgrees(unsorted)).toStrictEqual({ text: '{"a":1,"b":2}' });
    expect(canonicalAgrees({ x: [sorted, unsorted] })).toStrictEqual({
      text: '{"x":[{"a":1,"b":2},{"a":1,"b":2}]}',
    });
  });

  it('an own toJSON key holding a string is data; holding a function it throws', () => {
    expect(canonicalAgrees({ a: 1, toJSON: 'x' })).toStrictEqual({ text: '{"a":1,"toJSON":"x"}' });
    expect(canonicalAgrees({ toJSON: 'x', a: 1 })).toStrictEqual({ text: '{"a":1,"toJSON":"x"}' });
    expect(canonicalAgrees({ a: 1, toJSON: () => 'hijacked' })).toMatchObject({
      throws: 'CanonicalizationError',
    });
    expect(canonicalAgrees({ toJSON: () => 'hijacked' })).toMatchObject({ throws: 'CanonicalizationError' });
    expect(canonicalAgrees([{ toJSON: () => 1 }])).toMatchObject({ throws: 'CanonicalizationError' });
  });

  it('holes, undefined, functions, symbols and bigints throw', () => {
    // eslint-disable-next-line no-sparse-arrays
    const holes: unknown[] = [1, , 2];
    const cases: unknown[] = [
      holes,
      new Array(3),
      [undefined],
      { a: undefined },
      { a: 1, b: undefined },
      undefined,
      () => 1,
      { a: () => 1 },
      Symbol('s'),
      { a: Symbol('s') },
      1n,
      { a: 1n },
    ];
    for (const v of cases) expect(canonicalAgrees(v)).toMatchObject({ throws: 'CanonicalizationError' });
  });

  it('-0 and non-finite numbers', () => {
    expect(canonicalAgrees(-0)).toStrictEqual({ text: '0' });
    expect(canonicalAgrees({ a: -0, b: [-0] })).toStrictEqual({ text: '{"a":0,"b":[0]}' });
    for (const v of [NaN, Infinity, -Infinity, { a: NaN }, [Infinity]]) {
      expect(canonicalAgrees(v)).toMatchObject({ throws: 'CanonicalizationError' });
    }
  });

  it('boxed primitives, Map, Set, Date, class instances and typed arrays throw', () => {
    const cases: unknown[] = [
      new Number(1),
      new String('ab'),
      new Boolean(true),
      Object(1n),
      new Map([['a', 1]]),
      new Map(),
      new Set([1]),
      new Date(0),
      { at: new Date(0) },
      new Point(1, 2),
      [new Point(1, 2)],
      new Uint8Array([1, 2]),
      /re/,
      new Error('e'),
      Object.create({ inherited: 1 }),
      Object.create(Object.create(null) as object),
    ];
    for (const v of cases) expect(canonicalAgrees(v)).toMatchObject({ throws: 'CanonicalizationError' });
  });

  it('symbol keys and non-enumerable properties are ignored by both', () => {
    const o: Record<PropertyKey, unknown> = { a: 1 };
    o[Symbol('s')] = 2;
    Object.defineProperty(o, 'hidden', { value: 3, enumerable: false });
    expect(canonicalAgrees(o)).toStrictEqual({ text: '{"a":1}' });
    const arr = [1, 2];
    (arr as unknown as Record<string, unknown>)['extra'] = 3;
    expect(canonicalAgrees(arr)).toStrictEqual({ text: '[1,2]' });
  });

  it('an inherited toJSON on Object.prototype or Array.prototype never changes the text', () => {
    const values: unknown[] = [
      { a: 1 },
      { b: 1, a: 2 },
      { a: [1, { c: 'x' }] },
      [1, 2],
      [],
      {},
      'text',
      1,
      null,
      { a: undefined },
    ];
    const protos = [Object.prototype, Array.prototype] as const;
    for (const proto of protos) {
      for (const enumerable of [false, true]) {
        const before = values.map((v) => outcome(canonicalizeReference, v));
        const [fast, reference] = withToJson(proto, enumerable, () => [
          values.map((v) => outcome(canonicalize, v)),
          values.map((v) => outcome(canonicalizeReference, v)),
        ]);
        expect((proto as { toJSON?: unknown }).toJSON).toBeUndefined();
        expect(fast).toStrictEqual(reference);
        expect(reference).toStrictEqual(before);
      }
    }
  });

  // Found by these tests: `JSON.stringify` calls a `toJSON` that is an own property of an array
  // (enumerable or not), a non-enumerable own property of a plain object, or inherited from a
  // prototype other than Array.prototype; the fast path now refuses any object or array whose
  // `toJSON` is a function, so the reference serializes the value.
  const toJsonHijacks: readonly [string, () => unknown][] = [
    ['an array with an own toJSON', () => Object.assign([1], { toJSON: () => 'x' })],
    [
      'an array with a non-enumerable own toJSON',
      () => Object.defineProperty([1], 'toJSON', { value: () => 'x' }),
    ],
    [
      'a plain object with a non-enumerable own toJSON',
      () => Object.defineProperty({ a: 1 }, 'toJSON', { value: () => 'x' }),
    ],
    [
      'an array whose prototype has a toJSON',
      () => Object.setPrototypeOf([1], { toJSON: () => 'x' }) as unknown,
    ],
    [
      'an Array subclass with a toJSON method',
      () => {
        class Tagged extends Array<number> {
          toJSON(): string {
            return 'x';
          }
        }
        return Tagged.from([1]);
      },
    ],
  ];
  for (const [name, make] of toJsonHijacks) {
    it(`${name} serializes like the reference`, () => {
      canonicalAgrees(make());
      canonicalAgrees({ nested: [make()] });
    });
  }
});

/** Values beyond JSON: everything `canonicalize` might be handed by mistake. */
const anythingArb = fc.anything({
  maxDepth: 3,
  withBoxedValues: true,
  withMap: true,
  withSet: true,
  withDate: true,
  withNullPrototype: true,
  withSparseArray: true,
  withTypedArray: true,
  withBigInt: true,
  withObjectString: false,
  key: fc.oneof(
    fc.string({ maxLength: 4 }),
    fc.constantFrom('10', '9', '2', '01', 'toJSON', '\uffff', '😀', '\ud800'),
  ),
  values: [
    fc.constantFrom(undefined, null, -0, NaN, Infinity, -Infinity, 2 ** 53, 'toJSON', '\ud800', '😀'),
    fc.boolean(),
    fc.double(),
    fc.string({ unit: 'binary', maxLength: 4 }),
    fc.constantFrom(() => 1, Symbol.for('s')),
  ],
});

describe('canonicalize fast path: generated values agree with the reference', () => {
  const canonicalJson = fc.oneof(
    fc.jsonValue({ maxDepth: 5 }),
    fc.jsonValue({ maxDepth: 4, stringUnit: 'grapheme' }),
    fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }),
    hostileJson,
  );

  it('on JSON values as generated, rebuilt with sorted keys and with shuffled keys', () => {
    let fastShaped = 0;
    fc.assert(
      fc.property(canonicalJson, picksArb, (value, picks) => {
        canonicalAgrees(value);
        const sorted = sortedCopy(value);
        const r = canonicalAgrees(sorted);
        if ('text' in r && r.text === JSON.stringify(sorted)) fastShaped++;
        canonicalAgrees(shuffledCopy(value, picks));
        canonicalAgrees(nullProtoCopy(value));
        canonicalAgrees([sorted, { k: sorted }]);
      }),
      { ...RUNS, numRuns: 3000 },
    );
    // The sorted copies really are in the fast path's shape, most of the time.
    expect(fastShaped).toBeGreaterThan(1000);
  });

  it('on arbitrary JavaScript values: holes, undefined, boxed values, Map, Date, null prototypes', () => {
    fc.assert(
      fc.property(anythingArb, (value) => {
        canonicalAgrees(value);
        canonicalAgrees(sortedCopy(value));
      }),
      { ...RUNS, numRuns: 3000 },
    );
  });

  it('with an inherited toJSON installed on Object.prototype', () => {
    const values = fc.sample(fc.tuple(canonicalJson, picksArb), { numRuns: 300, seed: SEED });
    const inputs = values.flatMap(([v, picks]) => [v, sortedCopy(v), shuffledCopy(v, picks)]);
    const before = inputs.map((v) => outcome(canonicalizeReference, v));
    const [fast, reference] = withToJson(Object.prototype, false, () => [
      inputs.map((v) => outcome(canonicalize, v)),
      inputs.map((v) => outcome(canonicalizeReference, v)),
    ]);
    expect(fast).toStrictEqual(reference);
    expect(reference).toStrictEqual(before);
  });
});
