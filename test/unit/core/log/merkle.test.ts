/**
 * RFC 9162 §2.1 Merkle hashing: known answers from the RFC 6962 eight-leaf vector set, the
 * corruption probes certificate-transparency implementations run on them, property tests against
 * the recursive reference, and every rejection path of the verifiers.
 */
import { hexToBytes } from '@noble/hashes/utils.js';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import {
  EMPTY_ROOT,
  MAX_PROOF_HASHES,
  arrayHashReader,
  consistencyProof,
  consistencyProofNodes,
  inclusionProof,
  inclusionProofNodes,
  leafHash,
  nodeHash,
  rangeNodes,
  rootFromLeafHashes,
  rootFromLeaves,
  rootNodes,
  treeRoot,
  verifyConsistency,
  verifyInclusion,
  useMerkleSha256,
  type MerkleErrorReason,
  type MerkleSha256,
} from '../../../../src/core/log/merkle.js';
import { createHash } from 'node:crypto';
import vectors from '../../../data/tlog/rfc6962-merkle.json';
import { RefTree, hex, leafData, refLeafHash } from './reference.js';

// Pure hashing, slow in workerd and slower on a loaded machine: no test here may fail on time.
vi.setConfig({ testTimeout: 300_000 });

const leaves = vectors.leaves.map((h) => hexToBytes(h));
const leafHashes = leaves.map(leafHash);
const read = arrayHashReader(leafHashes);
const root = (n: number): Uint8Array => hexToBytes(vectors.roots[n - 1]!);
const SOME_HASH = hexToBytes('abacaba000000000000000000000000000000000000000000060061e00123456');

function reasonOf(r: { ok: boolean; error?: { reason: MerkleErrorReason } }): MerkleErrorReason | undefined {
  return r.ok ? undefined : r.error?.reason;
}

function flip(h: Uint8Array, bit: number): Uint8Array {
  const c = h.slice();
  c[bit >> 3]! ^= 1 << (bit & 7);
  return c;
}

