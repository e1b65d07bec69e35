/**
 * C2SP tlog-proof and checkpoint consistency, end to end: a log sequenced with `appendLeaves`,
 * checkpoints signed at batch boundaries, proofs served from its tiles and verified offline; a
 * forked, rewritten or rolled-back log is caught. Every rejection path of the parser and verifier.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { signCheckpoint } from '../../../../src/core/log/checkpoint.js';
import { consistencyProof, inclusionProof, leafHash } from '../../../../src/core/log/merkle.js';
import { ed25519Signer, ed25519Verifier } from '../../../../src/core/log/note.js';
import {
  TLOG_PROOF_HEADER,
  parseTlogProof,
  serializeTlogProof,
  verifyCheckpointConsistency,
  verifyTlogProof,
} from '../../../../src/core/log/proof.js';
import {
  EMPTY_LOG_STATE,
  appendLeaves,
  hashReaderFromTiles,
  stateRoot,
  tilesForConsistencyProof,
  tilesForInclusionProof,
  type LogState,
  type Tile,
} from '../../../../src/core/log/tiles.js';
import { leafData } from './reference.js';

// Pure hashing, slow in workerd and slower on a loaded machine: no test here may fail on time.
vi.setConfig({ testTimeout: 300_000 });

function must<T>(r: { ok: true; value: T } | { ok: false; error: { message: string } }): T {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}
const reason = (r: { ok: boolean; error?: { reason: string } }): string =>
  r.ok ? 'accepted' : r.error!.reason;
const b64 = (b: Uint8Array): string => btoa(String.fromCharCode(...b));

const ORIGIN = 'writ.example/log/tenant_1';
const signer = must(ed25519Signer(ORIGIN, new Uint8Array(32).fill(9)));
const verifier = must(ed25519Verifier(ORIGIN, signer.publicKey));

/** A tiny sequencer over the pure library: tiles in a map, a signed checkpoint per batch. */
class Log {
  state: LogState = EMPTY_LOG_STATE;
  readonly tiles = new Map<string, Tile>();
  readonly checkpoints = new Map<number, string>();
  readonly entries: Uint8Array[] = [];

  append(entries: Uint8Array[]): string {
    const step = must(appendLeaves(this.state, entries.map(leafHash)));
    for (const t of step.tiles) this.tiles.set(`${t.level}/${t.index}/${t.width}`, t);
    this.state = step.state;
    this.entries.push(...entries);
    const note = must(
      signCheckpoint(
        { origin: ORIGIN, size: this.state.size, rootHash: must(stateRoot(this.state)), extensions: [] },
        [signer],
      ),
    );
    this.checkpoints.set(this.state.size, note);
    return note;
  }

