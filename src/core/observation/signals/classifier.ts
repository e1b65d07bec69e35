/**
 * The optional model-based classifier, as a port: its verdict is an argument, never a call.
 *
 * Guarantees: a verdict can only add a signal (`instruction_like_text` under rule
 * `classifier.injection`), never remove or weaken a heuristic one, and never change authority
 * (there is none to change: evidence stays `untrusted_evidence_only`). Anything that is not a
 * well-formed verdict (missing, malformed, out of range, a failed or timed-out call mapped to
 * `null` by the adapter) leaves the report exactly as the heuristic made it, so the detector
 * works offline and a broken classifier changes nothing.
 * Never: performs I/O, reads a clock, or trusts a verdict's claim that text is benign.
 */
import { z } from 'zod';
import { compareHits, type SignalReport } from '../signals.js';
import type { ClassifierOutcome, ObservationSignal, SignalHit } from '../schema.js';

/** What an adapter hands the core: the classifier's judgement of one text. */
export const ClassifierVerdict = z.strictObject({
  /** The model that judged, for the reader (`@cf/...`); a label, not an authority. */
  model: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII'),
  /** Probability-like score that the text is a prompt injection. */
  injection_score: z.number().min(0).max(1),
});
export type ClassifierVerdict = z.infer<typeof ClassifierVerdict>;

export const CLASSIFIER_RULE = 'classifier.injection';

/** Scores at or above this raise the signal unless the tenant configures another threshold. */
export const DEFAULT_CLASSIFIER_THRESHOLD = 0.9;

/**
 * The heuristic report with the classifier's verdict folded in. `verdict` is `unknown` on
 * purpose: it is parsed here, and whatever does not parse is no verdict.
 */
export function withClassifierVerdict(
  report: SignalReport,
  verdict: unknown,
  threshold: number = DEFAULT_CLASSIFIER_THRESHOLD,
): SignalReport {
  const parsed = ClassifierVerdict.safeParse(verdict);
  // A threshold outside (0, 1] would make every verdict, or none, fire: treat it as no classifier.
  if (!parsed.success || !(threshold > 0 && threshold <= 1)) return report;
  if (parsed.data.injection_score < threshold) return report;
  const hit: SignalHit = { signal: 'instruction_like_text', rule: CLASSIFIER_RULE, encoding: 'plain' };
  if (report.hits.some((h) => compareHits(h, hit) === 0)) return report;
  const hits = [...report.hits, hit].sort(compareHits);
  const details = [...report.details, { ...hit, family: 'classifier', languages: [] }].sort(compareHits);
  const signals = [...new Set([...report.signals, hit.signal])].sort();
  return { ...report, signals, hits, details };
}

/** The signals and hits a receipt binds. */
export interface SignalScanResult {
  readonly signals: readonly ObservationSignal[];
  readonly hits: readonly SignalHit[];
}

/**
 * A receipt's signals with the recorded classifier outcome folded in (validation and replay
 * alike, from the trusted context): a verdict at or above its threshold adds the classifier hit;
 * an unavailable classifier, a lower score or no outcome returns the scan unchanged. Only ever
 * adds: every heuristic hit is kept.
 */
export function withClassifierOutcome(
  scan: SignalScanResult,
  outcome: ClassifierOutcome | undefined,
): { signals: ObservationSignal[]; hits: SignalHit[] } {
  const same = { signals: [...scan.signals], hits: [...scan.hits] };
  if (outcome === undefined || outcome.status !== 'verdict') return same;
  if (!(outcome.threshold > 0 && outcome.threshold <= 1) || !(outcome.injection_score >= outcome.threshold)) {
    return same;
  }
  const hit: SignalHit = { signal: 'instruction_like_text', rule: CLASSIFIER_RULE, encoding: 'plain' };
  if (same.hits.some((h) => compareHits(h, hit) === 0)) return same;
  return {
    signals: [...new Set([...same.signals, hit.signal])].sort(),
    hits: [...same.hits, hit].sort(compareHits),
  };
}
