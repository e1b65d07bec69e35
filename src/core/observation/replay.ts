/**
 * Replay of stored observation receipts: recompute from the original inputs and list every
 * difference (spec ch. 12, "Strict replay uses the original time decision").
 *
 * Guarantees: a stored receipt with any field changed, added or removed, or whose `sha256` does
 * not match its body, fails replay. Strict replay passes the original `now`; passing a newer one
 * is a deliberate fork and is expected to differ.
 * Never: trusts the stored decision, reads a clock, or does I/O.
 */
import { compare, type ReplayReport } from '../receipts/replay.js';
import { ok } from '../result.js';
import {
  type ErrorObservationValidationInput,
  type ObservationValidationInput,
  validateErrorObservation,
  validateObservation,
} from './validate.js';

export function verifyObservationReceipt(stored: unknown, inputs: ObservationValidationInput): ReplayReport {
  const r = validateObservation(inputs);
  return compare(stored, r.ok ? ok(r.value.receipt) : r);
}

export function verifyErrorObservationReceipt(
  stored: unknown,
  inputs: ErrorObservationValidationInput,
): ReplayReport {
  const r = validateErrorObservation(inputs);
  return compare(stored, r.ok ? ok(r.value.receipt) : r);
}
