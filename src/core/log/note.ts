/**
 * C2SP signed-note (https://c2sp.org/signed-note) with Ed25519 signatures (type 0x01): parsing,
 * serialization, signing, verifier keys in the `<name>+<hex key ID>+<base64(0x01 || key)>` form,
 * and verification.
 *
 * Guarantees: a note opens only if at least one signature by a KNOWN verifier (same key name AND
 * key ID) verifies over the exact note text; signatures by unknown keys are ignored and reported
 * (witness cosignatures, rotated keys), and a known key's signature that fails to verify rejects
 * the whole note (the spec's SHOULD, taken as a MUST). Ed25519 verification is strict RFC 8032
 * (`zip215: false`): non-canonical S (S >= L), non-canonical point encodings and small-order
 * public keys are refused. The note's form is checked before any signature: valid UTF-8, no
 * control character but newline, text ending in newline, a blank line, then 1..MAX_SIGNATURES
 * lines `— <name> <base64(key ID || signature)>`, names without Unicode spaces or `+`, base64 in
 * its one canonical spelling, total size bounded first. Nothing here throws on any input.
 * Never: reads a clock, does I/O, holds a seed anywhere but inside a signer's closure, or accepts
 * a signature algorithm other than Ed25519.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesEqual, concatBytes, decodeBase64, decodeUtf8, encodeBase64, utf8 } from './encoding.js';
import { err, ok, type Result } from '../result.js';

/**
 * The largest note accepted, in UTF-8 bytes, checked before parsing. The spec asks verifiers to
 * accept at least 16 signatures of up to ~5 kB (post-quantum); 256 KiB leaves room for that.
 */
export const MAX_NOTE_SIZE = 256 * 1024;

/** The most signature lines accepted (the spec's floor is 16; golang.org/x/mod/sumdb/note uses 100). */
export const MAX_SIGNATURES = 100;

/** The longest key name accepted, in UTF-16 units. */
export const MAX_KEY_NAME_LENGTH = 256;

/** Signature type identifier for Ed25519 (C2SP signed-note "Signature types"). */
export const ED25519_SIGNATURE_TYPE = 0x01;

const ED25519_PUBLIC_KEY_SIZE = 32;
const ED25519_SIGNATURE_SIZE = 64;
const SIGNATURE_PREFIX = '\u2014 ';
const PRIVATE_KEY_PREFIX = 'PRIVATE+KEY+';

export type NoteErrorReason =
  | 'too_large'
  | 'malformed_note'
  | 'too_many_signatures'
  | 'invalid_key_name'
  | 'invalid_verifier_key'
  | 'invalid_signer_key'
  | 'ambiguous_key'
  | 'invalid_signature'
  | 'unverified_note';

export interface NoteError {
  readonly reason: NoteErrorReason;
  readonly message: string;
}

const noteError = (reason: NoteErrorReason, message: string): NoteError => ({ reason, message });

/** One signature line: the key name, the 32-bit key ID, and the signature bytes after the ID. */
export interface NoteSignature {
  readonly name: string;
  readonly keyId: number;
  readonly signature: Uint8Array;
}

export interface ParsedNote {
  /** The signed text, including its final newline (not the blank separator line). */
  readonly text: string;
  readonly signatures: readonly NoteSignature[];
}

export interface OpenedNote {
  readonly text: string;
  /** Signatures by known keys, all verified (one per key). */
  readonly verified: readonly NoteSignature[];
  /** Signatures by keys the caller does not know, kept for the caller (e.g. a witness policy). */
  readonly unverified: readonly NoteSignature[];
}

/** A trusted Ed25519 key: build it with `ed25519Verifier` or `parseVerifierKey`. */
export interface NoteVerifier {
  readonly name: string;
  readonly keyId: number;
  readonly publicKey: Uint8Array;
}

