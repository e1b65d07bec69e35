import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  CanonicalizationError,
  canonicalBytes,
  canonicalize,
  digestOf,
  sha256Hex,
  sha256HexOfText,
} from '../../../../src/core/canonical/canonical.js';
import { decodeJsonText, utf8Encode } from '../../../../src/core/canonical/json.js';
import type { JsonObject, JsonValue } from '../../../../src/core/canonical/json.js';
import appendixB from '../../../data/rfc8785/appendix-b-numbers.json';
import sortingExpectedOrder from '../../../data/rfc8785/section-3.2.3-sorting-expected-order.json';
import sortingInputText from '../../../data/rfc8785/section-3.2.3-sorting-input.json?raw';
import mainInputText from '../../../data/rfc8785/section-3.2.2-input.txt?raw';
import mainOutputText from '../../../data/rfc8785/section-3.2.3-output.txt?raw';
import mainOutputHex from '../../../data/rfc8785/section-3.2.4-utf8.hex.txt?raw';

function float64FromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

function bitsOfFloat64(value: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  return view.getBigUint64(0).toString(16).padStart(16, '0');
}

function hexToBytes(hex: string): Uint8Array {
  const digits = hex.replace(/\s+/g, '');
  const out = new Uint8Array(digits.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(digits.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function decodeOrThrow(text: string): JsonValue {
  const result = decodeJsonText(text);
  if (!result.ok) throw new Error(`test vector did not decode: ${result.error.reason}`);
  return result.value;
}

describe('canonicalize: RFC 8785 Appendix B number serialization', () => {
  const finiteRows = appendixB.rows.flatMap((row) => (row.json === null ? [] : [{ ...row, json: row.json }]));
  const forbiddenRows = appendixB.rows.filter((row) => row.json === null);

  it('holds every row of the published table', () => {
    expect(appendixB.rows).toHaveLength(26);
    expect(finiteRows).toHaveLength(24);
    expect(forbiddenRows.map((row) => row.ieee754)).toEqual(['7fffffffffffffff', '7ff0000000000000']);
  });

  it.each(finiteRows)('$ieee754 serializes as $json', ({ ieee754, json }) => {
    const value = float64FromBits(ieee754);
    expect(canonicalize(value)).toBe(json);
    expect(canonicalize([value])).toBe(`[${json}]`);
    expect(canonicalize({ n: value })).toBe(`{"n":${json}}`);
  });

  it.each(finiteRows)('$ieee754: the expected text reads back as the same double', ({ ieee754, json }) => {
    // Guards the data file itself: a typo in either column would break this.
    const expectedBits = ieee754 === '8000000000000000' ? '0000000000000000' : ieee754;
    expect(bitsOfFloat64(Number(json))).toBe(expectedBits);
  });

  it.each(forbiddenRows)('$ieee754 ($comment) is rejected', ({ ieee754 }) => {
    const value = float64FromBits(ieee754);
    expect(Number.isFinite(value)).toBe(false);
    expect(() => canonicalize(value)).toThrow(CanonicalizationError);
    expect(() => canonicalize([value])).toThrow(CanonicalizationError);
    expect(() => canonicalize({ n: value })).toThrow(CanonicalizationError);
  });
});

describe('canonicalize: RFC 8785 §3.2.3 UTF-16 property sorting', () => {
  const sample = decodeOrThrow(sortingInputText);

  it('orders the sample members exactly as the RFC lists them', () => {
    const canonical = canonicalize(sample);
    const positions = sortingExpectedOrder.map((name) => canonical.indexOf(JSON.stringify(name)));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(Object.keys(sample as JsonObject)).toHaveLength(sortingExpectedOrder.length);
  });

  it('sorts by UTF-16 code units, not by code points', () => {
    // U+1F600 is stored as D83D DE00, so it precedes U+E000..U+FFFF in UTF-16 order, although its
    // code point (and its UTF-8 encoding) sorts after them.
    const canonical = canonicalize(sample);
    expect(canonical.indexOf('\ud83d\ude00')).toBeLessThan(canonical.indexOf('\ufb33'));
    expect(canonicalize({ '\ufb33': 1, '\u{1f600}': 2, '\uffff': 3, '\ue000': 4 })).toBe(
      '{"\u{1f600}":2,"\ue000":4,"\ufb33":1,"\uffff":3}',
    );
  });

  it('does not depend on the order the sample was written in', () => {
    const reversed = Object.fromEntries(Object.entries(sample as JsonObject).reverse());
    expect(canonicalize(reversed)).toBe(canonicalize(sample));
  });

  it('orders prefixes first and compares keys in their unescaped form', () => {
    expect(canonicalize({ ab: 4, aa: 3, a: 2, '': 1 })).toBe('{"":1,"a":2,"aa":3,"ab":4}');
    expect(canonicalize({ b: 1, '\n': 2, a: 3 })).toBe('{"\\n":2,"a":3,"b":1}');
    // Integer-like keys sort as strings, not in JS property enumeration order.
    expect(canonicalize({ 2: 'b', 10: 'a', 1: 'c' })).toBe('{"1":"c","10":"a","2":"b"}');
  });
});

describe('canonicalize: RFC 8785 §3.2.2 / §3.2.3 / §3.2.4 sample', () => {
  const value = decodeOrThrow(mainInputText);

  it('produces the published canonical text', () => {
    expect(canonicalize(value)).toBe(mainOutputText);
  });

  it('produces the published UTF-8 bytes', () => {
    expect(toHex(canonicalBytes(value))).toBe(toHex(hexToBytes(mainOutputHex)));
    expect(new TextDecoder().decode(hexToBytes(mainOutputHex))).toBe(mainOutputText);
  });

  it('gives the same result for the JSON.parse reading of the sample', () => {
    expect(canonicalize(JSON.parse(mainInputText))).toBe(mainOutputText);
  });

  it('is a fixed point: canonical text canonicalizes to itself', () => {
    expect(canonicalize(decodeOrThrow(mainOutputText))).toBe(mainOutputText);
  });

  it('digests the published bytes', () => {
    expect(digestOf(value)).toBe(sha256Hex(hexToBytes(mainOutputHex)));
  });
});

describe('canonicalize: primitives (RFC 8785 §3.2.2)', () => {
  it('serializes literals', () => {
    expect(canonicalize(null)).toBe('null');
    expect(canonicalize(true)).toBe('true');
    expect(canonicalize(false)).toBe('false');
  });

  it('drops the sign of zero', () => {
    expect(canonicalize(-0)).toBe('0');
    expect(canonicalize([-0, 0])).toBe('[0,0]');
  });

  it('escapes every ASCII control character as RFC 8785 §3.2.2.2 prescribes', () => {
    const short: Record<number, string> = { 0x08: '\\b', 0x09: '\\t', 0x0a: '\\n', 0x0c: '\\f', 0x0d: '\\r' };
    for (let c = 0; c < 0x20; c++) {
      const expected = short[c] ?? `\\u${c.toString(16).padStart(4, '0')}`;
      expect(canonicalize(String.fromCharCode(c))).toBe(`"${expected}"`);
    }
  });

  it('escapes only the quote and the backslash outside the control range', () => {
    expect(canonicalize('"')).toBe('"\\""');
    expect(canonicalize('\\')).toBe('"\\\\"');
    for (const raw of [
      '/',
      '\u007f',
      '\u0080',
      '\u00f6',
      '\u2028',
      '\u2029',
      '\u20ac',
      '\ufeff',
      '\ud83d\ude00',
    ]) {
      expect(canonicalize(raw)).toBe(`"${raw}"`);
    }
  });

  it('escapes control characters in keys too', () => {
    expect(canonicalize({ '\u0001': 1, '"': 2 })).toBe('{"\\u0001":1,"\\"":2}');
  });

  it('emits no whitespace and keeps array order', () => {
    expect(canonicalize([3, 1, 2, [], {}, [{}], ' '])).toBe('[3,1,2,[],{},[{}]," "]');
  });

  it('sorts nested objects, including objects inside arrays', () => {
    const value = { z: [{ y: 1, x: 2 }], a: { c: { f: 1, e: 2 }, b: null } };
    expect(canonicalize(value)).toBe('{"a":{"b":null,"c":{"e":2,"f":1}},"z":[{"x":2,"y":1}]}');
  });

  it('accepts objects without a prototype', () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare['b'] = 1;
    bare['a'] = 2;
    expect(canonicalize(bare)).toBe('{"a":2,"b":1}');
  });

  it('ignores toJSON, which would let a value choose its own digest', () => {
    expect(canonicalize({ toJSON: 1, a: 2 })).toBe('{"a":2,"toJSON":1}');
  });
});

describe('canonicalize: rejections', () => {
  it.each([
    ['lone high surrogate', '\ud800'],
    ['lone low surrogate', '\udc00'],
    ['high surrogate at the end', 'abc\udbff'],
    ['low surrogate at the start', '\udfffabc'],
    ['surrogates in the wrong order', '\ude00\ud83d'],
    ['two high surrogates', '\ud83d\ud83d'],
  ])('rejects a %s in a string', (_label, text) => {
    expect(() => canonicalize(text)).toThrow(CanonicalizationError);
    expect(() => canonicalize([text])).toThrow(CanonicalizationError);
    expect(() => canonicalize({ key: { nested: [text] } })).toThrow(CanonicalizationError);
    expect(() => canonicalize({ [text]: 1 })).toThrow(CanonicalizationError);
  });

  it.each([
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['-Infinity', -Infinity],
  ])('rejects %s', (_label, value) => {
    expect(() => canonicalize(value)).toThrow(CanonicalizationError);
    expect(() => canonicalize([1, [value]])).toThrow(CanonicalizationError);
    expect(() => canonicalize({ a: { b: value } })).toThrow(CanonicalizationError);
    expect(() => digestOf({ a: value })).toThrow(CanonicalizationError);
  });

  it('rejects undefined wherever it appears', () => {
    expect(() => canonicalize(undefined)).toThrow(CanonicalizationError);
    expect(() => canonicalize([undefined])).toThrow(CanonicalizationError);
    // A sparse array hole reads as undefined.
    expect(() => canonicalize(new Array<unknown>(1))).toThrow(CanonicalizationError);
    // Dropping the member silently would give {a: undefined} the digest of {}.
    expect(() => canonicalize({ a: undefined })).toThrow(CanonicalizationError);
    expect(() => digestOf({ b: 1, a: undefined })).toThrow(CanonicalizationError);
  });

  it.each([
    ['a function', () => 1],
    ['a symbol', Symbol('s')],
    ['a bigint', 1n],
  ])('rejects %s', (_label, value) => {
    expect(() => canonicalize(value)).toThrow(CanonicalizationError);
    expect(() => canonicalize({ a: value })).toThrow(CanonicalizationError);
  });

  class Point {
    constructor(readonly x: number) {}
  }

  it.each([
    ['a Map', new Map([['a', 1]])],
    ['a Set', new Set([1])],
    ['a Date', new Date(0)],
    ['a typed array', new Uint8Array([1, 2])],
    ['a boxed string', new String('ab')],
    ['a class instance', new Point(1)],
  ])('rejects %s instead of reading it as a plain object', (_label, value) => {
    expect(() => canonicalize(value)).toThrow(CanonicalizationError);
    expect(() => canonicalize([value])).toThrow(CanonicalizationError);
  });
});

describe('sha256 known answers (FIPS 180-2)', () => {
  it('hashes "abc"', () => {
    expect(sha256HexOfText('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex(utf8Encode('abc'))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('hashes the empty string', () => {
    expect(sha256HexOfText('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('hashes the two-block message', () => {
    expect(sha256HexOfText('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')).toBe(
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
  });

  it('hashes text as UTF-8', () => {
    expect(sha256HexOfText('\u20ac')).toBe(sha256Hex(new Uint8Array([0xe2, 0x82, 0xac])));
  });

  it('agrees with WebCrypto on arbitrary bytes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), async (bytes) => {
        const expected = toHex(new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)));
        expect(sha256Hex(bytes)).toBe(expected);
      }),
      { numRuns: 50 },
    );
  });

  it('digestOf is sha256 over the canonical bytes', () => {
    const value = { b: [1, 'x'], a: null };
    expect(digestOf(value)).toBe(sha256HexOfText('{"a":null,"b":[1,"x"]}'));
    expect(digestOf(value)).toBe(sha256Hex(canonicalBytes(value)));
  });
});

// ---- properties -------------------------------------------------------------------------------

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

const keyArb = fc
  .oneof(
    fc.string({ unit: 'binary', maxLength: 4 }),
    fc.constantFrom('', 'a', 'aa', 'ab', 'b', 'B', '1', '10', '2', '\r', '\u0080', '\u00f6', '\u20ac'),
    fc.constantFrom('\ufb33', '\ud83d\ude00', '\ue000', '\uffff', '\u{10000}', '\u{10ffff}'),
  )
  .filter((key) => !FORBIDDEN_KEYS.has(key));

// Integers written without an exponent must stay in the safe range to be accepted by the decoder
// (JCS writes integral doubles below 1e21 in plain integer form).
const numberArb = fc.oneof(
  fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
  fc
    .double({ noNaN: true, noDefaultInfinity: true })
    .filter((n) => !Number.isInteger(n) || Number.isSafeInteger(n) || Math.abs(n) >= 1e21),
);

const { value: jsonArb } = fc.letrec<{ value: JsonValue; array: JsonValue[]; object: JsonObject }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 5 },
    fc.constant(null),
    fc.boolean(),
    numberArb,
    fc.string({ unit: 'binary', maxLength: 8 }),
    tie('array'),
    tie('object'),
  ),
  array: fc.array(tie('value'), { maxLength: 5 }),
  object: fc.dictionary(keyArb, tie('value'), { maxKeys: 6 }),
}));

