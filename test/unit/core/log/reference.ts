/**
 * Test-only reference implementations, written straight from the RFC 9162 §2.1 recursive
 * definitions and sharing no code with `src/core/log`: the library is checked against these.
 */
import { sha256 } from '@noble/hashes/sha2.js';

const cat = (...parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};

export const refLeafHash = (d: Uint8Array): Uint8Array => sha256(cat(Uint8Array.of(0), d));
export const refNodeHash = (l: Uint8Array, r: Uint8Array): Uint8Array => sha256(cat(Uint8Array.of(1), l, r));

const k = (n: number): number => {
  let x = 1;
  while (x * 2 < n) x *= 2;
  return x;
};

/**
 * MTH(D[lo:hi]) over leaf hashes, memoized per (lo, hi) so sweeping every prefix of a large
 * tree stays cheap (prefixes share almost all of their subtrees).
 */
export class RefTree {
  readonly #memo = new Map<string, Uint8Array>();
  constructor(readonly leafHashes: readonly Uint8Array[]) {}

  mth(lo: number, hi: number): Uint8Array {
    if (hi - lo === 0) return sha256(new Uint8Array(0));
    if (hi - lo === 1) return this.leafHashes[lo]!;
    const key = `${lo}:${hi}`;
    const hit = this.#memo.get(key);
    if (hit) return hit;
    const s = k(hi - lo);
    const h = refNodeHash(this.mth(lo, lo + s), this.mth(lo + s, hi));
    this.#memo.set(key, h);
    return h;
  }

  root(n: number): Uint8Array {
    return this.mth(0, n);
  }

  /** RFC 9162 §2.1.3.1 PATH(m, D[lo:hi]). */
  path(m: number, lo: number, hi: number): Uint8Array[] {
    if (hi - lo <= 1) return [];
    const s = k(hi - lo);
    return m < s
      ? [...this.path(m, lo, lo + s), this.mth(lo + s, hi)]
      : [...this.path(m - s, lo + s, hi), this.mth(lo, lo + s)];
  }

  /** RFC 9162 §2.1.4.1 SUBPROOF(m, D[lo:hi], b). */
  subproof(m: number, lo: number, hi: number, b: boolean): Uint8Array[] {
    if (m === hi - lo) return b ? [] : [this.mth(lo, hi)];
    const s = k(hi - lo);
    return m <= s
      ? [...this.subproof(m, lo, lo + s, b), this.mth(lo + s, hi)]
      : [...this.subproof(m - s, lo + s, hi, false), this.mth(lo, lo + s)];
  }
}

/** Deterministic distinct leaf data: the 8-byte big-endian index, tagged. */
export function leafData(i: number, tag = 0): Uint8Array {
  const out = new Uint8Array(9);
  out[0] = tag;
  new DataView(out.buffer).setBigUint64(1, BigInt(i));
  return out;
}

export const hex = (b: Uint8Array): string => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
