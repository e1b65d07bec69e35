/**
 * Replay of stored observation receipts: recompute from the original inputs and list every
 * difference (spec ch. 12, "Strict replay uses the original time decision").
 *
 * Guarantees: a stored receipt with any field changed, added or removed, or whose `sha256` does
 * not match its body, fails replay. Strict replay passes the original `now`; passing a newer one
 * is a deliberate fork and is expected to differ. A refused observation is stored without its
 * payload (never more than was admitted); its replay recomputes every check from the observation's
 * other fields and takes the findings of the refused bytes (`WithheldContent`) as stored, and
 * never yields an accepted receipt.
 * Never: trusts the stored decision, reads a clock, or does I/O.
 */
import { compare, type ReplayReport } from '../receipts/replay.js';
import { ok } from '../result.js';
import {
  type ErrorObservationValidationInput,
  type ObservationValidationInput,
  type WithheldContent,
  type WithheldErrorObservation,
  type WithheldObservation,
  decideWithheldErrorObservation,
  decideWithheldObservation,
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

export function verifyWithheldObservationReceipt(
  stored: unknown,
  inputs: Omit<ObservationValidationInput, 'observation'> & {
    readonly observation: WithheldObservation;
    readonly withheld: WithheldContent;
  },
): ReplayReport {
  return compare(stored, decideWithheldObservation(inputs));
}

export function verifyWithheldErrorObservationReceipt(
  stored: unknown,
  inputs: Omit<ErrorObservationValidationInput, 'observation'> & {
    readonly observation: WithheldErrorObservation;
    readonly withheld: WithheldContent;
  },
): ReplayReport {
  return compare(stored, decideWithheldErrorObservation(inputs));
}
