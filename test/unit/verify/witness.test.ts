/**
 * Witness cosignatures (C2SP tlog-cosignature, Ed25519 cosignature/v1) in the offline verifier:
 * witness vkeys, the quorum check on a checkpoint, and the receipt log verifier with a policy.
 * Known answers: a real CT-log checkpoint cosigned by public witnesses (test/data/tlog/
 * cosignature.json, sources there and in test/data/tlog/README.md). The rest signs its own
 * checkpoints with the test helpers `testWitness` and `cosign`, written from the spec.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  cosignatureKeyId,
  cosignatureMessage,
  parseWitnessKey,
  verifyCosignatures,
  type WitnessKey,
  witnessPolicy,
  witnessVerifierKey,
} from '../../../src/core/log/cosignature.js';
import { openNote, parseVerifierKey } from '../../../src/core/log/note.js';
import { verifyBundle } from '../../../src/verify/bundle.js';
import { logVerifierKeys, receiptLogVerifier, witnessedLogVerifier } from '../../../src/verify/log.js';
import vectors from '../../data/tlog/cosignature.json';
import { generateKeyRing } from '../../../src/core/receipts/keys.js';
import {
  authorizationBundle,
  cosign,
  ISSUER,
  keys,
  OTHER_SEED,
  realLog,
  ring,
  testWitness,
  withCheckpoint,
} from './fixtures.js';

const must = <T>(r: { ok: true; value: T } | { ok: false; error: { message: string } }): T => {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
};
const wk = (vkey: string): WitnessKey => must(parseWitnessKey(vkey));

const W1 = testWitness('witness.test/w1', 11);
const W2 = testWitness('witness.test/w2', 12);
const W3 = testWitness('witness.test/w3', 13);
const STRANGER = testWitness('witness.test/stranger', 14);
const T0 = 1_765_000_000;

const base = authorizationBundle();
const log = realLog(base.signature);
const longer = realLog(base.signature, undefined, { after: 3 });

/** The receipt log's checkpoint with cosignatures by `ws` appended. */
function cosigned(ws: readonly (typeof W1)[], note: string = log.checkpoint, at = T0): string {
  return ws.reduce((n, w) => cosign(n, w, at), note);
}

const policy = (ws: readonly (typeof W1)[], quorum?: number) =>
  must(
    witnessPolicy(
      ws.map((w) => wk(w.vkey)),
      quorum,
    ),
  );

/** The last signature line of a note, and the note without it. */
function lastLine(note: string): { line: string; rest: string } {
  const end = note.lastIndexOf('\n', note.length - 2);
  return { line: note.slice(end + 1), rest: note.slice(0, end + 1) };
}

