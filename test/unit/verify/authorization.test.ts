/**
 * The executor's check (spec ch. 11 integration test): missing, denied, expired, mutated and
 * wrong-audience receipts are refused, each with its reason; a valid one is accepted. Replay
 * protection is the executor's idempotency claim (docs/receipts.md), not this function.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import type { AuthorizationReceipt } from '../../../src/core/model.js';
import { POLICY_LIMITS } from '../../../src/core/policy.js';
import { decodeBase64, encodeBase64 } from '../../../src/core/receipts/base64.js';
import { generateKeyRing, type KeyRingDocument } from '../../../src/core/receipts/keys.js';
import { verifyAuthorizationReceipt, type ExecutorVerifyOptions } from '../../../src/verify/authorization.js';
import { buildScenario, EXECUTOR_RELEASE, mustAuthorize, rollbackInput, T } from '../core/fixtures.js';
import { authorizeV2, ISSUER, keys, OTHER_SEED, ring, SEED, sign, wire } from './fixtures.js';

const AUDIENCE = { executor_release: EXECUTOR_RELEASE } as const;

function setup() {
  const receipt = authorizeV2();
  const signature = sign(receipt);
  const opts: ExecutorVerifyOptions = {
    keys: keys(),
    audience: AUDIENCE,
    now: T.now + 1,
    signature: wire(signature),
    input: rollbackInput(),
  };
  return { receipt, signature, opts };
}

/** The receipt with other times, re-hashed: what a holder of a signing key could issue. */
function reissued(r: AuthorizationReceipt, evaluated: number, deadline: number): AuthorizationReceipt {
  const body = { ...r.body, evaluated_at_unix_ms: evaluated, dispatch_deadline_unix_ms: deadline };
  return { sha256: digestOf(body), body } as AuthorizationReceipt;
}

const reason = (receipt: unknown, opts: ExecutorVerifyOptions) => {
  const v = verifyAuthorizationReceipt(receipt, opts);
  return v.ok ? 'ok' : v.reason;
};

