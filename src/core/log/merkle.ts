/**
 * RFC 9162 §2.1 (= RFC 6962 §2.1) Merkle Tree hashing with SHA-256: tree hashes, inclusion
 * proofs and consistency proofs, generated and verified.
 *
 * Guarantees: leaf and node hashes are domain-separated (`0x00` / `0x01` prefixes, §2.1.1), so a
 * leaf can never be presented as an interior node. Verification follows §2.1.3.2 and §2.1.4.2
 * step by step and, before any hashing, checks every precondition the RFC states or implies
 * (sizes are safe integers, `index < size`, `first <= second`, every hash exactly 32 bytes, the
 * proof exactly as long as the one the log must have produced). Every malformed or wrong proof is
 * a typed `MerkleError`; no input, however hostile, makes a verifier throw.
 * Generation reads complete-subtree hashes through a `HashReader`, so a sequencer produces proofs
 * from stored tiles without loading every leaf. SHA-256 is @noble/hashes unless an adapter
 * installs a native one that reproduces the known answers (`useMerkleSha256`).
 * Never: reads a clock, does I/O, or uses bitwise operators on tree sizes (JavaScript's are
 * 32-bit; sizes here go up to 2^53 - 1).
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesEqual } from './encoding.js';
import { err, ok, type Result } from '../result.js';

/** SHA-256 output size: every leaf, node and root hash is exactly this long. */
export const HASH_SIZE = 32;

/**
 * The longest proof any tree of at most 2^53 - 1 leaves needs (53 levels, plus one for the
 * consistency seed). Longer proof arrays are rejected before any hashing.
 */
export const MAX_PROOF_HASHES = 64;

export type MerkleErrorReason =
  | 'invalid_size'
  | 'index_out_of_range'
  | 'size_decreased'
  | 'invalid_hash'
  | 'wrong_proof_length'
  | 'root_mismatch'
  | 'missing_node';

export interface MerkleError {
  readonly reason: MerkleErrorReason;
  readonly message: string;
}

const merkleError = (reason: MerkleErrorReason, message: string): MerkleError => ({ reason, message });

/** A complete (perfect) subtree: `2^level` leaves starting at leaf `index * 2^level`. */
export interface NodeId {
  readonly level: number;
  readonly index: number;
}

/**
 * Returns the hash of the complete subtree `(level, index)`, or undefined when it is not stored.
 * A sequencer backs it with tiles (`hashReaderFromTiles`); tests back it with an array.
 */
export type HashReader = (level: number, index: number) => Uint8Array | undefined;

const LEAF_PREFIX = Uint8Array.of(0x00);
const NODE_PREFIX = Uint8Array.of(0x01);

/** SHA-256 of the concatenation of `parts`: the one primitive the tree hashes are made of. */
export type MerkleSha256 = (parts: readonly Uint8Array[]) => Uint8Array;

const portableSha256: MerkleSha256 = (parts) => {
  const h = sha256.create();
  for (const p of parts) h.update(p);
  return h.digest();
};
let merkleSha256: MerkleSha256 = portableSha256;

/** RFC 6962 test vector: the hash of the empty leaf, SHA-256(0x00). */
const EMPTY_LEAF_HASH = '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d';

const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/**
 * Let an adapter hash leaves and nodes with the platform's native, synchronous SHA-256
 * (`node:crypto` `createHash`, which workerd provides under `nodejs_compat`): a leaf of a 1 KB
 * entry hashes about three times faster than with the portable one, and the sequencer hashes every
 * entry of a batch. The core imports no platform API; the implementation must reproduce the known
 * answers (RFC 6962's empty-leaf hash, and the portable hashes of a multi-block leaf and of a node
 * whose inputs are views at an offset into a larger buffer) or it is refused and the portable one
 * stays: a tree head never depends on which implementation computed it. Returns whether installed.
 */