describe('witness keys (cosignature/v1 vkeys)', () => {
  it('parses a published witness vkey and derives its key id with type 0x04 (known answer)', () => {
    const k = wk(vectors.witnessedCheckpoint.witnessVerifierKey);
    expect(k.name).toBe('remora.n621.de');
    expect(k.keyId).toBe(0xda77ade7);
    expect(cosignatureKeyId(k.name, k.publicKey)).toBe(0xda77ade7);
    expect(witnessVerifierKey(k.name, k.publicKey)).toBe(vectors.witnessedCheckpoint.witnessVerifierKey);
    // The test helper's independent derivation agrees with the verifier's.
    expect(wk(W1.vkey).keyId).toBe(W1.keyId);
  });

  it('refuses malformed vkeys with a typed reason', () => {
    const k = wk(W1.vkey);
    const b64 = W1.vkey.split('+').slice(2).join('+');
    const key = (type: number, bytes: Uint8Array) => btoa(String.fromCharCode(type, ...bytes));
    const hex = k.keyId.toString(16).padStart(8, '0');
    const cases: [string, string][] = [
      ['', 'malformed_witness_key'],
      [vectors.formatsCosignatureKeys.wrongParts, 'malformed_witness_key'],
      [vectors.formatsCosignatureKeys.invalidBase64, 'malformed_witness_key'],
      [vectors.formatsCosignatureKeys.invalidAlgorithm, 'unsupported_witness_key_type'],
      // A plain note key (type 0x01) is not a witness key, though transparency-dev/formats converts it.
      [vectors.formatsCosignatureKeys.plainEd25519, 'unsupported_witness_key_type'],
      // ML-DSA-44 (0x06) is not implemented.
      [`${W1.name}+${hex}+${key(0x06, new Uint8Array(32).fill(1))}`, 'unsupported_witness_key_type'],
      [`${W1.name}+${hex.toUpperCase()}+${b64}`, 'malformed_witness_key'],
      [`${W1.name}+${hex}0+${b64}`, 'malformed_witness_key'],
      [`${W1.name}+00000000+${b64}`, 'witness_key_id_mismatch'],
      // Another name under the same key and ID: the ID no longer matches.
      [`witness.test/other+${hex}+${b64}`, 'witness_key_id_mismatch'],
      ['+' + hex + '+' + b64, 'invalid_witness_name'],
      [`a b+${hex}+${b64}`, 'invalid_witness_name'],
      [`${'n'.repeat(257)}+${hex}+${b64}`, 'invalid_witness_name'],
      [`${W1.name}+${hex}+${key(0x04, W1.publicKey.subarray(0, 31))}`, 'invalid_witness_public_key'],
      [`${W1.name}+${hex}+${key(0x04, new Uint8Array([...W1.publicKey, 0]))}`, 'invalid_witness_public_key'],
      // The identity point (small order) verifies forgeries under lax rules.
      [
        `${W1.name}+${hex}+${key(0x04, Uint8Array.of(1, ...new Uint8Array(31)))}`,
        'invalid_witness_public_key',
      ],
      [`${W1.name}+${hex}+${b64} `, 'malformed_witness_key'],
      [`${W1.name}+${hex}+${b64.slice(0, -1)}`, 'malformed_witness_key'],
    ];
    for (const [vkey, reason] of cases) {
      const r = parseWitnessKey(vkey);
      expect(r.ok, vkey).toBe(false);
      if (!r.ok) expect(r.error.reason, vkey).toBe(reason);
    }
    expect(parseWitnessKey(vectors.formatsCosignatureKeys.valid).ok).toBe(true);
  });

  it('refuses a policy that could count one witness twice, or never be met', () => {
    const [k1, k2] = [wk(W1.vkey), wk(W2.vkey)];
    const renamed = wk(witnessVerifierKey('witness.test/alias', W1.publicKey));
    const bad: [WitnessKey[], number | undefined, string][] = [
      [[], undefined, 'no_witnesses'],
      [[k1, k1], undefined, 'duplicate_witness'],
      // The cosignature/v1 message does not commit to the name: one key under two names is one witness.
      [[k1, renamed], 1, 'duplicate_witness'],
      [[k1, k2], 0, 'invalid_quorum'],
      [[k1, k2], 3, 'invalid_quorum'],
      [[k1, k2], 1.5, 'invalid_quorum'],
    ];
    for (const [ws, q, reason] of bad) {
      const r = witnessPolicy(ws, q);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.reason).toBe(reason);
    }
    expect(must(witnessPolicy([k1, k2])).quorum).toBe(2);
  });
});