describe('verifyAuthorizationReceipt (executor side)', () => {
  it('accepts a valid, signed, unexpired receipt for this executor and these input bytes', () => {
    const { receipt, opts } = setup();
    const v = verifyAuthorizationReceipt(wire(receipt), opts);
    expect(v.ok).toBe(true);
    expect(
      reason(wire(receipt), {
        ...opts,
        input: new TextEncoder().encode(JSON.stringify(rollbackInput(), null, 2)),
      }),
    ).toBe('ok');
    const { input: _omit, ...noInput } = opts;
    expect(reason(wire(receipt), noInput)).toBe('ok');
  });

  it('missing', () => {
    const { opts } = setup();
    expect(reason(undefined, opts)).toBe('missing');
    expect(reason(null, opts)).toBe('missing');
  });

  it('missing signature, and a signature that is not the issuer’s', () => {
    const { receipt, opts } = setup();
    expect(reason(wire(receipt), { ...opts, signature: undefined })).toBe('signature_missing');
    const stranger = ring(generateKeyRing(OTHER_SEED, ISSUER, 0));
    expect(reason(wire(receipt), { ...opts, signature: sign(receipt, stranger) })).toBe('unknown_key');
    expect(
      reason(wire(receipt), {
        ...opts,
        signature: sign(receipt, ring(generateKeyRing(SEED, 'evil.example', 0))),
      }),
    ).toBe('issuer_mismatch');
    const sig = decodeBase64(setup().signature.signature) as Uint8Array;
    sig[0] = (sig[0] as number) ^ 1;
    expect(
      reason(wire(receipt), { ...opts, signature: { ...setup().signature, signature: encodeBase64(sig) } }),
    ).toBe('bad_signature');
    // A valid signature of another receipt does not transfer.
    const other = authorizeV2(buildScenario(), { dispatch_window_ms: 1000, executor_principal_id: null });
    expect(reason(wire(receipt), { ...opts, signature: sign(other) })).toBe('signature_mismatch');
  });

  it('a retired key: receipts signed before retirement verify, signatures dated after do not', () => {
    const { receipt, opts } = setup();
    const base = generateKeyRing(SEED, ISSUER, 0);
    // The receipt was evaluated at T.now; the key signs until T.now + 1, then until T.now.
    const retiredAt = (at: number) =>
      keys(
        ring({
          ...base,
          keys: [{ ...(base.keys[0] as KeyRingDocument['keys'][0]), signing_until_unix_ms: at }],
        }),
      );
    expect(reason(wire(receipt), { ...opts, keys: retiredAt(T.now + 1) })).toBe('ok');
    expect(reason(wire(receipt), { ...opts, keys: retiredAt(T.now) })).toBe('key_not_valid_at_issue');
    // The signer chooses the envelope's date: one dated inside the window, over a receipt
    // evaluated after it, is no signature of that receipt.
    expect(
      reason(wire(receipt), { ...opts, keys: retiredAt(T.now), signature: sign(receipt, ring(), T.now - 1) }),
    ).toBe('signature_mismatch');
  });

  it('a signature dated other than the evaluation, and a deadline past the policy limit, are refused', () => {
    const { receipt, opts } = setup();
    for (const at of [T.now - 1, T.now + 1, 0]) {
      expect(reason(wire(receipt), { ...opts, signature: sign(receipt, ring(), at) })).toBe(
        'signature_mismatch',
      );
    }
    // What no Writ policy can issue: a deadline more than the policy limit after the evaluation,
    // or not after it at all. Re-hashed and signed at the evaluation time, as a key holder could.
    for (const deadline of [
      T.now + POLICY_LIMITS.authorizationMaxDispatchMs + 1,
      T.now,
      T.now - 1,
      Number.MAX_SAFE_INTEGER,
    ]) {
      const forged = reissued(receipt, T.now, deadline);
      expect(
        reason(wire(forged), { ...opts, now: T.now - 5, signature: sign(forged) }),
        String(deadline),
      ).toBe('malformed');
    }
    const longest = reissued(receipt, T.now, T.now + POLICY_LIMITS.authorizationMaxDispatchMs);
    expect(reason(wire(longest), { ...opts, signature: sign(longest) })).toBe('ok');
  });

  it('property: a retired key mints no receipt an executor accepts once its window plus the policy limit has passed', () => {
    const base = generateKeyRing(SEED, ISSUER, 0);
    const { receipt, opts } = setup();
    const LIMIT = POLICY_LIMITS.authorizationMaxDispatchMs;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 40 }),
        fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
        fc.integer({ min: -(2 ** 41), max: 2 ** 41 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.nat({ max: 2 ** 40 }),
        (retired, evalOffset, deadlineOffset, issuedBefore, after) => {
          const pinned = keys(
            ring({
              ...base,
              keys: [{ ...(base.keys[0] as KeyRingDocument['keys'][0]), signing_until_unix_ms: retired }],
            }),
          );
          // Anything the key holder can make: any evaluation time and deadline, re-hashed, and an
          // envelope dated anywhere the key may sign.
          const evaluated = Math.max(0, retired + evalOffset);
          const forged = reissued(receipt, evaluated, Math.max(0, evaluated + deadlineOffset));
          const issued = Math.max(0, retired - 1 - issuedBefore);
          const now = retired + LIMIT + after;
          const v = verifyAuthorizationReceipt(wire(forged), {
            ...opts,
            keys: pinned,
            now,
            signature: sign(forged, ring(), issued),
          });
          expect(v.ok).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
    // Not vacuous: before that time, a receipt it signed at its evaluation inside the window is accepted.
    const pinned = keys(
      ring({
        ...base,
        keys: [{ ...(base.keys[0] as KeyRingDocument['keys'][0]), signing_until_unix_ms: T.now + 1 }],
      }),
    );
    const last = reissued(receipt, T.now, T.now + LIMIT);
    expect(
      reason(wire(last), {
        ...opts,
        keys: pinned,
        now: T.now + 1 + LIMIT - 2,
        signature: sign(last, ring(), T.now),
      }),
    ).toBe('ok');
  });

  it('denied', () => {
    const s = buildScenario();
    s.invocation.principal_id = 'user:mallory@acme';
    const denied = authorizeV2(s);
    const { opts } = setup();
    expect(reason(wire(denied), { ...opts, signature: sign(denied) })).toBe('denied');
  });

  it('expired: at and after the dispatch deadline', () => {
    const { receipt, opts } = setup();
    const deadline = T.now + 60_000;
    expect(reason(wire(receipt), { ...opts, now: deadline - 1 })).toBe('ok');
    expect(reason(wire(receipt), { ...opts, now: deadline })).toBe('expired');
    expect(reason(wire(receipt), { ...opts, now: deadline + 3_600_000 })).toBe('expired');
  });

  it('expired when the clock reading is not a time: a bad `now` never makes a receipt unexpiring', () => {
    const { receipt, opts } = setup();
    // NaN compares false with everything, so `now >= deadline` alone let these through.
    for (const now of [Number.NaN, undefined, null, '1', Number.NEGATIVE_INFINITY, T.now + 0.5]) {
      expect(reason(wire(receipt), { ...opts, now: now as unknown as number }), String(now)).toBe('expired');
    }
  });

  it('mutated: any changed body field, even re-signed fields are caught by the digest', () => {
    const { receipt, opts } = setup();
    for (const [k, v] of Object.entries({
      violations: [],
      decision: 'denied',
      dispatch_deadline_unix_ms: T.now + 3_600_000,
      executor_release: 'other 1.0',
      target: { type: 'deployment', attributes: { environment: 'staging', service: 'api' } },
      input_sha256: 'a'.repeat(64),
    })) {
      const m = wire(receipt) as { body: Record<string, unknown> };
      m.body[k] = v;
      const got = reason(m, opts);
      expect(got, k).toBe(k === 'violations' ? 'ok' : 'digest_mismatch');
    }
    const extra = wire(receipt) as { body: Record<string, unknown> };
    extra.body.note = 'x';
    expect(reason(extra, opts)).toBe('malformed');
    expect(reason({ ...receipt, sha256: 'f'.repeat(64) }, opts)).toBe('digest_mismatch');
  });

  it('wrong audience: another release, or another principal when one is pinned', () => {
    const { receipt, opts } = setup();
    expect(
      reason(wire(receipt), { ...opts, audience: { executor_release: 'rollback-executor 1.4.3' } }),
    ).toBe('wrong_audience');
    const pinnedTo = authorizeV2(buildScenario(), {
      dispatch_window_ms: 60_000,
      executor_principal_id: 'executor:a',
    });
    const o = { ...opts, signature: sign(pinnedTo) };
    expect(
      reason(wire(pinnedTo), { ...o, audience: { ...AUDIENCE, executor_principal_id: 'executor:a' } }),
    ).toBe('ok');
    expect(
      reason(wire(pinnedTo), { ...o, audience: { ...AUDIENCE, executor_principal_id: 'executor:b' } }),
    ).toBe('wrong_audience');
    expect(reason(wire(pinnedTo), o)).toBe('wrong_audience');
  });

  it('input mismatch: other bytes, other values, duplicate keys', () => {
    const { receipt, opts } = setup();
    expect(reason(wire(receipt), { ...opts, input: { ...rollbackInput(), to_version: 'v40' } })).toBe(
      'input_mismatch',
    );
    expect(reason(wire(receipt), { ...opts, input: new TextEncoder().encode('{"service":"api"') })).toBe(
      'input_mismatch',
    );
    const dup = canonicalize(rollbackInput()).replace('{', '{"service":"billing",');
    expect(reason(wire(receipt), { ...opts, input: new TextEncoder().encode(dup) })).toBe('input_mismatch');
  });

  it('a version 1 receipt (no audience) and unknown versions are refused', () => {
    const { opts } = setup();
    const v1 = mustAuthorize(buildScenario());
    expect(reason(wire(v1), { ...opts, signature: sign(v1) })).toBe('unsupported_version');
    const v3 = wire(authorizeV2()) as { body: Record<string, unknown> };
    v3.body.receipt_version = 3;
    expect(reason(v3, opts)).toBe('unsupported_version');
    expect(reason({ sha256: 'x' }, opts)).toBe('malformed');
  });
});
