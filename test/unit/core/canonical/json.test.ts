import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  DEFAULT_JSON_LIMITS,
  decodeJsonBytes,
  decodeJsonText,
  hasLoneSurrogate,
  utf8ByteLength,
  utf8Encode,
} from '../../../../src/core/canonical/json.js';
import type {
  JsonDecodeReason,
  JsonLimits,
  JsonObject,
  JsonValue,
} from '../../../../src/core/canonical/json.js';

const BIG: JsonLimits = { maxBytes: 1 << 24, maxDepth: 1000 };

function rejects(text: string, reason: JsonDecodeReason, limits: JsonLimits = DEFAULT_JSON_LIMITS) {
  const result = decodeJsonText(text, limits);
  expect(result.ok, `expected ${JSON.stringify(text)} to be rejected`).toBe(false);
  if (result.ok) throw new Error('unreachable');
  expect(result.error.reason).toBe(reason);
  return result.error;
}

function accepts(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): JsonValue {
  const result = decodeJsonText(text, limits);
  if (!result.ok) {
    throw new Error(
      `expected ${JSON.stringify(text)} to decode, got ${result.error.reason}: ${result.error.message}`,
    );
  }
  return result.value;
}

function rejectsBytes(bytes: number[] | Uint8Array, reason: JsonDecodeReason, limits = DEFAULT_JSON_LIMITS) {
  const result = decodeJsonBytes(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes), limits);
  expect(result.ok).toBe(false);
  if (!result.ok) expect(result.error.reason).toBe(reason);
}

const nestedArrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
const nestedObjects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

describe('decodeJsonText: ordinary input', () => {
  it('decodes every JSON type', () => {
    expect(accepts('null')).toBe(null);
    expect(accepts('true')).toBe(true);
    expect(accepts('false')).toBe(false);
    expect(accepts('0')).toBe(0);
    expect(accepts('-12.5e-1')).toBe(-1.25);
    expect(accepts('"x"')).toBe('x');
    expect(accepts('[]')).toEqual([]);
    expect(accepts('{}')).toEqual({});
    expect(accepts('{"a":[1,{"b":null}],"c":"d"}')).toEqual({ a: [1, { b: null }], c: 'd' });
  });

  it('allows the four JSON whitespace characters between tokens', () => {
    expect(accepts(' \t\r\n{ "a" :\n[ 1 ,\t2 ] , "b" : { } }\r\n ')).toEqual({ a: [1, 2], b: {} });
  });

  it('decodes every short escape and \\u escapes in either case', () => {
    expect(accepts('"\\"\\\\\\/\\b\\f\\n\\r\\t"')).toBe('"\\/\b\f\n\r\t');
    expect(accepts('"\\u0041\\u00e9\\u00E9\\u20AC\\u0000"')).toBe('A\u00e9\u00e9\u20ac\u0000');
  });

  it('keeps keys that merely resemble Object.prototype members as own data', () => {
    const value = accepts('{"toString":1,"hasOwnProperty":2,"__proto":3,"Constructor":4,"prototypes":5}');
    expect(Object.keys(value as JsonObject)).toEqual([
      'toString',
      'hasOwnProperty',
      '__proto',
      'Constructor',
      'prototypes',
    ]);
    expect((value as JsonObject)['toString']).toBe(1);
  });

  it('accepts forbidden names as string values', () => {
    expect(accepts('{"a":"__proto__","b":["constructor","prototype"]}')).toEqual({
      a: '__proto__',
      b: ['constructor', 'prototype'],
    });
  });

  it('accepts characters JSON allows raw: DEL, U+2028, U+2029, non-ASCII', () => {
    expect(accepts('"\u007f\u2028\u2029\u00f6\u20ac\ud83d\ude00"')).toBe(
      '\u007f\u2028\u2029\u00f6\u20ac\ud83d\ude00',
    );
  });
});