describe('known answers (RFC 6962 eight-leaf vectors)', () => {
  it('hashes the empty tree to SHA-256 of the empty string', () => {
    expect(hex(EMPTY_ROOT)).toBe(vectors.emptyRoot);
    expect(hex(rootFromLeafHashes([]))).toBe(vectors.emptyRoot);
    const r = treeRoot(0, read);
    expect(r.ok && hex(r.value)).toBe(vectors.emptyRoot);
  });

  it('computes the root of every prefix of the eight leaves', () => {
    for (let n = 1; n <= 8; n++) {
      expect(hex(rootFromLeaves(leaves.slice(0, n)))).toBe(vectors.roots[n - 1]);
      const r = treeRoot(n, read);
      expect(r.ok && hex(r.value)).toBe(vectors.roots[n - 1]);
    }
  });

  it('domain-separates leaves from nodes', () => {
    expect(hex(leafHash(new Uint8Array(0)))).toBe(vectors.roots[0]);
    expect(hex(nodeHash(leafHashes[0]!, leafHashes[1]!))).toBe(vectors.roots[1]);
  });

  for (const v of vectors.inclusion) {
    const proof = v.proof.map((h) => hexToBytes(h));
    it(`generates and verifies the inclusion proof of leaf ${v.index} in ${v.size}`, () => {
      const got = inclusionProof(v.index, v.size, read);
      expect(got.ok && got.value.map(hex)).toEqual(v.proof);
      expect(verifyInclusion(leafHashes[v.index]!, v.index, v.size, proof, root(v.size)).ok).toBe(true);
    });

    it(`rejects every corruption of the inclusion proof of leaf ${v.index} in ${v.size}`, () => {
      const lh = leafHashes[v.index]!;
      const rt = root(v.size);
      const probes: [number, number, Uint8Array, Uint8Array, Uint8Array[]][] = [
        [v.index - 1, v.size, lh, rt, proof],
        [v.index + 1, v.size, lh, rt, proof],
        [v.index ^ 2, v.size, lh, rt, proof],
        [v.index, v.size * 2, lh, rt, proof],
        [v.index, Math.floor(v.size / 2), lh, rt, proof],
        [v.index, v.size, refLeafHash(new TextEncoder().encode('WrongLeaf')), rt, proof],
        [v.index, v.size, lh, EMPTY_ROOT, proof],
        [v.index, v.size, lh, SOME_HASH, proof],
        [v.index, v.size, lh, rt, [...proof, rt]],
        [v.index, v.size, lh, rt, [rt, ...proof]],
        [v.index, v.size, lh, rt, [...proof, new Uint8Array(0)]],
      ];
      for (let i = 0; i < proof.length; i++) {
        probes.push([v.index, v.size, lh, rt, proof.map((p, j) => (j === i ? flip(p, 3) : p))]);
      }
      if (proof.length > 0) probes.push([v.index, v.size, lh, rt, proof.slice(0, -1)]);
      if (proof.length > 1) probes.push([v.index, v.size, lh, rt, [proof[0]!, SOME_HASH, ...proof.slice(1)]]);
      for (const [i, s, l, r, p] of probes) expect(verifyInclusion(l, i, s, p, r).ok).toBe(false);
    });
  }

  for (const v of vectors.consistency) {
    const proof = v.proof.map((h) => hexToBytes(h));
    it(`generates and verifies the consistency proof from ${v.size1} to ${v.size2}`, () => {
      const got = consistencyProof(v.size1, v.size2, read);
      expect(got.ok && got.value.map(hex)).toEqual(v.proof);
      expect(verifyConsistency(v.size1, v.size2, root(v.size1), root(v.size2), proof).ok).toBe(true);
    });

    if (proof.length === 0) continue;
    it(`rejects every corruption of the consistency proof from ${v.size1} to ${v.size2}`, () => {
      const r1 = root(v.size1);
      const r2 = root(v.size2);
      const wrong = SOME_HASH;
      const probes: [number, number, Uint8Array, Uint8Array, Uint8Array[]][] = [
        [v.size1 - 1, v.size2, r1, r2, proof],
        [v.size1 + 1, v.size2, r1, r2, proof],
        [v.size1 ^ 2, v.size2, r1, r2, proof],
        [v.size1, v.size2 * 2, r1, r2, proof],
        [v.size1, Math.floor(v.size2 / 2), r1, r2, proof],
        [v.size1, v.size2, wrong, r2, proof],
        [v.size1, v.size2, r1, wrong, proof],
        [v.size1, v.size2, r2, r1, proof],
        [v.size1, v.size2, r1, r2, []],
        [v.size1, v.size2, r1, r2, [...proof, r1]],
        [v.size1, v.size2, r1, r2, [...proof, r2]],
        [v.size1, v.size2, r1, r2, [r1, ...proof]],
        [v.size1, v.size2, r1, r2, [r2, ...proof]],
        [v.size1, v.size2, r1, r2, [proof[0]!, ...proof]],
        [v.size1, v.size2, r1, r2, proof.slice(0, -1)],
      ];
      for (let i = 0; i < proof.length; i++) {
        probes.push([v.size1, v.size2, r1, r2, proof.map((p, j) => (j === i ? flip(p, 4) : p))]);
      }
      for (const [s1, s2, a, b, p] of probes) expect(verifyConsistency(s1, s2, a, b, p).ok).toBe(false);
    });
  }
});

