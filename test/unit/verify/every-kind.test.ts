/**
 * Issue 11, "every single-byte change to a bundle is detected", for a bundle of every kind the
 * service issues: authorization (allow and deny), execution, reconciliation, observation (accepted,
 * and refused with its payload withheld) and error observation (refused, detail withheld). Every
 * byte position of each serialized bundle is changed once, to the change most likely to stay
 * well-formed JSON (a digit to another digit, a letter to another letter), and the offline
 * verifier must refuse each. Before observation receipt version 3 and reconciliation receipt
 * version 2, the withheld findings' `actual_sha256` / `actual_bytes` and the reconciliation's
 * `max_clock_skew_ms` were bound only loosely; the last block shows this sweep catches that.
 */
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../src/core/canonical/canonical.js';
import { reconcileOperation } from '../../../src/core/execution/reconciliation.js';
import type { ObservationReceiptVersion } from '../../../src/core/observation/schema.js';
import {
  type ErrorObservationValidationInput,
  type ObservationValidationInput,
  errorDetailFindings,
  inlineContentFindings,
  validateErrorObservation,
  validateObservation,
} from '../../../src/core/observation/validate.js';
import type { SignableReceipt } from '../../../src/core/receipts/signing.js';
import { publicKeySet } from '../../../src/core/receipts/keys.js';
import { verifyBundleBytes } from '../../../src/verify/bundle.js';
import { buildObservation, buildScenario, mustVerify, T } from '../core/fixtures.js';
import { baseInput, errorInput } from '../core/observation/fixtures.js';
import {
  authorizationBundle,
  authorizeV2,
  executionBundle,
  fakeLog,
  fakeLogVerifier,
  keys,
  ring,
  sign,
} from './fixtures.js';

const pinned = { trustedKeys: keys(), logVerifier: fakeLogVerifier } as const;
const SKEW_MS = 5_000;
const OPERATION_ID = 'a'.repeat(64);

/** A bundle around `receipt` and its replay inputs, signed at `at`, with a log section. */
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

function deniedBundle() {
  const s = buildScenario();
  // Evaluated after the grant expired: a well-formed denial, receipted like an allow.
  const late = { ...s, now: T.grantExpiresAt + 1 };
  const b = authorizationBundle(late);
  expect(b.receipt.body.decision).toBe('denied');
  return b;
}

/**
 * An operation left indeterminate, resolved by a target observation whose clock runs 1 s ahead of
 * the reconciliation (within the policy's skew, so the skew matters to the recomputation).
 */
function reconciliationBundle(receiptVersion?: 1 | 2) {
  const s = buildScenario();
  const authorization = authorizeV2(s);
  const original = mustVerify(
    s.contract,
    authorization,
    buildObservation(s.contract, authorization, 'indeterminate'),
  );
  const observation = buildObservation(s.contract, authorization, 'failed_no_effect');
  const at = observation.completed_at_unix_ms - 1_000;
  const r = reconcileOperation(
    {
      contract: s.contract,
      authorization,
      operation_id: OPERATION_ID,
      original,
      observation,
      reconciled_by: 'user:bob@acme',
      now: at,
      max_clock_skew_ms: SKEW_MS,
    },
    receiptVersion === undefined ? {} : { receiptVersion },
  );
  if (!r.ok || !r.value.ok) throw new Error('fixture reconciliation did not resolve');
  return bundleOf(
    r.value.receipt,
    {
      kind: 'reconciliation',
      contract: s.contract,
      authorization,
      original,
      observation,
      max_clock_skew_ms: SKEW_MS,
      operation_id: OPERATION_ID,
      reconciled_by: 'user:bob@acme',
      reconciled_at_unix_ms: at,
    },
    at,
  );
}

function acceptedObservationBundle() {
  const validation = baseInput();
  const r = validateObservation(validation);
  if (!r.ok) throw new Error(r.error.message);
  expect(r.value.receipt.body.decision).toBe('accepted_untrusted_evidence');
  return bundleOf(r.value.receipt, { kind: 'observation', validation }, validation.now);
}

/** A reporter substitutes another payload for the executor's: refused, the payload not kept. */
function withheldObservationBundle(receiptVersion?: ObservationReceiptVersion) {
  const validation: ObservationValidationInput = baseInput();
  validation.observation.payload = '{"substituted":true}';
  const opts = receiptVersion === undefined ? {} : { receiptVersion };
  const r = validateObservation(validation, opts);
  if (!r.ok) throw new Error(r.error.message);
  expect(r.value.receipt.body.decision).toBe('rejected');
  const { observation, ...common } = validation;
  const { payload: _payload, ...kept } = observation;
  const withheld = inlineContentFindings(observation, validation.policy, receiptVersion);
  return bundleOf(
    r.value.receipt,
    { kind: 'observation', validation: { ...common, observation: kept, withheld } },
    validation.now,
  );
}

