/**
 * Receipt signatures and keys: the envelope, strict RFC 8032 verification (known answer, S >= L,
 * non-canonical encodings, small-order keys), key windows and rotation, and the key documents.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { sha512 } from '@noble/hashes/sha2.js';
import { bytesToHex, hexToBytes } from '@noble/hashes/utils.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/core/canonical/canonical.js';
import { decodeBase64, encodeBase64 } from '../../../../src/core/receipts/base64.js';
import {
  generateKeyRing,
  isStrictPublicKey,
  keyIdOf,
  type KeyRing,
  type KeyRingDocument,
  parseKeyRing,
  parsePublicKeySet,
  parsePublicKeySetText,
  publicKeySet,
  trustedKeysOfRing,
} from '../../../../src/core/receipts/keys.js';
import {
  SIGNATURE_DOMAIN,
  type SignatureEnvelope,
  signedMessage,
  signReceipt,
  strictVerify,
  verifyReceiptSignature,
} from '../../../../src/core/receipts/signing.js';
import { buildScenario, mustAuthorize, T } from '../fixtures.js';

const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const P = 2n ** 255n - 19n;

function le32(n: bigint): Uint8Array {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = Number((n >> BigInt(8 * i)) & 255n);
  return out;
}
function fromLe(b: Uint8Array): bigint {
  let n = 0n;
  for (let i = b.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(b[i] as number);
  return n;
}
const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};

const SEED_A = new Uint8Array(32).fill(7);
const SEED_B = new Uint8Array(32).fill(9);
const ISSUER = 'writ.example';

function ringText(doc: KeyRingDocument): string {
  return JSON.stringify(doc);
}

function mustRing(doc: KeyRingDocument): KeyRing {
  const r = parseKeyRing(ringText(doc));
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** Key A retired at `rotatedAt`, key B active from then on. */
function rotatedRing(rotatedAt: number): KeyRing {
  const a = generateKeyRing(SEED_A, ISSUER, 0);
  const b = generateKeyRing(SEED_B, ISSUER, rotatedAt);
  return mustRing({
    ...b,
    keys: [{ ...(a.keys[0] as KeyRingDocument['keys'][0]), signing_until_unix_ms: rotatedAt }, ...b.keys],
  });
}

const receipt = () => mustAuthorize(buildScenario());

describe('strict Ed25519 verification (RFC 8032)', () => {
  it('RFC 8032 §7.1 test vector 1 as a known answer', () => {
    const seed = hexToBytes('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60');
    const pub = hexToBytes('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a');
    const sig = hexToBytes(
      'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
    );
    expect(bytesToHex(ed25519.getPublicKey(seed))).toBe(bytesToHex(pub));
    expect(bytesToHex(ed25519.sign(new Uint8Array(0), seed))).toBe(bytesToHex(sig));
    expect(strictVerify(sig, new Uint8Array(0), pub)).toBe(true);
    expect(strictVerify(sig, new Uint8Array([0]), pub)).toBe(false);
  });

  it('refuses S >= L (the malleable twin S + L of a valid signature)', () => {
    const msg = new Uint8Array([1, 2, 3]);
    const sig = ed25519.sign(msg, SEED_A);
    const pub = ed25519.getPublicKey(SEED_A);
    const s = fromLe(sig.subarray(32));
    const twin = concat(sig.subarray(0, 32), le32(s + L));
    expect(strictVerify(sig, msg, pub)).toBe(true);
    expect(strictVerify(twin, msg, pub)).toBe(false);
  });

  it('refuses a small-order public key that a cofactored, permissive verifier accepts', () => {
    // A = identity: [8][k]A = 0, so (R = [r]B, S = r) "verifies" any message.
    const identity = le32(1n);
    const r = 12345n;
    const R = ed25519.Point.BASE.multiply(r).toBytes();
    const sig = concat(R, le32(r));
    const msg = new Uint8Array([42]);
    expect(ed25519.verify(sig, msg, identity, { zip215: true })).toBe(true);
    expect(strictVerify(sig, msg, identity)).toBe(false);
    expect(isStrictPublicKey(identity)).toBe(false);
  });

  it('refuses a non-canonical public key encoding (y >= p)', () => {
    const identityNonCanonical = le32(P + 1n);
    const r = 777n;
    const sig = concat(ed25519.Point.BASE.multiply(r).toBytes(), le32(r));
    const msg = new Uint8Array([7]);
    expect(ed25519.verify(sig, msg, identityNonCanonical, { zip215: true })).toBe(true);
    expect(strictVerify(sig, msg, identityNonCanonical)).toBe(false);
    expect(isStrictPublicKey(identityNonCanonical)).toBe(false);
  });

  it('refuses a non-canonical R encoding (y >= p) in an otherwise valid signature', () => {
    // R = identity spelled y = p + 1, S = k·a: [S]B = [k]A and R adds nothing, so only the
    // encoding check tells this apart.
    const pub = ed25519.getPublicKey(SEED_A);
    const { scalar } = ed25519.utils.getExtendedPublicKey(SEED_A);
    const R = le32(P + 1n);
    const msg = new Uint8Array([9, 9]);
    const k = fromLe(sha512(concat(R, pub, msg))) % L;
    const sig = concat(R, le32((k * scalar) % L));
    expect(ed25519.verify(sig, msg, pub, { zip215: true })).toBe(true);
    expect(strictVerify(sig, msg, pub)).toBe(false);
  });

  it('wrong lengths are false, never a throw', () => {
    expect(strictVerify(new Uint8Array(63), new Uint8Array(0), ed25519.getPublicKey(SEED_A))).toBe(false);
    expect(strictVerify(new Uint8Array(64), new Uint8Array(0), new Uint8Array(31))).toBe(false);
  });
});