describe('rejection paths', () => {
  const lh = leafHashes[0]!;
  const rt = root(1);

  it('rejects tree sizes that are not safe non-negative integers', () => {
    for (const size of [-1, 1.5, Number.NaN, Infinity, 2 ** 53]) {
      expect(reasonOf(verifyInclusion(lh, 0, size, [], rt))).toBe('invalid_size');
      expect(reasonOf(verifyConsistency(size, 1, rt, rt, []))).toBe('invalid_size');
      expect(reasonOf(verifyConsistency(0, size, EMPTY_ROOT, rt, []))).toBe('invalid_size');
      expect(reasonOf(inclusionProof(0, size, read))).toBe('invalid_size');
      expect(reasonOf(treeRoot(size, read))).toBe('invalid_size');
      expect(reasonOf(rootNodes(size))).toBe('invalid_size');
    }
  });

  it('rejects an inclusion proof in an empty tree (size 0)', () => {
    expect(reasonOf(verifyInclusion(lh, 0, 0, [], EMPTY_ROOT))).toBe('index_out_of_range');
    expect(reasonOf(inclusionProof(0, 0, read))).toBe('index_out_of_range');
  });

  it('rejects an index at or past the tree size, negative or fractional', () => {
    for (const index of [1, 2, -1, 0.5, Number.NaN]) {
      expect(reasonOf(verifyInclusion(lh, index, 1, [], rt))).toBe('index_out_of_range');
      expect(reasonOf(inclusionProofNodes(index, 1))).toBe('index_out_of_range');
    }
  });

  it('rejects a first tree larger than the second', () => {
    expect(reasonOf(verifyConsistency(2, 1, root(2), root(1), []))).toBe('size_decreased');
    expect(reasonOf(consistencyProof(2, 1, read))).toBe('size_decreased');
    expect(reasonOf(consistencyProofNodes(2, 1))).toBe('size_decreased');
  });

  it('rejects hashes of the wrong length or type', () => {
    const short = new Uint8Array(31);
    expect(reasonOf(verifyInclusion(short, 0, 1, [], rt))).toBe('invalid_hash');
    expect(reasonOf(verifyInclusion(lh, 0, 1, [], short))).toBe('invalid_hash');
    expect(reasonOf(verifyInclusion(leafHashes[1]!, 1, 2, [new Uint8Array(33)], root(2)))).toBe(
      'invalid_hash',
    );
    const notBytes = 'x'.repeat(32) as unknown as Uint8Array;
    expect(reasonOf(verifyInclusion(notBytes, 0, 1, [], rt))).toBe('invalid_hash');
    expect(reasonOf(verifyConsistency(1, 2, short, root(2), [leafHashes[1]!]))).toBe('invalid_hash');
    expect(reasonOf(verifyConsistency(1, 2, rt, root(2), [short]))).toBe('invalid_hash');
  });

  it('rejects proofs of the wrong length, too long or not an array', () => {
    expect(reasonOf(verifyInclusion(lh, 0, 2, [], root(2)))).toBe('wrong_proof_length');
    expect(reasonOf(verifyInclusion(lh, 0, 1, [rt], rt))).toBe('wrong_proof_length');
    const huge = Array.from({ length: MAX_PROOF_HASHES + 1 }, () => rt);
    expect(reasonOf(verifyInclusion(lh, 0, 1, huge, rt))).toBe('wrong_proof_length');
    expect(reasonOf(verifyConsistency(1, 2, rt, root(2), huge))).toBe('wrong_proof_length');
    const notArray = { length: 0 } as unknown as Uint8Array[];
    expect(reasonOf(verifyInclusion(lh, 0, 1, notArray, rt))).toBe('wrong_proof_length');
    expect(reasonOf(verifyConsistency(1, 2, rt, root(2), notArray))).toBe('wrong_proof_length');
  });

  it('treats the empty first tree as a prefix of everything, and nothing else', () => {
    expect(verifyConsistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, []).ok).toBe(true);
    expect(verifyConsistency(0, 8, EMPTY_ROOT, root(8), []).ok).toBe(true);
    expect(reasonOf(verifyConsistency(0, 8, root(1), root(8), []))).toBe('root_mismatch');
    expect(reasonOf(verifyConsistency(0, 8, EMPTY_ROOT, root(8), [EMPTY_ROOT]))).toBe('wrong_proof_length');
    expect(consistencyProof(0, 5, read)).toEqual({ ok: true, value: [] });
  });

  it('requires equal heads and an empty proof for equal sizes', () => {
    expect(verifyConsistency(5, 5, root(5), root(5), []).ok).toBe(true);
    expect(reasonOf(verifyConsistency(5, 5, root(5), root(4), []))).toBe('root_mismatch');
    expect(reasonOf(verifyConsistency(5, 5, root(5), root(5), [root(5)]))).toBe('wrong_proof_length');
  });

  it('reports a node the reader cannot supply', () => {
    const partial = arrayHashReader(leafHashes.slice(0, 4));
    expect(reasonOf(inclusionProof(0, 8, partial))).toBe('missing_node');
    expect(reasonOf(consistencyProof(3, 8, partial))).toBe('missing_node');
    expect(reasonOf(treeRoot(8, partial))).toBe('missing_node');
  });
});

describe('node sets', () => {
  it('decomposes a prefix into its compact range', () => {
    expect(rangeNodes(0, 13)).toEqual([
      { level: 3, index: 0 },
      { level: 2, index: 2 },
      { level: 0, index: 12 },
    ]);
    expect(rootNodes(0)).toEqual({ ok: true, value: [] });
  });

  it('names exactly the nodes proof generation reads', () => {
    for (let n = 1; n <= 40; n++) {
      for (let m = 0; m < n; m++) {
        const seen: string[] = [];
        const spy = (level: number, index: number): Uint8Array | undefined => {
          seen.push(`${level}/${index}`);
          return read(level, index) ?? SOME_HASH;
        };
        inclusionProof(m, n, spy);
        const nodes = inclusionProofNodes(m, n);
        expect(nodes.ok && nodes.value.map((x) => `${x.level}/${x.index}`)).toEqual(seen);
      }
    }
  });
});

