/**
 * C2SP tlog-proof (https://c2sp.org/tlog-proof): an offline-verifiable proof that an entry is in
 * a log, and the consistency check between two signed checkpoints.
 *
 * Format: `c2sp.org/tlog-proof@v1`, an optional `extra <base64>` line, `index <N>`, zero or more
 * base64 inclusion-proof hashes (leaf sibling first), an empty line, then the signed checkpoint
 * verbatim.
 * Guarantees: `verifyTlogProof` accepts only when the embedded checkpoint is signed by a known key,
 * is for the expected origin, and the leaf is at the stated index of that checkpoint's tree
 * (RFC 9162 §2.1.3.2). `verifyCheckpointConsistency` accepts only two checkpoints of the same
 * origin, both signed by known keys, the older no larger than the newer, linked by an RFC 9162
 * §2.1.4.2 consistency proof: a missing, reordered, rewritten or forked history fails it. The
 * extra data is returned but never trusted (it is not signed). Nothing here throws on any input.
 * Never: reads a clock or does I/O.
 */
import {
  HASH_SIZE,
  MAX_PROOF_HASHES,
  leafHash,
  verifyConsistency,
  verifyInclusion,
  type MerkleError,
} from './merkle.js';
import { decodeBase64, encodeBase64, parseDecimal } from './encoding.js';
import { verifyCheckpoint, type Checkpoint, type CheckpointError } from './checkpoint.js';
import { MAX_NOTE_SIZE, type NoteVerifier } from './note.js';
import { err, ok, type Result } from '../result.js';

export const TLOG_PROOF_HEADER = 'c2sp.org/tlog-proof@v1';

/** The largest extra data accepted, in bytes (it is opaque and unauthenticated). */
export const MAX_EXTRA_SIZE = 4096;

/** The largest proof text accepted, checked before parsing. */
export const MAX_TLOG_PROOF_SIZE = MAX_NOTE_SIZE + 8192;

export interface TlogProof {
  readonly extra?: Uint8Array;
  readonly index: number;
  readonly hashes: readonly Uint8Array[];
  /** The signed checkpoint note, verbatim. */
  readonly checkpoint: string;
}

export type ProofErrorReason =
  'malformed_proof' | 'too_large' | CheckpointError['reason'] | MerkleError['reason'];

export interface ProofError {
  readonly reason: ProofErrorReason;
  readonly message: string;
}

const proofError = (reason: ProofErrorReason, message: string): ProofError => ({ reason, message });

/** Serialize a proof; the checkpoint is appended as given. */
export function serializeTlogProof(proof: TlogProof): Result<string, ProofError> {
  const bad = (why: string): Result<never, ProofError> => err(proofError('malformed_proof', why));
  if (!Number.isSafeInteger(proof.index) || proof.index < 0)
    return bad('index must be a safe non-negative integer');
  if (proof.hashes.length > MAX_PROOF_HASHES || proof.hashes.some((h) => h.length !== HASH_SIZE)) {
    return bad('proof hashes must be 32 bytes each');
  }
  if (proof.extra !== undefined && (proof.extra.length === 0 || proof.extra.length > MAX_EXTRA_SIZE)) {
    return bad(`extra data must be 1..${MAX_EXTRA_SIZE} bytes`);
  }
  const lines = [TLOG_PROOF_HEADER];
  if (proof.extra !== undefined) lines.push(`extra ${encodeBase64(proof.extra)}`);
  lines.push(`index ${proof.index}`, ...proof.hashes.map(encodeBase64), '');
  const text = lines.join('\n') + '\n' + proof.checkpoint;
  const back = parseTlogProof(text);
  return back.ok ? ok(text) : back;
}