/** An Ed25519 signer; the seed lives only inside `sign`. */
export interface NoteSigner {
  readonly name: string;
  readonly keyId: number;
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

// The Unicode White_Space property: exactly Go's unicode.IsSpace, which golang.org/x/mod's
// isValidName uses. Not JavaScript's \s, which also matches U+FEFF (not a space: a name with it
// is valid, and a witness signing under one must not make a note malformed). A space in a name
// would split the signature line differently.
const SPACE = /\p{White_Space}/u;

/**
 * A key name as C2SP signed-note defines it ("Format"): non-empty, no Unicode space, no `+`
 * (and, as all of a note, well-formed and free of control characters). The rule for the names of
 * signature lines read or carried on: an unknown cosigner's name is never held to more, since
 * verifiers "MUST ignore signatures from unknown keys".
 */
export function isNoteKeyName(name: string): boolean {
  return (
    typeof name === 'string' &&
    name.length > 0 &&
    name.isWellFormed() &&
    !SPACE.test(name) &&
    !name.includes('+') &&
    !hasControl(name)
  );
}

/**
 * The names of keys Writ signs or verifies with: a note key name of at most
 * MAX_KEY_NAME_LENGTH UTF-16 units (bounding verifier and signer key text).
 */
export function isValidKeyName(name: string): boolean {
  return isNoteKeyName(name) && name.length <= MAX_KEY_NAME_LENGTH;
}

function hasControl(text: string): boolean {
  return /[\u0000-\u0009\u000b-\u001f]/.test(text);
}

/**
 * key ID = SHA-256(key name || 0x0A || 0x01 || 32-byte Ed25519 public key)[:4], big-endian
 * (C2SP signed-note "Ed25519 signatures").
 */
export function ed25519KeyId(name: string, publicKey: Uint8Array): number {
  return keyIdOf(name, ED25519_SIGNATURE_TYPE, publicKey);
}

/**
 * A signed-note key ID of any signature type: SHA-256(key name || 0x0A || type || public key)[:4],
 * big-endian (C2SP signed-note; `ed25519KeyId` for type 0x01, cosignature.ts for 0x04).
 */
export function keyIdOf(name: string, type: number, publicKey: Uint8Array): number {
  const h = sha256(concatBytes(utf8(name), Uint8Array.of(0x0a, type), publicKey));
  return ((h[0]! << 24) | (h[1]! << 16) | (h[2]! << 8) | h[3]!) >>> 0;
}

/**
 * Strict RFC 8032 §5.1.7 verification: canonical encodings of A and R (y < p, no "negative zero"
 * x), S < L, and A not of small order; then the cofactored equation. Never throws.
 */
export function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== ED25519_PUBLIC_KEY_SIZE) return false;
  if (!(signature instanceof Uint8Array) || signature.length !== ED25519_SIGNATURE_SIZE) return false;
  if (!(message instanceof Uint8Array)) return false;
  try {
    // zip215: false is noble's RFC 8032 / FIPS 186-5 mode; its default for ed25519 is ZIP-215,
    // which accepts non-canonical encodings and so lets one key sign the same text two ways.
    return ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}

/** A public key usable for strict verification: a canonical encoding of a point of large order. */
export function isStrictPublicKey(publicKey: Uint8Array): boolean {
  try {
    return !ed25519.Point.fromBytes(publicKey, false).isSmallOrder();
  } catch {
    return false;
  }
}

/** A verifier for `name` and a 32-byte Ed25519 public key. */
export function ed25519Verifier(name: string, publicKey: Uint8Array): Result<NoteVerifier, NoteError> {
  if (!isValidKeyName(name))
    return err(noteError('invalid_key_name', 'key name is empty or has a space or +'));
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== ED25519_PUBLIC_KEY_SIZE) {
    return err(noteError('invalid_verifier_key', 'ed25519 public key must be 32 bytes'));
  }
  // A small-order or non-canonical key would verify nothing under strict rules; refuse it now.
  if (!isStrictPublicKey(publicKey)) {
    return err(
      noteError('invalid_verifier_key', 'ed25519 public key is not a canonical point of large order'),
    );
  }
  return ok({ name, keyId: ed25519KeyId(name, publicKey), publicKey: publicKey.slice() });
}

