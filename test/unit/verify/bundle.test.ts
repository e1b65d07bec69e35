/**
 * Offline bundles: valid bundles of each kind verify; every single-byte change to a bundle's JSON
 * text is detected (property); a stripped signature, an unknown key, a retired key and a missing or
 * failing log proof are refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import {
  ErrorObservationValidationInput,
  ObservationValidationInput,
  validateErrorObservation,
  validateObservation,
} from '../../../src/core/observation/validate.js';
import { generateKeyRing, type KeyRingDocument, publicKeySet } from '../../../src/core/receipts/keys.js';
import type { SignableReceipt } from '../../../src/core/receipts/signing.js';
import { type BundleVerdict, verifyBundle, verifyBundleBytes } from '../../../src/verify/bundle.js';
import { buildScenario, T } from '../core/fixtures.js';
import {
  authorizationBundle,
  executionBundle,
  fakeLog,
  fakeLogVerifier,
  ISSUER,
  keys,
  OTHER_SEED,
  ring,
  SEED,
  sign,
  wire,
} from './fixtures.js';
import legacyV3 from '../core/observation/legacy-v3-receipts.json';
import legacyV4 from '../core/observation/legacy-v4-receipts.json';
import legacyV5 from '../core/observation/legacy-v5-receipts.json';
import legacyV6 from '../core/observation/legacy-v6-receipts.json';

const pinned = { trustedKeys: keys(), logVerifier: fakeLogVerifier } as const;
const reason = (v: BundleVerdict) => (v.valid ? 'valid' : v.failure?.reason);

describe('verifyBundle', () => {
  it('accepts valid authorization and execution bundles, pinned or with the bundle’s own keys', () => {
    for (const b of [authorizationBundle(), executionBundle()]) {
      const v = verifyBundle(wire(b), pinned);
      expect(v).toMatchObject({ valid: true, key_trust: 'pinned', log: { status: 'included' } });
      const own = verifyBundle(wire(b), { logVerifier: fakeLogVerifier });
      expect(own).toMatchObject({ valid: true, key_trust: 'bundle' });
    }
  });

  it('a stripped or null signature fails, whatever the rest of the bundle says', () => {
    const b = wire(authorizationBundle()) as Record<string, unknown>;
    delete b.signature;
    expect(reason(verifyBundle(b, pinned))).toBe('malformed_bundle');
    expect(reason(verifyBundle({ ...b, signature: null }, pinned))).toBe('malformed_bundle');
  });

  it('an unknown key fails; a key the pinned set does not list is refused in the bundle', () => {
    const stranger = ring(generateKeyRing(OTHER_SEED, ISSUER, 0));
    const b = authorizationBundle(buildScenario(), stranger);
    expect(reason(verifyBundle(wire(b), pinned))).toBe('keys_mismatch');
    expect(reason(verifyBundle(wire({ ...b, keys: authorizationBundle().keys }), pinned))).toBe(
      'unknown_key',
    );
  });

  it('a retired key fails for receipts issued after retirement, and verifies before', () => {
    const base = generateKeyRing(SEED, ISSUER, 0);
    const retiredDoc: KeyRingDocument = {
      ...base,
      keys: [{ ...(base.keys[0] as KeyRingDocument['keys'][0]), signing_until_unix_ms: T.now }],
    };
    const trustedKeys = keys(ring(retiredDoc));
    const b = authorizationBundle();
    // Signed at T.now by the key whose window closed at T.now (a leaked key minting late receipts).
    expect(reason(verifyBundle(wire(b), { trustedKeys, logVerifier: fakeLogVerifier }))).toBe(
      'key_not_valid_at_issue',
    );
    const early = sign(b.receipt, ring(), T.now - 1);
    const ok = verifyBundle(wire({ ...b, signature: early, log: fakeLog(early) }), {
      trustedKeys,
      logVerifier: fakeLogVerifier,
    });
    expect(ok.valid).toBe(true);
  });

  it('a recomputation difference is named', () => {
    const b = wire(authorizationBundle()) as { inputs: { evaluated_at_unix_ms: number } };
    b.inputs.evaluated_at_unix_ms += 1;
    const v = verifyBundle(b, pinned);
    expect(reason(v)).toBe('receipt_mismatch');
    expect(v.failure?.differences).toContain('body.evaluated_at_unix_ms');
    const k = wire(authorizationBundle()) as { inputs: { kind: string } };
    k.inputs.kind = 'execution';
    expect(reason(verifyBundle(k, pinned))).toBe('malformed_bundle');
  });

  it('the log: missing fails unless allowed; a failing proof fails even when unlogged is allowed', () => {
    const b = authorizationBundle();
    expect(reason(verifyBundle(wire({ ...b, log: null }), pinned))).toBe('unlogged');
    expect(verifyBundle(wire({ ...b, log: null }), { ...pinned, allowUnlogged: true })).toMatchObject({
      valid: true,
      log: { status: 'unlogged_allowed' },
    });
    const bad = { ...b, log: { ...b.log, checkpoint: '0'.repeat(64) } };
    expect(reason(verifyBundle(wire(bad), { ...pinned, allowUnlogged: true }))).toBe('log_failed');
  });

  it('every single-byte change to the serialized bundle is detected (property)', () => {
    for (const make of [authorizationBundle, executionBundle]) {
      const bytes = new TextEncoder().encode(JSON.stringify(make()));
      expect(verifyBundleBytes(bytes, pinned).valid).toBe(true);
      fc.assert(
        fc.property(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, delta) => {
          const changed = bytes.slice();
          changed[at] = ((changed[at] as number) + delta) & 255;
          expect(verifyBundleBytes(changed, pinned).valid).toBe(false);
        }),
        { seed: 0xb0d1e, numRuns: 400 },
      );
    }
  }, 120_000);

  it('every position of the serialized bundle, changed once, is detected', () => {
    const bytes = new TextEncoder().encode(JSON.stringify(authorizationBundle()));
    for (let at = 0; at < bytes.length; at++) {
      const changed = bytes.slice();
      // A digit stays a digit, a letter a letter: the changes most likely to stay well-formed.
      const b = changed[at] as number;
      changed[at] =
        b >= 48 && b <= 57 ? 48 + ((b - 47) % 10) : b >= 97 && b <= 122 ? 97 + ((b - 96) % 26) : b ^ 1;
      const v = verifyBundleBytes(changed, pinned);
      if (v.valid) throw new Error(`change at byte ${at} went undetected`);
    }
  }, 120_000);

  it('with the bundle’s own keys, a changed public key or signature is detected', () => {
    const b = authorizationBundle();
    const k = wire(b) as { keys: { keys: { public_key_b64: string }[] } };
    const key = k.keys.keys[0] as { public_key_b64: string };
    key.public_key_b64 = (key.public_key_b64[0] === 'A' ? 'B' : 'A') + key.public_key_b64.slice(1);
    expect(verifyBundle(k, { logVerifier: fakeLogVerifier }).valid).toBe(false);
  });

  it('refuses oversized and malformed texts before parsing', () => {
    expect(reason(verifyBundleBytes(new Uint8Array([0xff]), pinned))).toBe('malformed_bundle');
    expect(reason(verifyBundleBytes(new TextEncoder().encode('{"a":1,"a":1}'), pinned))).toBe(
      'malformed_bundle',
    );
    expect(reason(verifyBundleBytes(new Uint8Array(16 * 1024 * 1024 + 1), pinned))).toBe('malformed_bundle');
  });
});

describe('observation bundles verify under the receipt version they carry', () => {
  // Version 3 receipts issued at aa74e75, before version 4 read JSON strings as a model does
  // (test/unit/core/observation/legacy-v3-receipts.json): they bound no signal for content that
  // holds a quoted secret; version 4 of the same inputs binds credential_like_text. Version 4
  // receipts issued at cd856d0, before version 5 read JSON text held in strings level by level
  // (legacy-v4-receipts.json): they bound no signal for a secret two strings deep; version 5 does.
  // Version 5 receipts issued at d6a5628, before version 6 read credentials in the text as written
  // (legacy-v5-receipts.json): they bound no signal for a key ended by a soft hyphen and a letter;
  // version 6 does. Version 6 receipts issued at ce58b77, before version 7 flagged every invisible
  // character and read credentials across a wrapped line (legacy-v6-receipts.json): they bound no
  // signal for a soft hyphen and a newline-wrapped key; version 7 does.
  type Fixtures = Record<
    'observation' | 'error_observation',
    { inputs: Record<string, unknown>; receipt: SignableReceipt & { body: Record<string, unknown> } }
  >;
  const V3 = legacyV3 as unknown as Fixtures;
  const V4 = legacyV4 as unknown as Fixtures;
  const V5 = legacyV5 as unknown as Fixtures;
  const V6 = legacyV6 as unknown as Fixtures;

  function bundleOf(receipt: SignableReceipt, inputs: unknown, at: number) {
    const signature = sign(receipt, ring(), at);
    return {
      bundle_version: 1,
      receipt,
      signature,
      inputs,
      keys: publicKeySet(ring(), at),
      log: fakeLog(signature),
    };
  }

  it.each([
    [3, 4, 'writ-signals/3', V3],
    [4, 5, 'writ-signals/4', V4],
    [5, 6, 'writ-signals/5', V5],
    [6, 7, 'writ-signals/6', V6],
  ] as const)(
    'a version %i bundle and a version %i bundle of the same observation both verify offline',
    (old, next, release, fixtures) => {
      for (const kind of ['observation', 'error_observation'] as const) {
        const { inputs, receipt } = fixtures[kind];
        const at = inputs.now as number;
        expect(receipt.body.receipt_version).toBe(old);
        const before = bundleOf(receipt, { kind, validation: inputs }, at);
        expect(verifyBundle(wire(before), pinned), kind).toMatchObject({ valid: true, failure: null });

        const options = { receiptVersion: next };
        const issued =
          kind === 'observation'
            ? validateObservation(ObservationValidationInput.parse(inputs), options)
            : validateErrorObservation(ErrorObservationValidationInput.parse(inputs), options);
        if (!issued.ok) throw new Error(issued.error.message);
        const nextReceipt = issued.value.receipt;
        expect(nextReceipt.body).toMatchObject({ receipt_version: next, signals_release: release });
        expect(nextReceipt.body.signals).toContain('credential_like_text');
        const after = bundleOf(nextReceipt, { kind, validation: inputs }, at);
        expect(verifyBundle(wire(after), pinned), kind).toMatchObject({ valid: true, failure: null });

        // The older body relabelled with the next version, re-hashed and signed by the issuer's
        // own key: replay recomputes the next version's signals and refuses it.
        const body = { ...receipt.body, receipt_version: next, signals_release: release };
        const relabelled = bundleOf(
          { sha256: digestOf(body), body } as SignableReceipt,
          { kind, validation: inputs },
          at,
        );
        expect(verifyBundle(wire(relabelled), pinned), kind).toMatchObject({
          valid: false,
          failure: {
            reason: 'receipt_mismatch',
            differences: ['body.signal_hits', 'body.signals', 'sha256'],
          },
        });
      }
    },
  );
});
