/**
 * The verification of an uploaded export, kept in R2 between the calls of its import
 * (src/services/import-uploads.ts): part-way (`Verification.save`: the byte offset reached and the
 * bounded state of the checks) or finished (what it found). A resumed call trusts what it reads
 * back: lines before the offset are not read again, and a finished verification lets rows be
 * written. So what is kept is sealed and bound.
 *
 * Sealed: HMAC-SHA256 over the exact bytes kept, under a key derived from the `WRIT_ADMIN_TOKEN`
 * secret (HKDF-SHA256, `info` = `writ/import-verification-state/v1`: docs/key-derivation.md).
 * Bound: the sealed bytes name the upload, the file's SHA-256 and the R2 object version hashed at
 * completion (read from the upload's record, itself sealed: `sealRecord`, under another key); a kept state naming another is refused even though its seal is good (another
 * upload's state copied over this one's would skip checks of bytes never verified).
 * Why a MAC and not a digest in D1: the state exists before the import knows its tenant, so before
 * there is a staged-import row on the target shard to hold a digest, and it is not tied to a shard
 * (the same upload may be imported onto another); a MAC needs no migration and no D1 write per
 * call. What it costs: a rollback to an earlier state of the same upload, sealed by this Worker,
 * is accepted, and that is harmless (it re-verifies lines already verified, of the same bytes).
 * Whoever holds the platform admin token can forge a state, but can already import any file.
 * Never: parses a kept state before its seal is checked, or trusts one of another format, rules
 * version, upload, digest or object version.
 */
import type { VerifiedFile } from './ports.js';
import type { SavedVerification } from './tenant-moves.js';

/** What is kept between calls. */
export type KeptVerification =
  | { readonly phase: 'verifying'; readonly state: SavedVerification }
  | { readonly phase: 'verified'; readonly found: VerifiedFile };

/** What the kept state must be of. */
export interface KeptBinding {
  readonly upload_id: string;
  readonly sha256: string;
  readonly version: string;
  /** The verifier's rules (`VERIFICATION_RULES`). */
  readonly rules: number;
}

/** The layout of the sealed bytes: raise with any change to it. */
const FORMAT = 1;
const INFO = 'writ/import-verification-state/v1';
const RECORD_INFO = 'writ/import-upload-record/v1';

const enc = new TextEncoder();

/** The sealing key, derived from the platform admin token (at least 32 characters, else refused). */
export function deriveStateKey(secret: string): Promise<CryptoKey> {
  return deriveKey(secret, INFO);
}

/**
 * The key sealing a completed upload's record (`sealRecord`): the same secret, its own label, so
 * neither MAC can stand for the other.
 */
export function deriveRecordKey(secret: string): Promise<CryptoKey> {
  return deriveKey(secret, RECORD_INFO);
}

async function deriveKey(secret: string, info: string): Promise<CryptoKey> {
  if (secret.length < 32) throw new Error('WRIT_ADMIN_TOKEN is shorter than 32 characters');
  const ikm = await crypto.subtle.importKey('raw', enc.encode(secret), 'HKDF', false, ['deriveKey']);
  return crypto.subtle.deriveKey(
    { name: 'HKDF', hash: 'SHA-256', salt: enc.encode('writ'), info: enc.encode(info) },
    ikm,
    { name: 'HMAC', hash: 'SHA-256', length: 256 },
    false,
    ['sign', 'verify'],
  );
}

const toHex = (b: ArrayBuffer) =>
  Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');

/** `<hex HMAC>\n<JSON of the binding and the state>`: the MAC covers exactly the bytes after `\n`. */
export async function sealKept(
  key: CryptoKey,
  binding: KeptBinding,
  kept: KeptVerification,
): Promise<string> {
  const payload = JSON.stringify({ format: FORMAT, ...binding, kept });
  const mac = await crypto.subtle.sign('HMAC', key, enc.encode(payload));
  return `${toHex(mac)}\n${payload}`;
}

/**
 * The kept state if it is sealed by this key and bound to `binding`; `stale` if it is of other
 * rules (a newer deployment: verify again, nothing is wrong); otherwise why it is refused.
 */
export async function openKept(
  key: CryptoKey,
  text: string,
  binding: KeptBinding,
): Promise<{ readonly kept: KeptVerification } | { readonly stale: true } | { readonly refused: string }> {
  const nl = text.indexOf('\n');
  const mac = nl === 64 ? text.slice(0, 64) : '';
  // Tampered or truncated state would resume checks that never ran, or skip them.
  if (!/^[0-9a-f]{64}$/.test(mac)) return { refused: 'is not sealed' };
  const macBytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) macBytes[i] = parseInt(mac.slice(2 * i, 2 * i + 2), 16);
  const payload = text.slice(nl + 1);
  // `verify` compares in constant time.
  if (!(await crypto.subtle.verify('HMAC', key, macBytes, enc.encode(payload))))
    return { refused: 'does not match its seal' };
  const v = JSON.parse(payload) as KeptBinding & {
    readonly format: unknown;
    readonly kept: KeptVerification;
  };
  if (v.format !== FORMAT) return { refused: 'is of another format' };
  // Another upload's state, sealed by this Worker, copied here: of bytes this upload never had.
  if (v.upload_id !== binding.upload_id) return { refused: 'is of another upload' };
  // Of another file or object version under this upload id: not of the bytes read now.
  if (v.sha256 !== binding.sha256) return { refused: 'is of another file digest' };
  if (v.version !== binding.version) return { refused: 'is of another object version' };
  if (v.rules !== binding.rules) return { stale: true };
  return { kept: v.kept };
}

/** What a completed upload's record pins: the digest the operator named, and the object hashed. */
export interface CompletedFile {
  readonly sha256: string;
  readonly bytes: number;
  readonly version: string;
}

const recordPayload = (upload_id: string, f: CompletedFile) =>
  enc.encode(JSON.stringify([upload_id, f.sha256, f.bytes, f.version]));

/**
 * The hex HMAC of a completed upload's record (its id, digest, size and object version), under
 * `deriveRecordKey`. The seal and pin of every later read hang on those values, and the record
 * lies in the same bucket as the object: unsealed, whoever can write the bucket could put other
 * bytes under the key and a record naming their digest and version, and the import would verify
 * and write that file instead of the one the operator completed.
 */
export async function sealRecord(key: CryptoKey, upload_id: string, f: CompletedFile): Promise<string> {
  return toHex(await crypto.subtle.sign('HMAC', key, recordPayload(upload_id, f)));
}

/** Whether `seal` is `sealRecord`'s for these values (compared in constant time by `verify`). */
export async function recordSealed(
  key: CryptoKey,
  upload_id: string,
  f: CompletedFile,
  seal: unknown,
): Promise<boolean> {
  if (typeof seal !== 'string' || !/^[0-9a-f]{64}$/.test(seal)) return false;
  const mac = new Uint8Array(32);
  for (let i = 0; i < 32; i++) mac[i] = parseInt(seal.slice(2 * i, 2 * i + 2), 16);
  return crypto.subtle.verify('HMAC', key, mac, recordPayload(upload_id, f));
}
