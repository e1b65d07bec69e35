/**
 * The note verifier keys of a tenant's log (src/verify/log.ts `logVerifierKeys`), against a known
 * answer: golang.org/x/mod/sumdb/note's PeterNeumann public key (test/data/tlog/signed-note.json)
 * under the origin `writ.example/log/ten-kat`. The expected key ID is the C2SP signed-note formula,
 * SHA-256("writ.example/log/ten-kat" || 0x0A || 0x01 || public key)[:4], computed outside this
 * codebase (Python's hashlib); the same computation gives Go's `c74f20a3` for PeterNeumann.
 */
import { describe, expect, it } from 'vitest';
import { ed25519Signer, parseVerifierKey } from '../../../src/core/log/note.js';
import { signCheckpoint, verifyCheckpoint } from '../../../src/core/log/checkpoint.js';
import { EMPTY_ROOT } from '../../../src/core/log/merkle.js';
import { generateKeyRing, parseKeyRing, trustedKeysOfRing } from '../../../src/core/receipts/keys.js';
import { logOrigin, logVerifierKeys } from '../../../src/verify/log.js';
import vectors from '../../data/tlog/signed-note.json';

const PETER_KEY = 'ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';

describe('logVerifierKeys', () => {
  it('gives the C2SP signed-note verifier key of the log origin (known answer)', () => {
    const publicKey = Uint8Array.from(atob(PETER_KEY), (c) => c.charCodeAt(0)).subarray(1);
    expect(vectors.goNote.peterVerifierKey).toBe(`PeterNeumann+c74f20a3+${PETER_KEY}`);
    const keys = {
      issuer: 'writ.example',
      keys: new Map([
        ['k1', { key_id: 'k1', public_key: publicKey, valid_from_unix_ms: 0, signing_until_unix_ms: null }],
      ]),
    };
    expect(logVerifierKeys(keys, 'ten-kat')).toEqual([
      { key_id: 'k1', vkey: `writ.example/log/ten-kat+4a08c8dd+${PETER_KEY}`, signing_until_unix_ms: null },
    ]);
  });

  it('says when each key stopped signing: a retired key is listed with its end, the active one with null', () => {
    const old = parseKeyRing(JSON.stringify(generateKeyRing(new Uint8Array(32).fill(1), 'writ.test', 0)));
    if (!old.ok) throw new Error('ring');
    const keys = trustedKeysOfRing(old.value);
    const [only] = [...keys.keys.values()];
    if (only === undefined) throw new Error('key');
    const retired = { ...only, key_id: 'retired', signing_until_unix_ms: 1_000 };
    const set = {
      issuer: keys.issuer,
      keys: new Map([
        [only.key_id, only],
        ['retired', retired],
      ]),
    };
    expect(logVerifierKeys(set, 'ten-a').map((k) => [k.key_id, k.signing_until_unix_ms])).toEqual([
      [only.key_id, null],
      ['retired', 1_000],
    ]);
  });

  it('verifies the checkpoints the ring’s key signs for that origin, and no other origin’s', () => {
    const seed = new Uint8Array(32).fill(7);
    const ring = parseKeyRing(JSON.stringify(generateKeyRing(seed, 'writ.test', 0)));
    if (!ring.ok) throw new Error('ring');
    const [k] = logVerifierKeys(trustedKeysOfRing(ring.value), 'ten-a');
    const verifier = parseVerifierKey(k!.vkey);
    if (!verifier.ok) throw new Error(verifier.error.message);
    const origin = logOrigin('writ.test', 'ten-a');
    const signer = ed25519Signer(origin, seed);
    if (!signer.ok) throw new Error('signer');
    const cp = signCheckpoint({ origin, size: 0, rootHash: EMPTY_ROOT, extensions: [] }, [signer.value]);
    if (!cp.ok) throw new Error('checkpoint');
    expect(verifyCheckpoint(cp.value, [verifier.value], origin).ok).toBe(true);
    // Another tenant's verifier key (another name, so another key ID) does not.
    const [other] = logVerifierKeys(trustedKeysOfRing(ring.value), 'ten-b');
    const otherVerifier = parseVerifierKey(other!.vkey);
    if (!otherVerifier.ok) throw new Error('other');
    expect(verifyCheckpoint(cp.value, [otherVerifier.value], origin).ok).toBe(false);
  });
});