function withheldErrorObservationBundle() {
  const validation: ErrorObservationValidationInput = errorInput();
  validation.observation.detail = '{"error":"other"}';
  const r = validateErrorObservation(validation);
  if (!r.ok) throw new Error(r.error.message);
  expect(r.value.receipt.body.decision).toBe('rejected');
  const { observation, ...common } = validation;
  const { detail: _detail, ...kept } = observation;
  const withheld = errorDetailFindings(observation, validation.policy);
  return bundleOf(
    r.value.receipt,
    { kind: 'error_observation', validation: { ...common, observation: kept, withheld } },
    validation.now,
  );
}

/** The one change per position: digits stay digits and letters letters, anything else flips a bit. */
function changed(b: number): number {
  if (b >= 0x30 && b <= 0x39) return 0x30 + ((b - 0x30 + 1) % 10);
  if (b >= 0x61 && b <= 0x7a) return 0x61 + ((b - 0x61 + 1) % 26);
  if (b >= 0x41 && b <= 0x5a) return 0x41 + ((b - 0x41 + 1) % 26);
  return b ^ 1;
}

/** The member whose key or value holds byte `at` of canonical JSON text (the last key before it). */
function memberAt(text: string, at: number): string {
  const keys = [...text.slice(0, at + 1).matchAll(/"([A-Za-z0-9_]+)":/g)];
  return keys.at(-1)?.[1] ?? '(none)';
}

/** The byte offsets (with the member they lie in) whose change the verifier did not catch. */
function undetected(bundle: unknown, inputsOnly = false): string[] {
  // Canonical text: a verifier may be handed any spelling, but this one has no insignificant bytes.
  const bytes = new TextEncoder().encode(canonicalize(bundle));
  expect(verifyBundleBytes(bytes, pinned)).toMatchObject({ valid: true, failure: null });
  const text = new TextDecoder().decode(bytes);
  const missed: string[] = [];
  // `inputsOnly`: just the bytes of `inputs` (canonical member order puts `keys` right after it;
  // the text is ASCII, so characters are bytes).
  const from = inputsOnly ? text.indexOf('"inputs":') : 0;
  const to = inputsOnly ? text.lastIndexOf(',"keys":') : bytes.length;
  expect(0 <= from && from < to).toBe(true);
  for (let at = from; at < to; at++) {
    const copy = bytes.slice();
    copy[at] = changed(copy[at] as number);
    if (verifyBundleBytes(copy, pinned).valid) missed.push(`${at} in ${memberAt(text, at)}`);
  }
  return missed;
}

/** A full sweep takes seconds per bundle on a loaded machine: generous watchdog, no timing asserted. */
const SWEEP_MS = 240_000;

describe('every single-byte change to a bundle of every kind is detected', () => {
  const kinds: [string, () => unknown][] = [
    ['authorization allow', () => authorizationBundle()],
    ['authorization deny', deniedBundle],
    ['execution', () => executionBundle()],
    ['reconciliation (version 2)', () => reconciliationBundle()],
    ['observation accepted', acceptedObservationBundle],
    ['observation refused, payload withheld (version 6)', () => withheldObservationBundle()],
    ['error observation refused, detail withheld (version 6)', withheldErrorObservationBundle],
  ];
  for (const [name, make] of kinds) {
    it(name, () => expect(undetected(make())).toEqual([]), SWEEP_MS);
  }
});

describe('the loose binding of the older versions is what the sweep catches', () => {
  it(
    'a version 1 reconciliation receipt leaves the clock skew unbound: changes to it go unnoticed',
    () => {
      const missed = undetected(reconciliationBundle(1), true);
      expect(missed.length).toBeGreaterThan(0);
      expect(missed.every((m) => m.endsWith(' in max_clock_skew_ms'))).toBe(true);
    },
    SWEEP_MS,
  );

  it(
    'a version 2 withheld observation leaves the actual digest and size unbound',
    () => {
      const missed = undetected(withheldObservationBundle(2), true);
      expect(missed.length).toBeGreaterThan(0);
      expect(missed.every((m) => / in actual_(bytes|sha256)$/.test(m))).toBe(true);
    },
    SWEEP_MS,
  );
});
