/**
 * Read-only output classification and an egress policy for message-sending tools (spec ch. 11
 * exercise: "Implement read-only output classification and an egress policy for a message-sending
 * tool"; "How can a read tool participate in data exfiltration?").
 *
 * A read tool has no effect of its own, but its output can leave through the next call: an agent
 * reads a customer record, then "summarizes" it into an email to an outside address. So:
 * - `classifyReadOutput` gives a read tool's output a data class: the class the tenant declared
 *   for that tool's output, raised (never lowered) by what the text shows: credential-like text
 *   (in the text, or in a string of it as a model reads it; found by the detector or located by
 *   the redactor) makes it `secret`, and so does text the scanner could not look at completely
 *   (padding or encoding must not buy a lower class);
 * - `evaluateEgress` decides whether a message may go to a destination: the destination must be
 *   named by the policy, and the message's class, the highest of its declared sources' classes and
 *   of its own text's classification, must not exceed the destination's maximum. Every violation
 *   is listed, sorted; the decision is `allowed` only when there is none.
 * Guarantees: monotonic (raising any class, or removing a destination from the policy, never turns
 * a denial into an allowance), deterministic, default deny for unknown destinations.
 * Never: lowers a declared class, trusts the message's own claim about its class, reads a clock
 * or does I/O. Which sources a message derives from is declared by the caller (the adapter's
 * lineage); the text check is the backstop when that declaration is incomplete.
 */
import { z } from 'zod';
import { fromZodError, type CoreError } from '../core/errors.js';
import { detectSignals } from '../core/observation/signals.js';
import { jsonStringLevelTextsWithSeparators } from '../core/observation/signals/as-read.js';
import { credentialSpansAsRead, CURRENT_SIGNALS_READING } from '../core/observation/signals/releases.js';
import { err, ok, type Result } from '../core/result.js';
import { Identifier, Sha256, strict } from '../core/schema.js';

export const DATA_CLASSES = ['public', 'internal', 'confidential', 'secret'] as const;
export const DataClass = z.enum(DATA_CLASSES);
export type DataClass = z.infer<typeof DataClass>;

const RANK: Readonly<Record<DataClass, number>> = { public: 0, internal: 1, confidential: 2, secret: 3 };

export function higherClass(a: DataClass, b: DataClass): DataClass {
  return RANK[a] >= RANK[b] ? a : b;
}

export interface OutputClassification {
  readonly data_class: DataClass;
  /** Why the class is above the declared one, sorted; empty when it is the declared class. */
  readonly raised_by: readonly string[];
}

/** Classify a read tool's output text, starting from the class declared for that tool. */
export function classifyReadOutput(text: string, declared: DataClass): OutputClassification {
  // The text, and its strings as a model reads them (unescaped) at each level of JSON text held in
  // strings, as the redactor and `writ-signals/5` read them (`jsonStringLevelTexts`, four
  // levels): a secret quoted inside a JSON string (`"{\"client_secret\": \"…\"}"`) shows only
  // there, and so does content too large to scan at a deeper level. Output that is no JSON only
  // gains scans of its quoted parts: a class is only ever raised by them. Each read as the current
  // release (`writ-signals/6`) reads: the credential rules also over the text as written, where an
  // invisible character ends a key as it does for the redactor, over the text with invisibles as
  // spaces, and over the text read through invisibles and across a line break inside a token.
  // The newlines joining a level's strings are separators, never a wrapped line.
  const detect = (t: string, separators: readonly number[] = []) =>
    detectSignals(t, { ...CURRENT_SIGNALS_READING, readThroughBoundaries: separators });
  const reports = [detect(text)];
  const quoted = text.includes('"');
  if (quoted)
    for (const level of jsonStringLevelTextsWithSeparators(text))
      reports.push(detect(level.text, level.separators));
  const raised: string[] = [];
  // And whatever the redactor locates (`credentialSpansAsRead`, `writ-redactor/4`: the text as
  // written and read through and, quoted, its strings as read), quote or no quote. `writ-signals/6`
  // signals all of it (property-tested in signals-split-credentials.test.ts); the redactor's own reading is kept so that output the
  // redactor would redact is never classified below `secret`, whatever a later release reads.
  if (
    reports.some((r) => r.signals.includes('credential_like_text')) ||
    credentialSpansAsRead(text, 'application/json').length > 0
  ) {
    raised.push('credential_like_text');
  }
  if (reports.some((r) => !r.complete)) raised.push('unscanned_content');
  return { data_class: raised.length > 0 ? 'secret' : declared, raised_by: raised.sort() };
}

/** Where messages may go and how sensitive they may be. Unknown destinations are denied. */
export const EgressPolicy = strict({
  destinations: z
    .array(
      strict({
        /** e.g. `slack:acme/#ops`, `email:acme.com`: the send tool's target, as the adapter names it. */
        destination: Identifier,
        max_class: DataClass,
      }),
    )
    .max(1024),
});
export type EgressPolicy = z.infer<typeof EgressPolicy>;

/** A message a send tool is about to deliver. */
export const EgressRequest = strict({
  destination: Identifier,
  /** The receipts of the outputs the message was composed from, with their classes. */
  sources: z.array(strict({ receipt_sha256: Sha256, data_class: DataClass })).max(256),
  /** The message text itself, classified as `public` plus what it shows. */
  text: z.string().max(1024 * 1024),
});
export type EgressRequest = z.infer<typeof EgressRequest>;

export type EgressViolation = 'egress_class_exceeded' | 'egress_destination_not_allowed';

export interface EgressDecision {
  readonly decision: 'allowed' | 'denied';
  /** Sorted. An unknown destination is only `egress_destination_not_allowed`: it has no maximum. */
  readonly violations: readonly EgressViolation[];
  /** The message's class: its sources' and its own text's, whichever is highest. */
  readonly data_class: DataClass;
  /** The destination's maximum, `null` when the policy does not name it. */
  readonly max_class: DataClass | null;
}

/** Decide one message (`policy` and `request` taken as `unknown`: validated here). */
export function evaluateEgress(policy: unknown, request: unknown): Result<EgressDecision, CoreError> {
  const p = EgressPolicy.safeParse(policy);
  if (!p.success) return err(fromZodError('invalid_policy', 'egress_policy', p.error));
  const r = EgressRequest.safeParse(request);
  if (!r.success) return err(fromZodError('invalid_request', 'egress', r.error));
  // A destination named twice takes its strictest maximum.
  let max: DataClass | null = null;
  for (const d of p.data.destinations) {
    if (d.destination !== r.data.destination) continue;
    max = max === null || RANK[d.max_class] < RANK[max] ? d.max_class : max;
  }
  let dataClass = classifyReadOutput(r.data.text, 'public').data_class;
  for (const s of r.data.sources) dataClass = higherClass(dataClass, s.data_class);
  const violations: EgressViolation[] = [];
  if (max === null) violations.push('egress_destination_not_allowed');
  else if (RANK[dataClass] > RANK[max]) violations.push('egress_class_exceeded');
  return ok({
    decision: violations.length === 0 ? 'allowed' : 'denied',
    violations,
    data_class: dataClass,
    max_class: max,
  });
}