describe('decodeJsonText: byte bound', () => {
  const limits: JsonLimits = { maxBytes: 16, maxDepth: 32 };

  it('accepts a text of exactly the limit and rejects one byte more', () => {
    expect(accepts(`"${'a'.repeat(14)}"`, limits)).toBe('a'.repeat(14));
    rejects(`"${'a'.repeat(15)}"`, 'too_large', limits);
  });

  it('counts UTF-8 bytes, not UTF-16 code units', () => {
    // é is one code unit but two bytes: 7 of them plus two quotes is 16 bytes in 9 code units.
    expect(accepts(`"${'é'.repeat(7)}"`, limits)).toBe('é'.repeat(7));
    // 8 of them is 18 bytes in only 10 code units.
    rejects(`"${'é'.repeat(8)}"`, 'too_large', limits);
    // € is three bytes: 16 bytes exactly, then 17.
    expect(accepts(`"${'€'.repeat(4)}aa"`, limits)).toBe('€€€€aa');
    rejects(`"${'€'.repeat(4)}aaa"`, 'too_large', limits);
    // An astral character is two code units and four bytes.
    expect(accepts(`"${'😀'.repeat(3)}aa"`, limits)).toBe('😀😀😀aa');
    rejects(`"${'😀'.repeat(3)}aaa"`, 'too_large', limits);
  });

  it('checks the bound before parsing', () => {
    // Malformed and oversized: the size is what is reported.
    rejects('['.repeat(17), 'too_large', limits);
    rejects(`"${'\ud800'.repeat(6)}"`, 'too_large', limits);
  });

  it('reports too_large at offset 0', () => {
    expect(rejects(' '.repeat(17), 'too_large', limits).offset).toBe(0);
  });

  it('applies the default bound of 256 KiB', () => {
    const atLimit = `"${'a'.repeat(DEFAULT_JSON_LIMITS.maxBytes - 2)}"`;
    expect(utf8ByteLength(atLimit)).toBe(262144);
    expect(accepts(atLimit)).toHaveLength(262142);
    rejects(`${atLimit} `, 'too_large');
  });
});

