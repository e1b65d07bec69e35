/**
 * Receipt signatures: who issued a receipt, with which key, when, for which tenant and kind
 * (spec ch. 11: "add issuer identity, signature, issued time, nonce or sequence, key release").
 *
 * The signature envelope (version 1), stored and served next to the receipt, never inside its body:
 *   { "signature_version": 1, "alg": "Ed25519", "issuer": "<identifier>", "key_id": "<16 hex>",
 *     "tenant_id": "<identifier>", "receipt_kind": "<kind>", "receipt_sha256": "<64 hex>",
 *     "issued_at_unix_ms": <int>, "signature": "<base64 of 64 bytes>" }
 * The signed message is the UTF-8 of `SIGNATURE_DOMAIN` ("writ-receipt-signature/v1" and a line
 * feed) followed by the RFC 8785 canonical JSON of the envelope without its `signature` member.
 * The domain prefix keeps these bytes from ever being a valid message of another protocol that
 * signs with the same key (a checkpoint, an approval), and the canonical form gives them one spelling.
 * The receipt is covered through `receipt_sha256`, the digest of its canonical body.
 *
 * Sequence: the receipt's position is its index in the tenant's transparency log, attested by a
 * signed checkpoint and an inclusion proof; the log is appended after the receipt commits, so the
 * issuance signature cannot carry it (see docs/receipts.md).
 *
 * Guarantees: the signer refuses (typed error) outside its key's window, and refuses a receipt
 * whose body does not hash to its `sha256`. Verification is strict RFC 8032 (no ZIP-215: canonical
 * R and A, S < L, small-order keys refused), with the key's window checked at `issued_at_unix_ms`.
 * Never: reads a clock (`issued_at` is an argument), signs anything but the envelope bytes, or
 * accepts a signature because the receipt "looks right".
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { z } from 'zod';
import { canonicalize, digestOf } from '../canonical/canonical.js';
import { utf8Encode } from '../canonical/json.js';
import { err, ok, type Result } from '../result.js';
import { Identifier, Sha256, UnixMs, strict } from '../schema.js';
import { decodeBase64, encodeBase64 } from './base64.js';
import {
  KeyId,
  type KeyRing,
  keyValidAt,
  SIGNATURE_ALG,
  type TrustedKeys,
  type VerificationKey,
} from './keys.js';

export const SIGNATURE_VERSION = 1;
export const SIGNATURE_DOMAIN = 'writ-receipt-signature/v1\n';

/** Every receipt kind Writ issues; the envelope names one so a signature cannot be re-read as another. */
export const RECEIPT_KINDS = [
  'authorization',
  'execution',
  'reconciliation',
  'observation',
  'error_observation',
  'derived_observation',
] as const;
export const ReceiptKind = z.enum(RECEIPT_KINDS);
export type ReceiptKind = z.infer<typeof ReceiptKind>;

export const SignatureEnvelope = strict({
  signature_version: z.literal(SIGNATURE_VERSION),
  alg: z.literal(SIGNATURE_ALG),
  issuer: Identifier,
  key_id: KeyId,
  tenant_id: Identifier,
  receipt_kind: ReceiptKind,
  receipt_sha256: Sha256,
  issued_at_unix_ms: UnixMs,
  signature: z.string().length(88),
});
export type SignatureEnvelope = z.infer<typeof SignatureEnvelope>;

/** What a signature binds of a receipt: its identity and the two fields every kind has. */
export interface SignableReceipt {
  readonly sha256: string;
  readonly body: { readonly tenant_id: string; readonly receipt_kind: string };
}

/** The exact bytes signed for an envelope (every member but `signature`). */
export function signedMessage(e: Omit<SignatureEnvelope, 'signature'>): Uint8Array {
  // Members picked one by one: an extra property on the argument can never slip into the message.
  const unsigned = {
    alg: e.alg,
    issued_at_unix_ms: e.issued_at_unix_ms,
    issuer: e.issuer,
    key_id: e.key_id,
    receipt_kind: e.receipt_kind,
    receipt_sha256: e.receipt_sha256,
    signature_version: e.signature_version,
    tenant_id: e.tenant_id,
  };
  return utf8Encode(SIGNATURE_DOMAIN + canonicalize(unsigned));
}

// ---------------------------------------------------------------------------------------------
// Signing

export type SigningErrorReason = 'key_retired' | 'key_not_yet_valid' | 'receipt_altered' | 'invalid_receipt';

export interface SigningError {
  readonly reason: SigningErrorReason;
  readonly message: string;
}

/** An envelope ready to sign: every member but `signature`, the exact message, and the key. */
export interface PreparedSignature {
  readonly unsigned: Omit<SignatureEnvelope, 'signature'>;
  readonly message: Uint8Array;
  readonly key_id: string;
  /** The active key's 32-byte seed (for a native signer; never logged or returned further). */
  readonly seed: Uint8Array;
}

/**
 * Everything `signReceipt` checks, without the signature itself: lets an adapter sign the exact
 * message with a native Ed25519 (WebCrypto), which gives the same bytes (RFC 8032 signatures
 * are deterministic). The signer refuses a retired key rather than fall back to another: which
 * key signs is configuration, never a guess.
 */
