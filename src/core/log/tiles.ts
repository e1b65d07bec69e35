/**
 * C2SP tlog-tiles (https://c2sp.org/tlog-tiles): the tile layout of an RFC 6962 tree, tile and
 * entry-bundle paths, and the pure append step a sequencer runs.
 *
 * A tile at level L, index N holds the hashes MTH(D[(N*256 + i) * 256^L : (N*256 + i + 1) *
 * 256^L]) for i in 0..255: leaf hashes at level 0, hashes of full level-(L-1) tiles above. The
 * rightmost tiles of each level are partial (1..255 hashes) and are never hashed into the level
 * above.
 *
 * Guarantees: `appendLeaves` is a pure function of (state, leaf hashes): the state is exactly the
 * rightmost partial tile of every level (at most 255 hashes each, enough to continue and to
 * compute the tree head), and it returns every tile whose content is new, full or partial, so a
 * sequencer stores only the state and writes tiles as immutable blobs at their paths. Any split
 * of the same leaves into batches yields the same tiles at the batch boundaries and the same
 * final state. Paths are the spec's exactly (`tile/<L>/<N>[.p/<W>]`, `x`-prefixed 3-digit
 * elements); parsers reject everything else.
 * Never: reads a clock, does I/O, or trusts a state or tile it did not check.
 */
import {
  HASH_SIZE,
  type HashReader,
  isHash,
  isTreeSize,
  type NodeId,
  rootFromLeafHashes,
  consistencyProofNodes,
  inclusionProofNodes,
  rootNodes,
  treeRoot,
} from './merkle.js';
import { concatBytes, parseDecimal } from './encoding.js';
import { err, ok, type Result } from '../result.js';

/** Tile height per C2SP tlog-tiles: a full tile is 2^8 = 256 hashes, 8,192 bytes. */
export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 2 ** TILE_HEIGHT;

/** The spec allows tile levels 0..63. */
export const MAX_TILE_LEVEL = 63;

/** The longest entry in an entry bundle: entries are uint16 length-prefixed. */
export const MAX_ENTRY_SIZE = 0xffff;

export type TileErrorReason =
  | 'invalid_path'
  | 'invalid_state'
  | 'invalid_leaf_hash'
  | 'invalid_tile'
  | 'invalid_entry'
  | 'invalid_bundle'
  | 'tree_too_large';

export interface TileError {
  readonly reason: TileErrorReason;
  readonly message: string;
}

const tileError = (reason: TileErrorReason, message: string): TileError => ({ reason, message });

/** A tile's coordinates: `width` is 1..256; 256 is a full tile, anything less a partial one. */
export interface TileRef {
  readonly level: number;
  readonly index: number;
  readonly width: number;
}

/** A tile with its content: `width` concatenated 32-byte hashes. */
export interface Tile extends TileRef {
  readonly hashes: Uint8Array;
}

/**
 * What a sequencer keeps between batches: the tree size and, for every level, the hashes of the
 * rightmost partial tile (`floor(size / 256^L) mod 256` of them, concatenated). The levels run up
 * to the highest that holds a hash; an empty tree has none.
 */
export interface LogState {
  readonly size: number;
  readonly partials: readonly Uint8Array[];
}

export const EMPTY_LOG_STATE: LogState = { size: 0, partials: [] };

/**
 * Tile height for this module's arithmetic. Production always uses 8 (`TILE_HEIGHT`); tests pass
 * smaller heights to reach upper tile levels with small trees. Paths exist only for height 8.
 */
export type TileHeight = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8;

const widthOf = (h: TileHeight): number => 2 ** h;

/** Width of the partial tile at `level` for a tree of `size` (0 when there is none). */
export function partialWidth(size: number, level: number, height: TileHeight = TILE_HEIGHT): number {
  const w = widthOf(height);
  return Math.floor(size / w ** level) % w;
}

/** Number of tile levels that hold at least one hash for a tree of `size`. */
function levelCount(size: number, height: TileHeight): number {
  const w = widthOf(height);
  let levels = 0;
  while (Math.floor(size / w ** levels) > 0) levels++;
  return levels;
}