describe('decodeJsonBytes: byte bound and UTF-8', () => {
  const limits: JsonLimits = { maxBytes: 16, maxDepth: 32 };

  it('accepts exactly the limit and rejects one byte more', () => {
    const atLimit = utf8Encode(`"${'é'.repeat(7)}"`);
    expect(atLimit.byteLength).toBe(16);
    expect(decodeJsonBytes(atLimit, limits)).toEqual({ ok: true, value: 'é'.repeat(7) });
    rejectsBytes(utf8Encode(`"${'é'.repeat(7)}a"`), 'too_large', limits);
  });

  it('checks the bound before decoding UTF-8', () => {
    rejectsBytes(new Uint8Array(17).fill(0xff), 'too_large', limits);
  });

  it.each([
    ['a lone continuation byte', [0x22, 0x80, 0x22]],
    ['a truncated two-byte sequence', [0x22, 0xc3, 0x22]],
    ['a truncated sequence at the end', [0x22, 0x61, 0x22, 0xe2, 0x82]],
    ['an overlong encoding of "/"', [0x22, 0xc0, 0xaf, 0x22]],
    ['an overlong three-byte encoding', [0x22, 0xe0, 0x80, 0xaf, 0x22]],
    ['a UTF-8 encoded surrogate (CESU-8)', [0x22, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80, 0x22]],
    ['a code point above U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]],
    ['the byte 0xff', [0x22, 0xff, 0x22]],
    ['an invalid byte outside a string', [0x5b, 0xfe, 0x5d]],
  ])('rejects %s as invalid_utf8', (_label, bytes) => {
    rejectsBytes(bytes, 'invalid_utf8');
  });

  it('decodes valid multibyte UTF-8', () => {
    const bytes = [0x22, 0xc3, 0xb6, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0x22];
    expect(decodeJsonBytes(new Uint8Array(bytes))).toEqual({ ok: true, value: 'ö€😀' });
  });

  it('does not strip a byte order mark', () => {
    rejectsBytes([0xef, 0xbb, 0xbf, 0x31], 'syntax');
  });

  it('reports the same parse errors as decodeJsonText', () => {
    rejectsBytes(utf8Encode('{"a":1,"a":2}'), 'duplicate_key');
    rejectsBytes(utf8Encode('[1e400]'), 'non_finite_number');
    rejectsBytes(utf8Encode('"\\udc00"'), 'lone_surrogate');
    rejectsBytes(utf8Encode('[[1]]'), 'too_deep', { maxBytes: 100, maxDepth: 1 });
  });
});

describe('decodeJsonText: depth bound', () => {
  const limits: JsonLimits = { maxBytes: 1 << 20, maxDepth: 5 };

  it('accepts nesting exactly at the bound and rejects one more level', () => {
    expect(accepts(nestedArrays(5), limits)).toEqual([[[[[]]]]]);
    rejects(nestedArrays(6), 'too_deep', limits);
    expect(accepts(nestedObjects(5), limits)).toEqual({ a: { a: { a: { a: { a: 1 } } } } });
    rejects(nestedObjects(6), 'too_deep', limits);
    expect(accepts('[{"a":[{"b":[]}]}]', limits)).toEqual([{ a: [{ b: [] }] }]);
    rejects('[{"a":[{"b":[[]]}]}]', 'too_deep', limits);
  });

  it('counts depth, not the number of containers', () => {
    const wide = `[${Array.from({ length: 50 }, () => nestedArrays(4)).join(',')}]`;
    expect(accepts(wide, limits)).toHaveLength(50);
    expect(
      accepts(`{${Array.from({ length: 20 }, (_, i) => `"k${i}":${nestedObjects(4)}`).join(',')}}`, limits),
    ).toBeTruthy();
  });

  it('points at the container that crossed the bound', () => {
    expect(rejects(nestedArrays(6), 'too_deep', limits).offset).toBe(5);
    expect(rejects(`[1, ${nestedArrays(6)}]`, 'too_deep', limits).offset).toBe(8);
  });

  it('treats scalars as depth zero', () => {
    const flat: JsonLimits = { maxBytes: 100, maxDepth: 0 };
    expect(accepts('"a"', flat)).toBe('a');
    rejects('[]', 'too_deep', flat);
    rejects('{}', 'too_deep', flat);
  });

  it('applies the default bound of 32', () => {
    expect(accepts(nestedArrays(32))).toBeTruthy();
    rejects(nestedArrays(33), 'too_deep');
  });

  it('fails closed on pathological nesting instead of overflowing the stack', () => {
    rejects(nestedArrays(100_000), 'too_deep');
    rejects('{"a":'.repeat(40_000), 'too_deep');
  });
});

describe('decodeJsonText: duplicate keys', () => {
  it('rejects a duplicate at the top level and points at the second occurrence', () => {
    expect(rejects('{"a":1,"a":2}', 'duplicate_key').offset).toBe(7);
  });

  it('rejects a duplicate in a nested object', () => {
    rejects('{"x":{"a":1,"b":2,"a":3}}', 'duplicate_key');
    rejects('[1,{"ok":true},{"a":1,"a":1}]', 'duplicate_key');
    rejects('{"x":[{"y":{"z":0,"z":0}}]}', 'duplicate_key');
  });

  it('compares keys after unescaping', () => {
    rejects('{"a":1,"\\u0061":2}', 'duplicate_key');
    rejects('{"\\u0061":1,"a":2}', 'duplicate_key');
    rejects('{"\\n":1,"\\u000a":2}', 'duplicate_key');
    rejects('{"\\/":1,"/":2}', 'duplicate_key');
    rejects('{"😀":1,"\\ud83d\\ude00":2}', 'duplicate_key');
    rejects('{"":1,"":2}', 'duplicate_key');
  });

  it('rejects duplicates even when the values are equal', () => {
    rejects('{"a":1,"a":1}', 'duplicate_key');
  });

  it('rejects a duplicate of a key that shadows an Object.prototype member', () => {
    rejects('{"toString":1,"toString":2}', 'duplicate_key');
  });

  it('allows the same key in sibling and nested objects', () => {
    expect(accepts('{"a":{"a":1},"b":{"a":2},"c":[{"a":3},{"a":4}]}')).toEqual({
      a: { a: 1 },
      b: { a: 2 },
      c: [{ a: 3 }, { a: 4 }],
    });
  });

  it('distinguishes keys that differ only in case or normalization', () => {
    expect(accepts('{"a":1,"A":2}')).toEqual({ a: 1, A: 2 });
    // U+00E9 and e + U+0301 are different strings; JCS does no normalization either.
    expect(Object.keys(accepts('{"\\u00e9":1,"e\\u0301":2}') as JsonObject)).toHaveLength(2);
  });
});

describe('decodeJsonText: forbidden keys', () => {
  it.each(['__proto__', 'constructor', 'prototype'])('rejects "%s" as a key', (key) => {
    expect(rejects(`{"${key}":1}`, 'forbidden_key').offset).toBe(1);
    rejects(`{"a":{"b":[{"${key}":{}}]}}`, 'forbidden_key');
  });

  it('rejects forbidden keys spelled with escapes', () => {
    rejects('{"\\u005f_proto__":{"polluted":true}}', 'forbidden_key');
    rejects('{"__proto\\u005f_":1}', 'forbidden_key');
    rejects('{"\\u005F\\u005F\\u0070\\u0072\\u006F\\u0074\\u006F\\u005F\\u005F":1}', 'forbidden_key');
    rejects('{"\\u0063onstructor":{"prototype":{}}}', 'forbidden_key');
    rejects('{"prot\\u006ftype":1}', 'forbidden_key');
  });

  it('reports a forbidden key before a later duplicate', () => {
    rejects('{"a":1,"__proto__":1,"a":2}', 'forbidden_key');
  });

  it('leaves Object.prototype untouched', () => {
    rejects('{"__proto__":{"polluted":true}}', 'forbidden_key');
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it.each(['__PROTO__', '_proto_', '__proto_', 'constructors', 'Prototype', 'proto'])(
    'allows the near miss "%s"',
    (key) => {
      expect(accepts(`{"${key}":1}`)).toEqual({ [key]: 1 });
    },
  );
});

describe('decodeJsonText: surrogates', () => {
  it.each([
    ['a lone high surrogate escape', '"\\ud800"'],
    ['a lone low surrogate escape', '"\\udc00"'],
    ['a high surrogate escape followed by a character', '"\\ud83dx"'],
    ['a high surrogate escape followed by a BMP escape', '"\\ud83d\\u0041"'],
    ['a high surrogate escape followed by a short escape', '"\\ud83d\\n"'],
    ['two high surrogate escapes', '"\\ud83d\\ud83d"'],
    ['a reversed pair of escapes', '"\\ude00\\ud83d"'],
    ['a high surrogate escape at the end of the string', '"abc\\udbff"'],
    ['a lone surrogate escape in a key', '{"\\udfff":1}'],
  ])('rejects %s', (_label, text) => {
    rejects(text, 'lone_surrogate');
  });

  it.each([
    ['a raw lone high surrogate', '"\ud800"'],
    ['a raw lone low surrogate', '"\udc00"'],
    ['a raw reversed pair', '"\ude00\ud83d"'],
    ['a raw high surrogate before the closing quote of a key', '{"a\ud83d":1}'],
    // The text itself is not well-formed UTF-16, even though the decoded value would be.
    ['an escaped high surrogate followed by a raw low surrogate', '"\\ud83d\ude00"'],
    ['a raw high surrogate followed by an escaped low surrogate', '"\ud83d\\ude00"'],
  ])('rejects %s in JS-string input', (_label, text) => {
    rejects(text, 'lone_surrogate');
  });

  it('points at the raw lone surrogate', () => {
    expect(rejects('"ab\udc00"', 'lone_surrogate').offset).toBe(3);
  });

  it('accepts valid surrogate pairs, escaped in either case or raw', () => {
    expect(accepts('"\\ud83d\\ude00"')).toBe('😀');
    expect(accepts('"\\uD83D\\uDE00"')).toBe('😀');
    expect(accepts('"\ud83d\ude00"')).toBe('😀');
    expect(accepts('{"\\udbff\\udfff":"\\ud800\\udc00"}')).toEqual({ '\u{10ffff}': '\u{10000}' });
  });

  it('does not treat surrogate-like escapes outside the range as surrogates', () => {
    expect(accepts('"\\ud7ff\\ue000"')).toBe('\ud7ff\ue000');
  });
});

describe('decodeJsonText: numbers', () => {
  it.each(['1e400', '-1e400', '1E+400', '1.5e309', `1${'0'.repeat(400)}.0`])(
    'rejects %s as non_finite_number',
    (text) => {
      rejects(text, 'non_finite_number');
      rejects(`{"a":[${text}]}`, 'non_finite_number');
    },
  );

  it('accepts underflow to zero', () => {
    expect(accepts('1e-400')).toBe(0);
    expect(Object.is(accepts('-1e-400'), -0)).toBe(true);
  });

  it('accepts integers at the edge of the safe range and rejects the next one', () => {
    expect(accepts('9007199254740991')).toBe(9007199254740991);
    expect(accepts('-9007199254740991')).toBe(-9007199254740991);
    rejects('9007199254740992', 'unsafe_integer');
    rejects('-9007199254740992', 'unsafe_integer');
    rejects('9007199254740993', 'unsafe_integer');
    rejects('123456789012345678901234567890', 'unsafe_integer');
  });

  it('points at the unsafe integer', () => {
    expect(rejects('{"id": 9007199254740993}', 'unsafe_integer').offset).toBe(7);
  });

  it('accepts fractions and exponents: only integer literals are range checked', () => {
    expect(accepts('1.5')).toBe(1.5);
    expect(accepts('-0.5')).toBe(-0.5);
    expect(accepts('1e20')).toBe(1e20);
    expect(accepts('9007199254740992.0')).toBe(9007199254740992);
    expect(accepts('1.7976931348623157e308')).toBe(Number.MAX_VALUE);
    expect(accepts('5e-324')).toBe(Number.MIN_VALUE);
    expect(accepts('1e01')).toBe(10);
    expect(accepts('0E-0')).toBe(0);
  });

  it('keeps the sign of negative zero', () => {
    expect(Object.is(accepts('-0'), -0)).toBe(true);
    expect(Object.is(accepts('0'), 0)).toBe(true);
  });

  it.each([
    ['a leading zero', '01'],
    ['a negative leading zero', '-01'],
    ['a double zero', '00'],
    ['a trailing point', '1.'],
    ['a leading point', '.5'],
    ['a plus sign', '+1'],
    ['a bare minus', '-'],
    ['a minus before a point', '-.5'],
    ['an empty exponent', '1e'],
    ['an exponent with only a sign', '1e+'],
    ['a hex literal', '0x10'],
    ['Infinity', 'Infinity'],
    ['-Infinity', '-Infinity'],
    ['NaN', 'NaN'],
    ['a digit separator', '1_000'],
    ['a leading zero in an array', '[01]'],
  ])('rejects %s as syntax', (_label, text) => {
    rejects(text, 'syntax');
  });
});

describe('decodeJsonText: syntax', () => {
  it.each([
    ['an empty text', ''],
    ['whitespace only', ' \n\t '],
    ['two values', '1 2'],
    ['two objects', '{} {}'],
    ['an extra closing bracket', '[]]'],
    ['an extra closing brace', '{}}'],
    ['a literal with trailing letters', 'nullx'],
    ['two strings', '"a""b"'],
    ['a trailing comma after a value', '1,'],
  ])('rejects trailing data or no data: %s', (_label, text) => {
    rejects(text, 'syntax');
  });

  it('accepts trailing whitespace', () => {
    expect(accepts('  [1]  \r\n')).toEqual([1]);
  });

  it('points at the trailing data', () => {
    expect(rejects('[1] x', 'syntax').offset).toBe(4);
  });

  it.each([
    ['a trailing comma in an array', '[1,]'],
    ['a trailing comma in an object', '{"a":1,}'],
    ['a leading comma', '[,1]'],
    ['a missing comma', '[1 2]'],
    ['a missing colon', '{"a" 1}'],
    ['a missing value', '{"a":}'],
    ['a single-quoted string', "'a'"],
    ['an unquoted key', '{a:1}'],
    ['a numeric key', '{1:1}'],
    ['a comment', '[1 /* c */]'],
    ['a line comment', '1 // c'],
    ['an unterminated string', '"abc'],
    ['an unterminated escape', '"abc\\'],
    ['an unterminated array', '[1,2'],
    ['an unterminated object', '{"a":1'],
    ['an invalid escape', '"\\x41"'],
    ['an escaped single quote', '"\\\'"'],
    ['a short \\u escape', '"\\u12"'],
    ['a non-hex \\u escape', '"\\u12G4"'],
    ['a \\U escape', '"\\U0041"'],
    ['a capitalised literal', 'True'],
    ['an upper-case literal', 'NULL'],
    ['a truncated literal', 'fals'],
    ['a byte order mark', '\ufeff1'],
    ['a form feed as whitespace', '\f1'],
    ['a vertical tab as whitespace', '\u000b1'],
    ['a no-break space as whitespace', '\u00a01'],
    ['a line separator as whitespace', '[1,\u20282]'],
  ])('rejects %s', (_label, text) => {
    rejects(text, 'syntax');
  });

  it('rejects every raw control character inside a string', () => {
    for (let c = 0; c < 0x20; c++) {
      rejects(`"a${String.fromCharCode(c)}b"`, 'syntax');
      rejects(`{"k${String.fromCharCode(c)}":1}`, 'syntax');
    }
  });

  it('accepts every control character when escaped', () => {
    for (let c = 0; c < 0x20; c++) {
      expect(accepts(`"\\u${c.toString(16).padStart(4, '0')}"`)).toBe(String.fromCharCode(c));
    }
  });

  it('gives every error a lowercase message without a trailing period and an offset inside the text', () => {
    const cases: [string, JsonLimits][] = [
      ['', DEFAULT_JSON_LIMITS],
      ['{"a":1,"a":2}', DEFAULT_JSON_LIMITS],
      ['{"__proto__":1}', DEFAULT_JSON_LIMITS],
      ['"\\ud800"', DEFAULT_JSON_LIMITS],
      ['1e999', DEFAULT_JSON_LIMITS],
      ['9007199254740992', DEFAULT_JSON_LIMITS],
      ['[[]]', { maxBytes: 100, maxDepth: 1 }],
      ['[1,2,3]', { maxBytes: 3, maxDepth: 32 }],
      ['[1,]', DEFAULT_JSON_LIMITS],
    ];
    for (const [text, limits] of cases) {
      const result = decodeJsonText(text, limits);
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.error.message).toMatch(/^[^A-Z].*[^.]$/);
      expect(result.error.offset).toBeGreaterThanOrEqual(0);
      expect(result.error.offset).toBeLessThanOrEqual(text.length);
    }
  });
});

describe('helpers', () => {
  it.each([
    ['', 0],
    ['a', 1],
    ['\u007f', 1],
    ['\u0080', 2],
    ['é', 2],
    ['\u07ff', 2],
    ['\u0800', 3],
    ['€', 3],
    ['\uffff', 3],
    ['😀', 4],
    ['\ud800', 3],
    ['\udc00', 3],
    ['\ud800a', 4],
    ['\udc00\ud800', 6],
  ])('utf8ByteLength(%j) is %i', (text, bytes) => {
    expect(utf8ByteLength(text)).toBe(bytes);
  });

  it.each([
    ['', false],
    ['abc', false],
    ['😀', false],
    ['\ud800', true],
    ['\udc00', true],
    ['a\ud83d', true],
    ['\ude00\ud83d', true],
    ['\ud83d\ude00\ude00', true],
  ])('hasLoneSurrogate(%j) is %s', (text, expected) => {
    expect(hasLoneSurrogate(text)).toBe(expected);
  });
});

// ---- properties -------------------------------------------------------------------------------

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** Any UTF-16 string, lone surrogates included. */
const utf16Arb = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) });