/** A signer for `name` from a 32-byte Ed25519 seed (RFC 8032 private key). */
export function ed25519Signer(name: string, seed: Uint8Array): Result<NoteSigner, NoteError> {
  if (!isValidKeyName(name))
    return err(noteError('invalid_key_name', 'key name is empty or has a space or +'));
  if (!(seed instanceof Uint8Array) || seed.length !== 32) {
    return err(noteError('invalid_signer_key', 'ed25519 seed must be 32 bytes'));
  }
  const secret = seed.slice();
  const publicKey = ed25519.getPublicKey(secret);
  return ok({
    name,
    keyId: ed25519KeyId(name, publicKey),
    publicKey,
    sign: (message) => ed25519.sign(message, secret),
  });
}

/** A key ID as its text form: 8 lowercase hex digits. */
export const hex8 = (n: number): string => n.toString(16).padStart(8, '0');

/** The verifier key text `<name>+<hex key ID>+<base64(0x01 || public key)>`. */
export function verifierKey(verifier: Pick<NoteVerifier, 'name' | 'publicKey'>): string {
  const id = ed25519KeyId(verifier.name, verifier.publicKey);
  const key = encodeBase64(concatBytes(Uint8Array.of(ED25519_SIGNATURE_TYPE), verifier.publicKey));
  return `${verifier.name}+${hex8(id)}+${key}`;
}

/** Longest verifier or signer key text accepted (a name, 8 hex digits, 44 base64 chars). */
export const MAX_KEY_TEXT = MAX_KEY_NAME_LENGTH + 80;

/** `<name>+<id>+<base64 key>` split into its fields (the key decoded), or undefined without two `+`. */
export function splitKeyText(
  text: string,
): { name: string; id: string; key: Uint8Array | undefined } | undefined {
  const i = text.indexOf('+');
  if (i < 0) return undefined;
  const j = text.indexOf('+', i + 1);
  if (j < 0) return undefined;
  // The base64 part may itself contain '+': name and ID are the first two fields.
  return { name: text.slice(0, i), id: text.slice(i + 1, j), key: decodeBase64(text.slice(j + 1)) };
}

/**
 * Parse a verifier key. The key ID must be 8 lowercase hex digits and match the name and key:
 * a mismatch means the text was altered or mixes two keys.
 */
export function parseVerifierKey(vkey: string): Result<NoteVerifier, NoteError> {
  const bad = (why: string): Result<never, NoteError> => err(noteError('invalid_verifier_key', why));
  if (typeof vkey !== 'string' || vkey.length > MAX_KEY_TEXT) return bad('verifier key is too long');
  const parts = splitKeyText(vkey);
  if (!parts || !isValidKeyName(parts.name)) return bad('verifier key must be <name>+<key id>+<key>');
  if (!/^[0-9a-f]{8}$/.test(parts.id)) return bad('verifier key id must be 8 lowercase hex digits');
  if (!parts.key || parts.key.length !== 1 + ED25519_PUBLIC_KEY_SIZE)
    return bad('verifier key must be 33 bytes');
  if (parts.key[0] !== ED25519_SIGNATURE_TYPE) return bad('verifier key is not an ed25519 key');
  const v = ed25519Verifier(parts.name, parts.key.subarray(1));
  if (!v.ok) return bad(v.error.message);
  if (hex8(v.value.keyId) !== parts.id) return bad('verifier key id does not match the key');
  return v;
}

/**
 * Parse a signer key in golang.org/x/mod/sumdb/note's form
 * `PRIVATE+KEY+<name>+<hex key ID>+<base64(0x01 || seed)>`, checking the ID against the key.
 */
export function parseSignerKey(skey: string): Result<NoteSigner, NoteError> {
  const bad = (why: string): Result<never, NoteError> => err(noteError('invalid_signer_key', why));
  if (typeof skey !== 'string' || skey.length > MAX_KEY_TEXT + PRIVATE_KEY_PREFIX.length) {
    return bad('signer key is too long');
  }
  if (!skey.startsWith(PRIVATE_KEY_PREFIX)) return bad('signer key must start with PRIVATE+KEY+');
  const parts = splitKeyText(skey.slice(PRIVATE_KEY_PREFIX.length));
  if (!parts || !isValidKeyName(parts.name))
    return bad('signer key must be PRIVATE+KEY+<name>+<key id>+<key>');
  if (!/^[0-9a-f]{8}$/.test(parts.id)) return bad('signer key id must be 8 lowercase hex digits');
  if (!parts.key || parts.key.length !== 33 || parts.key[0] !== ED25519_SIGNATURE_TYPE) {
    return bad('signer key must be an ed25519 seed');
  }
  const s = ed25519Signer(parts.name, parts.key.subarray(1));
  if (!s.ok) return bad(s.error.message);
  if (hex8(s.value.keyId) !== parts.id) return bad('signer key id does not match the key');
  return s;
}