function checkState(state: LogState, height: TileHeight): TileError | undefined {
  if (!isTreeSize(state.size))
    return tileError('invalid_state', 'state size must be a safe non-negative integer');
  if (!Array.isArray(state.partials) || state.partials.length !== levelCount(state.size, height)) {
    return tileError('invalid_state', 'state must hold one partial tile per level');
  }
  for (let level = 0; level < state.partials.length; level++) {
    const p = state.partials[level];
    // A partial of the wrong width would put hashes at the wrong positions in every later tile.
    if (!(p instanceof Uint8Array) || p.length !== partialWidth(state.size, level, height) * HASH_SIZE) {
      return tileError('invalid_state', `state partial tile at level ${level} has the wrong width`);
    }
  }
  return undefined;
}

export interface AppendResult {
  readonly state: LogState;
  /**
   * Tiles whose content is new: every tile completed by this batch and the partial tiles of the
   * new size, lowest level first. Write them all before publishing a checkpoint for the new size.
   */
  readonly tiles: readonly Tile[];
}

/**
 * Append a batch of leaf hashes. Pure: returns the next state and the tiles to write; the input
 * state is not modified. A partial tile is emitted only for levels this batch changed (the others
 * were written, at the same path, by an earlier batch).
 */
export function appendLeaves(
  state: LogState,
  leafHashes: readonly Uint8Array[],
  height: TileHeight = TILE_HEIGHT,
): Result<AppendResult, TileError> {
  const bad = checkState(state, height);
  if (bad) return err(bad);
  for (const h of leafHashes) {
    if (!isHash(h)) return err(tileError('invalid_leaf_hash', `leaf hashes must be ${HASH_SIZE} bytes`));
  }
  const newSize = state.size + leafHashes.length;
  if (!Number.isSafeInteger(newSize))
    return err(tileError('tree_too_large', 'tree size would exceed 2^53 - 1'));

  const w = widthOf(height);
  const tiles: Tile[] = [];
  const partials: Uint8Array[] = [];
  let incoming: readonly Uint8Array[] = leafHashes;
  const levels = levelCount(newSize, height);
  for (let level = 0; level < levels; level++) {
    const old = state.partials[level] ?? new Uint8Array(0);
    if (incoming.length === 0) {
      partials.push(old);
      continue;
    }
    const hashes = [...splitHashes(old), ...incoming];
    const firstTile = Math.floor(state.size / w ** (level + 1));
    const completed: Uint8Array[] = [];
    let at = 0;
    for (; at + w <= hashes.length; at += w) {
      const full = hashes.slice(at, at + w);
      tiles.push({ level, index: firstTile + completed.length, width: w, hashes: concatBytes(...full) });
      // The level above holds the MTH of each full tile: the tile is a complete subtree.
      completed.push(rootFromLeafHashes(full));
    }
    const rest = concatBytes(...hashes.slice(at));
    if (rest.length > 0) {
      tiles.push({
        level,
        index: firstTile + completed.length,
        width: rest.length / HASH_SIZE,
        hashes: rest,
      });
    }
    partials.push(rest);
    incoming = completed;
  }
  return ok({ state: { size: newSize, partials }, tiles });
}

function splitHashes(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let o = 0; o < bytes.length; o += HASH_SIZE) out.push(bytes.subarray(o, o + HASH_SIZE));
  return out;
}

/** The state's partial tiles as tiles (the ones a checkpoint of `state.size` needs). */
export function partialTiles(state: LogState, height: TileHeight = TILE_HEIGHT): Tile[] {
  const w = widthOf(height);
  const out: Tile[] = [];
  state.partials.forEach((hashes, level) => {
    if (hashes.length > 0) {
      out.push({
        level,
        index: Math.floor(state.size / w ** (level + 1)),
        width: hashes.length / HASH_SIZE,
        hashes,
      });
    }
  });
  return out;
}