describe('verifyCosignatures', () => {
  it('verifies the cosignature of a public witness on a real checkpoint, ignoring the others (known answer)', () => {
    const note = vectors.witnessedCheckpoint.checkpoint;
    // The log's own Ed25519 signature, under its published vkey.
    expect(openNote(note, [must(parseVerifierKey(vectors.witnessedCheckpoint.logVerifierKey))]).ok).toBe(
      true,
    );
    const p = must(witnessPolicy([wk(vectors.witnessedCheckpoint.witnessVerifierKey)]));
    expect(must(verifyCosignatures(note, p))).toEqual({
      quorum: 1,
      witnesses: 1,
      cosigned: [
        {
          name: 'remora.n621.de',
          key_id: 'da77ade7',
          timestamp_unix_s: vectors.witnessedCheckpoint.witnessTimestamp,
        },
      ],
    });
    // Another size under the same cosignature: the witness's line now fails, and fails the note.
    const clobbered = note.replace('\n1432088532\n', '\n42\n');
    expect(verifyCosignatures(clobbered, p)).toMatchObject({
      ok: false,
      error: { reason: 'invalid_cosignature' },
    });
  });

  it('signs exactly "cosignature/v1\\ntime <t>\\n" and the note text', () => {
    expect(new TextDecoder().decode(cosignatureMessage('o\n1\nh\n', 1679315147n))).toBe(
      'cosignature/v1\ntime 1679315147\no\n1\nh\n',
    );
  });

  it('passes with a quorum, and says which witnesses cosigned', () => {
    const note = cosign(cosigned([W1, STRANGER]), W3, T0 + 5);
    expect(must(verifyCosignatures(note, policy([W1, W2, W3], 2)))).toEqual({
      quorum: 2,
      witnesses: 3,
      cosigned: [
        { name: W1.name, key_id: W1.vkey.split('+')[1], timestamp_unix_s: T0 },
        { name: W3.name, key_id: W3.vkey.split('+')[1], timestamp_unix_s: T0 + 5 },
      ],
    });
  });

  it('fails each way a cosignature can be missing or wrong, with the reason', () => {
    const one = cosigned([W1]);
    const { line: w2Line } = lastLine(cosigned([W2], longer.checkpoint));
    const { line: w1Line, rest } = lastLine(one);
    const sigBytes = (line: string) =>
      Uint8Array.from(atob(line.slice(line.lastIndexOf(' ') + 1, -1)), (c) => c.charCodeAt(0));
    const relined = (line: string, bytes: Uint8Array) =>
      `${line.slice(0, line.lastIndexOf(' ') + 1)}${btoa(String.fromCharCode(...bytes))}\n`;
    const tsTampered = sigBytes(w1Line);
    tsTampered[11] = tsTampered[11]! ^ 1; // the low byte of the timestamp
    const sigMutated = sigBytes(w1Line);
    sigMutated[40] = sigMutated[40]! ^ 0x80;
    const short = sigBytes(w1Line).subarray(0, 4 + 64); // no timestamp: a plain note signature's shape
    const p2 = policy([W1, W2]);
    const cases: [string, string, string][] = [
      ['missing cosignature', one, 'witness_quorum_not_met'],
      ['no cosignature at all', log.checkpoint, 'witness_quorum_not_met'],
      ['only an unknown key cosigned', cosigned([STRANGER]), 'witness_quorum_not_met'],
      // W2's cosignature of a longer tree of the same log, pasted under this checkpoint.
      ['a cosignature over a different checkpoint', `${one}${w2Line}`, 'invalid_cosignature'],
      [
        'a tampered timestamp',
        `${rest}${relined(w1Line, tsTampered)}${lastLine(cosigned([W2])).line}`,
        'invalid_cosignature',
      ],
      [
        'a mutated signature byte',
        `${rest}${relined(w1Line, sigMutated)}${lastLine(cosigned([W2])).line}`,
        'invalid_cosignature',
      ],
      ['a line of the wrong length', `${rest}${relined(w1Line, short)}`, 'invalid_cosignature'],
      // The same line twice, and a second cosignature at another time: one witness, counted once.
      ['a duplicate cosignature from the same witness', `${one}${w1Line}`, 'witness_quorum_not_met'],
      ['two cosignatures by one witness', cosign(one, W1, T0 + 60), 'witness_quorum_not_met'],
      ['not a note', 'not a note', 'malformed_note'],
    ];
    for (const [what, note, reason] of cases) {
      const r = verifyCosignatures(note, p2);
      expect(r.ok, what).toBe(false);
      if (!r.ok) expect(r.error.reason, what).toBe(reason);
    }
    const missing = verifyCosignatures(one, p2);
    if (missing.ok) throw new Error('expected a failure');
    expect(missing.error.message).toContain(JSON.stringify(W2.name));
    expect(missing.error.cosigned.map((c) => c.name)).toEqual([W1.name]);
  });

  it('accepts timestamps up to 2^53 - 1 seconds and refuses later ones (far future; the spec caps at 2^63 - 1)', () => {
    const p = policy([W1]);
    const max = BigInt(Number.MAX_SAFE_INTEGER);
    expect(must(verifyCosignatures(cosigned([W1], log.checkpoint, 0), p)).cosigned[0]?.timestamp_unix_s).toBe(
      0,
    );
    expect(verifyCosignatures(cosign(log.checkpoint, W1, max), p).ok).toBe(true);
    for (const t of [max + 1n, 2n ** 63n - 1n, 2n ** 64n - 1n]) {
      expect(verifyCosignatures(cosign(log.checkpoint, W1, t), p)).toMatchObject({
        ok: false,
        error: { reason: 'invalid_cosignature' },
      });
    }
  });

  it('ignores a line that shares a witness name but not its key id (signed-note: unknown key)', () => {
    // A cosignature under W1's name by another key: another key ID, so an unknown key's line.
    const impostor = { ...STRANGER, name: W1.name, keyId: cosignatureKeyId(W1.name, STRANGER.publicKey) };
    const note = cosign(cosigned([W1]), impostor, T0);
    expect(must(verifyCosignatures(note, policy([W1]))).cosigned.map((c) => c.name)).toEqual([W1.name]);
    expect(verifyCosignatures(cosign(log.checkpoint, impostor, T0), policy([W1])).ok).toBe(false);
  });

  it('property: any single-byte change to a cosigned checkpoint fails when the quorum requires that witness', () => {
    const note = new TextEncoder().encode(cosigned([W2]));
    const logKey = must(parseVerifierKey(logVerifierKeys(keys(), base.signature.tenant_id)[0]!.vkey));
    const p = policy([W2]);
    const { rest } = lastLine(cosigned([W2]));
    // The log signature line: the only bytes the witness's own check does not cover.
    const logLine =
      new TextEncoder().encode(rest).length - new TextEncoder().encode(lastLine(rest).line).length;
    const accepted = (bytes: Uint8Array) => openNote(bytes, [logKey]).ok && verifyCosignatures(bytes, p).ok;
    expect(accepted(note)).toBe(true);
    fc.assert(
      fc.property(fc.nat(note.length - 1), fc.integer({ min: 1, max: 255 }), (i, delta) => {
        const m = note.slice();
        m[i] = (m[i]! + delta) & 0xff;
        expect(accepted(m)).toBe(false);
        // Outside the log's signature line, the witness's check alone refuses it.
        if (i < logLine || i >= new TextEncoder().encode(rest).length)
          expect(verifyCosignatures(m, p).ok).toBe(false);
      }),
      { numRuns: 400 },
    );
  });
});

