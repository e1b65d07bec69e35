/**
 * The signal detector of each observation receipt version: version 1 receipts were issued with
 * release `writ-signals/1` (the frozen `legacy-v1.ts`), versions 2 and 3 with `writ-signals/2` (the
 * current `../signals.ts`).
 *
 * Guarantees: a receipt is only ever recomputed with the detector of the version written in it, so
 * a detector change never turns an honest stored receipt into a replay failure, and a receipt
 * whose version was edited is recomputed under other rules and fails.
 * Never: picks a detector from anything but the receipt version, reads a clock, or does I/O.
 */
import type { ObservationReceiptVersion, ObservationSignal, SignalHit } from '../schema.js';
import { detectSignals } from '../signals.js';
import { credentialSpans as credentialSpansV1, detectSignals as detectSignalsV1 } from './legacy-v1.js';
import { credentialSpans, type CredentialSpan } from '../signals.js';

/** What a receipt binds of a scan: the signals and the hits, nothing else. */
export interface SignalScan {
  readonly signals: ObservationSignal[];
  readonly hits: SignalHit[];
}

const DETECTORS: Readonly<Record<ObservationReceiptVersion, (text: string) => SignalScan>> = {
  1: detectSignalsV1,
  2: detectSignals,
  // Version 3 changed what a receipt binds of the content, not the signal rules.
  3: detectSignals,
};

/** Scan `text` with the rule set that receipts of `version` bind. */
export function scanUnder(version: ObservationReceiptVersion, text: string): SignalScan {
  const r = DETECTORS[version](text);
  // Only the bound fields: a report's extra detail (families, work counters) is not receipt data.
  return { signals: r.signals, hits: r.hits };
}

/** Credential spans as located by the release-1 rules (the `writ-redactor/1` redactor) or the current ones. */
export function credentialSpansUnder(legacy: boolean, text: string): CredentialSpan[] {
  return legacy ? credentialSpansV1(text) : credentialSpans(text);
}
