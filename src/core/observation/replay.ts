/**
 * Replay of stored observation receipts: recompute from the original inputs and list every
 * difference (spec ch. 12, "Strict replay uses the original time decision").
 *
 * Guarantees: a stored receipt with any field changed, added or removed, or whose `sha256` does
 * not match its body, fails replay. A receipt is recomputed under the version written in its own
 * stored body, with that version's signal rule set (version 1: `writ-signals/1`, versions 2 and 3:
 * `writ-signals/2`, version 4: `writ-signals/3`, version 5: `writ-signals/4`, version 6:
 * `writ-signals/5`, version 7: `writ-signals/6`), so a detector
 * change never fails an honest old receipt, and an edited version recomputes under other rules
 * and fails. Strict replay passes the original `now`; passing a newer one is a deliberate fork and
 * is expected to differ. A refused observation is stored without its payload (never more than was
 * admitted); its replay recomputes every check from the observation's other fields and takes the
 * findings of the refused bytes (`WithheldContent`) as stored, and never yields an accepted
 * receipt.
 * Never: trusts the stored decision, reads a clock, or does I/O.
 */
import { compare, type ReplayReport } from '../receipts/replay.js';
import { ok } from '../result.js';
import { OBSERVATION_RECEIPT_VERSION, ObservationReceiptVersion } from './schema.js';
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
  const r = validateObservation(inputs, { receiptVersion: storedReceiptVersion(stored) });
  return compare(stored, r.ok ? ok(r.value.receipt) : r);
}

export function verifyErrorObservationReceipt(
  stored: unknown,
  inputs: ErrorObservationValidationInput,
): ReplayReport {
  const r = validateErrorObservation(inputs, { receiptVersion: storedReceiptVersion(stored) });
  return compare(stored, r.ok ? ok(r.value.receipt) : r);
}

export function verifyWithheldObservationReceipt(
  stored: unknown,
  inputs: Omit<ObservationValidationInput, 'observation'> & {
    readonly observation: WithheldObservation;
    readonly withheld: WithheldContent;
  },
): ReplayReport {
  return compare(stored, decideWithheldObservation(inputs, { receiptVersion: storedReceiptVersion(stored) }));
}

export function verifyWithheldErrorObservationReceipt(
  stored: unknown,
  inputs: Omit<ErrorObservationValidationInput, 'observation'> & {
    readonly observation: WithheldErrorObservation;
    readonly withheld: WithheldContent;
  },
): ReplayReport {
  return compare(
    stored,
    decideWithheldErrorObservation(inputs, { receiptVersion: storedReceiptVersion(stored) }),
  );
}

/**
 * The receipt version a stored receipt (untrusted data) names in its body. Anything that is not a
 * known version (absent, unknown, another type) is recomputed as the current version, so it still
 * fails with every differing field named rather than as an unreadable receipt.
 */
export function storedReceiptVersion(stored: unknown): ObservationReceiptVersion {
  const body = ownField(stored, 'body');
  const v = ObservationReceiptVersion.safeParse(ownField(body, 'receipt_version'));
  return v.success ? v.data : OBSERVATION_RECEIPT_VERSION;
}

function ownField(o: unknown, k: string): unknown {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return undefined;
  // Own properties only: a `__proto__` key must never read through to a prototype.
  return Object.prototype.hasOwnProperty.call(o, k) ? (o as Record<string, unknown>)[k] : undefined;
}
