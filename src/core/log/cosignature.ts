/**
 * C2SP tlog-cosignature (https://c2sp.org/tlog-cosignature), the Ed25519 `cosignature/v1` type
 * (signature type 0x04): witness verifier keys, the signed message, and verifying the witness
 * cosignatures on a checkpoint against a k-of-n quorum of named witnesses.
 *
 * Guarantees: a witness key is the vkey `<name>+<hex key ID>+<base64(0x04 || 32-byte key)>`, its
 * ID SHA-256(name || 0x0A || 0x04 || key)[:4] checked against the text, its key a canonical point
 * of large order (strict RFC 8032, as note.ts). A cosignature line counts only when its key name
 * AND key ID match a configured witness (signed-note: "Verifiers MUST ignore signatures from
 * unknown keys, even if they share a name or ID (but not both) with a known key"); such a line
 * MUST then verify: one that does not (wrong length, timestamp beyond range, bad signature) fails
 * the whole check (the spec's SHOULD reject, taken as a MUST, as note.ts does for log keys). Each
 * witness counts once toward the quorum however many lines it has. The signed message is
 * `cosignature/v1\ntime <t>\n` followed by the whole note text (extension lines included).
 * Never: reads a clock (a timestamp is reported, never compared with now), does I/O, throws, or
 * decides by itself whether cosignatures are required: the caller's policy does.
 */
import { concatBytes, encodeBase64, utf8 } from './encoding.js';
import {
  hex8,
  isStrictPublicKey,
  isValidKeyName,
  keyIdOf,
  MAX_KEY_TEXT,
  parseNote,
  splitKeyText,
  verifyEd25519,
  type NoteSignature,
} from './note.js';
import { err, ok, type Result } from '../result.js';

/** Signature type identifier of Ed25519 cosignature/v1 (C2SP signed-note "Signature types"). */
export const COSIGNATURE_V1_TYPE = 0x04;

/** The header line of the cosignature/v1 signed message (domain separation). */
export const COSIGNATURE_V1_HEADER = 'cosignature/v1';

/** The most witnesses a policy names (a note carries at most MAX_SIGNATURES lines anyway). */
export const MAX_WITNESSES = 64;

/** 8-byte big-endian timestamp, then the 64-byte Ed25519 signature. */
const COSIGNATURE_SIZE = 8 + 64;

export type WitnessKeyErrorReason =
  | 'malformed_witness_key'
  | 'invalid_witness_name'
  | 'unsupported_witness_key_type'
  | 'witness_key_id_mismatch'
  | 'invalid_witness_public_key';

export interface WitnessKeyError {
  readonly reason: WitnessKeyErrorReason;
  readonly message: string;
}

/** A witness (cosigner) Ed25519 cosignature/v1 key: build it with `parseWitnessKey`. */
export interface WitnessKey {
  readonly name: string;
  readonly keyId: number;
  readonly publicKey: Uint8Array;
  /** The vkey text it was parsed from (canonical: it round-trips). */
  readonly vkey: string;
}

/** key ID = SHA-256(name || 0x0A || 0x04 || 32-byte Ed25519 public key)[:4], big-endian. */
export function cosignatureKeyId(name: string, publicKey: Uint8Array): number {
  return keyIdOf(name, COSIGNATURE_V1_TYPE, publicKey);
}

/** The vkey text of a witness key: `<name>+<hex key ID>+<base64(0x04 || public key)>`. */
export function witnessVerifierKey(name: string, publicKey: Uint8Array): string {
  const key = encodeBase64(concatBytes(Uint8Array.of(COSIGNATURE_V1_TYPE), publicKey));
  return `${name}+${hex8(cosignatureKeyId(name, publicKey))}+${key}`;
}

/**
 * Parse a witness vkey. Only type 0x04 is accepted: a plain note key (0x01) given as a witness is
 * most likely the log's own key pasted by mistake, and counting it would let the log witness
 * itself; ML-DSA-44 (0x06) is not implemented.
 */