/**
 * Make an fc.jsonValue acceptable to the strict decoder without changing its JSON meaning
 * elsewhere: drop forbidden keys, turn -0 into 0 (JSON.stringify writes it as 0), and replace
 * integers outside the safe range that JSON.stringify would write as integer literals.
 */
function strictable(value: unknown): JsonValue {
  if (typeof value === 'number') {
    if (Object.is(value, -0)) return 0;
    if (Number.isInteger(value) && !Number.isSafeInteger(value) && Math.abs(value) < 1e21) return 0.5;
    return value;
  }
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (Array.isArray(value)) return value.map(strictable);
  const out: JsonObject = {};
  for (const [key, member] of Object.entries(value as Record<string, unknown>)) {
    if (!FORBIDDEN_KEYS.has(key)) out[key] = strictable(member);
  }
  return out;
}

const strictJsonArb = fc.jsonValue({ maxDepth: 6, stringUnit: 'binary' }).map(strictable);

/** A generated JSON text, with the rejections the strict decoder must find in it (by construction). */
interface Doc {
  readonly text: string;
  readonly violations: ReadonlySet<JsonDecodeReason>;
  readonly height: number;
}

const doc = (text: string, violations: Iterable<JsonDecodeReason> = [], height = 0): Doc => ({
  text,
  violations: new Set(violations),
  height,
});