function checkSize(note: string | Uint8Array): string | NoteError {
  if (note instanceof Uint8Array) {
    if (note.length > MAX_NOTE_SIZE) return noteError('too_large', `note exceeds ${MAX_NOTE_SIZE} bytes`);
    const text = decodeUtf8(note);
    return text ?? noteError('malformed_note', 'note is not valid utf-8');
  }
  if (typeof note !== 'string') return noteError('malformed_note', 'note must be text or bytes');
  // UTF-8 never takes fewer bytes than UTF-16 units, so the length check bounds the encoding.
  if (note.length > MAX_NOTE_SIZE || utf8(note).length > MAX_NOTE_SIZE) {
    return noteError('too_large', `note exceeds ${MAX_NOTE_SIZE} bytes`);
  }
  if (!note.isWellFormed()) return noteError('malformed_note', 'note is not valid utf-8');
  return note;
}

/** Note text rules shared by parsing and signing: ends in newline, no control but newline. */
function checkText(text: string): NoteError | undefined {
  if (!text.endsWith('\n')) return noteError('malformed_note', 'note text must end with a newline');
  if (hasControl(text)) return noteError('malformed_note', 'note has a control character other than newline');
  return undefined;
}

/** Parse a signed note without verifying it. The text MUST be ignored until `openNote` says so. */
export function parseNote(note: string | Uint8Array): Result<ParsedNote, NoteError> {
  const checked = checkSize(note);
  if (typeof checked !== 'string') return err(checked);
  const malformed = (why: string): Result<never, NoteError> => err(noteError('malformed_note', why));
  if (hasControl(checked)) return malformed('note has a control character other than newline');
  // The text is separated from the signatures by the LAST empty line.
  const split = checked.lastIndexOf('\n\n');
  if (split < 0) return malformed('note has no blank line before its signatures');
  const text = checked.slice(0, split + 1);
  const block = checked.slice(split + 2);
  if (block.length === 0 || !block.endsWith('\n')) return malformed('note must end with signature lines');
  const lines = block.slice(0, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) {
    return err(noteError('too_many_signatures', `note has more than ${MAX_SIGNATURES} signatures`));
  }
  const signatures: NoteSignature[] = [];
  for (const line of lines) {
    if (!line.startsWith(SIGNATURE_PREFIX))
      return malformed('signature line must start with an em dash and space');
    const rest = line.slice(SIGNATURE_PREFIX.length);
    const space = rest.indexOf(' ');
    if (space < 0) return malformed('signature line must be "— <name> <signature>"');
    const name = rest.slice(0, space);
    if (!isNoteKeyName(name)) return malformed('signature key name is empty or has a space or +');
    const bytes = decodeBase64(rest.slice(space + 1));
    // Four bytes of key ID and at least one of signature.
    if (!bytes || bytes.length < 5) return malformed('signature must be base64 of key id and signature');
    const keyId = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
    signatures.push({ name, keyId, signature: bytes.slice(4) });
  }
  return ok({ text, signatures });
}

/** One signature line of a note, `— <name> <base64(key ID || signature)>` and its newline. */
export const signatureLine = (s: NoteSignature): string => {
  const id = Uint8Array.of(s.keyId >>> 24, (s.keyId >>> 16) & 0xff, (s.keyId >>> 8) & 0xff, s.keyId & 0xff);
  return `${SIGNATURE_PREFIX}${s.name} ${encodeBase64(concatBytes(id, s.signature))}\n`;
};