export function useMerkleSha256(impl: MerkleSha256): boolean {
  const big = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7) & 0xff);
  const view = (at: number) => big.subarray(at, at + HASH_SIZE);
  const cases: readonly (readonly Uint8Array[])[] = [
    [LEAF_PREFIX, new Uint8Array(0)],
    [LEAF_PREFIX, big],
    [NODE_PREFIX, view(3), view(101)],
  ];
  try {
    // All computed before any is compared: an implementation that reuses its output buffer fails.
    const got = cases.map((c) => impl(c));
    if (hex(got[0]!) !== EMPTY_LEAF_HASH) return false;
    for (const [i, c] of cases.entries()) {
      if (!isHash(got[i]) || !bytesEqual(got[i]!, portableSha256(c))) return false;
    }
  } catch {
    return false;
  }
  merkleSha256 = impl;
  return true;
}

/** RFC 9162 §2.1.1: MTH({d(0)}) = SHA-256(0x00 || d(0)). */
export function leafHash(data: Uint8Array): Uint8Array {
  return merkleSha256([LEAF_PREFIX, data]);
}

/** RFC 9162 §2.1.1: SHA-256(0x01 || MTH(left) || MTH(right)). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return merkleSha256([NODE_PREFIX, left, right]);
}

/** RFC 9162 §2.1.1: the hash of an empty tree is the hash of an empty string. */
export const EMPTY_ROOT: Uint8Array = sha256(new Uint8Array(0));

export function isHash(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array && value.length === HASH_SIZE;
}

