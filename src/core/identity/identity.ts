/**
 * Principal identity: roles, API key format, key digests and server-generated ids.
 *
 * Guarantees: an API key is `writ_<shard>_` followed by the base64url encoding of exactly 32
 * random bytes (256 bits). The shard number is a non-secret routing part: it names the D1 shard
 * that holds the key's tenant, so authentication needs no global lookup. Only the SHA-256 of the
 * whole key (routing part included) is ever stored or compared, so a key whose routing part was
 * changed is a different key that matches nothing. A key in the earlier format (`writ_` + 43
 * characters, no routing part) still parses and routes to shard 0, where every tenant created
 * before shards lives. Ids are a type prefix and 128 random
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
/** Shard numbers a key can name: 0..MAX_SHARDS-1 (D1 allows about 5,000 bindings per Worker). */
export const MAX_SHARDS = 1000;
/**
 * `writ_<shard>_` + 43 base64url characters (32 bytes, unpadded), the shard in decimal without
 * leading zeros (one spelling per shard, so a key has exactly one form); or the earlier format,
 * `writ_` + 43 characters. The two never overlap: a routed key is at least 50 characters long,
 * an earlier one exactly 48.
 */
export const API_KEY_PATTERN = /^writ_(?:(?:0|[1-9][0-9]{0,2})_)?[A-Za-z0-9_-]{43}$/;
const ROUTED_KEY = /^writ_(0|[1-9][0-9]{0,2})_[A-Za-z0-9_-]{43}$/;
const LEGACY_KEY = /^writ_[A-Za-z0-9_-]{43}$/;

/** What a presented key says about where to look, and the digest to look up there. */
export interface ApiKeyRoute {
  readonly shard: number;
  readonly key_sha256: string;
  /** An earlier-format key (no routing part): shard 0. */
  readonly legacy: boolean;
}

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

/** A key routed to `shard`. The routing part is not secret; the 256 random bits are. */
export function formatApiKey(random: Uint8Array, shard: number): string {
  if (random.byteLength !== API_KEY_BYTES)
    throw new RangeError(`an api key needs ${API_KEY_BYTES} random bytes`);
  if (!Number.isSafeInteger(shard) || shard < 0 || shard >= MAX_SHARDS)
    throw new RangeError(`a shard is an integer in 0..${MAX_SHARDS - 1}`);
  return `${API_KEY_PREFIX}${shard}_${base64url(random)}`;
}

/**
 * The shard a presented key routes to and the digest to look up there; null for anything that is
 * not a well-formed key (the caller answers 401 without touching storage). Which shard a key names
 * decides only where the lookup happens: the digest covers the routing part, so pointing a key at
 * another shard (or stripping its routing part) yields a digest no stored key has.
 */
export function parseApiKey(key: string): ApiKeyRoute | null {
  if (key.length > 64) return null;
  const routed = ROUTED_KEY.exec(key);
  if (routed !== null) {
    return { shard: Number(routed[1]), key_sha256: apiKeyDigest(key), legacy: false };
  }
  if (LEGACY_KEY.test(key)) return { shard: 0, key_sha256: apiKeyDigest(key), legacy: true };
  return null;
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