/** Rebuild `value` with every object's members inserted in a pseudo-random order. */
function reorder(value: JsonValue, next: () => number): JsonValue {
  if (Array.isArray(value)) return value.map((item) => reorder(item, next));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = next() % (i + 1);
    [entries[i], entries[j]] = [entries[j] as [string, JsonValue], entries[i] as [string, JsonValue]];
  }
  const out: JsonObject = {};
  for (const [key, member] of entries) out[key] = reorder(member, next);
  return out;
}

function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state >>> 8;
  };
}

/** Reference JCS written independently: explicit UTF-16 comparison, no Array.prototype.sort default. */
function referenceJcs(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(referenceJcs).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const keys = Object.keys(value).sort((a, b) => {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const d = a.charCodeAt(i) - b.charCodeAt(i);
      if (d !== 0) return d;
    }
    return a.length - b.length;
  });
  return `{${keys.map((k) => `${JSON.stringify(k)}:${referenceJcs(value[k] as JsonValue)}`).join(',')}}`;
}

describe('canonicalize: properties', () => {
  it('canonical bytes do not depend on object key insertion order', () => {
    fc.assert(
      fc.property(jsonArb, fc.integer(), (value, seed) => {
        const shuffled = reorder(value, lcg(seed));
        expect(canonicalize(shuffled)).toBe(canonicalize(value));
        expect(digestOf(shuffled)).toBe(digestOf(value));
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips through the strict decoder to the same canonical form', () => {
    fc.assert(
      fc.property(jsonArb, (value) => {
        const canonical = canonicalize(value);
        const decoded = decodeJsonText(canonical);
        expect(decoded.ok).toBe(true);
        if (decoded.ok) expect(canonicalize(decoded.value)).toBe(canonical);
      }),
      { numRuns: 300 },
    );
  });

  it('matches an independent reference implementation', () => {
    fc.assert(
      fc.property(jsonArb, (value) => {
        expect(canonicalize(value)).toBe(referenceJcs(value));
      }),
      { numRuns: 300 },
    );
  });

  it('canonical bytes are the UTF-8 encoding of the canonical text', () => {
    fc.assert(
      fc.property(jsonArb, (value) => {
        expect(toHex(canonicalBytes(value))).toBe(toHex(new TextEncoder().encode(canonicalize(value))));
      }),
    );
  });

  it('serializes every finite double so that it reads back as the same value', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
        const text = canonicalize(n);
        expect(Object.is(Number(text), n === 0 ? 0 : n)).toBe(true);
        expect(text).toBe(String(n));
      }),
      { numRuns: 1000 },
    );
  });
});