export function prepareSignature(
  ring: KeyRing,
  receipt: SignableReceipt,
  issuedAtUnixMs: number,
): Result<PreparedSignature, SigningError> {
  const kind = ReceiptKind.safeParse(receipt.body.receipt_kind);
  if (!kind.success || !Identifier.safeParse(receipt.body.tenant_id).success) {
    return err({ reason: 'invalid_receipt', message: 'receipt kind or tenant is not valid' });
  }
  if (!UnixMs.safeParse(issuedAtUnixMs).success) {
    return err({ reason: 'invalid_receipt', message: 'issue time must be a non-negative integer' });
  }
  const key = ring.active;
  if (issuedAtUnixMs < key.valid_from_unix_ms) {
    return err({ reason: 'key_not_yet_valid', message: `key "${key.key_id}" is not valid yet` });
  }
  // A key past its window may be compromised or handed over: it must not create new receipts.
  if (!keyValidAt(key, issuedAtUnixMs)) {
    return err({ reason: 'key_retired', message: `key "${key.key_id}" is retired` });
  }
  // Signing a body that does not hash to its identity would vouch for bytes nobody can recompute.
  let digest: string | null;
  try {
    digest = digestOf(receipt.body);
  } catch {
    digest = null;
  }
  if (digest !== receipt.sha256) {
    return err({ reason: 'receipt_altered', message: 'receipt body does not hash to its sha256' });
  }
  const unsigned = {
    signature_version: SIGNATURE_VERSION,
    alg: SIGNATURE_ALG,
    issuer: ring.issuer,
    key_id: key.key_id,
    tenant_id: receipt.body.tenant_id,
    receipt_kind: kind.data,
    receipt_sha256: receipt.sha256,
    issued_at_unix_ms: issuedAtUnixMs,
  } as const;
  return ok({ unsigned, message: signedMessage(unsigned), key_id: key.key_id, seed: key.seed });
}

/** Sign a receipt with the ring's active key at `issuedAtUnixMs` (portable Ed25519). */
export function signReceipt(
  ring: KeyRing,
  receipt: SignableReceipt,
  issuedAtUnixMs: number,
): Result<SignatureEnvelope, SigningError> {
  const p = prepareSignature(ring, receipt, issuedAtUnixMs);
  if (!p.ok) return p;
  return ok({ ...p.value.unsigned, signature: encodeBase64(ed25519.sign(p.value.message, p.value.seed)) });
}

// ---------------------------------------------------------------------------------------------
// Verification

export const SIGNATURE_FAILURES = [
  'missing',
  'malformed_signature',
  'issuer_mismatch',
  'unknown_key',
  'key_not_valid_at_issue',
  'receipt_mismatch',
  'bad_signature',
] as const;
export type SignatureFailureReason = (typeof SIGNATURE_FAILURES)[number];

export interface SignatureFailure {
  readonly reason: SignatureFailureReason;
  readonly message: string;
}

export interface VerifiedSignature {
  readonly envelope: SignatureEnvelope;
  readonly key: VerificationKey;
}

const fail = (reason: SignatureFailureReason, message: string): Result<never, SignatureFailure> =>
  err({ reason, message });

/**
 * Verify `envelope` (untrusted, as decoded from JSON) for `receipt` against `keys`. The receipt's
 * own digest is not recomputed here: callers check `digestOf(body) === sha256` (or recompute the
 * receipt from its inputs) before trusting the body.
 */
export function verifyReceiptSignature(
  envelope: unknown,
  receipt: SignableReceipt,
  keys: TrustedKeys,
): Result<VerifiedSignature, SignatureFailure> {
  if (envelope === undefined || envelope === null) return fail('missing', 'the receipt carries no signature');
  const parsed = SignatureEnvelope.safeParse(envelope);
  if (!parsed.success) return fail('malformed_signature', 'the signature envelope is not valid');
  const e = parsed.data;
  // Keys of one issuer vouch for that issuer only.
  if (e.issuer !== keys.issuer)
    return fail('issuer_mismatch', `issuer "${e.issuer}" is not "${keys.issuer}"`);
  const key = keys.keys.get(e.key_id);
  if (key === undefined) return fail('unknown_key', `key "${e.key_id}" is not published by the issuer`);
  // A retired (possibly leaked) key must not mint receipts dated after its retirement.
  if (!keyValidAt(key, e.issued_at_unix_ms)) {
    return fail('key_not_valid_at_issue', `key "${e.key_id}" was not valid at the issue time`);
  }
  // A valid signature over another receipt, tenant or kind must not transfer to this one.
  if (
    e.receipt_sha256 !== receipt.sha256 ||
    e.tenant_id !== receipt.body.tenant_id ||
    e.receipt_kind !== receipt.body.receipt_kind
  ) {
    return fail('receipt_mismatch', 'the signature is for another receipt, tenant or kind');
  }
  const sig = decodeBase64(e.signature);
  if (sig === null || sig.length !== 64)
    return fail('malformed_signature', 'the signature is not 64 bytes of base64');
  if (!strictVerify(sig, signedMessage(e), key.public_key)) {
    return fail('bad_signature', 'the signature does not verify');
  }
  return ok({ envelope: e, key });
}

/**
 * Ed25519 verification per RFC 8032 §5.1.7 with strict decoding: `zip215: false` refuses
 * non-canonical R and A and small-order A; noble refuses S >= L. Malformed input is `false`.
 */
export function strictVerify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== 64 || publicKey.length !== 32) return false;
  try {
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}