describe('witnessedLogVerifier (the bundle verifier with a witness policy)', () => {
  const opts = (quorum?: number) => ({
    trustedKeys: keys(),
    logVerifier: witnessedLogVerifier(policy([W1, W2], quorum)),
  });
  const bundleWith = (checkpoint: string) =>
    JSON.parse(JSON.stringify({ ...base, log: withCheckpoint(log, checkpoint) })) as unknown;

  it('accepts a bundle whose checkpoint carries the quorum, and reports the witnesses', () => {
    const v = verifyBundle(bundleWith(cosigned([W1, W2])), opts());
    expect(v).toMatchObject({
      valid: true,
      log: { status: 'included', inclusion: { index: 3, witnesses: { quorum: 2 } } },
    });
    expect(verifyBundle(bundleWith(cosigned([W2])), opts(1)).valid).toBe(true);
  });

  it('refuses a bundle short of the quorum, or with a bad cosignature by a configured witness', () => {
    const short = verifyBundle(bundleWith(cosigned([W1, STRANGER])), opts());
    expect(short).toMatchObject({
      valid: false,
      failure: { reason: 'log_failed' },
      log: { reason: 'witness_quorum_not_met' },
    });
    expect(short.failure?.message).toContain(`cosigned by ${JSON.stringify(W1.name)}`);
    const { line } = lastLine(cosigned([W2], longer.checkpoint));
    const forged = verifyBundle(bundleWith(`${cosigned([W1])}${line}`), opts(1));
    expect(forged).toMatchObject({ valid: false, log: { reason: 'invalid_cosignature' } });
  });

  it('cosignatures never stand in for the log: a checkpoint the trusted log key did not sign fails first', () => {
    // A log under a key the verifier does not trust, its checkpoint cosigned by both witnesses.
    const stranger = realLog(base.signature, ring(generateKeyRing(OTHER_SEED, ISSUER, 0)));
    const b = { ...base, log: withCheckpoint(stranger, cosigned([W1, W2], stranger.checkpoint)) };
    const v = verifyBundle(JSON.parse(JSON.stringify(b)), opts());
    expect(v).toMatchObject({ valid: false, failure: { reason: 'log_failed' } });
    expect(v.log).not.toMatchObject({ reason: expect.stringMatching(/witness|cosignature/) });
    // The checkpoint beside the proof must still be the proof's, cosigned or not.
    const swapped = {
      ...base,
      log: { ...withCheckpoint(log, cosigned([W1, W2])), checkpoint: cosigned([W1, W2], longer.checkpoint) },
    };
    expect(verifyBundle(JSON.parse(JSON.stringify(swapped)), opts())).toMatchObject({
      valid: false,
      log: { reason: 'checkpoint_mismatch' },
    });
  });

  it('without a policy, cosignatures are neither required nor checked (unchanged behaviour)', () => {
    const o = { trustedKeys: keys(), logVerifier: receiptLogVerifier };
    expect(verifyBundle(bundleWith(log.checkpoint), o).valid).toBe(true);
    const { line } = lastLine(cosigned([W2], longer.checkpoint));
    expect(verifyBundle(bundleWith(`${log.checkpoint}${line}`), o).valid).toBe(true);
  });
});