const wsArb = fc.constantFrom('', '', ' ', '\n', '\t', '\r\n  ');

const hex4 = (c: number, upper: boolean) => {
  const h = c.toString(16).padStart(4, '0');
  return upper ? h.toUpperCase() : h;
};

/** One piece of a string token body, written the way the generator chose. */
const stringPieceArb = fc.oneof(
  // A character written raw when JSON allows it, escaped otherwise.
  {
    weight: 6,
    arbitrary: fc
      .string({ unit: 'binary', minLength: 1, maxLength: 3 })
      .map((s) => s.replace(/["\\\u0000-\u001f]/g, (ch) => `\\u${hex4(ch.charCodeAt(0), false)}`)),
  },
  // Any code unit as a \u escape (lone surrogates included).
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 0, max: 0xffff }), fc.boolean())
      .map(([c, upper]) => `\\u${hex4(c, upper)}`),
  },
  { weight: 2, arbitrary: fc.constantFrom('\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t') },
  // Raw and escaped surrogates, paired and not.
  { weight: 1, arbitrary: fc.constantFrom('\ud800', '\udbff', '\udc00', '\udfff', '\ud83d\ude00') },
  { weight: 1, arbitrary: fc.constantFrom('\\ud83d\\ude00', '\\uD83D\\uDE00', '\\ud800', '\\udfff') },
);