/** Serialize a note: text, blank line, one line per signature. */
export function serializeNote(note: ParsedNote): Result<string, NoteError> {
  const bad = checkText(note.text);
  if (bad) return err(bad);
  if (note.signatures.length === 0)
    return err(noteError('malformed_note', 'a note needs at least one signature'));
  if (note.signatures.length > MAX_SIGNATURES) {
    return err(noteError('too_many_signatures', `note has more than ${MAX_SIGNATURES} signatures`));
  }
  for (const s of note.signatures) {
    if (!isNoteKeyName(s.name))
      return err(noteError('invalid_key_name', 'key name is empty or has a space or +'));
    if (!Number.isInteger(s.keyId) || s.keyId < 0 || s.keyId > 0xffffffff || s.signature.length === 0) {
      return err(noteError('malformed_note', 'signature needs a 32-bit key id and bytes'));
    }
  }
  const out = `${note.text}\n${note.signatures.map(signatureLine).join('')}`;
  // Re-parse: what we write must be exactly what a verifier reads back (e.g. a text with a
  // trailing blank line would move the separator).
  const back = parseNote(out);
  if (!back.ok) return back;
  if (back.value.text !== note.text)
    return err(noteError('malformed_note', 'note text would not parse back'));
  return ok(out);
}

/** Sign `text` with each signer and serialize the note. */
export function signNote(text: string, signers: readonly NoteSigner[]): Result<string, NoteError> {
  if (typeof text !== 'string' || !text.isWellFormed())
    return err(noteError('malformed_note', 'text is not valid'));
  const bad = checkText(text);
  if (bad) return err(bad);
  if (signers.length === 0) return err(noteError('malformed_note', 'a note needs at least one signer'));
  const message = utf8(text);
  const signatures = signers.map((s) => ({ name: s.name, keyId: s.keyId, signature: s.sign(message) }));
  return serializeNote({ text, signatures });
}

/**
 * Verify a note against trusted keys (C2SP signed-note "Signatures"): accepted iff at least one
 * signature by a known key (name and key ID both match) verifies; a known key's signature that
 * fails rejects the note; other signatures are returned as `unverified`.
 */
export function openNote(
  note: string | Uint8Array,
  verifiers: readonly NoteVerifier[],
): Result<OpenedNote, NoteError> {
  const parsed = parseNote(note);
  if (!parsed.ok) return parsed;
  const known = new Map<string, NoteVerifier>();
  const ambiguous = new Set<string>();
  for (const v of verifiers) {
    // A hand-built verifier whose ID does not belong to its key would make the match meaningless.
    if (
      !isValidKeyName(v.name) ||
      !isStrictPublicKey(v.publicKey) ||
      ed25519KeyId(v.name, v.publicKey) !== v.keyId
    ) {
      return err(
        noteError('invalid_verifier_key', `verifier ${JSON.stringify(v.name)} is not a valid ed25519 key`),
      );
    }
    const k = `${v.name}+${v.keyId}`;
    const had = known.get(k);
    if (had && !bytesEqual(had.publicKey, v.publicKey)) ambiguous.add(k);
    known.set(k, v);
  }
  const message = utf8(parsed.value.text);
  const verified: NoteSignature[] = [];
  const unverified: NoteSignature[] = [];
  const seen = new Set<string>();
  for (const s of parsed.value.signatures) {
    const k = `${s.name}+${s.keyId}`;
    const v = known.get(k);
    if (!v) {
      const line = signatureLine(s);
      if (!seen.has(line)) unverified.push(s);
      seen.add(line);
      continue;
    }
    // Two trusted keys share name and ID: which one signed cannot be told, so neither counts.
    if (ambiguous.has(k))
      return err(
        noteError('ambiguous_key', `two known keys are named ${JSON.stringify(s.name)}+${hex8(s.keyId)}`),
      );
    if (!verifyEd25519(v.publicKey, message, s.signature)) {
      return err(
        noteError(
          'invalid_signature',
          `signature by ${JSON.stringify(s.name)}+${hex8(s.keyId)} does not verify`,
        ),
      );
    }
    if (!verified.some((x) => x.name === s.name && x.keyId === s.keyId)) verified.push(s);
  }
  if (verified.length === 0) return err(noteError('unverified_note', 'note has no signature by a known key'));
  return ok({ text: parsed.value.text, verified, unverified });
}
