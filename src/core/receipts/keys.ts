/**
 * Receipt signing keys: the secret key ring (a Worker secret) and the public key set it publishes
 * (`GET /.well-known/writ-keys`), with rotation by validity windows.
 *
 * Key ring secret (`WRIT_RECEIPT_KEYS`), JSON, at most 64 KiB, duplicate keys rejected:
 *   { "key_ring_version": 1, "issuer": "<identifier>", "active": "<key_id>",
 *     "keys": [ { "key_id": "<16 hex>", "seed_b64": "<32-byte Ed25519 seed, base64>",
 *                 "valid_from_unix_ms": <int>, "signing_until_unix_ms": <int> | null } ] }
 * Public key set (no secrets):
 *   { "key_set_version": 1, "issuer": "...", "keys": [ { "key_id", "alg": "Ed25519",
 *     "public_key_b64", "valid_from_unix_ms", "signing_until_unix_ms", "status": "active" | "retired" } ] }
 *
 * `key_id` is the first 8 bytes of SHA-256 of the 32-byte public key, in lowercase hex: it names
 * one key everywhere and cannot be chosen for another key. A key signs and verifies only inside
 * its window [`valid_from_unix_ms`, `signing_until_unix_ms`) (`null`: open-ended). Rotation: set
 * the old key's `signing_until_unix_ms`, add the new key and name it `active`; the old key stays
 * published, so receipts it signed inside its window still verify, and nothing later does.
 *
 * Guarantees: a ring parses only if every seed is canonical base64 of 32 bytes, every `key_id` is
 * the one derived from its seed's public key, ids are unique and `active` names one of them; a key
 * set parses only if every public key is a canonical, non-small-order Ed25519 point (RFC 8032 strict
 * decoding) whose id matches. Status is computed from `now`, never trusted from the document.
 * Never: reads a clock or randomness (`generateKeyRing` takes the seed bytes), logs or publishes a
 * seed, or does I/O.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { z } from 'zod';
import { sha256Hex } from '../canonical/canonical.js';
import { decodeJsonText } from '../canonical/json.js';
import { err, ok, type Result } from '../result.js';
import { Identifier, UnixMs, strict } from '../schema.js';
import { decodeBase64, encodeBase64 } from './base64.js';

export const KEY_RING_VERSION = 1;
export const KEY_SET_VERSION = 1;
export const SIGNATURE_ALG = 'Ed25519';
/** Bound on the secret and on a published key set, checked before parsing. */
export const KEY_DOCUMENT_MAX_BYTES = 64 * 1024;
const MAX_KEYS = 64;

export const KeyId = z.string().regex(/^[0-9a-f]{16}$/, 'must be 16 lowercase hex characters');

const Window = {
  valid_from_unix_ms: UnixMs,
  signing_until_unix_ms: UnixMs.nullable(),
};

export const KeyRingDocument = strict({
  key_ring_version: z.literal(KEY_RING_VERSION),
  issuer: Identifier,
  active: KeyId,
  keys: z
    .array(strict({ key_id: KeyId, seed_b64: z.string().max(64), ...Window }))
    .min(1)
    .max(MAX_KEYS),
});
export type KeyRingDocument = z.infer<typeof KeyRingDocument>;

export const PublicKeySet = strict({
  key_set_version: z.literal(KEY_SET_VERSION),
  issuer: Identifier,
  keys: z
    .array(
      strict({
        key_id: KeyId,
        alg: z.literal(SIGNATURE_ALG),
        public_key_b64: z.string().max(64),
        ...Window,
        status: z.enum(['active', 'retired']),
      }),
    )
    .max(MAX_KEYS),
});
export type PublicKeySet = z.infer<typeof PublicKeySet>;

/** One verification key, decoded. */
export interface VerificationKey {
  readonly key_id: string;
  readonly public_key: Uint8Array;
  readonly valid_from_unix_ms: number;
  readonly signing_until_unix_ms: number | null;
}

/** A parsed public key set: the issuer and its keys by id. */
export interface TrustedKeys {
  readonly issuer: string;
  readonly keys: ReadonlyMap<string, VerificationKey>;
}

