/**
 * C2SP tlog-checkpoint: a real sum.golang.org checkpoint verified with that log's published key,
 * the spec's example body, and every rejection path of the body parser and of verification.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import {
  attachCheckpointSignature,
  parseCheckpointBody,
  serializeCheckpointBody,
  signCheckpoint,
  verifyCheckpoint,
  type Checkpoint,
} from '../../../../src/core/log/checkpoint.js';
import { EMPTY_ROOT } from '../../../../src/core/log/merkle.js';
import {
  ed25519Signer,
  ed25519Verifier,
  parseNote,
  parseVerifierKey,
  signNote,
} from '../../../../src/core/log/note.js';
import { utf8 } from '../../../../src/core/log/encoding.js';
import {
  appendBatch,
  checkpointBodyOf,
  checkpointOf,
  sealBatch,
  sequenceBatch,
} from '../../../../src/core/log/sequencer.js';
import { EMPTY_LOG_STATE, TILE_WIDTH } from '../../../../src/core/log/tiles.js';
import vectors from '../../../data/tlog/signed-note.json';

// Pure hashing, slow in workerd and slower on a loaded machine: no test here may fail on time.
vi.setConfig({ testTimeout: 300_000 });

function must<T>(r: { ok: true; value: T } | { ok: false; error: { message: string } }): T {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}
const reason = (r: { ok: boolean; error?: { reason: string } }): string =>
  r.ok ? 'accepted' : r.error!.reason;

const ORIGIN = 'writ.example/log/tenant_1';
const logSigner = must(ed25519Signer(ORIGIN, new Uint8Array(32).fill(1)));
const logVerifier = must(ed25519Verifier(ORIGIN, logSigner.publicKey));
const witness = must(ed25519Signer('witness.example', new Uint8Array(32).fill(2)));
const ROOT = new Uint8Array(32).fill(0xab);
const cp: Checkpoint = { origin: ORIGIN, size: 42, rootHash: ROOT, extensions: [] };

describe('known answers', () => {
  it('verifies a sum.golang.org checkpoint with its published key', () => {
    const { sumdbCheckpoint: v } = vectors;
    const key = must(parseVerifierKey(v.verifierKey));
    const got = must(verifyCheckpoint(v.note, [key], v.origin));
    expect(got.checkpoint.size).toBe(v.size);
    expect(btoa(String.fromCharCode(...got.checkpoint.rootHash))).toBe(v.rootHash);
    expect(reason(verifyCheckpoint(v.note, [key], 'Go rocks but I might have the wrong ID'))).toBe(
      'origin_mismatch',
    );
    expect(reason(verifyCheckpoint(v.note.replace('6476701', '6476702'), [key], v.origin))).toBe(
      'invalid_signature',
    );
  });

  it('parses the tlog-checkpoint spec example body', () => {
    const body = vectors.specExamples.checkpoint.split('\n\n')[0]! + '\n';
    const got = must(parseCheckpointBody(body));
    expect(got.origin).toBe('example.com/behind-the-sofa');
    expect(got.size).toBe(20852163);
    expect(must(serializeCheckpointBody(got))).toBe(body);
  });
});

describe('signing and verifying', () => {
  it('round-trips a checkpoint signed by the log and cosigned by a witness', () => {
    const note = must(signCheckpoint(cp, [logSigner, witness]));
    expect(note.startsWith(`${ORIGIN}\n42\n${btoa(String.fromCharCode(...ROOT))}\n\n— ${ORIGIN} `)).toBe(
      true,
    );
    const got = must(verifyCheckpoint(note, [logVerifier], ORIGIN));
    expect(got.checkpoint).toEqual(cp);
    expect(got.note.unverified.map((s) => s.name)).toEqual(['witness.example']);
  });

  it('keeps extension lines and the empty tree', () => {
    const withExt = { ...cp, extensions: ['ext one', 'two'] };
    expect(
      must(verifyCheckpoint(must(signCheckpoint(withExt, [logSigner])), [logVerifier], ORIGIN)).checkpoint,
    ).toEqual(withExt);
    const empty = { ...cp, size: 0, rootHash: EMPTY_ROOT };
    expect(
      must(verifyCheckpoint(must(signCheckpoint(empty, [logSigner])), [logVerifier], ORIGIN)).checkpoint.size,
    ).toBe(0);
  });

  it('refuses a checkpoint for another origin, even signed by the trusted key', () => {
    const other = must(ed25519Signer('writ.example/log/tenant_2', new Uint8Array(32).fill(1)));
    const note = must(signCheckpoint({ ...cp, origin: other.name }, [other]));
    // Same seed, other name: a different key ID, so the note is unverified for this verifier...
    expect(reason(verifyCheckpoint(note, [logVerifier], ORIGIN))).toBe('unverified_note');
    // ...and with that key trusted, the origin check still refuses it for tenant_1.
    const v = must(ed25519Verifier(other.name, other.publicKey));
    expect(reason(verifyCheckpoint(note, [logVerifier, v], ORIGIN))).toBe('origin_mismatch');
  });

  it('refuses a validly signed note whose body is not a checkpoint', () => {
    const note = must(signNote('not a checkpoint\n', [logSigner]));
    expect(reason(verifyCheckpoint(note, [logVerifier], ORIGIN))).toBe('malformed_checkpoint');
  });

  it('requires the log key name to equal the origin when signing', () => {
    expect(reason(signCheckpoint(cp, [witness]))).toBe('origin_mismatch');
    expect(reason(signCheckpoint(cp, []))).toBe('origin_mismatch');
  });

  it('round-trips any well-formed body', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 30 }).filter((s) => !s.includes('\n')),
        fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        (origin, size, root) => {
          const c = { origin, size: size === 0 ? 1 : size, rootHash: root, extensions: [] };
          return (
            JSON.stringify(must(parseCheckpointBody(must(serializeCheckpointBody(c))))) === JSON.stringify(c)
          );
        },
      ),
    );
  });
});

describe('rejection paths', () => {
  const root = btoa(String.fromCharCode(...ROOT));
  it('rejects every malformed body', () => {
    for (const body of [
      '',
      `${ORIGIN}\n42\n${root}`,
      `${ORIGIN}\n42\n`,
      `${ORIGIN}\n42\n\n`,
      `\n42\n${root}\n`,
      `${ORIGIN}\n042\n${root}\n`,
      `${ORIGIN}\n00\n${root}\n`,
      `${ORIGIN}\n+42\n${root}\n`,
      `${ORIGIN}\n-1\n${root}\n`,
      `${ORIGIN}\n4 2\n${root}\n`,
      `${ORIGIN}\n42.0\n${root}\n`,
      `${ORIGIN}\n\n${root}\n`,
      `${ORIGIN}\n9007199254740992\n${root}\n`,
      `${ORIGIN}\n18446744073709551615\n${root}\n`,
      `${ORIGIN}\n42\n${root.slice(0, -1)}\n`,
      `${ORIGIN}\n42\n${root.slice(0, -1)}8\n`,
      `${ORIGIN}\n42\n${btoa(String.fromCharCode(...new Uint8Array(31)))}\n`,
      `${ORIGIN}\n42\n${btoa(String.fromCharCode(...new Uint8Array(33)))}\n`,
      `${ORIGIN}\n42\n${root.replace(/=$/, '')}\n`,
      `${ORIGIN}\n42\n ${root}\n`,
      `${ORIGIN}\n42\n${root}\n\n`,
      `${ORIGIN}\n42\n${root}\next\n\n`,
      `${ORIGIN}\n0\n${root}\n`,
      `${ORIGIN}\n42\n${root}\n${'x'.repeat(5000)}\n`,
      7 as unknown as string,
    ]) {
      expect([body, reason(parseCheckpointBody(body))]).toEqual([body, 'malformed_checkpoint']);
    }
  });

  it('refuses to write a checkpoint it could not parse back', () => {
    for (const bad of [
      { ...cp, origin: '' },
      { ...cp, origin: 'a\nb' },
      { ...cp, size: -1 },
      { ...cp, size: 1.5 },
      { ...cp, size: 2 ** 53 },
      { ...cp, rootHash: new Uint8Array(31) },
      { ...cp, extensions: [''] },
      { ...cp, extensions: ['a\nb'] },
      { ...cp, size: 0 },
    ]) {
      expect(reason(serializeCheckpointBody(bad))).toBe('malformed_checkpoint');
      expect(reason(signCheckpoint(bad, [logSigner]))).toBe('malformed_checkpoint');
    }
  });
});

describe('a checkpoint signed outside the core (attachCheckpointSignature, appendBatch + sealBatch)', () => {
  const body = must(serializeCheckpointBody(cp));
  const signature = () => ({ name: ORIGIN, keyId: logSigner.keyId, signature: logSigner.sign(utf8(body)) });

  it('gives the same bytes as signCheckpoint for the same key (Ed25519 is deterministic)', () => {
    expect(must(attachCheckpointSignature(body, signature()))).toBe(must(signCheckpoint(cp, [logSigner])));
  });

  it('the two-step append gives the same tiles, bundles and checkpoint as sequenceBatch', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 300 }),
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 300 }),
        (first, second) => {
          let state = EMPTY_LOG_STATE;
          let pending: Uint8Array[] = [];
          for (const batch of [first, second]) {
            const one = must(sequenceBatch(state, pending, batch, ORIGIN, logSigner));
            const a = must(appendBatch(state, pending, batch, ORIGIN));
            const sig = {
              name: ORIGIN,
              keyId: logSigner.keyId,
              signature: logSigner.sign(utf8(a.checkpointBody)),
            };
            expect(must(sealBatch(a, sig))).toEqual(one);
            const all = [...pending, ...batch];
            pending = all.slice(all.length - (one.state.size % TILE_WIDTH));
            state = one.state;
          }
          expect(must(checkpointBodyOf(state, ORIGIN))).toBe(
            must(parseNote(must(checkpointOf(state, ORIGIN, logSigner)))).text,
          );
        },
      ),
      { numRuns: 15 },
    );
  });

  it('refuses a signature under another name, of another length, or over a body that does not parse', () => {
    // Another name: the note's key name would disagree with the origin it vouches for.
    expect(reason(attachCheckpointSignature(body, { ...signature(), name: 'witness.example' }))).toBe(
      'origin_mismatch',
    );
    // Not an Ed25519 signature: a truncated or padded signature line.
    for (const n of [0, 63, 65]) {
      expect(reason(attachCheckpointSignature(body, { ...signature(), signature: new Uint8Array(n) }))).toBe(
        'invalid_signature',
      );
    }
    // A body that is not a checkpoint is never published under the log's key.
    expect(reason(attachCheckpointSignature('not a checkpoint\n', signature()))).toBe('malformed_checkpoint');
    expect(
      reason(
        sealBatch(
          { ...must(appendBatch(EMPTY_LOG_STATE, [], [utf8('x')], ORIGIN)) },
          { ...signature(), name: 'other' },
        ),
      ),
    ).toBe('signing_failed');
  });
});
