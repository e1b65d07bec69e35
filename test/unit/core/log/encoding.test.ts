/**
 * The shared encodings: base64 agrees with the platform's btoa/atob on canonical text and has
 * exactly one accepted spelling per value; decimals have no second spelling either.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { decodeBase64, decodeUtf8, encodeBase64, parseDecimal } from '../../../../src/core/log/encoding.js';

// Pure hashing, slow in workerd and slower on a loaded machine: no test here may fail on time.
vi.setConfig({ testTimeout: 300_000 });

const latin1 = (b: Uint8Array): string => String.fromCharCode(...b);

describe('base64', () => {
  it('matches btoa and round-trips', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 70 }), (b) => {
        const text = encodeBase64(b);
        expect(text).toBe(btoa(latin1(b)));
        expect(Array.from(decodeBase64(text)!)).toEqual(Array.from(b));
      }),
    );
  });

  it('accepts no text other than the canonical encoding of what it decodes to', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...'AB+/=az09 -_\n'.split('')), maxLength: 12 }),
        (text) => {
          const b = decodeBase64(text);
          return b === undefined || encodeBase64(b) === text;
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('rejects each non-canonical spelling', () => {
    for (const text of [
      'A',
      'AA',
      'AAA',
      'AA=',
      'A===',
      '=AAA',
      'AA=A',
      'AB==',
      'AAB=',
      'AA==AAAA',
      'AA-_',
      'AA A',
      'é===',
    ]) {
      expect([text, decodeBase64(text)]).toEqual([text, undefined]);
    }
    expect(Array.from(decodeBase64('')!)).toEqual([]);
  });
});

describe('decimal', () => {
  it('accepts 0 and digits without leading zeros up to 2^53 - 1', () => {
    expect(parseDecimal('0')).toBe(0);
    expect(parseDecimal('9007199254740991')).toBe(Number.MAX_SAFE_INTEGER);
    fc.assert(fc.property(fc.nat({ max: Number.MAX_SAFE_INTEGER }), (n) => parseDecimal(String(n)) === n));
  });

  it('rejects every other spelling', () => {
    for (const text of [
      '',
      '00',
      '01',
      '-0',
      '+1',
      '1e3',
      '1.0',
      ' 1',
      '1 ',
      '0x10',
      '９',
      '9007199254740992',
      '1'.repeat(17),
    ]) {
      expect([text, parseDecimal(text)]).toEqual([text, undefined]);
    }
  });
});

describe('utf-8', () => {
  it('decodes strictly', () => {
    expect(decodeUtf8(Uint8Array.of(0xc3, 0xa9))).toBe('é');
    expect(decodeUtf8(Uint8Array.of(0xc3))).toBeUndefined();
    expect(decodeUtf8(Uint8Array.of(0xed, 0xa0, 0x80))).toBeUndefined();
  });
});
