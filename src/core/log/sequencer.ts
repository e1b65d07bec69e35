/**
 * The sequencer's pure steps for Writ's receipt logs: append a batch of entries (tiles, entry
 * bundles, the signed checkpoint of the new size), and produce inclusion and consistency proofs
 * from stored tiles. The Durable Object (durable-objects/log-sequencer.ts) only stores what these
 * return and reads what they ask for. An append can be signed here (`sequenceBatch`, with a
 * synchronous signer) or in two steps around a signature made outside (`appendBatch`, then
 * `sealBatch`), with the same bytes either way.
 *
 * Guarantees: the same state and entries always give the same tiles, bundles and checkpoint bytes
 * (Ed25519 is deterministic), so a batch redone after a crash rewrites identical objects; a
 * checkpoint is only produced together with every tile its size needs; a proof is generated only
 * from hashes actually stored (`missing_node` otherwise, never a guess).
 * Never: reads a clock, does I/O, or interprets an entry's bytes.
 */
import { attachCheckpointSignature, serializeCheckpointBody } from './checkpoint.js';
import { encodeBase64 } from './encoding.js';
import { consistencyProof, inclusionProof, leafHash } from './merkle.js';
import { signNote, type NoteSignature, type NoteSigner } from './note.js';
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

/** A batch appended but not yet signed: everything but the checkpoint's signature. */
export interface AppendedBatch {
  readonly state: LogState;
  readonly leafHashes: readonly Uint8Array[];
  /** Every tile whose content is new (full ones completed, partial ones of the new size). */
  readonly tiles: readonly Tile[];
  readonly bundles: readonly EntryBundle[];
  /** The checkpoint body (C2SP tlog-checkpoint note text) of the new size, to be signed. */
  readonly checkpointBody: string;
}

/** An appended batch with its checkpoint signed. */
export interface SequencedBatch extends Omit<AppendedBatch, 'checkpointBody'> {
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
  const a = appendBatch(state, pending, entries, origin);
  if (!a.ok) return a;
  const checkpoint = signCheckpointBody(a.value.checkpointBody, origin, signer);
  if (!checkpoint.ok) return checkpoint;
  return ok(withCheckpoint(a.value, checkpoint.value));
}

/**
 * `sequenceBatch` without the signature: the caller signs `checkpointBody` with the log key (for
 * the Durable Object, natively and asynchronously) and completes it with `sealBatch`. The two
 * paths give identical bytes (Ed25519 is deterministic).
 */
export function appendBatch(
  state: LogState,
  pending: readonly Uint8Array[],
  entries: readonly Uint8Array[],
  origin: string,
): Result<AppendedBatch, SequencerError> {
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

  const body = checkpointBodyOf(next, origin);
  if (!body.ok) return body;
  return ok({ state: next, leafHashes, tiles: appended.value.tiles, bundles, checkpointBody: body.value });
}

/** Complete an appended batch with the log key's signature over its checkpoint body. */
export function sealBatch(
  batch: AppendedBatch,
  signature: NoteSignature,
): Result<SequencedBatch, SequencerError> {
  const cp = attachCheckpointSignature(batch.checkpointBody, signature);
  if (!cp.ok) return fail('signing_failed', cp.error.message);
  return ok(withCheckpoint(batch, cp.value));
}

function withCheckpoint(batch: AppendedBatch, checkpoint: string): SequencedBatch {
  const { state, leafHashes, tiles, bundles } = batch;
  return { state, leafHashes, tiles, bundles, checkpoint };
}

/** The checkpoint body (unsigned note text) of a log's current state (also of the empty log). */
export function checkpointBodyOf(state: LogState, origin: string): Result<string, SequencerError> {
  const root = stateRoot(state);
  if (!root.ok) return fail('invalid_state', root.error.message);
  const body = serializeCheckpointBody({ origin, size: state.size, rootHash: root.value, extensions: [] });
  return body.ok ? ok(body.value) : fail('signing_failed', body.error.message);
}

/** The signed checkpoint of a log's current state (also of the empty log). */
export function checkpointOf(
  state: LogState,
  origin: string,
  signer: NoteSigner,
): Result<string, SequencerError> {
  const body = checkpointBodyOf(state, origin);
  if (!body.ok) return body;
  return signCheckpointBody(body.value, origin, signer);
}

/** What `signCheckpoint` does after serializing the body: the log key's name is the origin. */
function signCheckpointBody(
  body: string,
  origin: string,
  signer: NoteSigner,
): Result<string, SequencerError> {
  if (signer.name !== origin)
    return fail('signing_failed', 'the log key name must equal the checkpoint origin');
  const note = signNote(body, [signer]);
  return note.ok ? ok(note.value) : fail('signing_failed', note.error.message);
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

/**
 * A C2SP tlog-proof for leaf `index` against `checkpoint`, a checkpoint of `size` (by default the
 * state's; an earlier size's, e.g. a checkpoint witnesses cosigned, is proven from the same tiles:
 * every node of an earlier tree is a node of this one).
 */
export function proveInclusion(
  state: LogState,
  index: number,
  checkpoint: string,
  load: TileLoader,
  size: number = state.size,
): Result<string, ProofError> {
  if (!Number.isSafeInteger(size) || size < 1 || size > state.size)
    return err({ reason: 'out_of_range', message: 'the checkpoint size is not a size of the tree' });
  if (!Number.isSafeInteger(index) || index < 0 || index >= size)
    return err({ reason: 'out_of_range', message: 'leaf is not in the tree' });
  const tiles = loadWith(state, load, tilesForInclusionProof(index, size));
  const hashes = inclusionProof(index, size, hashReaderFromTiles(tiles));
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