/** The tree head of the state, from its partial tiles alone. */
export function stateRoot(state: LogState, height: TileHeight = TILE_HEIGHT): Result<Uint8Array, TileError> {
  const bad = checkState(state, height);
  if (bad) return err(bad);
  const r = treeRoot(state.size, hashReaderFromTiles(partialTiles(state, height), height));
  return r.ok ? r : err(tileError('invalid_state', r.error.message));
}

/**
 * Serialize a state for storage: the size as 8 bytes big-endian, then the partial tiles' hashes
 * level by level (their widths follow from the size).
 */
export function encodeState(state: LogState): Uint8Array {
  const head = new Uint8Array(8);
  new DataView(head.buffer).setBigUint64(0, BigInt(state.size));
  return concatBytes(head, ...state.partials);
}

export function decodeState(
  bytes: Uint8Array,
  height: TileHeight = TILE_HEIGHT,
): Result<LogState, TileError> {
  if (!(bytes instanceof Uint8Array) || bytes.length < 8)
    return err(tileError('invalid_state', 'state is too short'));
  const size = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0);
  if (size > BigInt(Number.MAX_SAFE_INTEGER))
    return err(tileError('invalid_state', 'state size exceeds 2^53 - 1'));
  const n = Number(size);
  const partials: Uint8Array[] = [];
  let at = 8;
  for (let level = 0; level < levelCount(n, height); level++) {
    const len = partialWidth(n, level, height) * HASH_SIZE;
    partials.push(bytes.slice(at, at + len));
    at += len;
  }
  if (at !== bytes.length) return err(tileError('invalid_state', 'state length does not match its size'));
  return ok({ size: n, partials });
}

/** The tile holding the hashes a node needs, for a tree of `size` leaves. */
function tileForNode(node: NodeId, size: number, height: TileHeight): TileRef {
  const w = widthOf(height);
  const level = Math.floor(node.level / height);
  // The node spans 2^(node.level - level*height) consecutive hashes of its tile level.
  const first = node.index * 2 ** (node.level - level * height);
  const index = Math.floor(first / w);
  const full = (index + 1) * w ** (level + 1) <= size;
  return { level, index, width: full ? w : partialWidth(size, level, height) };
}

/**
 * The tiles (deduplicated, in first-use order) that hold the given nodes of a tree of `size`:
 * full tiles where complete, otherwise the partial tile of that size.
 */
