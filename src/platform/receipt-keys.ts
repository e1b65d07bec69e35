/**
 * The receipt key ring from the Worker secret `WRIT_RECEIPT_KEYS` (format: src/core/receipts/keys.ts,
 * docs/receipts.md), parsed once per isolate, and what it gives the service: the receipt signer,
 * the published key set, and the transparency log's checkpoint signer.
 *
 * Fail closed: a missing or invalid ring is `signing_unavailable` (503) at the first write that
 * needs a signature, before anything is written; reads of stored receipts still work. Never: logs
 * or returns a seed, or signs with any key but the ring's active one.
 *
 * The log key is the ring's active key itself, used under the note key name `<issuer>/log/<tenant>`
 * (the checkpoint origin): one secret to rotate, and a verifier that pins the issuer's published key
 * set trusts the log with no second document. The two uses cannot be confused: a receipt signature
 * signs `writ-receipt-signature/v1\n...` and a checkpoint signs a note whose first line is an
 * origin containing `/log/`, so no byte string is a valid message of both (docs/receipts.md).
 */
import { isValidKeyName, ed25519KeyId, ed25519Signer } from '../core/log/note.js';
import {
  type KeyRing,
  keyValidAt,
  type PublicKeySet,
  type TrustedKeys,
  parseKeyRing,
  publicKeySet,
  trustedKeysOfRing,
} from '../core/receipts/keys.js';
import { encodeBase64 } from '../core/receipts/base64.js';
import { prepareSignature, signReceipt } from '../core/receipts/signing.js';
import type { ReceiptSigner } from '../db/receipts.js';
import { logOrigin } from '../verify/log.js';
import { ServiceError } from '../services/errors.js';

type Parsed = { readonly ok: true; readonly ring: KeyRing } | { readonly ok: false; readonly why: string };

// Keyed by the secret's text: a changed secret (a new deployment) is parsed again, an unchanged
// one never is. The seed stays inside this module's cache and the core's signer.
let cache: { readonly text: string | undefined; readonly parsed: Parsed } | null = null;

function ring(env: { readonly WRIT_RECEIPT_KEYS?: string }): Parsed {
  const text = env.WRIT_RECEIPT_KEYS;
  if (cache !== null && cache.text === text) return cache.parsed;
  let parsed: Parsed;
  if (text === undefined || text.trim() === '') parsed = { ok: false, why: 'WRIT_RECEIPT_KEYS is not set' };
  else {
    const r = parseKeyRing(text);
    if (!r.ok) parsed = { ok: false, why: `WRIT_RECEIPT_KEYS is invalid: ${r.error.reason}` };
    // The issuer names every tenant's log (`<issuer>/log/<tenant>`), which must be a note key name.
    else if (!isValidKeyName(`${r.value.issuer}/log/x`))
      parsed = { ok: false, why: 'WRIT_RECEIPT_KEYS issuer cannot name a log (no "+" allowed)' };
    else parsed = { ok: true, ring: r.value };
  }
  cache = { text, parsed };
  return parsed;
}

function unavailable(why: string): ServiceError {
  // The operator's problem, not the caller's: the message names the secret, never its content.
  console.error(JSON.stringify({ level: 'error', event: 'receipt_keys_unavailable', why }));
  return new ServiceError('signing_unavailable', 'receipt signing is not configured; nothing was written');
}

/** The ring, or `signing_unavailable`. */
export function requireKeyRing(env: { readonly WRIT_RECEIPT_KEYS?: string }): KeyRing {
  const r = ring(env);
  if (!r.ok) throw unavailable(r.why);
  return r.ring;
}

/**
 * The ring, or `signing_unavailable` unless its active key may sign a receipt issued at `at`: for
 * a write whose receipt is signed later, away from the request (an operation's object records the
 * receipt, then mirrors it into D1 signed at that time). Checked before anything is recorded: a
 * receipt recorded under a retired active key could never be signed (no later key's window covers
 * its issue time), so its operation would never reach D1.
 */
export function requireSigningKeyAt(env: { readonly WRIT_RECEIPT_KEYS?: string }, at: number): KeyRing {
  const ring = requireKeyRing(env);
  const key = ring.active;
  if (at < key.valid_from_unix_ms) throw unavailable(`key "${key.key_id}" is not valid yet`);
  if (!keyValidAt(key, at)) throw unavailable(`key "${key.key_id}" is retired`);
  return ring;
}

