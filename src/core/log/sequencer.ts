/**
 * The sequencer's pure steps for Writ's receipt logs: append a batch of entries (tiles, entry
 * bundles, the signed checkpoint of the new size), and produce inclusion and consistency proofs
 * from stored tiles. The Durable Object (durable-objects/log-sequencer.ts) only stores what these
 * return and reads what they ask for.
 *
 * Guarantees: the same state and entries always give the same tiles, bundles and checkpoint bytes
 * (Ed25519 is deterministic), so a batch redone after a crash rewrites identical objects; a
 * checkpoint is only produced together with every tile its size needs; a proof is generated only
 * from hashes actually stored (`missing_node` otherwise, never a guess).
 * Never: reads a clock, does I/O, or interprets an entry's bytes.
 */
import { signCheckpoint } from './checkpoint.js';
import { encodeBase64 } from './encoding.js';
import { consistencyProof, inclusionProof, leafHash } from './merkle.js';
import type { NoteSigner } from './note.js';
import { serializeTlogProof } from './proof.js';
import {
  type LogState,
  type Tile,
  type TileRef,
  TILE_WIDTH,
  appendLeaves,
  encodeEntryBundle,
  hashReaderFromTiles,
  partialTiles,
  stateRoot,
  tilesForConsistencyProof,
  tilesForInclusionProof,
} from './tiles.js';
import { err, ok, type Result } from '../result.js';

export interface EntryBundle {
  readonly index: number;
  readonly width: number;
  readonly bytes: Uint8Array;
}

export interface SequencedBatch {
  readonly state: LogState;
  readonly leafHashes: readonly Uint8Array[];
  /** Every tile whose content is new (full ones completed, partial ones of the new size). */
  readonly tiles: readonly Tile[];
  readonly bundles: readonly EntryBundle[];
  /** The signed checkpoint (C2SP signed note) of the new size. */
  readonly checkpoint: string;
}

export interface SequencerError {
  readonly reason: 'invalid_batch' | 'invalid_state' | 'signing_failed';
  readonly message: string;
}

const fail = (reason: SequencerError['reason'], message: string): Result<never, SequencerError> =>
  err({ reason, message });

/**
 * Append `entries` to a log in `state`. `pending` are the entries of the current partial entry
 * bundle (the last `state.size mod 256` entries), needed to rewrite that bundle wider.
 */
export function sequenceBatch(
  state: LogState,
  pending: readonly Uint8Array[],
  entries: readonly Uint8Array[],
  origin: string,
  signer: NoteSigner,
): Result<SequencedBatch, SequencerError> {
  if (entries.length === 0) return fail('invalid_batch', 'a batch appends at least one entry');
  // A wrong pending set would publish a bundle whose entries do not hash to the tile's leaves.
  if (pending.length !== state.size % TILE_WIDTH)
    return fail('invalid_state', 'pending entries do not match the state');
  const leafHashes = entries.map(leafHash);
  const appended = appendLeaves(state, leafHashes);
  if (!appended.ok) return fail('invalid_state', appended.error.message);
  const next = appended.value.state;

  const bundles: EntryBundle[] = [];
  const all = [...pending, ...entries];
  const first = Math.floor(state.size / TILE_WIDTH);
  for (let at = 0; at < all.length; at += TILE_WIDTH) {
    const chunk = all.slice(at, at + TILE_WIDTH);
    const bytes = encodeEntryBundle(chunk);
    if (!bytes.ok) return fail('invalid_batch', bytes.error.message);
    bundles.push({ index: first + at / TILE_WIDTH, width: chunk.length, bytes: bytes.value });
  }

  const root = stateRoot(next);
  if (!root.ok) return fail('invalid_state', root.error.message);
  const checkpoint = signCheckpoint({ origin, size: next.size, rootHash: root.value, extensions: [] }, [
    signer,
  ]);
  if (!checkpoint.ok) return fail('signing_failed', checkpoint.error.message);
  return ok({ state: next, leafHashes, tiles: appended.value.tiles, bundles, checkpoint: checkpoint.value });
}

/** The signed checkpoint of a log's current state (also of the empty log). */
export function checkpointOf(
  state: LogState,
  origin: string,
  signer: NoteSigner,
): Result<string, SequencerError> {
  const root = stateRoot(state);
  if (!root.ok) return fail('invalid_state', root.error.message);
  const cp = signCheckpoint({ origin, size: state.size, rootHash: root.value, extensions: [] }, [signer]);
  return cp.ok ? ok(cp.value) : fail('signing_failed', cp.error.message);
}

export interface ProofError {
  readonly reason: 'out_of_range' | 'missing_node' | 'invalid_proof';
  readonly message: string;
}

/**
 * Load tiles by reference: the full tile at those coordinates if stored, else the partial of the
 * state. Wider tiles at the same coordinates serve narrower requests (tiles only grow).
 */
export type TileLoader = (refs: readonly TileRef[]) => readonly Tile[];

function loadWith(state: LogState, load: TileLoader, refs: readonly TileRef[]): Tile[] {
  return [...load(refs), ...partialTiles(state)];
}

/** A C2SP tlog-proof for leaf `index` against `checkpoint` (of `state.size`). */
export function proveInclusion(
  state: LogState,
  index: number,
  checkpoint: string,
  load: TileLoader,
): Result<string, ProofError> {
  if (!Number.isSafeInteger(index) || index < 0 || index >= state.size)
    return err({ reason: 'out_of_range', message: 'leaf is not in the tree' });
  const tiles = loadWith(state, load, tilesForInclusionProof(index, state.size));
  const hashes = inclusionProof(index, state.size, hashReaderFromTiles(tiles));
  if (!hashes.ok) return err({ reason: 'missing_node', message: hashes.error.message });
  const text = serializeTlogProof({ index, hashes: hashes.value, checkpoint });
  return text.ok ? ok(text.value) : err({ reason: 'invalid_proof', message: text.error.message });
}

/** The RFC 9162 consistency proof from `from` to `to` (both at most `state.size`), base64 lines. */
export function proveConsistency(
  state: LogState,
  from: number,
  to: number,
  load: TileLoader,
): Result<readonly string[], ProofError> {
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || from > to || to > state.size)
    return err({ reason: 'out_of_range', message: 'sizes must satisfy 0 <= from <= to <= tree size' });
  const tiles = loadWith(state, load, tilesForConsistencyProof(from, to));
  const hashes = consistencyProof(from, to, hashReaderFromTiles(tiles));
  if (!hashes.ok) return err({ reason: 'missing_node', message: hashes.error.message });
  return ok(hashes.value.map(encodeBase64));
}