export function parseWitnessKey(vkey: string): Result<WitnessKey, WitnessKeyError> {
  const bad = (reason: WitnessKeyErrorReason, message: string): Result<never, WitnessKeyError> =>
    err({ reason, message });
  if (typeof vkey !== 'string' || vkey.length === 0 || vkey.length > MAX_KEY_TEXT) {
    return bad('malformed_witness_key', 'witness key is empty or too long');
  }
  const parts = splitKeyText(vkey);
  if (parts === undefined) {
    return bad('malformed_witness_key', 'witness key must be <name>+<key id>+<base64 key>');
  }
  const { name, id, key: raw } = parts;
  if (!isValidKeyName(name)) {
    return bad('invalid_witness_name', 'witness key name is empty, too long, or has a space or +');
  }
  if (!/^[0-9a-f]{8}$/.test(id)) {
    return bad('malformed_witness_key', 'witness key id must be 8 lowercase hex digits');
  }
  if (raw === undefined || raw.length === 0) {
    return bad('malformed_witness_key', 'witness key material must be canonical base64');
  }
  if (raw[0] !== COSIGNATURE_V1_TYPE) {
    const what =
      raw[0] === 0x01
        ? 'a plain ed25519 note key (type 0x01), not a cosignature/v1 key (type 0x04)'
        : `of signature type 0x${raw[0]!.toString(16).padStart(2, '0')}; only cosignature/v1 (0x04) is supported`;
    return bad('unsupported_witness_key_type', `witness key is ${what}`);
  }
  if (raw.length !== 33) {
    return bad('invalid_witness_public_key', 'witness key must be 0x04 and a 32-byte ed25519 key');
  }
  const publicKey = raw.slice(1);
  // A small-order or non-canonical key would verify nothing under strict rules; refuse it now.
  if (!isStrictPublicKey(publicKey)) {
    return bad('invalid_witness_public_key', 'witness key is not a canonical ed25519 point of large order');
  }
  const keyId = cosignatureKeyId(name, publicKey);
  // The ID must be the one the key gives: a mismatch means the text was altered or mixes two keys.
  if (hex8(keyId) !== id) return bad('witness_key_id_mismatch', 'witness key id does not match the key');
  return ok({ name, keyId, publicKey, vkey });
}

/** The bytes a cosigner signs: `cosignature/v1\ntime <t>\n` || the note text (its body). */
export function cosignatureMessage(body: string, timestamp: bigint): Uint8Array {
  return utf8(`${COSIGNATURE_V1_HEADER}\ntime ${timestamp.toString(10)}\n${body}`);
}

export type WitnessPolicyErrorReason =
  'no_witnesses' | 'too_many_witnesses' | 'duplicate_witness' | 'invalid_quorum';

export interface WitnessPolicyError {
  readonly reason: WitnessPolicyErrorReason;
  readonly message: string;
}

/** Which witnesses the verifier trusts and how many of them must have cosigned. */
export interface WitnessPolicy {
  readonly witnesses: readonly WitnessKey[];
  readonly quorum: number;
}

/**
 * A k-of-n policy. `quorum` defaults to all the witnesses given (the strictest reading of "these
 * witnesses"; asking for fewer is a choice the caller writes down). A quorum of 0 or above n is
 * refused: 0 would require nothing while looking configured, above n could never be met.
 */
export function witnessPolicy(
  witnesses: readonly WitnessKey[],
  quorum?: number,
): Result<WitnessPolicy, WitnessPolicyError> {
  const bad = (reason: WitnessPolicyErrorReason, message: string): Result<never, WitnessPolicyError> =>
    err({ reason, message });
  if (witnesses.length === 0) return bad('no_witnesses', 'a witness policy needs at least one witness');
  if (witnesses.length > MAX_WITNESSES)
    return bad('too_many_witnesses', `at most ${MAX_WITNESSES} witnesses`);
  const ids = new Set<string>();
  const keys = new Set<string>();
  for (const w of witnesses) {
    const id = `${w.name}+${hex8(w.keyId)}`;
    if (ids.has(id)) return bad('duplicate_witness', `witness ${JSON.stringify(id)} is given twice`);
    ids.add(id);
    // The cosignature/v1 message does not commit to the witness name: one key under two names
    // would let one cosignature, relabelled, count twice toward the quorum.
    const pk = encodeBase64(w.publicKey);
    if (keys.has(pk)) {
      return bad(
        'duplicate_witness',
        `witness ${JSON.stringify(w.name)} reuses another witness's public key`,
      );
    }
    keys.add(pk);
  }
  const k = quorum ?? witnesses.length;
  if (!Number.isSafeInteger(k) || k < 1 || k > witnesses.length) {
    return bad(
      'invalid_quorum',
      `the quorum must be between 1 and ${witnesses.length} (the witnesses given)`,
    );
  }
  return ok({ witnesses: [...witnesses], quorum: k });
}

