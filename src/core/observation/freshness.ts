/**
 * Freshness and time ordering of an observation (spec ch. 12, "Time and freshness are domain
 * properties").
 *
 * Guarantees: freshness is measured from `source_as_of_unix_ms` (when the source state was
 * current), not from acquisition or validation; age is evaluated against the `now` passed in, so
 * strict replay with the original `now` reproduces the original decision and re-evaluation under
 * a newer `now` is an explicit fork; a required source generation is never assumed when absent.
 * Never: reads a clock, or treats a byte-perfect digest as proof of currency.
 */
import type { ObservationPolicy, ObservationTrustedContext, ObservationViolation } from './schema.js';

export interface FreshnessFacts {
  readonly source_as_of_unix_ms: number;
  readonly source_generation: number | null;
  readonly observed_at_unix_ms: number;
}

export function checkFreshness(
  facts: FreshnessFacts,
  policy: ObservationPolicy,
  trusted: ObservationTrustedContext,
  now: number,
): ObservationViolation[] {
  const v = new Set<ObservationViolation>();
  // A source state dated after the acquisition that returned it is fabricated or mis-clocked.
  if (facts.source_as_of_unix_ms > facts.observed_at_unix_ms) v.add('source_time_after_observation');
  // An observation dated after its own validation (beyond clock skew) claims a future that has not happened.
  if (facts.observed_at_unix_ms > now + policy.max_clock_skew_ms) v.add('observed_after_evaluation');
  // Authentic, byte-perfect, and too old for the decision (a cached deployment state).
  if (now - facts.source_as_of_unix_ms > policy.max_age_ms) v.add('observation_stale');
  const needsGeneration = policy.require_source_generation || trusted.min_source_generation !== null;
  // A missing generation cannot be assumed current.
  if (needsGeneration && facts.source_generation === null) v.add('source_generation_missing');
  // A replica or cache behind the generation the decision acts on.
  if (
    trusted.min_source_generation !== null &&
    facts.source_generation !== null &&
    facts.source_generation < trusted.min_source_generation
  ) {
    v.add('source_generation_stale');
  }
  return [...v].sort();
}