describe('properties against the recursive reference', () => {
  const N = 70;
  const data = Array.from({ length: N }, (_, i) => leafData(i));
  const hashes = data.map(leafHash);
  const ref = new RefTree(data.map(refLeafHash));
  // Memoized: the sweep below reads the same subtrees thousands of times.
  const memo = new Map<string, Uint8Array | undefined>();
  const base = arrayHashReader(hashes);
  const reader = (level: number, index: number): Uint8Array | undefined => {
    const key = `${level}/${index}`;
    if (!memo.has(key)) memo.set(key, base(level, index));
    return memo.get(key);
  };

  it('matches the reference roots and proofs for every size and index up to 70', () => {
    for (let n = 0; n <= N; n++) {
      const r = treeRoot(n, reader);
      expect(r.ok && hex(r.value)).toBe(hex(ref.root(n)));
      expect(hex(rootFromLeafHashes(hashes.slice(0, n)))).toBe(hex(ref.root(n)));
      for (let m = 0; m < n; m++) {
        const p = inclusionProof(m, n, reader);
        expect(p.ok && p.value.map(hex)).toEqual(ref.path(m, 0, n).map(hex));
        expect(verifyInclusion(hashes[m]!, m, n, p.ok ? p.value : [], ref.root(n)).ok).toBe(true);
      }
    }
  });

  it('matches the reference consistency proofs for every pair m <= n up to 40', () => {
    for (let n = 0; n <= 40; n++) {
      for (let m = 0; m <= n; m++) {
        const p = consistencyProof(m, n, reader);
        const want = m === 0 ? [] : ref.subproof(m, 0, n, true);
        expect(p.ok && p.value.map(hex)).toEqual(want.map(hex));
        expect(verifyConsistency(m, n, ref.root(m), ref.root(n), p.ok ? p.value : []).ok).toBe(true);
      }
    }
  });

  const inclusionCase = fc
    .integer({ min: 1, max: N })
    .chain((n) => fc.record({ n: fc.constant(n), m: fc.integer({ min: 0, max: n - 1 }) }));

  it('fails an inclusion proof after any single-bit change in a proof hash, the leaf or the root', () => {
    fc.assert(
      fc.property(inclusionCase, fc.nat(), fc.integer({ min: 0, max: 255 }), ({ n, m }, pick, bit) => {
        const proof = (inclusionProof(m, n, reader) as { value: Uint8Array[] }).value;
        const rt = ref.root(n);
        const slot = pick % (proof.length + 2);
        if (slot < proof.length) {
          const bad = proof.map((p, j) => (j === slot ? flip(p, bit) : p));
          return !verifyInclusion(hashes[m]!, m, n, bad, rt).ok;
        }
        if (slot === proof.length) return !verifyInclusion(flip(hashes[m]!, bit), m, n, proof, rt).ok;
        return !verifyInclusion(hashes[m]!, m, n, proof, flip(rt, bit)).ok;
      }),
      { numRuns: 400 },
    );
  });

  // The head is bound to the size by the signed checkpoint, so probes use the head of the size
  // they claim: a proof for one position must not verify for any other (index, size, head).
  it('fails an inclusion proof presented for any other index or tree size', () => {
    fc.assert(
      fc.property(
        inclusionCase,
        fc.integer({ min: 0, max: 2 * N }),
        fc.integer({ min: 1, max: N }),
        ({ n, m }, i, s) => {
          fc.pre(i !== m || s !== n);
          const proof = (inclusionProof(m, n, reader) as { value: Uint8Array[] }).value;
          return !verifyInclusion(hashes[m]!, i, s, proof, ref.root(s)).ok;
        },
      ),
      { numRuns: 400 },
    );
  });

  const consistencyCase = fc
    .integer({ min: 2, max: N })
    .chain((n) => fc.record({ n: fc.constant(n), m: fc.integer({ min: 1, max: n - 1 }) }));

  it('fails a consistency proof after any single-bit change in a proof hash or either head', () => {
    fc.assert(
      fc.property(consistencyCase, fc.nat(), fc.integer({ min: 0, max: 255 }), ({ n, m }, pick, bit) => {
        const proof = (consistencyProof(m, n, reader) as { value: Uint8Array[] }).value;
        const r1 = ref.root(m);
        const r2 = ref.root(n);
        const slot = pick % (proof.length + 2);
        if (slot < proof.length) {
          return !verifyConsistency(
            m,
            n,
            r1,
            r2,
            proof.map((p, j) => (j === slot ? flip(p, bit) : p)),
          ).ok;
        }
        if (slot === proof.length) return !verifyConsistency(m, n, flip(r1, bit), r2, proof).ok;
        return !verifyConsistency(m, n, r1, flip(r2, bit), proof).ok;
      }),
      { numRuns: 400 },
    );
  });

  it('fails a consistency proof presented for other sizes', () => {
    fc.assert(
      fc.property(
        consistencyCase,
        fc.integer({ min: 0, max: N }),
        fc.integer({ min: 0, max: N }),
        ({ n, m }, a, b) => {
          fc.pre(a !== m || b !== n);
          const proof = (consistencyProof(m, n, reader) as { value: Uint8Array[] }).value;
          return !verifyConsistency(a, b, ref.root(a), ref.root(b), proof).ok;
        },
      ),
      { numRuns: 400 },
    );
  });

  it('detects a fork: a log that rewrote leaf j is inconsistent with every later head of the original', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: N }).chain((m) =>
          fc.record({
            m: fc.constant(m),
            n: fc.integer({ min: m, max: N }),
            j: fc.integer({ min: 0, max: m - 1 }),
          }),
        ),
        ({ m, n, j }) => {
          const forked = hashes.map((h, i) => (i === j ? leafHash(leafData(i, 1)) : h));
          const forkedRoot = rootFromLeafHashes(forked.slice(0, m));
          // The honest log's proof from m to n, and the forked log's own proof: neither links the
          // forked head of size m to the honest head of size n.
          const honest = (consistencyProof(m, n, reader) as { value: Uint8Array[] }).value;
          const forgedProof = (consistencyProof(m, n, arrayHashReader(forked)) as { value: Uint8Array[] })
            .value;
          return (
            !verifyConsistency(m, n, forkedRoot, ref.root(n), honest).ok &&
            !verifyConsistency(m, n, forkedRoot, ref.root(n), forgedProof).ok
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('a native SHA-256 for leaves and nodes (useMerkleSha256)', () => {
  const native: MerkleSha256 = (parts) => {
    const h = createHash('sha256');
    for (const p of parts) h.update(p);
    return new Uint8Array(h.digest());
  };

  it('refuses an implementation that does not reproduce the known answers, keeping the portable one', () => {
    const before = rootFromLeaves(vectors.leaves.map((l) => hexToBytes(l)));
    const refused: MerkleSha256[] = [
      // Wrong bytes: a tree head computed with it would be another tree's.
      (parts) => native([...parts, Uint8Array.of(0)]),
      // Ignores a view's offset: the sequencer hashes subarrays of stored tiles.
      (parts) => native(parts.map((p) => new Uint8Array(p.buffer, 0, p.length))),
      // Reuses its output buffer: every hash would alias the last one.
      (() => {
        const out = new Uint8Array(32);
        return (parts: readonly Uint8Array[]) => (out.set(native(parts)), out);
      })(),
      // Not 32 bytes, or throws.
      (parts) => native(parts).subarray(0, 31),
      () => {
        throw new Error('no sha256');
      },
    ];
    for (const impl of refused) expect(useMerkleSha256(impl)).toBe(false);
    expect(rootFromLeaves(vectors.leaves.map((l) => hexToBytes(l)))).toEqual(before);
  });

  it('installs node:crypto, and every hash and root is byte-identical to the portable one', () => {
    const leaves = Array.from({ length: 300 }, (_, i) => new Uint8Array(i % 1100).fill(i & 0xff));
    const hashes = leaves.map(leafHash);
    const portable = { root: rootFromLeaves(leaves), node: nodeHash(hashes[0]!, hashes[1]!) };
    expect(useMerkleSha256(native)).toBe(true);
    expect(leaves.map(leafHash)).toEqual(hashes);
    expect(rootFromLeaves(leaves)).toEqual(portable.root);
    expect(nodeHash(hashes[0]!, hashes[1]!)).toEqual(portable.node);
    expect(rootFromLeaves(vectors.leaves.map((l) => hexToBytes(l)))).toEqual(
      hexToBytes(vectors.roots[vectors.roots.length - 1]!),
    );
  });
});