export function tilesForNodes(
  nodes: readonly NodeId[],
  size: number,
  height: TileHeight = TILE_HEIGHT,
): TileRef[] {
  const seen = new Set<string>();
  const out: TileRef[] = [];
  for (const n of nodes) {
    const t = tileForNode(n, size, height);
    const key = `${t.level}/${t.index}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(t);
    }
  }
  return out;
}

/** Tiles needed for the inclusion proof of `index` in the tree of `size`. */
export function tilesForInclusionProof(
  index: number,
  size: number,
  height: TileHeight = TILE_HEIGHT,
): TileRef[] {
  const nodes = inclusionProofNodes(index, size);
  return nodes.ok ? tilesForNodes(nodes.value, size, height) : [];
}

/** Tiles needed for the consistency proof from `size1` to `size2`. */
export function tilesForConsistencyProof(
  size1: number,
  size2: number,
  height: TileHeight = TILE_HEIGHT,
): TileRef[] {
  const nodes = consistencyProofNodes(size1, size2);
  return nodes.ok ? tilesForNodes(nodes.value, size2, height) : [];
}

/** Tiles needed for the tree head of `size`. */
export function tilesForRoot(size: number, height: TileHeight = TILE_HEIGHT): TileRef[] {
  const nodes = rootNodes(size);
  return nodes.ok ? tilesForNodes(nodes.value, size, height) : [];
}

/**
 * A `HashReader` over loaded tiles. A node inside a tile is computed from the tile's hashes
 * (at most 2^(height-1) of them). Where several tiles share coordinates (a partial and the full
 * tile that replaced it) the widest is used: a tile path is immutable, so a wider tile at the
 * same coordinates extends a narrower one.
 */
export function hashReaderFromTiles(tiles: readonly Tile[], height: TileHeight = TILE_HEIGHT): HashReader {
  const w = widthOf(height);
  const byKey = new Map<string, Tile>();
  for (const t of tiles) {
    if (t.hashes.length !== t.width * HASH_SIZE) continue;
    const key = `${t.level}/${t.index}`;
    const had = byKey.get(key);
    if (!had || had.width < t.width) byKey.set(key, t);
  }
  return (nodeLevel, nodeIndex) => {
    const level = Math.floor(nodeLevel / height);
    const span = 2 ** (nodeLevel - level * height);
    const first = nodeIndex * span;
    const tile = byKey.get(`${level}/${Math.floor(first / w)}`);
    const offset = first % w;
    if (!tile || offset + span > tile.width) return undefined;
    const hashes = splitHashes(tile.hashes.subarray(offset * HASH_SIZE, (offset + span) * HASH_SIZE));
    return span === 1 ? hashes[0] : rootFromLeafHashes(hashes);
  };
}

/** Validate tile bytes fetched from storage against the coordinates they were fetched for. */
export function tileFromBytes(ref: TileRef, bytes: Uint8Array): Result<Tile, TileError> {
  if (!(bytes instanceof Uint8Array) || bytes.length !== ref.width * HASH_SIZE) {
    return err(tileError('invalid_tile', `tile must be ${ref.width * HASH_SIZE} bytes`));
  }
  return ok({ ...ref, hashes: bytes });
}

// ---- paths -------------------------------------------------------------------------------

/** `<N>` as zero-padded 3-digit path elements, all but the last prefixed with `x`. */
function encodeIndex(index: number): string {
  const groups: string[] = [];
  let n = index;
  do {
    groups.unshift(String(n % 1000).padStart(3, '0'));
    n = Math.floor(n / 1000);
  } while (n > 0);
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
}

const suffix = (width: number): string => (width === TILE_WIDTH ? '' : `.p/${width}`);

/** `tile/<L>/<N>[.p/<W>]` (C2SP tlog-tiles "Merkle Tree"). */
export function tilePath(ref: TileRef): string {
  return `tile/${ref.level}/${encodeIndex(ref.index)}${suffix(ref.width)}`;
}

/** `tile/entries/<N>[.p/<W>]` (C2SP tlog-tiles "Log entries"). */
export function entryBundlePath(index: number, width: number): string {
  return `tile/entries/${encodeIndex(index)}${suffix(width)}`;
}

/**
 * The path prefixes (`<full path>.p/`) of the partial tiles and entry bundles superseded by the
 * full ones among `tiles` and `bundles` (C2SP tlog-tiles: a log "MAY delete any partial tile once
 * the corresponding full tile is available"). Partial ones yield nothing.
 */
export function supersededPartialPrefixes(
  tiles: readonly TileRef[],
  bundles: readonly { readonly index: number; readonly width: number }[],
): string[] {
  return [
    ...tiles.filter((t) => t.width === TILE_WIDTH).map((t) => `${tilePath(t)}.p/`),
    ...bundles.filter((e) => e.width === TILE_WIDTH).map((e) => `${entryBundlePath(e.index, e.width)}.p/`),
  ];
}

export type ParsedTilePath =
  | { readonly kind: 'tile'; readonly level: number; readonly index: number; readonly width: number }
  | { readonly kind: 'entries'; readonly index: number; readonly width: number };

/** The longest path accepted (level, 6 index groups for 2^53, partial suffix), bounded first. */
const MAX_PATH_LENGTH = 64;

/**
 * Parse a tile or entry-bundle path (without the log prefix). Exactly the spec's encoding: no
 * leading zeros in `<L>` or `<W>`, 3-digit `<N>` elements with `x` on all but the last and no
 * redundant leading `x000` element, width 1..255 for partial tiles. Anything else would name the
 * same tile two ways, letting a cache serve a different object for the same content.
 */
export function parseTilePath(path: string): Result<ParsedTilePath, TileError> {
  const bad = (why: string): Result<never, TileError> => err(tileError('invalid_path', why));
  if (typeof path !== 'string' || path.length > MAX_PATH_LENGTH) return bad('path is too long');
  const parts = path.split('/');
  if (parts[0] !== 'tile' || parts.length < 3) return bad('path must start with tile/');
  let level: number | undefined;
  if (parts[1] !== 'entries') {
    level = parseDecimal(parts[1]!);
    if (level === undefined || level > MAX_TILE_LEVEL)
      return bad('tile level must be 0..63 without leading zeros');
  }
  let rest = parts.slice(2);
  let width = TILE_WIDTH;
  const dotP = rest.findIndex((p) => p.endsWith('.p'));
  if (dotP >= 0) {
    if (dotP !== rest.length - 2) return bad('partial suffix must be .p/<W> at the end');
    const w = parseDecimal(rest[rest.length - 1]!);
    if (w === undefined || w < 1 || w >= TILE_WIDTH) return bad('partial width must be 1..255');
    width = w;
    rest = [...rest.slice(0, -2), rest[rest.length - 2]!.slice(0, -2)];
  }
  let index = 0;
  for (let i = 0; i < rest.length; i++) {
    const last = i === rest.length - 1;
    const m = /^(x?)([0-9]{3})$/.exec(rest[i]!);
    if (!m || (m[1] === 'x') === last) return bad('index elements must be xNNN/.../NNN');
    // x000 as the first element would be a second spelling of a smaller index.
    if (i === 0 && !last && m[2] === '000') return bad('index must not have leading zero elements');
    index = index * 1000 + Number(m[2]);
  }
  if (!Number.isSafeInteger(index)) return bad('tile index exceeds 2^53 - 1');
  return ok(level === undefined ? { kind: 'entries', index, width } : { kind: 'tile', level, index, width });
}

// ---- entry bundles -----------------------------------------------------------------------

/** An entry bundle: each entry as a big-endian uint16 length, then its bytes. */
export function encodeEntryBundle(entries: readonly Uint8Array[]): Result<Uint8Array, TileError> {
  if (entries.length === 0 || entries.length > TILE_WIDTH) {
    return err(tileError('invalid_bundle', `a bundle holds 1..${TILE_WIDTH} entries`));
  }
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    if (!(e instanceof Uint8Array) || e.length > MAX_ENTRY_SIZE) {
      return err(tileError('invalid_entry', `entries must be at most ${MAX_ENTRY_SIZE} bytes`));
    }
    parts.push(Uint8Array.of(e.length >> 8, e.length & 0xff), e);
  }
  return ok(concatBytes(...parts));
}

/**
 * Parse an entry bundle expected to hold `width` entries (from its path). Trailing bytes, a
 * truncated entry or a different count are errors: a bundle is checked against its level-0 tile.
 */
export function parseEntryBundle(bytes: Uint8Array, width: number): Result<Uint8Array[], TileError> {
  if (!(bytes instanceof Uint8Array)) return err(tileError('invalid_bundle', 'bundle must be bytes'));
  if (!Number.isSafeInteger(width) || width < 1 || width > TILE_WIDTH) {
    return err(tileError('invalid_bundle', `bundle width must be 1..${TILE_WIDTH}`));
  }
  const out: Uint8Array[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (out.length === width)
      return err(tileError('invalid_bundle', 'bundle has more entries than its width'));
    if (at + 2 > bytes.length) return err(tileError('invalid_bundle', 'bundle ends inside a length prefix'));
    const len = (bytes[at]! << 8) | bytes[at + 1]!;
    at += 2;
    if (at + len > bytes.length) return err(tileError('invalid_bundle', 'bundle ends inside an entry'));
    out.push(bytes.slice(at, at + len));
    at += len;
  }
  if (out.length !== width)
    return err(tileError('invalid_bundle', `bundle has ${out.length} entries, expected ${width}`));
  return ok(out);
}
