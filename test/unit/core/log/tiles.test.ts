/**
 * C2SP tlog-tiles: the spec's path and layout examples, the sequencer's append step checked
 * against the recursive reference over arbitrary batch splits, proofs served from tiles, and
 * every rejection path of the state, path and bundle parsers.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import {
  consistencyProof,
  inclusionProof,
  leafHash,
  treeRoot,
  verifyConsistency,
  verifyInclusion,
} from '../../../../src/core/log/merkle.js';
import {
  EMPTY_LOG_STATE,
  TILE_WIDTH,
  appendLeaves,
  decodeState,
  encodeEntryBundle,
  encodeState,
  entryBundlePath,
  hashReaderFromTiles,
  parseEntryBundle,
  parseTilePath,
  partialTiles,
  partialWidth,
  stateRoot,
  supersededPartialPrefixes,
  tileFromBytes,
  tilePath,
  tilesForConsistencyProof,
  tilesForInclusionProof,
  tilesForRoot,
  type LogState,
  type Tile,
  type TileHeight,
  type TileRef,
} from '../../../../src/core/log/tiles.js';
import { RefTree, hex, leafData, refLeafHash } from './reference.js';

// Pure hashing, slow in workerd and slower on a loaded machine: no test here may fail on time.
vi.setConfig({ testTimeout: 300_000 });

const MAX = 2100;
const hashes = Array.from({ length: MAX }, (_, i) => leafHash(leafData(i)));
const ref = new RefTree(Array.from({ length: MAX }, (_, i) => refLeafHash(leafData(i))));

function mustAppend(state: LogState, batch: readonly Uint8Array[], height?: TileHeight) {
  const r = appendLeaves(state, batch, height);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

const key = (t: TileRef): string => `${t.level}/${t.index}/${t.width}`;

describe('paths (C2SP tlog-tiles examples)', () => {
  it('encodes indices as x-prefixed 3-digit elements', () => {
    expect(tilePath({ level: 0, index: 1234067, width: 256 })).toBe('tile/0/x001/x234/067');
    expect(tilePath({ level: 0, index: 0, width: 256 })).toBe('tile/0/000');
    expect(tilePath({ level: 1, index: 1000, width: 17 })).toBe('tile/1/x001/000.p/17');
    expect(tilePath({ level: 2, index: 999, width: 1 })).toBe('tile/2/999.p/1');
    expect(entryBundlePath(1234067, 256)).toBe('tile/entries/x001/x234/067');
    expect(entryBundlePath(5, 112)).toBe('tile/entries/005.p/112');
  });

  it('names the partials a full tile or bundle supersedes, and none for a partial one', () => {
    expect(
      supersededPartialPrefixes(
        [
          { level: 0, index: 1234067, width: 256 },
          { level: 1, index: 4, width: 17 },
        ],
        [
          { index: 5, width: 256 },
          { index: 6, width: 112 },
        ],
      ),
    ).toEqual(['tile/0/x001/x234/067.p/', 'tile/entries/005.p/']);
    // Every partial path of that tile starts with its prefix; the full tile's own path does not.
    const [p] = supersededPartialPrefixes([{ level: 0, index: 1234067, width: 256 }], []);
    expect(tilePath({ level: 0, index: 1234067, width: 3 }).startsWith(p ?? '-')).toBe(true);
    expect(tilePath({ level: 0, index: 1234067, width: 256 }).startsWith(p ?? '-')).toBe(false);
    expect(tilePath({ level: 0, index: 1234068, width: 3 }).startsWith(p ?? '-')).toBe(false);
  });

  it('parses what it writes', () => {
    for (const [path, want] of [
      ['tile/0/x001/x234/067', { kind: 'tile', level: 0, index: 1234067, width: 256 }],
      ['tile/63/000', { kind: 'tile', level: 63, index: 0, width: 256 }],
      ['tile/1/x001/000.p/17', { kind: 'tile', level: 1, index: 1000, width: 17 }],
      ['tile/entries/005.p/112', { kind: 'entries', index: 5, width: 112 }],
      ['tile/entries/x009/x007/x199/x254/x740/991', { kind: 'entries', index: 9007199254740991, width: 256 }],
    ] as const) {
      expect(parseTilePath(path)).toEqual({ ok: true, value: want });
    }
    fc.assert(
      fc.property(
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: 0, max: 63 }),
        fc.integer({ min: 1, max: 256 }),
        (index, level, width) => {
          const p = parseTilePath(tilePath({ level, index, width }));
          return (
            p.ok &&
            p.value.kind === 'tile' &&
            p.value.index === index &&
            p.value.level === level &&
            p.value.width === width
          );
        },
      ),
    );
  });

  it('rejects every other spelling', () => {
    for (const path of [
      '',
      'tile',
      'tile/0',
      'tiles/0/000',
      '/tile/0/000',
      'tile/00/000',
      'tile/01/000',
      'tile/64/000',
      'tile/-1/000',
      'tile/a/000',
      'tile/0/0',
      'tile/0/0000',
      'tile/0/x000',
      'tile/0/x000/001',
      'tile/0/001/002',
      'tile/0/x001/x002',
      'tile/0/X001/002',
      'tile/0/000.p/0',
      'tile/0/000.p/256',
      'tile/0/000.p/01',
      'tile/0/000.p/',
      'tile/0/000.p',
      'tile/0/000.p/5/6',
      'tile/0/x001.p/5/002',
      'tile/0/.p/5',
      'tile/0/000/',
      'tile/entries/',
      'tile/entries/0001',
      'tile/0/x009/x007/x199/x254/x740/992',
      `tile/0/${'x001/'.repeat(20)}001`,
      42 as unknown as string,
    ]) {
      const r = parseTilePath(path);
      expect(r.ok ? path : r.error.reason).toBe('invalid_path');
    }
  });
});

describe('layout', () => {
  it('represents a tree of 256 as a full level-0 tile and a level-1 partial of width 1', () => {
    const { state, tiles } = mustAppend(EMPTY_LOG_STATE, hashes.slice(0, 256));
    expect(tiles.map(tilePath)).toEqual(['tile/0/000', 'tile/1/000.p/1']);
    expect(partialTiles(state).map(tilePath)).toEqual(['tile/1/000.p/1']);
    const r = stateRoot(state);
    expect(r.ok && hex(r.value)).toBe(hex(ref.root(256)));
  });

  it('represents a tree of 70,000 as the spec describes', () => {
    // 273 full level-0 tiles, a level-0 partial of 112, one full level-1 tile, a level-1
    // partial of 17 and a level-2 partial of 1.
    // Any distinct 32-byte values do for the layout, without hashing 70,000 leaves first.
    const many = Array.from({ length: 70_000 }, (_, i) => {
      const h = new Uint8Array(32);
      new DataView(h.buffer).setUint32(0, i);
      return h;
    });
    let state = EMPTY_LOG_STATE;
    const full: Tile[] = [];
    for (const [a, b] of [
      [0, 1],
      [1, 40_000],
      [40_000, 70_000],
    ] as const) {
      const step = mustAppend(state, many.slice(a, b));
      state = step.state;
      full.push(...step.tiles.filter((t) => t.width === TILE_WIDTH));
    }
    expect(full.filter((t) => t.level === 0)).toHaveLength(273);
    expect(full.filter((t) => t.level === 1).map(tilePath)).toEqual(['tile/1/000']);
    expect(full.filter((t) => t.level > 1)).toHaveLength(0);
    expect(partialTiles(state).map(tilePath)).toEqual([
      'tile/0/273.p/112',
      'tile/1/001.p/17',
      'tile/2/000.p/1',
    ]);
    // Heads are checked against the reference elsewhere; the point here is the layout.
    expect(stateRoot(state).ok).toBe(true);
  });
});

describe('the append step against the reference', () => {
  const batches = (total: number) =>
    fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 1, maxLength: 40 }).map((sizes) => {
      const out: number[] = [];
      let sum = 0;
      for (const s of sizes) {
        const n = Math.min(s, total - sum);
        out.push(n);
        sum += n;
      }
      if (sum < total) out.push(total - sum);
      return out;
    });

  for (const height of [8, 2, 1] as const) {
    it(`serves roots and proofs from tiles that equal the reference (height ${height})`, () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 2000 }).chain((total) => batches(total)),
          fc.array(fc.nat(), { minLength: 8, maxLength: 8 }),
          (split, picks) => {
            let state = EMPTY_LOG_STATE;
            const store = new Map<string, Tile>();
            const sizes: number[] = [0];
            for (const n of split) {
              const step = mustAppend(state, hashes.slice(state.size, state.size + n), height);
              for (const t of step.tiles) {
                // Immutable blobs: a path is written once, or again with the same bytes.
                const had = store.get(key(t));
                if (had) expect(hex(had.hashes)).toBe(hex(t.hashes));
                store.set(key(t), t);
              }
              state = step.state;
              if (n > 0) sizes.push(state.size);
              const root = stateRoot(state, height);
              expect(root.ok && hex(root.value)).toBe(hex(ref.root(state.size)));
              expect(hex(encodeState(state))).toBe(hex(encodeState(decode(encodeState(state), height))));
            }
            // Proofs for checkpointed sizes (batch boundaries), from the tiles those sizes name.
            const pick = (i: number, n: number): number => picks[i]! % n;
            const s2 = sizes[pick(0, sizes.length)]!;
            const s1 = sizes[pick(1, sizes.length)]!;
            const [older, newer] = s1 <= s2 ? [s1, s2] : [s2, s1];
            const served = (refs: TileRef[]): Tile[] =>
              refs.map((r) => {
                const t = store.get(key(r));
                expect(t, `tile ${key(r)} was never written`).toBeDefined();
                return t!;
              });
            const rootRead = hashReaderFromTiles(served(tilesForRoot(newer, height)), height);
            const root = treeRoot(newer, rootRead);
            expect(root.ok && hex(root.value)).toBe(hex(ref.root(newer)));
            if (newer > 0) {
              for (let i = 2; i < 6; i++) {
                const index = pick(i, newer);
                const read = hashReaderFromTiles(
                  served(tilesForInclusionProof(index, newer, height)),
                  height,
                );
                const p = inclusionProof(index, newer, read);
                expect(p.ok && p.value.map(hex)).toEqual(ref.path(index, 0, newer).map(hex));
                expect(
                  verifyInclusion(hashes[index]!, index, newer, p.ok ? p.value : [], ref.root(newer)).ok,
                ).toBe(true);
              }
            }
            const read = hashReaderFromTiles(served(tilesForConsistencyProof(older, newer, height)), height);
            const c = consistencyProof(older, newer, read);
            const want = older === 0 ? [] : ref.subproof(older, 0, newer, true);
            expect(c.ok && c.value.map(hex)).toEqual(want.map(hex));
            expect(
              verifyConsistency(older, newer, ref.root(older), ref.root(newer), c.ok ? c.value : []).ok,
            ).toBe(true);
          },
        ),
        { numRuns: height === 8 ? 20 : 15 },
      );
    });
  }

  it('appends 2000 leaves one at a time; every split gives the same tiles and state', () => {
    // Every size is appended and must be a valid state; the head is compared with the reference
    // at every size up to 600 (three level-0 tiles, the first level-1 partials), at each tile
    // boundary and its neighbours, and at every 13th size beyond.
    const checked = (n: number): boolean => n <= 600 || n % 13 === 0 || [255, 0, 1].includes(n % 256);
    let state = EMPTY_LOG_STATE;
    const fullOneByOne = new Set<string>();
    for (let n = 0; n < 2000; n++) {
      const step = mustAppend(state, hashes.slice(n, n + 1));
      for (const t of step.tiles) if (t.width === TILE_WIDTH) fullOneByOne.add(`${key(t)}:${hex(t.hashes)}`);
      state = step.state;
      if (checked(n + 1)) {
        const r = stateRoot(state);
        expect(r.ok && hex(r.value)).toBe(hex(ref.root(n + 1)));
      }
    }
    const once = mustAppend(EMPTY_LOG_STATE, hashes.slice(0, 2000));
    expect(hex(encodeState(once.state))).toBe(hex(encodeState(state)));
    const fullOnce = new Set(
      once.tiles.filter((t) => t.width === TILE_WIDTH).map((t) => `${key(t)}:${hex(t.hashes)}`),
    );
    expect([...fullOnce].sort()).toEqual([...fullOneByOne].sort());
  });

  it('leaves the input state untouched and accepts an empty batch', () => {
    const a = mustAppend(EMPTY_LOG_STATE, hashes.slice(0, 300));
    const before = hex(encodeState(a.state));
    const b = mustAppend(a.state, hashes.slice(300, 700));
    expect(hex(encodeState(a.state))).toBe(before);
    expect(b.state.size).toBe(700);
    const none = mustAppend(a.state, []);
    expect(none.tiles).toEqual([]);
    expect(hex(encodeState(none.state))).toBe(before);
  });
});

function decode(bytes: Uint8Array, height?: TileHeight): LogState {
  const r = decodeState(bytes, height);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

describe('rejection paths', () => {
  const good = mustAppend(EMPTY_LOG_STATE, hashes.slice(0, 300)).state;

  it('refuses a state that is not one a sequencer produced', () => {
    const bad: LogState[] = [
      { size: -1, partials: [] },
      { size: 1.5, partials: [] },
      { size: 2 ** 53, partials: [] },
      { size: 300, partials: [] },
      { size: 300, partials: [good.partials[0]!] },
      { size: 300, partials: [good.partials[0]!.slice(32), good.partials[1]!] },
      { size: 300, partials: [good.partials[0]!, new Uint8Array(64)] },
      { size: 0, partials: [new Uint8Array(0)] },
      { size: 300, partials: 'x' as unknown as Uint8Array[] },
      { size: 300, partials: [good.partials[0]!, 'y'.repeat(32) as unknown as Uint8Array] },
    ];
    for (const s of bad) {
      const r = appendLeaves(s, [hashes[0]!]);
      expect(r.ok ? 'accepted' : r.error.reason).toBe('invalid_state');
      const root = stateRoot(s);
      expect(root.ok ? 'accepted' : root.error.reason).toBe('invalid_state');
    }
  });

  it('refuses leaf hashes that are not 32 bytes', () => {
    for (const h of [new Uint8Array(31), new Uint8Array(33), 'h' as unknown as Uint8Array]) {
      const r = appendLeaves(good, [hashes[0]!, h]);
      expect(r.ok ? 'accepted' : r.error.reason).toBe('invalid_leaf_hash');
    }
  });

  it('refuses a batch that would overflow the safe size range', () => {
    const size = Number.MAX_SAFE_INTEGER;
    const partials: Uint8Array[] = [];
    for (let level = 0; Math.floor(size / TILE_WIDTH ** level) > 0; level++) {
      partials.push(new Uint8Array(partialWidth(size, level) * 32));
    }
    const huge: LogState = { size, partials };
    expect(stateRoot(huge).ok).toBe(true);
    const r = appendLeaves(huge, [hashes[0]!]);
    expect(r.ok ? 'accepted' : r.error.reason).toBe('tree_too_large');
  });

  it('refuses malformed encoded state', () => {
    const enc = encodeState(good);
    const over = new Uint8Array(8);
    new DataView(over.buffer).setBigUint64(0, 2n ** 53n);
    for (const bytes of [
      new Uint8Array(7),
      enc.slice(0, -1),
      new Uint8Array([...enc, 0]),
      over,
      'state' as unknown as Uint8Array,
    ]) {
      const r = decodeState(bytes);
      expect(r.ok ? 'accepted' : r.error.reason).toBe('invalid_state');
    }
  });

  it('refuses tile bytes of the wrong length', () => {
    expect(tileFromBytes({ level: 0, index: 0, width: 3 }, new Uint8Array(96)).ok).toBe(true);
    for (const bytes of [new Uint8Array(95), new Uint8Array(97), 'x' as unknown as Uint8Array]) {
      const r = tileFromBytes({ level: 0, index: 0, width: 3 }, bytes);
      expect(r.ok ? 'accepted' : r.error.reason).toBe('invalid_tile');
    }
  });

  it('reads no node a tile does not hold', () => {
    const read = hashReaderFromTiles(partialTiles(good));
    expect(read(0, 299)).toBeDefined();
    expect(read(0, 300)).toBeUndefined();
    expect(read(0, 0)).toBeUndefined();
    const truncated = hashReaderFromTiles([
      { level: 0, index: 1, width: 44, hashes: new Uint8Array(43 * 32) },
    ]);
    expect(truncated(0, 256)).toBeUndefined();
  });

  it('names no tiles for impossible proofs', () => {
    expect(tilesForInclusionProof(5, 5)).toEqual([]);
    expect(tilesForConsistencyProof(6, 5)).toEqual([]);
    expect(tilesForRoot(-1)).toEqual([]);
  });
});

describe('entry bundles', () => {
  it('round-trips uint16 length-prefixed entries', () => {
    const entries = [new Uint8Array(0), Uint8Array.of(1, 2, 3), new Uint8Array(0xffff).fill(7)];
    const enc = encodeEntryBundle(entries);
    expect(enc.ok && Array.from(enc.value.slice(0, 7))).toEqual([0, 0, 0, 3, 1, 2, 3]);
    const back = enc.ok ? parseEntryBundle(enc.value, 3) : undefined;
    expect(back?.ok && back.value.map(hex)).toEqual(entries.map(hex));
  });

  it('rejects bundles and entries out of bounds', () => {
    const reason = (r: { ok: boolean; error?: { reason: string } }) => (r.ok ? 'accepted' : r.error!.reason);
    expect(reason(encodeEntryBundle([]))).toBe('invalid_bundle');
    expect(reason(encodeEntryBundle(Array.from({ length: 257 }, () => new Uint8Array(1))))).toBe(
      'invalid_bundle',
    );
    expect(reason(encodeEntryBundle([new Uint8Array(0x10000)]))).toBe('invalid_entry');
    expect(reason(encodeEntryBundle(['x' as unknown as Uint8Array]))).toBe('invalid_entry');
    const two = Uint8Array.of(0, 1, 9, 0, 1, 8);
    expect(reason(parseEntryBundle(two, 2))).toBe('accepted');
    expect(reason(parseEntryBundle(two, 1))).toBe('invalid_bundle');
    expect(reason(parseEntryBundle(two, 3))).toBe('invalid_bundle');
    expect(reason(parseEntryBundle(two.slice(0, 5), 2))).toBe('invalid_bundle');
    expect(reason(parseEntryBundle(Uint8Array.of(0, 1, 9, 0), 2))).toBe('invalid_bundle');
    expect(reason(parseEntryBundle(two, 0))).toBe('invalid_bundle');
    expect(reason(parseEntryBundle(two, 257))).toBe('invalid_bundle');
    expect(reason(parseEntryBundle('x' as unknown as Uint8Array, 1))).toBe('invalid_bundle');
  });
});