/** Parse a proof's structure (the checkpoint is not verified here). */
export function parseTlogProof(text: string): Result<TlogProof, ProofError> {
  const bad = (why: string): Result<never, ProofError> => err(proofError('malformed_proof', why));
  if (typeof text !== 'string') return bad('proof must be text');
  if (text.length > MAX_TLOG_PROOF_SIZE) return err(proofError('too_large', 'proof is too large'));
  let at = 0;
  const nextLine = (): string | undefined => {
    const nl = text.indexOf('\n', at);
    if (nl < 0) return undefined;
    const line = text.slice(at, nl);
    at = nl + 1;
    return line;
  };
  if (nextLine() !== TLOG_PROOF_HEADER) return bad(`first line must be ${TLOG_PROOF_HEADER}`);
  let line = nextLine();
  let extra: Uint8Array | undefined;
  if (line?.startsWith('extra ')) {
    // An empty extra would be written by omitting the line; a second spelling is refused.
    extra = decodeBase64(line.slice('extra '.length));
    if (!extra || extra.length === 0 || extra.length > MAX_EXTRA_SIZE) {
      return bad(`extra must be base64 of 1..${MAX_EXTRA_SIZE} bytes`);
    }
    line = nextLine();
  }
  if (!line?.startsWith('index ')) return bad('proof must have an index line');
  const index = parseDecimal(line.slice('index '.length));
  if (index === undefined) return bad('index must be a decimal without leading zeros, below 2^53');
  const hashes: Uint8Array[] = [];
  for (;;) {
    line = nextLine();
    if (line === undefined) return bad('proof must have an empty line before the checkpoint');
    if (line === '') break;
    if (hashes.length === MAX_PROOF_HASHES) return bad(`proof has more than ${MAX_PROOF_HASHES} hashes`);
    const h = decodeBase64(line);
    if (!h || h.length !== HASH_SIZE) return bad('proof hashes must be base64 of 32 bytes');
    hashes.push(h);
  }
  const checkpoint = text.slice(at);
  if (checkpoint.length === 0) return bad('proof has no checkpoint');
  return ok(extra === undefined ? { index, hashes, checkpoint } : { extra, index, hashes, checkpoint });
}

/** The entry a proof is about: its bytes (hashed as an RFC 9162 leaf) or its leaf hash. */
export type ProvenLeaf = { readonly data: Uint8Array } | { readonly leafHash: Uint8Array };

export interface VerifiedTlogProof {
  readonly checkpoint: Checkpoint;
  readonly index: number;
  /** Unauthenticated: whatever the prover attached. Never trust it without checking it. */
  readonly extra?: Uint8Array;
}

/**
 * Verify a tlog-proof for `leaf`: the checkpoint is signed by one of `verifiers` for
 * `expectedOrigin`, and the leaf is at the proof's index in that checkpoint's tree.
 */
export function verifyTlogProof(
  proofText: string,
  leaf: ProvenLeaf,
  verifiers: readonly NoteVerifier[],
  expectedOrigin: string,
): Result<VerifiedTlogProof, ProofError> {
  const parsed = parseTlogProof(proofText);
  if (!parsed.ok) return parsed;
  const cp = verifyCheckpoint(parsed.value.checkpoint, verifiers, expectedOrigin);
  if (!cp.ok) return cp;
  let hash: Uint8Array;
  if ('data' in leaf && leaf.data instanceof Uint8Array) hash = leafHash(leaf.data);
  else if ('leafHash' in leaf && leaf.leafHash instanceof Uint8Array) hash = leaf.leafHash;
  else return err(proofError('malformed_proof', 'leaf must be data or a leaf hash'));
  const { checkpoint } = cp.value;
  const inc = verifyInclusion(
    hash,
    parsed.value.index,
    checkpoint.size,
    parsed.value.hashes,
    checkpoint.rootHash,
  );
  if (!inc.ok) return inc;
  const out = { checkpoint, index: parsed.value.index };
  return ok(parsed.value.extra === undefined ? out : { ...out, extra: parsed.value.extra });
}

/**
 * Check that `newer` extends `older`: both signed by known keys for `origin`, and `proof` (RFC
 * 9162 §2.1.4 consistency proof hashes) links the older tree head to the newer one. Anyone
 * holding two checkpoints can run this; a log that dropped, reordered, rewrote or forked its
 * history cannot produce a passing proof.
 */
export function verifyCheckpointConsistency(
  older: string,
  newer: string,
  proof: readonly Uint8Array[],
  verifiers: readonly NoteVerifier[],
  origin: string,
): Result<{ readonly older: Checkpoint; readonly newer: Checkpoint }, ProofError> {
  const a = verifyCheckpoint(older, verifiers, origin);
  if (!a.ok) return a;
  const b = verifyCheckpoint(newer, verifiers, origin);
  if (!b.ok) return b;
  const o = a.value.checkpoint;
  const n = b.value.checkpoint;
  const c = verifyConsistency(o.size, n.size, o.rootHash, n.rootHash, proof);
  if (!c.ok) return c;
  return ok({ older: o, newer: n });
}
