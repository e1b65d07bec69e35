/**
 * The log side of C2SP tlog-witness (src/core/log/witness.ts): strict witness configuration, the
 * add-checkpoint body, reading a witness's answer, and verifying its cosignature before anything
 * of it is kept. Witnesses and cosignatures come from the verifier tests' helpers (written from
 * the spec, independently of the code under test).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ed25519Signer, signNote, verifierKey } from '../../../../src/core/log/note.js';
import {
  MAX_LOG_WITNESSES,
  addCheckpointBody,
  parseLogWitnesses,
  parseWitnessUrl,
  readAddCheckpointAnswer,
  verifyWitnessAnswer,
  withCosignatures,
} from '../../../../src/core/log/witness.js';
import { parseWitnessKey, verifyCosignatures, witnessPolicy } from '../../../../src/core/log/cosignature.js';
import { cosign, testWitness } from '../../verify/fixtures.js';

const W1 = testWitness('witness.test/w1', 21);
const W2 = testWitness('witness.test/w2', 22);
const PROD = { allowLoopbackHttp: false };
const DEV = { allowLoopbackHttp: true };
const HASH = btoa(String.fromCharCode(...new Uint8Array(32).fill(9)));

const must = <T>(r: { ok: true; value: T } | { ok: false; error: { message: string } }): T => {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
};

const LOG = must(ed25519Signer('writ.test/log/t1', new Uint8Array(32).fill(3)));
const checkpointOf = (size: number) => must(signNote(`writ.test/log/t1\n${size}\n${HASH}\n`, [LOG]));
const CP = checkpointOf(5);
/** The signature lines `cosign` appended to a note. */
const linesAdded = (note: string, base: string) => note.slice(base.length);

describe('witness configuration', () => {
  it('accepts https prefixes and normalizes away a trailing slash', () => {
    expect(parseWitnessUrl('https://witness.example/sub/', PROD)).toEqual({
      ok: true,
      value: 'https://witness.example/sub',
    });
    expect(parseWitnessUrl('https://witness.example', PROD)).toEqual({
      ok: true,
      value: 'https://witness.example',
    });
    expect(parseWitnessUrl('http://127.0.0.1:8080/w', DEV)).toEqual({
      ok: true,
      value: 'http://127.0.0.1:8080/w',
    });
    expect(parseWitnessUrl('http://localhost:8080', DEV).ok).toBe(true);
  });

  it.each([
    ['http to a public host', 'http://witness.example', DEV],
    ['http to loopback outside development', 'http://127.0.0.1:8080', PROD],
    ['https to loopback outside development', 'https://localhost', PROD],
    ['another scheme', 'ftp://witness.example', PROD],
    ['credentials', 'https://user:pw@witness.example', PROD],
    ['a query', 'https://witness.example/?x=1', PROD],
    ['an empty query', 'https://witness.example/?', PROD],
    ['a fragment', 'https://witness.example/#f', PROD],
    ['a space', 'https://witness.example/ a', PROD],
    ['not a url', 'witness.example', PROD],
    ['too long', `https://witness.example/${'a'.repeat(600)}`, PROD],
    ['not text', 42, PROD],
  ])('refuses %s', (_what, url, options) => {
    expect(parseWitnessUrl(url, options)).toMatchObject({
      ok: false,
      error: { reason: 'invalid_witness_url' },
    });
  });

  it('refuses bad keys, too many witnesses and duplicates, naming the offending entry', () => {
    const good = { vkey: W1.vkey, url: 'https://w1.example' };
    expect(must(parseLogWitnesses([good], PROD))[0]!.key.name).toBe('witness.test/w1');
    // The log's own (0x01) note key is not a witness key: the log would witness itself.
    const logVkey = verifierKey(LOG);
    expect(parseLogWitnesses([good, { vkey: logVkey, url: 'https://x.example' }], PROD)).toMatchObject({
      ok: false,
      error: { reason: 'unsupported_witness_key_type', index: 1 },
    });
    const wrongId = W1.vkey.replace(
      /\+([0-9a-f]{8})\+/,
      (_m, id: string) => `+${id === '00000000' ? '00000001' : '00000000'}+`,
    );
    expect(parseLogWitnesses([{ vkey: wrongId, url: good.url }], PROD)).toMatchObject({
      ok: false,
      error: { reason: 'witness_key_id_mismatch', index: 0 },
    });
    expect(parseLogWitnesses([{ vkey: W1.vkey, url: 'http://w1.example' }], PROD)).toMatchObject({
      ok: false,
      error: { reason: 'invalid_witness_url', index: 0 },
    });
    expect(parseLogWitnesses([good, { ...good, url: 'https://other.example' }], PROD)).toMatchObject({
      ok: false,
      error: { reason: 'duplicate_witness' },
    });
    const many = Array.from({ length: MAX_LOG_WITNESSES + 1 }, (_, i) => ({
      vkey: testWitness(`witness.test/m${i}`, 40 + i).vkey,
      url: `https://m${i}.example`,
    }));
    expect(parseLogWitnesses(many.slice(0, MAX_LOG_WITNESSES), PROD).ok).toBe(true);
    expect(parseLogWitnesses(many, PROD)).toMatchObject({
      ok: false,
      error: { reason: 'too_many_witnesses' },
    });
    expect(parseLogWitnesses([], PROD)).toEqual({ ok: true, value: [] });
  });
});