  #reader(refs: { level: number; index: number; width: number }[]) {
    return hashReaderFromTiles(refs.map((r) => this.tiles.get(`${r.level}/${r.index}/${r.width}`)!));
  }

  proof(index: number, size: number, extra?: Uint8Array): string {
    const hashes = must(inclusionProof(index, size, this.#reader(tilesForInclusionProof(index, size))));
    const p = { index, hashes, checkpoint: this.checkpoints.get(size)! };
    return must(serializeTlogProof(extra ? { ...p, extra } : p));
  }

  consistency(size1: number, size2: number): Uint8Array[] {
    return must(consistencyProof(size1, size2, this.#reader(tilesForConsistencyProof(size1, size2))));
  }
}

const entry = (i: number, tag = 0): Uint8Array => leafData(i, tag);

function buildLog(batches: number[], tagAt?: { index: number; tag: number }): Log {
  const log = new Log();
  let next = 0;
  for (const n of batches) {
    log.append(
      Array.from({ length: n }, (_, k) => entry(next + k, tagAt && next + k === tagAt.index ? tagAt.tag : 0)),
    );
    next += n;
  }
  return log;
}

const log = buildLog([1, 4, 250, 45, 300]);

describe('tlog-proof format', () => {
  it('writes the spec layout: header, optional extra, index, hashes, blank line, checkpoint', () => {
    const text = log.proof(3, 5, Uint8Array.of(1, 2, 3));
    const lines = text.split('\n');
    expect(lines[0]).toBe(TLOG_PROOF_HEADER);
    expect(lines[1]).toBe('extra AQID');
    expect(lines[2]).toBe('index 3');
    const hashes = must(inclusionProof(3, 5, hashReaderFromTiles([...log.tiles.values()])));
    expect(lines.slice(3, 3 + hashes.length)).toEqual(hashes.map(b64));
    expect(lines[3 + hashes.length]).toBe('');
    expect(text.endsWith(`\n\n${log.checkpoints.get(5)!}`)).toBe(true);
    const back = must(parseTlogProof(text));
    expect(back.index).toBe(3);
    expect(Array.from(back.extra!)).toEqual([1, 2, 3]);
    expect(back.checkpoint).toBe(log.checkpoints.get(5));
  });

  it('omits the extra line when there is no extra data, and allows an empty path', () => {
    const text = log.proof(0, 1);
    expect(text.startsWith(`${TLOG_PROOF_HEADER}\nindex 0\n\n`)).toBe(true);
    expect(must(parseTlogProof(text)).hashes).toEqual([]);
  });

  it('rejects every malformed proof', () => {
    const good = log.proof(3, 5);
    const [, , ...rest] = good.split('\n');
    const body = rest.join('\n');
    const hash = b64(new Uint8Array(32));
    for (const text of [
      '',
      'c2sp.org/tlog-proof@v2\nindex 3\n' + body,
      ' c2sp.org/tlog-proof@v1\nindex 3\n' + body,
      `${TLOG_PROOF_HEADER}\n` + body,
      `${TLOG_PROOF_HEADER}\nindex 03\n` + body,
      `${TLOG_PROOF_HEADER}\nindex -3\n` + body,
      `${TLOG_PROOF_HEADER}\nindex three\n` + body,
      `${TLOG_PROOF_HEADER}\nindex  3\n` + body,
      `${TLOG_PROOF_HEADER}\nindex 9007199254740992\n` + body,
      `${TLOG_PROOF_HEADER}\nextra \nindex 3\n` + body,
      `${TLOG_PROOF_HEADER}\nextra !!notbase64!!\nindex 3\n` + body,
      `${TLOG_PROOF_HEADER}\nextra AQI\nindex 3\n` + body,
      `${TLOG_PROOF_HEADER}\nextra ${b64(new Uint8Array(4097))}\nindex 3\n` + body,
      `${TLOG_PROOF_HEADER}\nindex 3\nextra AQID\n` + body,
      `${TLOG_PROOF_HEADER}\nindex 3\n!!notbase64!!\n\n${log.checkpoints.get(5)}`,
      `${TLOG_PROOF_HEADER}\nindex 3\n${b64(new Uint8Array(64))}\n\n${log.checkpoints.get(5)}`,
      `${TLOG_PROOF_HEADER}\nindex 3\n${b64(new Uint8Array(31))}\n\n${log.checkpoints.get(5)}`,
      `${TLOG_PROOF_HEADER}\nindex 3\n${`${hash}\n`.repeat(65)}\n${log.checkpoints.get(5)}`,
      `${TLOG_PROOF_HEADER}\nindex 3\n${hash}`,
      `${TLOG_PROOF_HEADER}\nindex 3\n${hash}\n\n`,
      `${TLOG_PROOF_HEADER}`,
    ]) {
      expect([text.slice(0, 60), reason(parseTlogProof(text))]).toEqual([
        text.slice(0, 60),
        'malformed_proof',
      ]);
    }
    expect(reason(parseTlogProof('x'.repeat(400_000)))).toBe('too_large');
    expect(reason(parseTlogProof(5 as unknown as string))).toBe('malformed_proof');
  });

  it('refuses to write a proof it could not read back', () => {
    const checkpoint = log.checkpoints.get(5)!;
    expect(reason(serializeTlogProof({ index: -1, hashes: [], checkpoint }))).toBe('malformed_proof');
    expect(reason(serializeTlogProof({ index: 0, hashes: [new Uint8Array(31)], checkpoint }))).toBe(
      'malformed_proof',
    );
    expect(reason(serializeTlogProof({ index: 0, hashes: [], checkpoint, extra: new Uint8Array(0) }))).toBe(
      'malformed_proof',
    );
    expect(reason(serializeTlogProof({ index: 0, hashes: [], checkpoint: '' }))).toBe('malformed_proof');
  });
});

describe('verifying a proof offline', () => {
  it('verifies every entry against every checkpoint that includes it (data or leaf hash)', () => {
    for (const size of log.checkpoints.keys()) {
      for (let index = 0; index < size; index += size > 50 ? 37 : 1) {
        const text = log.proof(index, size);
        const got = must(verifyTlogProof(text, { data: log.entries[index]! }, [verifier], ORIGIN));
        expect([got.index, got.checkpoint.size]).toEqual([index, size]);
        expect(
          reason(verifyTlogProof(text, { leafHash: leafHash(log.entries[index]!) }, [verifier], ORIGIN)),
        ).toBe('accepted');
      }
    }
  });

  it('returns the extra data, unauthenticated', () => {
    const got = must(
      verifyTlogProof(log.proof(7, 255, Uint8Array.of(42)), { data: entry(7) }, [verifier], ORIGIN),
    );
    expect(Array.from(got.extra!)).toEqual([42]);
  });

  it('fails for another entry, index, origin, key, or a changed proof or checkpoint', () => {
    const text = log.proof(100, 300);
    const data = { data: entry(100) };
    expect(reason(verifyTlogProof(text, { data: entry(101) }, [verifier], ORIGIN))).toBe('root_mismatch');
    expect(reason(verifyTlogProof(text, { data: entry(100, 1) }, [verifier], ORIGIN))).toBe('root_mismatch');
    expect(reason(verifyTlogProof(text.replace('index 100', 'index 101'), data, [verifier], ORIGIN))).toBe(
      'root_mismatch',
    );
    expect(reason(verifyTlogProof(text.replace('index 100', 'index 300'), data, [verifier], ORIGIN))).toBe(
      'index_out_of_range',
    );
    expect(reason(verifyTlogProof(text, data, [verifier], 'writ.example/log/tenant_2'))).toBe(
      'origin_mismatch',
    );
    const other = must(
      ed25519Verifier(ORIGIN, must(ed25519Signer(ORIGIN, new Uint8Array(32).fill(8))).publicKey),
    );
    expect(reason(verifyTlogProof(text, data, [other], ORIGIN))).toBe('unverified_note');
    const lines = text.split('\n');
    const flipped = [...lines];
    const first = Uint8Array.from(atob(lines[2]!), (c) => c.charCodeAt(0));
    first[0]! ^= 1;
    flipped[2] = b64(first);
    expect(reason(verifyTlogProof(flipped.join('\n'), data, [verifier], ORIGIN))).toBe('root_mismatch');
    const dropped = [...lines.slice(0, 2), ...lines.slice(3)].join('\n');
    expect(reason(verifyTlogProof(dropped, data, [verifier], ORIGIN))).toBe('wrong_proof_length');
    const resized = text.replace('\n300\n', '\n299\n');
    expect(reason(verifyTlogProof(resized, data, [verifier], ORIGIN))).toBe('invalid_signature');
    expect(reason(verifyTlogProof(text, {} as { data: Uint8Array }, [verifier], ORIGIN))).toBe(
      'malformed_proof',
    );
  });
});

describe('consistency between checkpoints', () => {
  const sizes = [...log.checkpoints.keys()];

  it('links every pair of the log’s checkpoints', () => {
    for (const a of sizes) {
      for (const b of sizes.filter((s) => s >= a)) {
        const got = verifyCheckpointConsistency(
          log.checkpoints.get(a)!,
          log.checkpoints.get(b)!,
          log.consistency(a, b),
          [verifier],
          ORIGIN,
        );
        expect([a, b, reason(got)]).toEqual([a, b, 'accepted']);
      }
    }
  });

  it('detects a rollback, a wrong origin, an unknown key and a changed proof', () => {
    const [c5, c300] = [log.checkpoints.get(5)!, log.checkpoints.get(300)!];
    const proof = log.consistency(5, 300);
    expect(reason(verifyCheckpointConsistency(c300, c5, proof, [verifier], ORIGIN))).toBe('size_decreased');
    expect(reason(verifyCheckpointConsistency(c5, c300, proof, [verifier], 'other.example/log'))).toBe(
      'origin_mismatch',
    );
    expect(reason(verifyCheckpointConsistency(c5, c300, proof, [], ORIGIN))).toBe('unverified_note');
    expect(reason(verifyCheckpointConsistency(c5, c300, proof.slice(1), [verifier], ORIGIN))).toBe(
      'wrong_proof_length',
    );
    expect(reason(verifyCheckpointConsistency(c5, c300, [...proof].reverse(), [verifier], ORIGIN))).toBe(
      'root_mismatch',
    );
  });

  it('detects a fork: a different entry at some index, at the same size or larger', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...sizes.filter((s) => s > 0)).chain((m) =>
          fc.record({
            m: fc.constant(m),
            n: fc.constantFrom(...sizes.filter((s) => s >= m)),
            j: fc.nat({ max: m - 1 }),
          }),
        ),
        ({ m, n, j }) => {
          // The same batches with entry j rewritten: every checkpoint from j on differs.
          const forked = buildLog([1, 4, 250, 45, 300], { index: j, tag: 7 });
          const forkedOld = forked.checkpoints.get(m)!;
          const honestNew = log.checkpoints.get(n)!;
          for (const proof of [log.consistency(m, n), forked.consistency(m, n)]) {
            expect(
              reason(verifyCheckpointConsistency(forkedOld, honestNew, proof, [verifier], ORIGIN)),
            ).not.toBe('accepted');
          }
          // And the forked log cannot prove inclusion of the honest entry j against its heads.
          const honestEntry = { data: log.entries[j]! };
          expect(reason(verifyTlogProof(forked.proof(j, m), honestEntry, [verifier], ORIGIN))).toBe(
            'root_mismatch',
          );
        },
      ),
      { numRuns: 12 },
    );
  });
});