describe('base64', () => {
  it('round-trips and accepts only the canonical spelling', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), (bytes) => {
        const text = encodeBase64(bytes);
        expect(decodeBase64(text)).toStrictEqual(bytes);
      }),
      { seed: 0x64, numRuns: 300 },
    );
    expect(decodeBase64('AQ==')).toStrictEqual(new Uint8Array([1]));
    for (const bad of ['AR==', 'AQ', 'AQ=', 'A===', 'AQ==\n', 'A-8=', 'A_8=', '=AAA', 'AA=A']) {
      expect(decodeBase64(bad), bad).toBeNull();
    }
  });
});

describe('signing a receipt', () => {
  it('signs the domain-separated canonical envelope and verifies against the published set', () => {
    const ring = mustRing(generateKeyRing(SEED_A, ISSUER, 0));
    const r = receipt();
    const signed = signReceipt(ring, r, T.now);
    expect(signed.ok).toBe(true);
    if (!signed.ok) return;
    const e = signed.value;
    expect(e).toMatchObject({
      signature_version: 1,
      alg: 'Ed25519',
      issuer: ISSUER,
      key_id: keyIdOf(ed25519.getPublicKey(SEED_A)),
      tenant_id: r.body.tenant_id,
      receipt_kind: 'authorization',
      receipt_sha256: r.sha256,
      issued_at_unix_ms: T.now,
    });
    // The documented message, spelled out.
    const { signature: _omit, ...unsigned } = e;
    expect(new TextDecoder().decode(signedMessage(e))).toBe(SIGNATURE_DOMAIN + canonicalize(unsigned));
    const keys = parsePublicKeySet(JSON.parse(JSON.stringify(publicKeySet(ring, T.now))));
    expect(keys.ok).toBe(true);
    if (!keys.ok) return;
    const v = verifyReceiptSignature(JSON.parse(JSON.stringify(e)), r, keys.value);
    expect(v.ok).toBe(true);
  });

  it('refuses a body that does not hash to its sha256', () => {
    const ring = mustRing(generateKeyRing(SEED_A, ISSUER, 0));
    const r = receipt();
    const forged = { ...r, body: { ...r.body, tenant_id: 'globex' } };
    expect(signReceipt(ring, forged, T.now)).toMatchObject({
      ok: false,
      error: { reason: 'receipt_altered' },
    });
  });

  it('a retired key cannot sign; its receipts from before still verify; none after', () => {
    const rotatedAt = T.now + 1000;
    const old = mustRing({
      ...generateKeyRing(SEED_A, ISSUER, 0),
      keys: [
        {
          ...(generateKeyRing(SEED_A, ISSUER, 0).keys[0] as KeyRingDocument['keys'][0]),
          signing_until_unix_ms: rotatedAt,
        },
      ],
    });
    const r = receipt();
    const before = signReceipt(old, r, rotatedAt - 1);
    expect(before.ok).toBe(true);
    expect(signReceipt(old, r, rotatedAt)).toMatchObject({ ok: false, error: { reason: 'key_retired' } });
    expect(signReceipt(old, r, -1)).toMatchObject({ ok: false, error: { reason: 'invalid_receipt' } });

    const ring = rotatedRing(rotatedAt);
    const keys = trustedKeysOfRing(ring);
    if (!before.ok) return;
    expect(verifyReceiptSignature(before.value, r, keys).ok).toBe(true);
    // The retired key's signature dated after retirement (a leaked key minting receipts) fails.
    const late = signReceipt(mustRing({ ...generateKeyRing(SEED_A, ISSUER, 0) }), r, rotatedAt + 5);
    if (!late.ok) throw new Error('setup');
    expect(verifyReceiptSignature(late.value, r, keys)).toMatchObject({
      ok: false,
      error: { reason: 'key_not_valid_at_issue' },
    });
    // The new key signs after rotation and verifies.
    const fresh = signReceipt(ring, r, rotatedAt);
    if (!fresh.ok) throw new Error('setup');
    expect(fresh.value.key_id).toBe(keyIdOf(ed25519.getPublicKey(SEED_B)));
    expect(verifyReceiptSignature(fresh.value, r, keys).ok).toBe(true);
    // Status is computed from now.
    expect(publicKeySet(ring, rotatedAt).keys.map((k) => k.status)).toStrictEqual(['retired', 'active']);
    expect(signReceipt(ring, r, rotatedAt - 1)).toMatchObject({
      ok: false,
      error: { reason: 'key_not_yet_valid' },
    });
  });

  it('every verification failure has its reason', () => {
    const ring = mustRing(generateKeyRing(SEED_A, ISSUER, 0));
    const keys = trustedKeysOfRing(ring);
    const r = receipt();
    const signed = signReceipt(ring, r, T.now);
    if (!signed.ok) throw new Error('setup');
    const e = signed.value;
    const reason = (env: unknown, rec = r, k = keys) => {
      const v = verifyReceiptSignature(env, rec, k);
      return v.ok ? 'ok' : v.error.reason;
    };
    expect(reason(e)).toBe('ok');
    expect(reason(undefined)).toBe('missing');
    expect(reason(null)).toBe('missing');
    expect(reason({ ...e, extra: 1 })).toBe('malformed_signature');
    expect(reason({ ...e, alg: 'EdDSA' })).toBe('malformed_signature');
    expect(reason({ ...e, issuer: 'evil.example' })).toBe('issuer_mismatch');
    expect(reason({ ...e, key_id: '0'.repeat(16) })).toBe('unknown_key');
    expect(reason(e, { ...r, sha256: 'f'.repeat(64) })).toBe('receipt_mismatch');
    expect(reason(e, { ...r, body: { ...r.body, tenant_id: 'globex' } })).toBe('receipt_mismatch');
    expect(reason({ ...e, issued_at_unix_ms: e.issued_at_unix_ms + 1 })).toBe('bad_signature');
    expect(
      reason(
        { ...e, receipt_kind: 'execution' },
        { ...r, body: { ...r.body, receipt_kind: 'execution' } as never },
      ),
    ).toBe('bad_signature');
    const sig = decodeBase64(e.signature) as Uint8Array;
    const flipped = sig.slice();
    flipped[10] = (flipped[10] as number) ^ 1;
    expect(reason({ ...e, signature: encodeBase64(flipped) })).toBe('bad_signature');
    expect(reason({ ...e, signature: '!' + e.signature.slice(1) })).toBe('malformed_signature');
    // Another ring's keys: same key id cannot be published for another key (parse refuses), so an
    // attacker's own key is "unknown".
    const other = trustedKeysOfRing(mustRing(generateKeyRing(SEED_B, ISSUER, 0)));
    expect(reason(e, r, other)).toBe('unknown_key');
  });

  it('any single-bit change to a signature or its signed fields fails (property)', () => {
    const ring = mustRing(generateKeyRing(SEED_A, ISSUER, 0));
    const keys = trustedKeysOfRing(ring);
    const r = receipt();
    const signed = signReceipt(ring, r, T.now);
    if (!signed.ok) throw new Error('setup');
    const sig = decodeBase64(signed.value.signature) as Uint8Array;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 64 * 8 - 1 }), (bit) => {
        const s = sig.slice();
        s[bit >> 3] = (s[bit >> 3] as number) ^ (1 << (bit & 7));
        const env: SignatureEnvelope = { ...signed.value, signature: encodeBase64(s) };
        expect(verifyReceiptSignature(env, r, keys).ok).toBe(false);
      }),
      { seed: 0x5161, numRuns: 200 },
    );
  });
});

