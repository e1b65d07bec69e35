/**
 * Principal identity: roles, API key format, key digests and server-generated ids.
 *
 * Guarantees: an API key is `writ_` followed by the base64url encoding of exactly 32 random bytes
 * (256 bits); only its SHA-256 is ever stored or compared. Ids are a type prefix and 128 random
 * bits in lowercase base32, so they are valid `Identifier`s and never collide across types.
 * Never: generates randomness (the adapter passes random bytes in), reads a clock, or does I/O.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { z } from 'zod';
import { utf8Encode } from '../canonical/json.js';

export const ROLES = ['tenant_admin', 'agent', 'approver', 'executor'] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

export const API_KEY_PREFIX = 'writ_';
export const API_KEY_BYTES = 32;
/** `writ_` + 43 base64url characters (32 bytes, unpadded). */
export const API_KEY_PATTERN = /^writ_[A-Za-z0-9_-]{43}$/;

export const ID_BYTES = 16;
export const ID_PREFIXES = {
  tenant: 'ten',
  principal: 'prn',
  grant: 'grt',
  approval: 'apr',
  run: 'run',
  invocation: 'inv',
  request: 'req',
  webhook_secret: 'whs',
} as const;
export type IdKind = keyof typeof ID_PREFIXES;

export function formatApiKey(random: Uint8Array): string {
  if (random.byteLength !== API_KEY_BYTES)
    throw new RangeError(`an api key needs ${API_KEY_BYTES} random bytes`);
  return API_KEY_PREFIX + base64url(random);
}

/**
 * SHA-256 (lowercase hex) of the key's UTF-8 bytes. A fast hash is enough because the key has
 * 256 bits of entropy: there is no dictionary to search (docs/key-derivation.md).
 */
export function apiKeyDigest(key: string): string {
  return bytesToHex(sha256(utf8Encode(key)));
}

/** A server id such as `prn-5m2x...`: prefix, hyphen, 26 base32 characters. */
export function formatId(kind: IdKind, random: Uint8Array): string {
  if (random.byteLength !== ID_BYTES) throw new RangeError(`an id needs ${ID_BYTES} random bytes`);
  return `${ID_PREFIXES[kind]}-${base32(random)}`;
}

/**
 * Compare two secrets without a data-dependent early exit: both are hashed first, so the
 * comparison runs over equal-length digests whatever the inputs' lengths (timing oracle).
 */
export function secretsEqual(a: string, b: string): boolean {
  const x = sha256(utf8Encode(a));
  const y = sha256(utf8Encode(b));
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= (x[i] as number) ^ (y[i] as number);
  return diff === 0;
}

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const B32 = 'abcdefghijklmnopqrstuvwxyz234567';

function base64url(bytes: Uint8Array): string {
  return encodeBits(bytes, 6, B64URL);
}

function base32(bytes: Uint8Array): string {
  return encodeBits(bytes, 5, B32);
}

function encodeBits(bytes: Uint8Array, width: number, alphabet: string): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  const mask = (1 << width) - 1;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= width) {
      bits -= width;
      out += alphabet[(acc >> bits) & mask];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += alphabet[(acc << (width - bits)) & mask];
  return out;
}
