import { describe, expect, it } from 'vitest';
import {
  API_KEY_PATTERN,
  apiKeyDigest,
  formatApiKey,
  formatId,
  parseApiKey,
  secretsEqual,
} from '../../../../src/core/identity/identity.js';
import { Identifier } from '../../../../src/core/schema.js';

describe('api keys', () => {
  it('are writ_<shard>_ + base64url of exactly 32 bytes', () => {
    const key = formatApiKey(new Uint8Array(32).fill(0xff), 0);
    expect(key).toBe(`writ_0_${'_'.repeat(42)}8`);
    expect(key).toMatch(API_KEY_PATTERN);
    expect(formatApiKey(new Uint8Array(32), 17)).toBe(`writ_17_${'A'.repeat(43)}`);
    expect(() => formatApiKey(new Uint8Array(31), 0)).toThrow(RangeError);
    expect(() => formatApiKey(new Uint8Array(32), -1)).toThrow(RangeError);
    expect(() => formatApiKey(new Uint8Array(32), 1000)).toThrow(RangeError);
    expect(() => formatApiKey(new Uint8Array(32), 1.5)).toThrow(RangeError);
  });

  it('route to the shard they name, and digest the whole key', () => {
    const key = formatApiKey(new Uint8Array(32).fill(7), 1);
    expect(parseApiKey(key)).toEqual({ shard: 1, key_sha256: apiKeyDigest(key), legacy: false });
  });

  it('in the earlier format (no routing part) still parse, and route to shard 0', () => {
    const legacy = `writ_${'1_'.repeat(21)}x`; // 43 characters that merely look like a routing part
    expect(legacy).toHaveLength(48);
    expect(legacy).toMatch(API_KEY_PATTERN);
    expect(parseApiKey(legacy)).toEqual({ shard: 0, key_sha256: apiKeyDigest(legacy), legacy: true });
  });

  it('that are malformed route nowhere', () => {
    const secret = 'A'.repeat(43);
    for (const bad of [
      '',
      'writ_',
      `writ_01_${secret}`, // a second spelling of shard 1
      `writ_1000_${secret}`, // beyond MAX_SHARDS
      `writ_-1_${secret}`,
      `writ_1_${secret}A`,
      `writ_1_${secret.slice(1)}`,
      `writ_1_${secret}`.replace('A', '='),
      `WRIT_1_${secret}`,
      `writ_1_${'A'.repeat(200)}`,
    ]) {
      expect(parseApiKey(bad), bad).toBeNull();
      expect(API_KEY_PATTERN.test(bad), bad).toBe(false);
    }
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