interface SigningKey extends VerificationKey {
  readonly seed: Uint8Array;
}

/** A parsed key ring. Opaque outside this module: the seeds never leave it except to sign. */
export interface KeyRing {
  readonly issuer: string;
  readonly active: SigningKey;
  readonly keys: readonly SigningKey[];
}

export type KeyErrorReason =
  | 'too_large'
  | 'malformed_json'
  | 'invalid_document'
  | 'invalid_key'
  | 'key_id_mismatch'
  | 'duplicate_key_id'
  | 'active_key_unknown';

export interface KeyError {
  readonly reason: KeyErrorReason;
  readonly message: string;
}

const keyError = (reason: KeyErrorReason, message: string): KeyError => ({ reason, message });

/** The key id of an Ed25519 public key (see the module comment). */
export function keyIdOf(publicKey: Uint8Array): string {
  return sha256Hex(publicKey).slice(0, 16);
}

/** Whether `t` falls inside the key's window: the one rule for both signing and verifying. */
export function keyValidAt(
  key: Pick<VerificationKey, 'valid_from_unix_ms' | 'signing_until_unix_ms'>,
  t: number,
) {
  return t >= key.valid_from_unix_ms && (key.signing_until_unix_ms === null || t < key.signing_until_unix_ms);
}

/**
 * RFC 8032 strict: canonical encoding of a curve point, and not of small order (a small-order key
 * lets one signature verify for many messages).
 */
export function isStrictPublicKey(publicKey: Uint8Array): boolean {
  if (publicKey.length !== 32) return false;
  try {
    const p = ed25519.Point.fromBytes(publicKey, false);
    return !p.isSmallOrder();
  } catch {
    return false;
  }
}

function parseBounded<S extends z.ZodType>(schema: S, text: string): Result<z.output<S>, KeyError> {
  // Bound before parsing: the secret and a downloaded key set are both untrusted in size.
  if (text.length > KEY_DOCUMENT_MAX_BYTES) return err(keyError('too_large', 'key document is too large'));
  const decoded = decodeJsonText(text, { maxBytes: KEY_DOCUMENT_MAX_BYTES, maxDepth: 8 });
  if (!decoded.ok)
    return err(keyError('malformed_json', `key document is not valid json: ${decoded.error.reason}`));
  return parseValue(schema, decoded.value);
}

function parseValue<S extends z.ZodType>(schema: S, value: unknown): Result<z.output<S>, KeyError> {
  const shaped = schema.safeParse(value);
  if (!shaped.success) {
    const first = shaped.error.issues[0];
    const where = first === undefined ? '' : `: ${first.path.join('.')}`;
    return err(keyError('invalid_document', `key document does not match its schema${where}`));
  }
  return ok(shaped.data);
}

/** Parse the key ring secret (text of the Worker secret). */
export function parseKeyRing(text: string): Result<KeyRing, KeyError> {
  const doc = parseBounded(KeyRingDocument, text);
  return doc.ok ? keyRingFromDocument(doc.value) : doc;
}

export function keyRingFromDocument(doc: KeyRingDocument): Result<KeyRing, KeyError> {
  const keys: SigningKey[] = [];
  const seen = new Set<string>();
  for (const k of doc.keys) {
    const seed = decodeBase64(k.seed_b64);
    if (seed === null || seed.length !== 32) {
      return err(keyError('invalid_key', `seed of key "${k.key_id}" is not 32 bytes of base64`));
    }
    const public_key = ed25519.getPublicKey(seed);
    // A hand-edited id that names another key would make verifiers look up the wrong key.
    if (keyIdOf(public_key) !== k.key_id) {
      return err(keyError('key_id_mismatch', `key id "${k.key_id}" is not derived from its key`));
    }
    if (seen.has(k.key_id)) return err(keyError('duplicate_key_id', `key id "${k.key_id}" appears twice`));
    seen.add(k.key_id);
    if (k.signing_until_unix_ms !== null && k.signing_until_unix_ms <= k.valid_from_unix_ms) {
      return err(keyError('invalid_document', `key "${k.key_id}" has an empty validity window`));
    }
    keys.push({
      key_id: k.key_id,
      public_key,
      seed,
      valid_from_unix_ms: k.valid_from_unix_ms,
      signing_until_unix_ms: k.signing_until_unix_ms,
    });
  }
  const active = keys.find((k) => k.key_id === doc.active);
  if (active === undefined)
    return err(keyError('active_key_unknown', `active key "${doc.active}" is not in the ring`));
  return ok({ issuer: doc.issuer, active, keys });
}

