/**
 * C2SP tlog-checkpoint (https://c2sp.org/tlog-checkpoint): the note body naming a log (origin),
 * its tree size and root hash, signed through `note.ts`.
 *
 * Guarantees: a body parses only if it is at least three non-empty lines ending in newline: a
 * non-empty origin, the size in decimal without leading zeros (at most 2^53 - 1), the root as
 * canonical base64 of exactly 32 bytes, then optional non-empty extension lines; an empty tree
 * must carry the empty-tree hash. `verifyCheckpoint` accepts a checkpoint only when a known key
 * signed it AND its origin is the one the caller expects, so a key trusted for one log never
 * vouches for another log's checkpoint.
 * Never: reads a clock, does I/O, or returns a checkpoint body it did not verify.
 */
import { EMPTY_ROOT, HASH_SIZE, isHash, isTreeSize } from './merkle.js';
import { bytesEqual, decodeBase64, encodeBase64, parseDecimal } from './encoding.js';
import {
  openNote,
  serializeNote,
  signNote,
  type NoteError,
  type NoteSignature,
  type NoteSigner,
  type NoteVerifier,
  type OpenedNote,
} from './note.js';
import { err, ok, type Result } from '../result.js';

/** The longest checkpoint body accepted (origin, size, root and a few extension lines). */
export const MAX_CHECKPOINT_BODY = 4096;

export interface Checkpoint {
  /** The log's identity, e.g. `writ.example/log/<tenant_id>`. */
  readonly origin: string;
  readonly size: number;
  readonly rootHash: Uint8Array;
  /** Opaque extension lines (NOT RECOMMENDED by the spec; Writ writes none). */
  readonly extensions: readonly string[];
}

export type CheckpointErrorReason = 'malformed_checkpoint' | 'origin_mismatch' | NoteError['reason'];

export interface CheckpointError {
  readonly reason: CheckpointErrorReason;
  readonly message: string;
}

const cpError = (reason: CheckpointErrorReason, message: string): CheckpointError => ({ reason, message });

/** A checkpoint whose signature by a known key verified, with the note it came from. */
export interface VerifiedCheckpoint {
  readonly checkpoint: Checkpoint;
  readonly note: OpenedNote;
}

/** Parse a checkpoint body (the note text). */
export function parseCheckpointBody(text: string): Result<Checkpoint, CheckpointError> {
  const bad = (why: string): Result<never, CheckpointError> => err(cpError('malformed_checkpoint', why));
  if (typeof text !== 'string' || text.length > MAX_CHECKPOINT_BODY)
    return bad('checkpoint body is too long');
  if (!text.endsWith('\n')) return bad('checkpoint body must end with a newline');
  const lines = text.slice(0, -1).split('\n');
  if (lines.length < 3) return bad('checkpoint needs origin, size and root hash lines');
  const [origin, sizeText, rootText, ...extensions] = lines as [string, string, string, ...string[]];
  if (origin.length === 0) return bad('checkpoint origin must be non-empty');
  const size = parseDecimal(sizeText);
  if (size === undefined) return bad('checkpoint size must be a decimal without leading zeros, below 2^53');
  const rootHash = decodeBase64(rootText);
  if (!rootHash || rootHash.length !== HASH_SIZE)
    return bad('checkpoint root hash must be base64 of 32 bytes');
  // A head that claims zero leaves but another hash is not a tree head of any tree.
  if (size === 0 && !bytesEqual(rootHash, EMPTY_ROOT)) return bad('an empty tree has another root hash');
  if (extensions.some((l) => l.length === 0)) return bad('checkpoint extension lines must be non-empty');
  return ok({ origin, size, rootHash, extensions });
}

/** The checkpoint body text. */
export function serializeCheckpointBody(cp: Checkpoint): Result<string, CheckpointError> {
  const bad = (why: string): Result<never, CheckpointError> => err(cpError('malformed_checkpoint', why));
  if (typeof cp.origin !== 'string' || cp.origin.length === 0 || cp.origin.includes('\n')) {
    return bad('checkpoint origin must be one non-empty line');
  }
  if (!isTreeSize(cp.size)) return bad('checkpoint size must be a safe non-negative integer');
  if (!isHash(cp.rootHash)) return bad('checkpoint root hash must be 32 bytes');
  if (cp.extensions.some((l) => typeof l !== 'string' || l.length === 0 || l.includes('\n'))) {
    return bad('checkpoint extension lines must be single non-empty lines');
  }
  const text = [cp.origin, String(cp.size), encodeBase64(cp.rootHash), ...cp.extensions].join('\n') + '\n';
  // What we sign must parse back to the same checkpoint (e.g. no empty-tree head mismatch).
  const back = parseCheckpointBody(text);
  return back.ok ? ok(text) : back;
}

/**
 * Sign a checkpoint. The log's key name SHOULD match the origin (C2SP tlog-checkpoint
 * "Signatures"); Writ enforces it for the first signer, the log's own key.
 */
export function signCheckpoint(
  cp: Checkpoint,
  signers: readonly NoteSigner[],
): Result<string, CheckpointError> {
  const body = serializeCheckpointBody(cp);
  if (!body.ok) return body;
  if (signers.length === 0 || signers[0]!.name !== cp.origin) {
    return err(cpError('origin_mismatch', 'the log key name must equal the checkpoint origin'));
  }
  return signNote(body.value, signers);
}

/** Ed25519 signature size: the only signature type a checkpoint of Writ carries. */
const ED25519_SIGNATURE_BYTES = 64;

/**
 * Assemble a checkpoint note from its body (`serializeCheckpointBody`) and the log key's Ed25519
 * signature over it, made by the caller (the Durable Object signs with the runtime's native
 * Ed25519, which is asynchronous). The same key and body give the same bytes as `signCheckpoint`
 * (RFC 8032 signatures are deterministic). Checks the body parses and the signature's key name is
 * its origin, as `signCheckpoint` does; the signature itself is the caller's (not verified here).
 */
export function attachCheckpointSignature(
  body: string,
  signature: NoteSignature,
): Result<string, CheckpointError> {
  const cp = parseCheckpointBody(body);
  if (!cp.ok) return cp;
  // A signature under another name would make the note's key name disagree with its origin.
  if (signature.name !== cp.value.origin) {
    return err(cpError('origin_mismatch', 'the log key name must equal the checkpoint origin'));
  }
  if (
    !(signature.signature instanceof Uint8Array) ||
    signature.signature.length !== ED25519_SIGNATURE_BYTES
  ) {
    return err(cpError('invalid_signature', 'a checkpoint signature is 64 bytes of ed25519'));
  }
  return serializeNote({ text: body, signatures: [signature] });
}

/**
 * Open a signed checkpoint: a known key must have signed it, the body must parse, and the
 * origin must equal `expectedOrigin` exactly.
 */
export function verifyCheckpoint(
  note: string | Uint8Array,
  verifiers: readonly NoteVerifier[],
  expectedOrigin: string,
): Result<VerifiedCheckpoint, CheckpointError> {
  const opened = openNote(note, verifiers);
  if (!opened.ok) return opened;
  const cp = parseCheckpointBody(opened.value.text);
  if (!cp.ok) return cp;
  if (cp.value.origin !== expectedOrigin) {
    return err(cpError('origin_mismatch', 'checkpoint is for another log'));
  }
  return ok({ checkpoint: cp.value, note: opened.value });
}