describe('add-checkpoint', () => {
  it('writes the body the spec gives: old size, proof lines, blank line, checkpoint', () => {
    expect(must(addCheckpointBody(0, [], CP))).toBe(`old 0\n\n${CP}`);
    expect(must(addCheckpointBody(3, [HASH, HASH], CP))).toBe(`old 3\n${HASH}\n${HASH}\n\n${CP}`);
    expect(addCheckpointBody(0, [HASH], CP).ok).toBe(false);
    expect(addCheckpointBody(-1, [], CP).ok).toBe(false);
    expect(addCheckpointBody(1, ['not base64'], CP).ok).toBe(false);
    expect(
      addCheckpointBody(
        1,
        Array.from({ length: 64 }, () => HASH),
        CP,
      ).ok,
    ).toBe(false);
    expect(addCheckpointBody(1, [], 'not a note').ok).toBe(false);
  });

  it('reads a 409 only with a size body of the spec’s content type', () => {
    expect(readAddCheckpointAnswer(409, 'text/x.tlog.size', '17\n')).toEqual({ kind: 'conflict', size: 17 });
    expect(readAddCheckpointAnswer(409, 'text/x.tlog.size; charset=utf-8', '0\n')).toEqual({
      kind: 'conflict',
      size: 0,
    });
    for (const [type, body] of [
      ['text/plain', '17\n'],
      ['text/x.tlog.size', '17'],
      ['text/x.tlog.size', '017\n'],
      ['text/x.tlog.size', '-1\n'],
      [null, '17\n'],
    ] as const) {
      expect(readAddCheckpointAnswer(409, type, body).kind).toBe('refused');
    }
    for (const status of [400, 403, 404, 422, 500, 503]) {
      expect(readAddCheckpointAnswer(status, 'text/plain', '')).toMatchObject({ kind: 'refused', status });
    }
    expect(readAddCheckpointAnswer(200, null, 'x')).toEqual({ kind: 'cosigned', body: 'x' });
  });
});

describe('a witness answer is verified before anything is kept', () => {
  const key = must(parseWitnessKey(W1.vkey));
  const answer = (note = CP, w = W1, t = 1_765_000_000) => linesAdded(cosign(note, w, t), note);

  it('keeps the witness’s valid cosignature over exactly this checkpoint, and it verifies as a policy', () => {
    const v = must(verifyWitnessAnswer(CP, answer(), key));
    expect(v.cosigned).toEqual({
      name: W1.name,
      key_id: W1.vkey.split('+')[1],
      timestamp_unix_s: 1_765_000_000,
    });
    const served = withCosignatures(CP, [v.line]);
    expect(verifyCosignatures(served, must(witnessPolicy([key], 1))).ok).toBe(true);
  });

  it('keeps only the newest line of the witness and drops lines by other keys', () => {
    const body = answer(CP, W1, 10) + answer(CP, W2, 11) + answer(CP, W1, 12);
    const v = must(verifyWitnessAnswer(CP, body, key));
    expect(v.cosigned.timestamp_unix_s).toBe(12);
    expect(v.line).toBe(answer(CP, W1, 12));
  });

  it('refuses a cosignature by another key, over another checkpoint, or a malformed answer', () => {
    expect(verifyWitnessAnswer(CP, answer(CP, W2), key)).toMatchObject({
      ok: false,
      error: { reason: 'no_cosignature' },
    });
    // The witness's key, over the checkpoint of another size.
    expect(verifyWitnessAnswer(CP, answer(checkpointOf(6)), key)).toMatchObject({
      ok: false,
      error: { reason: 'invalid_cosignature' },
    });
    // Another key under the witness's name and key ID (a forged line): fails, not ignored.
    const forged = testWitness(W1.name, 99);
    const impostor = answer(CP, { ...forged, keyId: W1.keyId });
    expect(verifyWitnessAnswer(CP, impostor, key)).toMatchObject({
      ok: false,
      error: { reason: 'invalid_cosignature' },
    });
    // A valid line beside an invalid one by the same witness: the whole answer is refused.
    expect(verifyWitnessAnswer(CP, answer() + impostor, key).ok).toBe(false);
    for (const bad of [
      '',
      'ok\n',
      `${answer()}\n`,
      answer().slice(0, -1),
      `${answer()}\n${CP}`,
      'x'.repeat(20_000),
    ]) {
      expect(verifyWitnessAnswer(CP, bad, key).ok).toBe(false);
    }
  });

  it('property: any changed byte of a valid answer is refused or is exactly as valid (never another checkpoint)', () => {
    const good = answer();
    fc.assert(
      fc.property(fc.nat(good.length - 1), fc.integer({ min: 1, max: 127 }), (i, x) => {
        const changed = good.slice(0, i) + String.fromCharCode(good.charCodeAt(i) ^ x) + good.slice(i + 1);
        const v = verifyWitnessAnswer(CP, changed, key);
        // A change that still verifies can only be the same signature (e.g. never: base64 is canonical).
        return !v.ok || v.value.line === good;
      }),
      { numRuns: 200 },
    );
  });
});