/** The published key set of a ring at `now`: public keys and windows only. */
export function publicKeySet(ring: KeyRing, now: number): PublicKeySet {
  return {
    key_set_version: KEY_SET_VERSION,
    issuer: ring.issuer,
    keys: ring.keys.map((k) => ({
      key_id: k.key_id,
      alg: SIGNATURE_ALG,
      public_key_b64: encodeBase64(k.public_key),
      valid_from_unix_ms: k.valid_from_unix_ms,
      signing_until_unix_ms: k.signing_until_unix_ms,
      status: k === ring.active && keyValidAt(k, now) ? 'active' : 'retired',
    })),
  };
}

/** The verification keys of a ring (the service verifying its own receipts). */
export function trustedKeysOfRing(ring: KeyRing): TrustedKeys {
  // Copies without the seed: verification keys travel further than the ring.
  const keys = ring.keys.map((k): VerificationKey => ({
    key_id: k.key_id,
    public_key: k.public_key,
    valid_from_unix_ms: k.valid_from_unix_ms,
    signing_until_unix_ms: k.signing_until_unix_ms,
  }));
  return { issuer: ring.issuer, keys: new Map(keys.map((k) => [k.key_id, k])) };
}

/** Parse a published key set from its JSON text (a `--keys` file, a fetched `/.well-known/writ-keys`). */
export function parsePublicKeySetText(text: string): Result<TrustedKeys, KeyError> {
  const doc = parseBounded(PublicKeySet, text);
  return doc.ok ? trustedKeysFromSet(doc.value) : doc;
}

/** Parse a published key set already decoded from JSON (e.g. embedded in a bundle). */
export function parsePublicKeySet(value: unknown): Result<TrustedKeys, KeyError> {
  const doc = parseValue(PublicKeySet, value);
  return doc.ok ? trustedKeysFromSet(doc.value) : doc;
}

function trustedKeysFromSet(set: PublicKeySet): Result<TrustedKeys, KeyError> {
  const keys = new Map<string, VerificationKey>();
  for (const k of set.keys) {
    const public_key = decodeBase64(k.public_key_b64);
    if (public_key === null || !isStrictPublicKey(public_key)) {
      return err(keyError('invalid_key', `public key "${k.key_id}" is not a strict ed25519 key`));
    }
    if (keyIdOf(public_key) !== k.key_id) {
      return err(keyError('key_id_mismatch', `key id "${k.key_id}" is not derived from its key`));
    }
    if (keys.has(k.key_id)) return err(keyError('duplicate_key_id', `key id "${k.key_id}" appears twice`));
    keys.set(k.key_id, {
      key_id: k.key_id,
      public_key,
      valid_from_unix_ms: k.valid_from_unix_ms,
      signing_until_unix_ms: k.signing_until_unix_ms,
    });
  }
  return ok({ issuer: set.issuer, keys });
}

/**
 * A one-key ring document from 32 random bytes the caller drew (`npm run dev` draws them with
 * `crypto.getRandomValues`); serialize it with `JSON.stringify` to make the secret.
 */
export function generateKeyRing(seed: Uint8Array, issuer: string, validFromUnixMs: number): KeyRingDocument {
  if (seed.length !== 32) throw new RangeError('seed must be 32 bytes');
  const key_id = keyIdOf(ed25519.getPublicKey(seed));
  return {
    key_ring_version: KEY_RING_VERSION,
    issuer,
    active: key_id,
    keys: [
      {
        key_id,
        seed_b64: encodeBase64(seed),
        valid_from_unix_ms: validFromUnixMs,
        signing_until_unix_ms: null,
      },
    ],
  };
}
