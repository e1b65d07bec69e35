/**
 * The Worker hashes with workerd's native SHA-256 (`node:crypto` under nodejs_compat), installed
 * by src/worker.ts through `useSha256`. Inside workerd: both of its forms prove themselves against
 * the known answers and give the same digests as the portable @noble/hashes.
 */
import { createHash, hash } from 'node:crypto';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';
import { afterEach, describe, expect, it } from 'vitest';
import { digestOf, sha256HexOfText, useSha256 } from '../../../src/core/canonical/canonical.js';
import { leafHash, nodeHash, rootFromLeaves, useMerkleSha256 } from '../../../src/core/log/merkle.js';
import { nativeMerkleSha256 } from '../../../src/platform/merkle-sha256.js';

const noble = (d: string | Uint8Array) =>
  bytesToHex(sha256(typeof d === 'string' ? new TextEncoder().encode(d) : d));

describe("useSha256 with workerd's node:crypto", () => {
  // Leave the implementation the Worker installs at startup in place for whatever runs next.
  afterEach(() => {
    expect(useSha256((d) => hash('sha256', d, 'hex'))).toBe(true);
  });

  it("installs the runtime's one-shot hash, as the Worker does, with identical digests", () => {
    expect(useSha256((d) => hash('sha256', d, 'hex'))).toBe(true);
    for (const text of ['', 'writ', 'é€😀'.repeat(100), '\u2028"\\'.repeat(999)]) {
      expect(sha256HexOfText(text)).toBe(noble(text));
    }
    expect(digestOf({ b: 1, a: 'é€😀' })).toBe(noble('{"a":"é€😀","b":1}'));
  });

  it("installs the runtime's Hash object, the Worker's fallback, with identical digests", () => {
    expect(useSha256((d) => createHash('sha256').update(d).digest('hex'))).toBe(true);
    for (const text of ['', 'writ', 'é€😀'.repeat(100), '\u2028"\\'.repeat(999)]) {
      expect(sha256HexOfText(text)).toBe(noble(text));
    }
    expect(digestOf({ b: 1, a: 'é€😀' })).toBe(noble('{"a":"é€😀","b":1}'));
  });
});

describe("useMerkleSha256 with workerd's node:crypto (the log's leaf and node hashes)", () => {
  it("installs the Worker's implementation; every leaf, node and root is identical to the portable one", () => {
    const leaves = Array.from({ length: 300 }, (_, i) => new TextEncoder().encode('é€😀'.repeat(i % 40)));
    const hashes = leaves.map(leafHash);
    const portable = { root: rootFromLeaves(leaves), node: nodeHash(hashes[0]!, hashes[1]!) };
    expect(useMerkleSha256(nativeMerkleSha256)).toBe(true);
    expect(leaves.map(leafHash)).toEqual(hashes);
    expect(nodeHash(hashes[0]!, hashes[1]!)).toEqual(portable.node);
    expect(rootFromLeaves(leaves)).toEqual(portable.root);
    expect(bytesToHex(leafHash(new Uint8Array(0)))).toBe(noble(Uint8Array.of(0)));
  });
});