const stringTokenArb = fc.array(stringPieceArb, { maxLength: 5 }).map((pieces) => `"${pieces.join('')}"`);

/** A key token: often a forbidden or colliding name, sometimes spelled with escapes. */
const keyTokenArb = fc.oneof(
  { weight: 3, arbitrary: stringTokenArb },
  { weight: 4, arbitrary: fc.constantFrom('"a"', '"\\u0061"', '"b"', '"toString"', '"1"', '""') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('"__proto__"', '"\\u005f_proto__"', '"constructor"', '"prototype"'),
  },
);

function stringDoc(token: string): Doc {
  const decoded = JSON.parse(token) as string;
  // A lone surrogate either in the text itself (raw) or in what the escapes decode to.
  return doc(token, hasLoneSurrogate(token) || hasLoneSurrogate(decoded) ? ['lone_surrogate'] : []);
}

function numberDoc(token: string): Doc {
  const n = Number(token);
  const violations: JsonDecodeReason[] = [];
  if (!Number.isFinite(n)) violations.push('non_finite_number');
  if (/^-?(0|[1-9][0-9]*)$/.test(token) && !Number.isSafeInteger(n)) violations.push('unsafe_integer');
  return doc(token, violations);
}

const numberTokenArb = fc.oneof(
  fc.integer().map(String),
  fc.bigInt({ min: -(1n << 70n), max: 1n << 70n }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc
    .tuple(
      fc.constantFrom('', '-'),
      fc.oneof(fc.constant('0'), fc.bigInt({ min: 1n, max: 10n ** 30n }).map(String)),
      fc.option(
        fc.nat().map((n) => `.${n}`),
        { nil: '' },
      ),
      fc.option(
        fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.integer({ min: 0, max: 500 })),
        { nil: undefined },
      ),
    )
    .map(([sign, int, frac, exp]) => `${sign}${int}${frac}${exp === undefined ? '' : exp.join('')}`),
  fc.constantFrom(
    '1e400',
    '-1e400',
    '1e-400',
    '-0',
    '9007199254740991',
    '9007199254740992',
    '-9007199254740992',
  ),
);