export function isTreeSize(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

const pow2 = (level: number): number => 2 ** level;

/** The largest power of two strictly smaller than n (n >= 2): RFC 9162 §2.1.1's k. */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * MTH over leaf hashes (RFC 9162 §2.1.1), computed left to right with a stack of complete
 * subtrees (the compact range), so it costs n - 1 node hashes and O(log n) memory.
 */
export function rootFromLeafHashes(leafHashes: readonly Uint8Array[]): Uint8Array {
  const stack: { hash: Uint8Array; level: number }[] = [];
  for (const h of leafHashes) {
    let top = { hash: h, level: 0 };
    while (stack.length > 0 && stack[stack.length - 1]!.level === top.level) {
      const left = stack.pop()!;
      top = { hash: nodeHash(left.hash, top.hash), level: top.level + 1 };
    }
    stack.push(top);
  }
  return foldRight(stack.map((s) => s.hash)) ?? EMPTY_ROOT;
}

/** MTH of leaf data: each item is hashed as a leaf first. */
export function rootFromLeaves(leaves: readonly Uint8Array[]): Uint8Array {
  return rootFromLeafHashes(leaves.map(leafHash));
}

// The complete subtrees of a range, left to right, hash to the range's MTH by folding from the
// right: MTH(D[a:b]) = HASH(MTH(D[a:a+k]) || MTH(D[a+k:b])) with D[a:a+k] complete.
function foldRight(hashes: readonly Uint8Array[]): Uint8Array | undefined {
  let acc: Uint8Array | undefined;
  for (let i = hashes.length - 1; i >= 0; i--)
    acc = acc === undefined ? hashes[i]! : nodeHash(hashes[i]!, acc);
  return acc;
}

/** A half-open leaf range [start, end) of a subtree that appears in the tree's structure. */
interface Range {
  readonly start: number;
  readonly end: number;
}

/**
 * The complete subtrees that make up the range [start, end), left to right. `start` must be a
 * multiple of the largest power of two not above `end - start` (true of every range a proof or
 * root refers to): then the range splits exactly as RFC 9162 §2.1.1 splits it.
 */
export function rangeNodes(start: number, end: number): NodeId[] {
  const out: NodeId[] = [];
  let at = start;
  while (at < end) {
    let size = 1;
    let level = 0;
    while (size * 2 <= end - at) {
      size *= 2;
      level++;
    }
    out.push({ level, index: at / size });
    at += size;
  }
  return out;
}

/** MTH(D[start:end]) from stored complete subtrees. */
export function rangeHash(start: number, end: number, read: HashReader): Result<Uint8Array, MerkleError> {
  const hashes: Uint8Array[] = [];
  for (const n of rangeNodes(start, end)) {
    const h = read(n.level, n.index);
    if (!isHash(h)) {
      return err(merkleError('missing_node', `node at level ${n.level} index ${n.index} is not available`));
    }
    hashes.push(h);
  }
  return ok(foldRight(hashes) ?? EMPTY_ROOT);
}

/**
 * RFC 9162 §2.1.3.1 PATH(m, D[n]) as ranges, leaf sibling first. Requires 0 <= m < n.
 * PATH(m, D[n]) = PATH(m, D[0:k]) : MTH(D[k:n]) for m < k, PATH(m - k, D[k:n]) : MTH(D[0:k])
 * otherwise; the descent below visits the same subtrees top-down, then reverses.
 */
function inclusionRanges(m: number, n: number): Range[] {
  const out: Range[] = [];
  let lo = 0;
  let hi = n;
  while (hi - lo > 1) {
    const k = splitPoint(hi - lo);
    if (m < lo + k) {
      out.push({ start: lo + k, end: hi });
      hi = lo + k;
    } else {
      out.push({ start: lo, end: lo + k });
      lo += k;
    }
  }
  return out.reverse();
}

/**
 * RFC 9162 §2.1.4.1 PROOF(m, D[n]) = SUBPROOF(m, D[n], true) as ranges. Requires 0 < m <= n.
 * SUBPROOF(m, D[m], true) = {}; SUBPROOF(m, D[m], false) = {MTH(D[m])}; for m < n,
 * SUBPROOF(m, D[0:k], b) : MTH(D[k:n]) if m <= k, else SUBPROOF(m - k, D[k:n], false) : MTH(D[0:k]).
 */
function consistencyRanges(m: number, n: number): Range[] {
  const out: Range[] = [];
  let lo = 0;
  let hi = n;
  let b = true;
  while (m !== hi) {
    const k = splitPoint(hi - lo);
    if (m - lo <= k) {
      out.push({ start: lo + k, end: hi });
      hi = lo + k;
    } else {
      out.push({ start: lo, end: lo + k });
      lo += k;
      b = false;
    }
  }
  if (!b) out.push({ start: lo, end: hi });
  return out.reverse();
}

function checkSize(size: unknown, what: string): MerkleError | undefined {
  return isTreeSize(size)
    ? undefined
    : merkleError('invalid_size', `${what} must be a safe non-negative integer`);
}

function checkInclusionArgs(index: number, size: number): MerkleError | undefined {
  const bad = checkSize(size, 'tree size');
  if (bad) return bad;
  // No leaf is in an empty tree; an index past the end names no leaf (RFC 9162 §2.1.3.2 step 1).
  if (size === 0) return merkleError('index_out_of_range', 'an empty tree includes no leaf');
  if (!isTreeSize(index) || index >= size) {
    return merkleError('index_out_of_range', `leaf index must be an integer below the tree size ${size}`);
  }
  return undefined;
}

function checkConsistencyArgs(size1: number, size2: number): MerkleError | undefined {
  const bad = checkSize(size1, 'first tree size') ?? checkSize(size2, 'second tree size');
  if (bad) return bad;
  // A log only grows: an older tree larger than the newer one is a rollback, not a proof request.
  if (size1 > size2) return merkleError('size_decreased', `first tree size ${size1} exceeds second ${size2}`);
  return undefined;
}

/** The complete subtrees whose hashes an inclusion proof for `index` in a tree of `size` needs. */
export function inclusionProofNodes(index: number, size: number): Result<NodeId[], MerkleError> {
  const bad = checkInclusionArgs(index, size);
  if (bad) return err(bad);
  return ok(inclusionRanges(index, size).flatMap((r) => rangeNodes(r.start, r.end)));
}

/** The complete subtrees whose hashes a consistency proof from `size1` to `size2` needs. */
export function consistencyProofNodes(size1: number, size2: number): Result<NodeId[], MerkleError> {
  const bad = checkConsistencyArgs(size1, size2);
  if (bad) return err(bad);
  if (size1 === 0) return ok([]);
  return ok(consistencyRanges(size1, size2).flatMap((r) => rangeNodes(r.start, r.end)));
}

/** The complete subtrees whose hashes the root of a tree of `size` needs (its compact range). */
export function rootNodes(size: number): Result<NodeId[], MerkleError> {
  const bad = checkSize(size, 'tree size');
  if (bad) return err(bad);
  return ok(rangeNodes(0, size));
}

/** The tree head MTH(D[0:size]). */
export function treeRoot(size: number, read: HashReader): Result<Uint8Array, MerkleError> {
  const bad = checkSize(size, 'tree size');
  if (bad) return err(bad);
  return rangeHash(0, size, read);
}

function hashRanges(ranges: readonly Range[], read: HashReader): Result<Uint8Array[], MerkleError> {
  const out: Uint8Array[] = [];
  for (const r of ranges) {
    const h = rangeHash(r.start, r.end, read);
    if (!h.ok) return h;
    out.push(h.value);
  }
  return ok(out);
}

/** RFC 9162 §2.1.3.1: the inclusion proof for leaf `index` in the tree of `size` leaves. */
export function inclusionProof(
  index: number,
  size: number,
  read: HashReader,
): Result<Uint8Array[], MerkleError> {
  const bad = checkInclusionArgs(index, size);
  if (bad) return err(bad);
  return hashRanges(inclusionRanges(index, size), read);
}

/**
 * RFC 9162 §2.1.4.1: the consistency proof from the tree of `size1` leaves to the tree of
 * `size2`. Empty when `size1` is 0 or equals `size2` (nothing to prove beyond comparing heads).
 */
export function consistencyProof(
  size1: number,
  size2: number,
  read: HashReader,
): Result<Uint8Array[], MerkleError> {
  const bad = checkConsistencyArgs(size1, size2);
  if (bad) return err(bad);
  if (size1 === 0) return ok([]);
  return hashRanges(consistencyRanges(size1, size2), read);
}

/**
 * A `HashReader` over an in-memory list of leaf hashes, for tests and small logs: each node is
 * computed on demand from the leaves it covers.
 */
export function arrayHashReader(leafHashes: readonly Uint8Array[]): HashReader {
  return (level, index) => {
    const width = pow2(level);
    const start = index * width;
    if (!Number.isSafeInteger(start) || start < 0 || start + width > leafHashes.length) return undefined;
    return rootFromLeafHashes(leafHashes.slice(start, start + width));
  };
}

function checkHashes(hashes: readonly unknown[], what: string): MerkleError | undefined {
  for (const h of hashes) {
    if (!isHash(h)) return merkleError('invalid_hash', `${what} must be ${HASH_SIZE}-byte hashes`);
  }
  return undefined;
}

const isOdd = (x: number): boolean => x % 2 === 1;
const half = (x: number): number => Math.floor(x / 2);

/**
 * RFC 9162 §2.1.3.2: verify that `leaf` (a leaf hash) is at `index` in the tree of `size`
 * leaves whose head is `root`.
 */
export function verifyInclusion(
  leaf: Uint8Array,
  index: number,
  size: number,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): Result<void, MerkleError> {
  const bad = checkInclusionArgs(index, size);
  if (bad) return err(bad);
  if (!Array.isArray(proof) || proof.length > MAX_PROOF_HASHES) {
    return err(
      merkleError('wrong_proof_length', `inclusion proof must be an array of at most ${MAX_PROOF_HASHES}`),
    );
  }
  const badHash = checkHashes([leaf, root], 'leaf and root') ?? checkHashes(proof, 'proof entries');
  if (badHash) return err(badHash);
  // The log's proof has exactly one hash per level of the path (§2.1.3.1); anything else is
  // padding or truncation, refused before hashing.
  const expected = inclusionRanges(index, size).length;
  if (proof.length !== expected) {
    return err(
      merkleError('wrong_proof_length', `inclusion proof has ${proof.length} hashes, expected ${expected}`),
    );
  }
  // Steps 2-5, verbatim.
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return err(merkleError('wrong_proof_length', 'inclusion proof is longer than the path'));
    if (isOdd(fn) || fn === sn) {
      r = nodeHash(p, r);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  if (sn !== 0) return err(merkleError('wrong_proof_length', 'inclusion proof is shorter than the path'));
  if (!bytesEqual(r, root))
    return err(merkleError('root_mismatch', 'inclusion proof does not lead to the root'));
  return ok(undefined);
}

/**
 * RFC 9162 §2.1.4.2: verify that the tree of `size1` leaves with head `root1` is a prefix of the
 * tree of `size2` leaves with head `root2`.
 * Edge cases the RFC leaves to the caller (it states 0 < first < second): an empty first tree is
 * a prefix of every tree, so the proof must be empty and `root1` must be the empty-tree hash;
 * equal sizes need an empty proof and equal heads.
 */
export function verifyConsistency(
  size1: number,
  size2: number,
  root1: Uint8Array,
  root2: Uint8Array,
  proof: readonly Uint8Array[],
): Result<void, MerkleError> {
  const bad = checkConsistencyArgs(size1, size2);
  if (bad) return err(bad);
  if (!Array.isArray(proof) || proof.length > MAX_PROOF_HASHES) {
    return err(
      merkleError('wrong_proof_length', `consistency proof must be an array of at most ${MAX_PROOF_HASHES}`),
    );
  }
  const badHash = checkHashes([root1, root2], 'tree heads') ?? checkHashes(proof, 'proof entries');
  if (badHash) return err(badHash);
  const expected = size1 === 0 ? 0 : consistencyRanges(size1, size2).length;
  if (proof.length !== expected) {
    return err(
      merkleError('wrong_proof_length', `consistency proof has ${proof.length} hashes, expected ${expected}`),
    );
  }
  if (size1 === 0) {
    // A head that claims zero leaves but another hash is not a tree head at all.
    if (!bytesEqual(root1, EMPTY_ROOT))
      return err(merkleError('root_mismatch', 'an empty tree has another head'));
    return ok(undefined);
  }
  if (size1 === size2) {
    // Same size, different heads: a fork (two histories of the same length).
    if (!bytesEqual(root1, root2))
      return err(merkleError('root_mismatch', 'trees of equal size have different heads'));
    return ok(undefined);
  }
  // Step 1 holds: the length check above guarantees a non-empty path for 0 < first < second.
  // Step 2: if first is an exact power of 2, prepend first_hash.
  const path = isPowerOfTwo(size1) ? [root1, ...proof] : [...proof];
  // Steps 3-4.
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (isOdd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  // Step 5.
  let fr = path[0]!;
  let sr = path[0]!;
  // Step 6.
  for (let i = 1; i < path.length; i++) {
    const c = path[i]!;
    if (sn === 0) return err(merkleError('wrong_proof_length', 'consistency proof is longer than the path'));
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  // Step 7.
  if (sn !== 0) return err(merkleError('wrong_proof_length', 'consistency proof is shorter than the path'));
  if (!bytesEqual(fr, root1))
    return err(merkleError('root_mismatch', 'consistency proof does not lead to the first head'));
  if (!bytesEqual(sr, root2))
    return err(merkleError('root_mismatch', 'consistency proof does not lead to the second head'));
  return ok(undefined);
}

function isPowerOfTwo(n: number): boolean {
  let x = n;
  while (x > 1 && x % 2 === 0) x /= 2;
  return x === 1;
}