/** One witness whose cosignature verified. */
export interface Cosigned {
  readonly name: string;
  readonly key_id: string;
  /** The latest verified timestamp of this witness on the note (POSIX seconds). */
  readonly timestamp_unix_s: number;
}

export type CosignatureErrorReason = 'malformed_note' | 'invalid_cosignature' | 'witness_quorum_not_met';

export interface CosignatureError {
  readonly reason: CosignatureErrorReason;
  readonly message: string;
  /** The witnesses whose cosignatures verified before the check failed. */
  readonly cosigned: readonly Cosigned[];
}

export interface CosignatureVerdict {
  readonly quorum: number;
  readonly witnesses: number;
  /** Sorted by name, one per witness. */
  readonly cosigned: readonly Cosigned[];
}

/**
 * Verify the cosignatures on a signed note (a checkpoint whose log signature the caller has
 * already verified) against a policy: at least `policy.quorum` distinct configured witnesses must
 * have a valid cosignature over exactly this note's text. Lines by unknown keys are ignored.
 */
export function verifyCosignatures(
  note: string | Uint8Array,
  policy: WitnessPolicy,
): Result<CosignatureVerdict, CosignatureError> {
  const parsed = parseNote(note);
  if (!parsed.ok) return err({ reason: 'malformed_note', message: parsed.error.message, cosigned: [] });
  const byId = new Map<string, WitnessKey>();
  for (const w of policy.witnesses) byId.set(`${w.name}+${w.keyId}`, w);
  const found = new Map<string, Cosigned>();
  const sorted = (): Cosigned[] =>
    [...found.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const line of parsed.value.signatures) {
    const w = byId.get(`${line.name}+${line.keyId}`);
    if (w === undefined) continue;
    const t = verifyOne(parsed.value.text, line, w);
    if (typeof t === 'string') {
      return err({
        reason: 'invalid_cosignature',
        message: `cosignature by witness ${JSON.stringify(w.name)}+${hex8(w.keyId)} ${t}`,
        cosigned: sorted(),
      });
    }
    const k = `${w.name}+${w.keyId}`;
    const had = found.get(k);
    if (had === undefined || had.timestamp_unix_s < t) {
      found.set(k, { name: w.name, key_id: hex8(w.keyId), timestamp_unix_s: t });
    }
  }
  const cosigned = sorted();
  if (cosigned.length < policy.quorum) {
    const missing = policy.witnesses
      .filter((w) => !found.has(`${w.name}+${w.keyId}`))
      .map((w) => JSON.stringify(w.name));
    return err({
      reason: 'witness_quorum_not_met',
      message: `${cosigned.length} of the ${policy.quorum} required witness cosignatures (no valid cosignature by ${missing.join(', ')})`,
      cosigned,
    });
  }
  return ok({ quorum: policy.quorum, witnesses: policy.witnesses.length, cosigned });
}

/** The timestamp a cosignature/v1 signature begins with (8 bytes, big-endian POSIX seconds). */
export function cosignatureTimestamp(signature: Uint8Array): bigint {
  let t = 0n;
  for (let i = 0; i < 8; i++) t = (t << 8n) | BigInt(signature[i] ?? 0);
  return t;
}

/** The timestamp of a valid cosignature, or why it is not one. */
function verifyOne(body: string, line: NoteSignature, w: WitnessKey): number | string {
  const sig = line.signature;
  if (sig.length !== COSIGNATURE_SIZE) return 'is not a timestamp and an ed25519 signature (72 bytes)';
  const t = cosignatureTimestamp(sig);
  // The spec caps the timestamp at 2^63 - 1 and lets verifiers refuse future ones; beyond 2^53
  // seconds is hundreds of millions of years ahead, so refusing it keeps the value a safe number.
  if (t > BigInt(Number.MAX_SAFE_INTEGER)) return 'has a timestamp beyond range';
  if (!verifyEd25519(w.publicKey, cosignatureMessage(body, t), sig.subarray(8))) return 'does not verify';
  return Number(t);
}