const { value: docArb } = fc.letrec<{ value: Doc; array: Doc; object: Doc }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 6 },
    fc.constantFrom('null', 'true', 'false').map((t) => doc(t)),
    numberTokenArb.map(numberDoc),
    stringTokenArb.map(stringDoc),
    tie('array'),
    tie('object'),
  ),
  array: fc.array(fc.tuple(wsArb, tie('value'), wsArb), { maxLength: 4 }).map((items) => {
    const violations = items.flatMap(([, item]) => [...item.violations]);
    const height = 1 + Math.max(0, ...items.map(([, item]) => item.height));
    return doc(`[${items.map(([a, item, b]) => a + item.text + b).join(',')}]`, violations, height);
  }),
  object: fc.array(fc.tuple(wsArb, keyTokenArb, wsArb, tie('value')), { maxLength: 4 }).map((members) => {
    const violations: JsonDecodeReason[] = [];
    const seen = new Set<string>();
    for (const [, keyToken, , member] of members) {
      const key = JSON.parse(keyToken) as string;
      violations.push(...stringDoc(keyToken).violations, ...member.violations);
      if (FORBIDDEN_KEYS.has(key)) violations.push('forbidden_key');
      if (seen.has(key)) violations.push('duplicate_key');
      seen.add(key);
    }
    const height = 1 + Math.max(0, ...members.map(([, , , member]) => member.height));
    const body = members.map(([a, keyToken, b, member]) => `${a}${keyToken}${b}:${member.text}`).join(',');
    return doc(`{${body}}`, violations, height);
  }),
}));

const DIFF_LIMITS: JsonLimits = { maxBytes: 1 << 20, maxDepth: 2 };