/**
 * The signer every receipt write uses. It resolves the ring when it signs (not when a store is
 * opened), so requests that write nothing never depend on the secret. The core checks the key's
 * window and the receipt's digest and builds the exact message; the runtime's native Ed25519
 * (WebCrypto) signs it, several times faster than the portable one and byte-identical (RFC 8032
 * signatures are deterministic); where WebCrypto lacks Ed25519 the portable signer is used.
 */
export function receiptSigner(env: { readonly WRIT_RECEIPT_KEYS?: string }): ReceiptSigner {
  return async (receipt, issued_at) => {
    const ring = requireKeyRing(env);
    const p = prepareSignature(ring, receipt, issued_at);
    if (!p.ok) {
      // `key_retired` / `key_not_yet_valid`: the active key's window does not cover now. The
      // receipt is refused rather than signed by a key rotation has closed.
      if (p.error.reason === 'key_retired' || p.error.reason === 'key_not_yet_valid') {
        throw unavailable(p.error.message);
      }
      throw new Error(`receipt cannot be signed: ${p.error.reason}`);
    }
    const key = await nativeKey(p.value.key_id, p.value.seed);
    if (key === null) {
      const portable = signReceipt(ring, receipt, issued_at);
      if (!portable.ok) throw new Error(`receipt cannot be signed: ${portable.error.reason}`);
      return portable.value;
    }
    const signature = new Uint8Array(await crypto.subtle.sign('Ed25519', key, p.value.message));
    return { ...p.value.unsigned, signature: encodeBase64(signature) };
  };
}

// PKCS #8 wrapping of a raw Ed25519 seed (RFC 8410): WebCrypto imports private keys only so.
const PKCS8_ED25519_PREFIX = [
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const nativeKeys = new Map<string, Promise<CryptoKey | null>>();

function nativeKey(key_id: string, seed: Uint8Array): Promise<CryptoKey | null> {
  let k = nativeKeys.get(key_id);
  if (k === undefined) {
    const pkcs8 = new Uint8Array([...PKCS8_ED25519_PREFIX, ...seed]);
    k = crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, false, ['sign']).catch(() => null);
    nativeKeys.set(key_id, k);
  }
  return k;
}

/** The published key set at `now` (`GET /.well-known/writ-keys`). */
export function publishedKeys(env: { readonly WRIT_RECEIPT_KEYS?: string }, now: number): PublicKeySet {
  return publicKeySet(requireKeyRing(env), now);
}

/** The ring's verification keys (the service checking its own checkpoints). */
export function ringTrustedKeys(env: { readonly WRIT_RECEIPT_KEYS?: string }): TrustedKeys {
  return trustedKeysOfRing(requireKeyRing(env));
}

/** A tenant log's checkpoint key: the ring's active key under the note key name of the log's origin. */
export interface LogKey {
  /** The log's origin, `<issuer>/log/<tenant>`, which is also the note key name. */
  readonly origin: string;
  /** The C2SP signed-note key ID of (origin, the active public key). */
  readonly keyId: number;
  /** Ed25519 over `message` with the active key: native (WebCrypto) where the runtime has it. */
  sign(message: Uint8Array): Promise<Uint8Array>;
}

/**
 * The checkpoint key of a tenant's log. Cheap to call per drain: the ring is parsed once per secret
 * text (with each key's public key), the native key is imported once per key id, and the key ID
 * is one SHA-256; no scalar multiplication and no portable signature runs on the object's thread.
 * A rotated ring (a new secret text) names a new active key, which takes effect at the next call.
 * The signature is byte-identical to the portable signer's (`ed25519Signer`): RFC 8032 is
 * deterministic, and a unit test checks the two agree.
 */
export function logKey(env: { readonly WRIT_RECEIPT_KEYS?: string }, tenant_id: string): LogKey {
  const k = requireKeyRing(env);
  const origin = logOrigin(k.issuer, tenant_id);
  if (!isValidKeyName(origin)) throw unavailable('log key: the log origin is not a valid key name');
  const { key_id, seed, public_key } = k.active;
  return {
    origin,
    keyId: ed25519KeyId(origin, public_key),
    sign: async (message) => {
      const key = await nativeKey(key_id, seed);
      if (key !== null) return new Uint8Array(await crypto.subtle.sign('Ed25519', key, message));
      const portable = ed25519Signer(origin, seed);
      if (!portable.ok) throw unavailable(`log key: ${portable.error.message}`);
      return portable.value.sign(message);
    },
  };
}
