/**
 * The signal detector of each observation receipt version: version 1 receipts were issued with
 * release `writ-signals/1` (the frozen `legacy-v1.ts`), versions 2 and 3 with `writ-signals/2` (the
 * current `../signals.ts` over the content's text), version 4 with `writ-signals/3` (the same
 * rules, over the text and, for JSON content, also over its strings as a model reads them:
 * `as-read.ts`).
 *
 * Guarantees: a receipt is only ever recomputed with the detector of the version written in it, so
 * a detector change never turns an honest stored receipt into a replay failure, and a receipt
 * whose version was edited is recomputed under other rules and fails. Version 4's scan of any
 * content is a superset of version 3's (the union of the text's scan and the strings' scan).
 * Never: picks a detector from anything but the receipt version and the content's media type,
 * reads a clock, or does I/O.
 */
import {
  isJsonMediaType,
  type ObservationReceiptVersion,
  type ObservationSignal,
  type SignalHit,
} from '../schema.js';
import { detectSignals } from '../signals.js';
import { credentialSpans as credentialSpansV1, detectSignals as detectSignalsV1 } from './legacy-v1.js';
import { credentialSpans, type CredentialSpan } from '../signals.js';
import { jsonStringsAsRead, mergeScans } from './as-read.js';

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
  // Version 4 runs the same rules over more text (`scanContentUnder`), not other rules.
  4: detectSignals,
};

/** Whether a version also scans JSON content's strings as read (`writ-signals/3` onwards). */
const READS_JSON_STRINGS: Readonly<Record<ObservationReceiptVersion, boolean>> = {
  1: false,
  2: false,
  3: false,
  4: true,
};

/** Scan `text` with the rule set that receipts of `version` bind (the text alone, as it is). */
export function scanUnder(version: ObservationReceiptVersion, text: string): SignalScan {
  const r = DETECTORS[version](text);
  // Only the bound fields: a report's extra detail (families, work counters) is not receipt data.
  return { signals: r.signals, hits: r.hits };
}

/**
 * Scan content of `mediaType` as receipts of `version` do: its text; from version 4, for a JSON
 * media type, also every string in it as a model reads it (`jsonStringsAsRead`), the hits being
 * the union of both scans. Versions 1 to 3 scan the text alone, exactly as they were issued.
 */
export function scanContentUnder(
  version: ObservationReceiptVersion,
  text: string,
  mediaType: string,
): SignalScan {
  const plain = scanUnder(version, text);
  if (!READS_JSON_STRINGS[version] || !isJsonMediaType(mediaType)) return plain;
  return mergeScans([plain, scanUnder(version, jsonStringsAsRead(text))]);
}

/** Credential spans as located by the release-1 rules (the `writ-redactor/1` redactor) or the current ones. */
export function credentialSpansUnder(legacy: boolean, text: string): CredentialSpan[] {
  return legacy ? credentialSpansV1(text) : credentialSpans(text);
}
