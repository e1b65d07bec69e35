import { describe, expect, it } from 'vitest';
import {
  API_KEY_PATTERN,
  apiKeyDigest,
  formatApiKey,
  formatId,
  secretsEqual,
} from '../../../../src/core/identity/identity.js';
import { Identifier } from '../../../../src/core/schema.js';

describe('api keys', () => {
  it('are writ_ + base64url of exactly 32 bytes', () => {
    const key = formatApiKey(new Uint8Array(32).fill(0xff));
    expect(key).toBe(`writ_${'_'.repeat(42)}8`);
    expect(key).toMatch(API_KEY_PATTERN);
    expect(formatApiKey(new Uint8Array(32))).toBe(`writ_${'A'.repeat(43)}`);
    expect(() => formatApiKey(new Uint8Array(31))).toThrow(RangeError);
  });

  it('are stored as the SHA-256 of their UTF-8 bytes', () => {
    // The FIPS 180-2 test vector for "abc".
    expect(apiKeyDigest('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

describe('ids', () => {
  it('are a type prefix and 26 base32 characters, valid identifiers', () => {
    const id = formatId('principal', new Uint8Array(16).fill(0xab));
    expect(id).toMatch(/^prn-[a-z2-7]{26}$/);
    expect(Identifier.safeParse(id).success).toBe(true);
    expect(formatId('tenant', new Uint8Array(16))).toBe(`ten-${'a'.repeat(26)}`);
    expect(() => formatId('grant', new Uint8Array(8))).toThrow(RangeError);
  });
});

describe('secretsEqual', () => {
  it('compares content, whatever the lengths', () => {
    expect(secretsEqual('token-0123456789', 'token-0123456789')).toBe(true);
    expect(secretsEqual('token-0123456789', 'token-0123456780')).toBe(false);
    expect(secretsEqual('token', 'token-0123456789')).toBe(false);
    expect(secretsEqual('', '')).toBe(true);
  });
});