describe('key documents', () => {
  const good = () => generateKeyRing(SEED_A, ISSUER, 0);
  const reason = (text: string) => {
    const r = parseKeyRing(text);
    return r.ok ? 'ok' : r.error.reason;
  };

  it('parses a generated ring and never publishes its seed', () => {
    expect(reason(ringText(good()))).toBe('ok');
    const published = JSON.stringify(publicKeySet(mustRing(good()), 0));
    expect(published).not.toContain(good().keys[0]?.seed_b64);
    expect(published).not.toContain('seed');
  });

  it('refuses every malformed ring', () => {
    const k = good().keys[0] as KeyRingDocument['keys'][0];
    expect(reason('x'.repeat(70_000))).toBe('too_large');
    expect(reason('{')).toBe('malformed_json');
    expect(reason('{"a":1,"a":1}')).toBe('malformed_json');
    expect(reason(ringText({ ...good(), keys: [] }))).toBe('invalid_document');
    expect(reason(JSON.stringify({ ...good(), extra: true }))).toBe('invalid_document');
    expect(reason(ringText({ ...good(), keys: [{ ...k, seed_b64: 'AQ==' }] }))).toBe('invalid_key');
    expect(reason(ringText({ ...good(), keys: [{ ...k, key_id: '0'.repeat(16) }] }))).toBe('key_id_mismatch');
    expect(reason(ringText({ ...good(), keys: [k, k] }))).toBe('duplicate_key_id');
    expect(reason(ringText({ ...good(), active: '0'.repeat(16) }))).toBe('active_key_unknown');
    expect(reason(ringText({ ...good(), keys: [{ ...k, signing_until_unix_ms: 0 }] }))).toBe(
      'invalid_document',
    );
  });

  it('refuses published sets with bad, small-order or mislabelled keys', () => {
    const set = publicKeySet(mustRing(good()), 0);
    const k = set.keys[0] as (typeof set.keys)[0];
    const reasonOf = (v: unknown) => {
      const r = parsePublicKeySet(v);
      return r.ok ? 'ok' : r.error.reason;
    };
    expect(reasonOf(set)).toBe('ok');
    expect(parsePublicKeySetText(JSON.stringify(set)).ok).toBe(true);
    expect(parsePublicKeySetText('{"key_set_version":1,"key_set_version":1}')).toMatchObject({
      ok: false,
      error: { reason: 'malformed_json' },
    });
    const identity = le32(1n);
    expect(
      reasonOf({
        ...set,
        keys: [{ ...k, public_key_b64: encodeBase64(identity), key_id: keyIdOf(identity) }],
      }),
    ).toBe('invalid_key');
    expect(reasonOf({ ...set, keys: [{ ...k, key_id: '0'.repeat(16) }] })).toBe('key_id_mismatch');
    expect(reasonOf({ ...set, keys: [k, k] })).toBe('duplicate_key_id');
    expect(reasonOf({ ...set, keys: [{ ...k, seed_b64: 'AA==' }] })).toBe('invalid_document');
  });

  it('generateKeyRing refuses a seed of the wrong length', () => {
    expect(() => generateKeyRing(new Uint8Array(31), ISSUER, 0)).toThrow(RangeError);
  });
});