describe('decodeJsonText: properties', () => {
  it('decodes JSON.stringify of any value without forbidden keys back to that value', () => {
    fc.assert(
      fc.property(strictJsonArb, fc.constantFrom(undefined, 0, 1, 2, '\t'), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        expect(decodeJsonText(text)).toEqual({ ok: true, value });
        expect(decodeJsonBytes(utf8Encode(text))).toEqual({ ok: true, value });
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with JSON.parse, rejecting exactly the inputs that break a strict rule', () => {
    fc.assert(
      fc.property(fc.tuple(wsArb, docArb, wsArb), ([before, generated, after]) => {
        const text = before + generated.text + after;
        const expected = JSON.parse(text) as unknown; // the generator only writes RFC 8259 grammar
        const violations = new Set(generated.violations);
        if (generated.height > DIFF_LIMITS.maxDepth) violations.add('too_deep');
        const result = decodeJsonText(text, DIFF_LIMITS);
        if (violations.size === 0) {
          expect(result).toEqual({ ok: true, value: expected });
        } else {
          expect(result.ok).toBe(false);
          if (!result.ok) expect([...violations]).toContain(result.error.reason);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never accepts what JSON.parse rejects, and agrees with it on what it accepts', () => {
    const editArb = fc.tuple(
      fc.nat(),
      fc.constantFrom('insert', 'delete', 'replace'),
      fc.constantFrom(
        '{',
        '}',
        '[',
        ']',
        ',',
        ':',
        '"',
        '\\',
        '-',
        '0',
        '1',
        'e',
        '.',
        ' ',
        'n',
        'u',
        'x',
        '\u0000',
      ),
    );
    fc.assert(
      fc.property(strictJsonArb, fc.array(editArb, { minLength: 1, maxLength: 3 }), (value, edits) => {
        let text = JSON.stringify(value);
        for (const [at, op, ch] of edits) {
          const i = text.length === 0 ? 0 : at % (text.length + 1);
          if (op === 'insert') text = text.slice(0, i) + ch + text.slice(i);
          else if (op === 'delete') text = text.slice(0, i) + text.slice(i + 1);
          else text = text.slice(0, i) + ch + text.slice(i + 1);
        }
        let parsed: { ok: true; value: unknown } | { ok: false };
        try {
          parsed = { ok: true, value: JSON.parse(text) as unknown };
        } catch {
          parsed = { ok: false };
        }
        const result = decodeJsonText(text, BIG);
        if (!parsed.ok) expect(result.ok).toBe(false);
        if (result.ok) expect(result.value).toEqual(parsed.ok ? parsed.value : undefined);
      }),
      { numRuns: 1000 },
    );
  });

  it('never throws, whatever the input', () => {
    fc.assert(
      fc.property(fc.oneof(utf16Arb, fc.json()), (text) => {
        const result = decodeJsonText(text);
        expect(typeof result.ok).toBe('boolean');
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        expect(typeof decodeJsonBytes(bytes).ok).toBe('boolean');
      }),
      { numRuns: 500 },
    );
  });

  it('decodes bytes and text identically for well-formed text', () => {
    fc.assert(
      fc.property(fc.tuple(wsArb, docArb, wsArb), ([before, generated, after]) => {
        const text = before + generated.text + after;
        fc.pre(!hasLoneSurrogate(text));
        expect(decodeJsonBytes(utf8Encode(text), DIFF_LIMITS)).toEqual(decodeJsonText(text, DIFF_LIMITS));
      }),
      { numRuns: 500 },
    );
  });

  it('utf8ByteLength equals the length of the TextEncoder encoding', () => {
    fc.assert(
      fc.property(utf16Arb, (text) => {
        expect(utf8ByteLength(text)).toBe(utf8Encode(text).byteLength);
      }),
      { numRuns: 500 },
    );
  });

  it('hasLoneSurrogate is the negation of String.prototype.isWellFormed', () => {
    fc.assert(
      fc.property(utf16Arb, (text) => {
        expect(hasLoneSurrogate(text)).toBe(!text.isWellFormed());
      }),
      { numRuns: 500 },
    );
  });

  it('the byte bound holds for any text: accepted iff within the limit', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.integer({ min: 2, max: 120 }),
        (body, maxBytes) => {
          const text = JSON.stringify(body);
          const result = decodeJsonText(text, { maxBytes, maxDepth: 1 });
          const size = utf8Encode(text).byteLength;
          if (size <= maxBytes) expect(result).toEqual({ ok: true, value: body });
          else expect(result).toMatchObject({ ok: false, error: { reason: 'too_large' } });
        },
      ),
      { numRuns: 500 },
    );
  });
});
