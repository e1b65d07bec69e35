/**
 * C2SP signed-note: known answers from RFC 8032 and golang.org/x/mod/sumdb/note, the strict
 * Ed25519 edge cases, every rejection path of the parsers, and the accept/ignore/reject rules
 * for known and unknown keys.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import {
  MAX_NOTE_SIZE,
  MAX_SIGNATURES,
  ed25519KeyId,
  ed25519Signer,
  ed25519Verifier,
  isValidKeyName,
  openNote,
  parseNote,
  parseSignerKey,
  parseVerifierKey,
  serializeNote,
  signNote,
  verifierKey,
  verifyEd25519,
  type NoteSigner,
  type NoteVerifier,
} from '../../../../src/core/log/note.js';
import vectors from '../../../data/tlog/signed-note.json';

// Pure hashing, slow in workerd and slower on a loaded machine: no test here may fail on time.
vi.setConfig({ testTimeout: 300_000 });

const { goNote, rfc8032Test1: rfc } = vectors;

function must<T>(r: { ok: true; value: T } | { ok: false; error: { message: string } }): T {
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}
const reason = (r: { ok: boolean; error?: { reason: string } }): string =>
  r.ok ? 'accepted' : r.error!.reason;

const peterSigner = must(parseSignerKey(goNote.peterSignerKey));
const peter = must(parseVerifierKey(goNote.peterVerifierKey));
const enoch = must(parseVerifierKey(goNote.enochVerifierKey));
const text = goNote.text;
const peterSig = goNote.peterSignature;
const enochSig = goNote.enochSignature;

describe('known answers', () => {
  it('signs and verifies RFC 8032 TEST 1 (empty message)', () => {
    const signer = must(ed25519Signer('rfc8032.example', hexToBytes(rfc.secretKey)));
    expect(bytesToHex(signer.publicKey)).toBe(rfc.publicKey);
    expect(bytesToHex(signer.sign(new Uint8Array(0)))).toBe(rfc.signature);
    expect(verifyEd25519(hexToBytes(rfc.publicKey), new Uint8Array(0), hexToBytes(rfc.signature))).toBe(true);
    expect(verifyEd25519(hexToBytes(rfc.publicKey), Uint8Array.of(0), hexToBytes(rfc.signature))).toBe(false);
  });

  it('reproduces the golang.org/x/mod note signature byte for byte', () => {
    expect(peterSigner.keyId).toBe(0xc74f20a3);
    expect(peter.keyId).toBe(0xc74f20a3);
    expect(verifierKey(peterSigner)).toBe(goNote.peterVerifierKey);
    expect(verifierKey(enoch)).toBe(goNote.enochVerifierKey);
    expect(bytesToHex(peterSigner.publicKey)).toBe(bytesToHex(peter.publicKey));
    expect(signNote(text, [peterSigner])).toEqual({ ok: true, value: `${text}\n${peterSig}` });
  });

  it('computes the key ID as SHA-256(name || 0x0A || 0x01 || key)[:4]', () => {
    expect(ed25519KeyId('PeterNeumann', peter.publicKey)).toBe(0xc74f20a3);
    expect(ed25519KeyId('EnochRoot', enoch.publicKey)).toBe(0xaf0cfe78);
  });

  it('opens with one known key and reports the other signature as unverified', () => {
    const n = must(openNote(`${text}\n${peterSig}${enochSig}`, [peter]));
    expect(n.text).toBe(text);
    expect(n.verified.map((s) => s.name)).toEqual(['PeterNeumann']);
    expect(n.unverified.map((s) => [s.name, s.keyId])).toEqual([['EnochRoot', 0xaf0cfe78]]);
    const both = must(openNote(`${text}\n${peterSig}${enochSig}`, [peter, enoch]));
    expect(both.verified.map((s) => s.name)).toEqual(['PeterNeumann', 'EnochRoot']);
    expect(both.unverified).toEqual([]);
  });

  it('accepts bytes as well as text, and drops repeated identical lines', () => {
    const n = must(
      openNote(new TextEncoder().encode(`${text}\n${peterSig}${peterSig}${enochSig}${enochSig}`), [peter]),
    );
    expect(n.verified).toHaveLength(1);
    expect(n.unverified).toHaveLength(1);
  });

  it('parses the signed-note spec example (blank line inside the text, non-ASCII)', () => {
    const n = must(parseNote(vectors.specExamples.note));
    expect(n.text).toBe(
      'Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n',
    );
    expect(n.signatures.map((s) => s.name)).toEqual(['quasimodo.example/salvatore']);
    expect(reason(openNote(vectors.specExamples.note, [peter]))).toBe('unverified_note');
  });
});

describe('which signatures count', () => {
  it('rejects a note with no signature by a known key', () => {
    expect(reason(openNote(`${text}\n${peterSig}${enochSig}`, []))).toBe('unverified_note');
  });

  it('ignores signatures that share only the name or only the key ID with a known key', () => {
    const otherId = peterSig.replace('x08g', 'AAAA');
    const otherName = peterSig.replace('PeterNeumann', 'PeterNeuman');
    for (const line of [otherId, otherName]) {
      expect(reason(openNote(`${text}\n${line}`, [peter]))).toBe('unverified_note');
      const n = must(openNote(`${text}\n${line}${peterSig}`, [peter]));
      expect(n.unverified).toHaveLength(1);
    }
  });

  it('rejects the whole note when a known key signature fails, even beside a good one', () => {
    const broken = `${peterSig.slice(0, 60)}ABCD${peterSig.slice(60)}`;
    expect(reason(openNote(`${text}\n${broken}`, [peter]))).toBe('invalid_signature');
    const mangled = `${enochSig.slice(0, 60)}ABCD${enochSig.slice(60)}`;
    expect(reason(openNote(`${text}\n${peterSig}${mangled}`, [peter, enoch]))).toBe('invalid_signature');
    // Unknown, it is ignored (witness cosignatures of other types pass through).
    expect(reason(openNote(`${text}\n${peterSig}${mangled}`, [peter]))).toBe('accepted');
  });

  it('rejects a known key signature of the wrong length', () => {
    const sig = parseNote(`${text}\n${peterSig}`);
    const s = must(sig).signatures[0]!;
    const short = must(serializeNote({ text, signatures: [{ ...s, signature: s.signature.slice(0, 63) }] }));
    expect(reason(openNote(short, [peter]))).toBe('invalid_signature');
  });

  it('refuses two trusted keys that share a name and key ID', () => {
    // Two public keys found by a birthday search (by Writ, offline) whose key IDs collide under
    // the same name; which of them signed could not be told.
    const a = must(
      ed25519Verifier(
        'collide.example',
        hexToBytes('71161736487eb38e53eb442e4d8bb420cea08f319682dffc112fff8f2248006c'),
      ),
    );
    const b = must(
      ed25519Verifier(
        'collide.example',
        hexToBytes('a02b7498d6127c6c1f4da159a94a651a9509afe78dab6eb859548e33d9b60b3c'),
      ),
    );
    expect(a.keyId).toBe(b.keyId);
    const line = `— collide.example ${btoa(String.fromCharCode(0x38, 0xf1, 0x81, 0x20, ...new Uint8Array(64)))}\n`;
    expect(reason(openNote(`${text}\n${line}${peterSig}`, [peter, a, b]))).toBe('ambiguous_key');
    // The same key listed twice is not ambiguous.
    expect(reason(openNote(`${text}\n${peterSig}`, [peter, peter, a, b]))).toBe('accepted');
  });

  it('refuses a hand-built verifier whose key ID does not belong to its key', () => {
    const forged: NoteVerifier = { ...enoch, name: 'PeterNeumann', keyId: 0xc74f20a3 };
    expect(reason(openNote(`${text}\n${peterSig}`, [forged]))).toBe('invalid_verifier_key');
    const badName: NoteVerifier = { ...peter, name: 'bad name' };
    expect(reason(openNote(`${text}\n${peterSig}`, [badName]))).toBe('invalid_verifier_key');
  });
});

describe('strict RFC 8032 verification (zip215: false)', () => {
  const pk = hexToBytes(rfc.publicKey);
  const sig = hexToBytes(rfc.signature);
  const msg = new Uint8Array(0);
  const L = 2n ** 252n + 27742317777372353535851937790883648493n;
  const le = (n: bigint): Uint8Array => {
    const out = new Uint8Array(32);
    for (let i = 0; i < 32; i++) out[i] = Number((n >> BigInt(8 * i)) & 0xffn);
    return out;
  };
  const fromLe = (b: Uint8Array): bigint => b.reduceRight((acc, x) => (acc << 8n) | BigInt(x), 0n);
  const withS = (s: bigint): Uint8Array => Uint8Array.from([...sig.slice(0, 32), ...le(s)]);

  // The identity point (a small-order point) written canonically, with y >= p (y = p + 1), and
  // as "negative zero" (x = 0 with the sign bit set).
  const identity = hexToBytes('0100000000000000000000000000000000000000000000000000000000000000');
  const identityYOverP = hexToBytes('eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f');
  const identityNegZero = hexToBytes('0100000000000000000000000000000000000000000000000000000000000080');
  const zeroS = new Uint8Array(32);

  it('rejects a non-canonical S (S + L), which the equation alone would accept', () => {
    const s = fromLe(sig.slice(32));
    expect(verifyEd25519(pk, msg, withS(s))).toBe(true);
    expect(verifyEd25519(pk, msg, withS(s + L))).toBe(false);
  });

  for (const [what, A, R] of [
    ['a small-order public key and R (canonical identity)', identity, identity],
    ['a non-canonical public key encoding (y >= p)', identityYOverP, identity],
    ['a non-canonical R encoding (y >= p)', identity, identityYOverP],
    ['a "negative zero" R encoding', identity, identityNegZero],
  ] as const) {
    it(`rejects ${what}, which ZIP-215 accepts for every message`, () => {
      const forged = Uint8Array.from([...R, ...zeroS]);
      const m = new TextEncoder().encode('any message at all');
      // Noble's default for ed25519 is ZIP-215: this forgery verifies there...
      expect(ed25519.verify(forged, m, A, { zip215: true })).toBe(true);
      // ...and not under the strict rules the log uses.
      expect(verifyEd25519(A, m, forged)).toBe(false);
    });
  }

  it('refuses small-order or non-canonical verifier keys up front', () => {
    for (const key of [identity, identityYOverP, identityNegZero, new Uint8Array(32)]) {
      expect(reason(ed25519Verifier('k.example', key))).toBe('invalid_verifier_key');
    }
    // 2^255 - 19 + 2 is y >= p too; 0xff..ff is not on the curve at all.
    expect(reason(ed25519Verifier('k.example', new Uint8Array(32).fill(0xff)))).toBe('invalid_verifier_key');
  });

  it('never throws on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 70 }), fc.uint8Array({ maxLength: 70 }), (a, b) => {
        expect(typeof verifyEd25519(a, msg, b)).toBe('boolean');
      }),
      { numRuns: 100 },
    );
    expect(verifyEd25519('x' as unknown as Uint8Array, msg, sig)).toBe(false);
    expect(verifyEd25519(pk, 'x' as unknown as Uint8Array, sig)).toBe(false);
  });
});

describe('rejection paths', () => {
  it('rejects the malformed notes golang.org/x/mod rejects', () => {
    const bad: (string | Uint8Array)[] = [
      text,
      `${text}\n`,
      `${text}\n${peterSig.slice(0, -1)}`,
      `\x01${text}\n${peterSig}`,
      Uint8Array.from([0xff, ...new TextEncoder().encode(`${text}\n${peterSig}`)]),
      `${text}\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=`,
      `${text}\n${peterSig}Unexpected line.\n`,
    ];
    for (const note of bad) expect(reason(openNote(note, [peter]))).toBe('malformed_note');
  });

  it('rejects other malformed notes', () => {
    const bad: string[] = [
      '',
      `${text}\n\n`,
      `${text}\r\n${peterSig}`,
      `${text.replace('you', 'y\tou')}\n${peterSig}`,
      `${text}\n${peterSig.replace('— ', '-- ')}`,
      `${text}\n${peterSig.replace('— ', '—')}`,
      `${text}\n${peterSig.replace('— PeterNeumann ', '—  ')}`,
      `${text}\n— PeterNeumann\n`,
      `${text}\n— PeterNeumann \n`,
      `${text}\n— Peter+Neumann ${peterSig.split(' ')[2]}`,
      `${text}\n— Peter\u00a0Neumann ${peterSig.split(' ')[2]}`,
      `${text}\n— PeterNeumann AAAAAA==\n`,
      `${text}\n— PeterNeumann AAAAAAA=\n`.replace('AAAAAAA=', 'AAAAAAB='),
      `${text}\n— PeterNeumann ${peterSig.split(' ')[2]!.replace('=', '')}`,
      `${text}\n${peterSig.replace('AM=', 'AN=')}`,
      `\ud800${text}\n${peterSig}`,
    ];
    for (const note of bad) expect([note, reason(parseNote(note))]).toEqual([note, 'malformed_note']);
    expect(reason(parseNote(42 as unknown as string))).toBe('malformed_note');
  });

  it('bounds the size and the number of signatures before verifying anything', () => {
    expect(reason(openNote(`${text}\n${peterSig.repeat(MAX_SIGNATURES + 1)}`, [peter]))).toBe(
      'too_many_signatures',
    );
    expect(reason(openNote(`${text}\n${peterSig.repeat(MAX_SIGNATURES + 1)}`, []))).toBe(
      'too_many_signatures',
    );
    expect(reason(openNote(`${text}\n${peterSig.repeat(MAX_SIGNATURES)}`, [peter]))).toBe('accepted');
    const big = `${'a'.repeat(MAX_NOTE_SIZE)}\n\n${peterSig}`;
    expect(reason(parseNote(big))).toBe('too_large');
    expect(reason(parseNote(new TextEncoder().encode(big)))).toBe('too_large');
    // Multi-byte characters count in UTF-8 bytes, not UTF-16 units.
    expect(reason(parseNote(`${'é'.repeat(MAX_NOTE_SIZE / 2)}\n\n${peterSig}`))).toBe('too_large');
  });

  it('rejects every substring and every one-character change of a verifier key', () => {
    const key = goNote.peterVerifierKey;
    for (let i = 0; i <= key.length; i++) {
      for (let j = i + 1; j <= key.length; j++) {
        if (i !== 0 || j !== key.length)
          expect(reason(parseVerifierKey(key.slice(i, j)))).toBe('invalid_verifier_key');
      }
    }
    for (let i = 0; i < key.length; i++) {
      const changed = key.slice(0, i) + String.fromCharCode(key.charCodeAt(i) + 1) + key.slice(i + 1);
      expect(reason(parseVerifierKey(changed))).toBe('invalid_verifier_key');
    }
    // golang.org/x/mod's: wrong key length and unknown algorithm, each with a matching key hash.
    expect(
      reason(parseVerifierKey('PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==')),
    ).toBe('invalid_verifier_key');
    expect(
      reason(parseVerifierKey('PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW')),
    ).toBe('invalid_verifier_key');
    expect(reason(parseVerifierKey(goNote.peterVerifierKey.replace('c74f20a3', 'C74F20A3')))).toBe(
      'invalid_verifier_key',
    );
    expect(reason(parseVerifierKey(`${'a'.repeat(400)}+c74f20a3+AAAA`))).toBe('invalid_verifier_key');
    expect(reason(parseVerifierKey(7 as unknown as string))).toBe('invalid_verifier_key');
  });

  it('rejects every substring and every one-character change of a signer key', () => {
    const key = goNote.peterSignerKey;
    for (let i = 0; i <= key.length; i++) {
      for (let j = i + 1; j <= key.length; j++) {
        if (i !== 0 || j !== key.length)
          expect(reason(parseSignerKey(key.slice(i, j)))).toBe('invalid_signer_key');
      }
    }
    for (let i = 0; i < key.length; i++) {
      const changed = key.slice(0, i) + String.fromCharCode(key.charCodeAt(i) + 1) + key.slice(i + 1);
      expect(reason(parseSignerKey(changed))).toBe('invalid_signer_key');
    }
    expect(reason(parseSignerKey(7 as unknown as string))).toBe('invalid_signer_key');
  });

  it('enforces the key name rules', () => {
    for (const name of [
      '',
      'a b',
      'a+b',
      'a\tb',
      'a\u00a0b',
      'a\u3000b',
      'a\u2028b',
      'a\u0085b',
      'a\nb',
      'x'.repeat(257),
      '\ud800',
    ]) {
      expect([name, isValidKeyName(name)]).toEqual([name, false]);
      expect(reason(ed25519Signer(name, new Uint8Array(32)))).toBe('invalid_key_name');
      expect(reason(ed25519Verifier(name, peter.publicKey))).toBe('invalid_key_name');
    }
    expect(isValidKeyName('writ.example/log/tenant_1')).toBe(true);
  });

  it('rejects seeds and public keys of the wrong length', () => {
    expect(reason(ed25519Signer('k', new Uint8Array(31)))).toBe('invalid_signer_key');
    expect(reason(ed25519Signer('k', 'x'.repeat(32) as unknown as Uint8Array))).toBe('invalid_signer_key');
    expect(reason(ed25519Verifier('k', new Uint8Array(33)))).toBe('invalid_verifier_key');
  });

  it('refuses to sign or write what it could not read back', () => {
    expect(reason(signNote('no newline', [peterSigner]))).toBe('malformed_note');
    expect(reason(signNote('tab\there\n', [peterSigner]))).toBe('malformed_note');
    expect(reason(signNote('\ud800\n', [peterSigner]))).toBe('malformed_note');
    expect(reason(signNote(text, []))).toBe('malformed_note');
    const s = must(parseNote(`${text}\n${peterSig}`)).signatures[0]!;
    expect(reason(serializeNote({ text, signatures: [] }))).toBe('malformed_note');
    expect(reason(serializeNote({ text, signatures: [{ ...s, name: 'a b' }] }))).toBe('invalid_key_name');
    expect(reason(serializeNote({ text, signatures: [{ ...s, keyId: 2 ** 32 }] }))).toBe('malformed_note');
    expect(reason(serializeNote({ text, signatures: [{ ...s, signature: new Uint8Array(0) }] }))).toBe(
      'malformed_note',
    );
    expect(
      reason(serializeNote({ text, signatures: Array.from({ length: MAX_SIGNATURES + 1 }, () => s) })),
    ).toBe('too_many_signatures');
  });
});

describe('properties', () => {
  const signer: NoteSigner = must(ed25519Signer('writ.example/log/t1', new Uint8Array(32).fill(7)));
  const verifier = must(ed25519Verifier(signer.name, signer.publicKey));
  const lineText = fc
    .string({ unit: 'grapheme', maxLength: 40 })
    .filter((s) => !/[\u0000-\u001f]/.test(s) && s.isWellFormed());
  const noteText = fc.array(lineText, { minLength: 1, maxLength: 5 }).map((ls) => `${ls.join('\n')}\n`);

  it('signs and opens any valid text, and rejects it after any change to the text', () => {
    fc.assert(
      fc.property(noteText, fc.nat(), (t, at) => {
        const signed = signNote(t, [signer]);
        if (!signed.ok) return t.endsWith('\n\n') || t === '\n';
        const opened = must(openNote(signed.value, [verifier]));
        expect(opened.text).toBe(t);
        const i = at % t.length;
        const changed = t.slice(0, i) + (t[i] === 'a' ? 'b' : 'a') + t.slice(i + 1);
        const tampered = signed.value.replace(t, changed);
        const r = openNote(tampered, [verifier]);
        return !r.ok || r.value.text === t;
      }),
      { numRuns: 60 },
    );
  });
});
