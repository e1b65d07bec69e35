// Time and freshness: completion ordering, clock skew, policy maximum age measured from the
// source time, source generations, and strict replay at the original time.
import { describe, expect, it } from 'vitest';
import { LAB_TIMES } from '../../../../src/lab/tool-loop.js';
import { verifyObservationReceipt } from '../../../../src/core/observation/replay.js';
import { TIMES, baseInput, mustValidate, violationsAfter } from './fixtures.js';

describe('observation time', () => {
  it('may equal execution completion, never precede it', () => {
    expect(
      violationsAfter((i) => {
        i.observation.observed_at_unix_ms = LAB_TIMES.completedAt;
      }),
    ).toEqual([]);
    expect(
      violationsAfter((i) => {
        i.observation.observed_at_unix_ms = LAB_TIMES.completedAt - 1;
      }),
    ).toEqual(['observed_before_completion']);
  });

  it('may lie ahead of the validator by at most the clock skew', () => {
    const ahead = (ms: number) =>
      violationsAfter((i) => {
        i.observation.observed_at_unix_ms = i.now + ms;
      });
    expect(ahead(baseInput().policy.max_clock_skew_ms)).toEqual([]);
    expect(ahead(baseInput().policy.max_clock_skew_ms + 1)).toEqual(['observed_after_evaluation']);
  });

  it('the source state cannot postdate its acquisition', () => {
    expect(
      violationsAfter((i) => {
        i.observation.source_as_of_unix_ms = i.observation.observed_at_unix_ms + 1;
      }),
    ).toEqual(['source_time_after_observation']);
  });
});

describe('freshness', () => {
  const at = (now: number) =>
    violationsAfter((i) => {
      i.now = now;
    });

  it('is measured from the source time, at the boundary of the policy maximum age', () => {
    const maxAge = baseInput().policy.max_age_ms;
    expect(at(TIMES.sourceAsOf + maxAge)).toEqual([]);
    expect(at(TIMES.sourceAsOf + maxAge + 1)).toEqual(['observation_stale']);
  });

  it('a byte-perfect cached result is still stale when its source is old', () => {
    // Acquired a moment ago, but the state it reports is an hour old.
    expect(
      violationsAfter((i) => {
        i.observation.source_as_of_unix_ms = i.now - 60 * 60_000;
      }),
    ).toEqual(['observation_stale']);
  });

  it('requires a source generation when the policy or the decision needs one', () => {
    expect(violationsAfter((i) => (i.observation.source_generation = null))).toEqual([
      'source_generation_missing',
    ]);
    expect(
      violationsAfter((i) => {
        i.observation.source_generation = null;
        i.policy.require_source_generation = false;
        i.trusted.min_source_generation = null;
      }),
    ).toEqual([]);
  });

  it('rejects a generation behind the one the decision acts on, accepts equal or newer', () => {
    expect(violationsAfter((i) => (i.trusted.min_source_generation = 8))).toEqual([
      'source_generation_stale',
    ]);
    expect(violationsAfter((i) => (i.trusted.min_source_generation = 7))).toEqual([]);
    expect(violationsAfter((i) => (i.trusted.min_source_generation = 6))).toEqual([]);
  });
});

describe('strict replay uses the original time', () => {
  it('reproduces the receipt at the original now, and a later now is a deliberate fork', () => {
    const input = baseInput();
    const receipt = mustValidate(input).receipt;
    expect(verifyObservationReceipt(receipt, input)).toEqual({ ok: true, differences: [] });
    const later = { ...input, now: input.now + input.policy.max_age_ms * 2 };
    const fork = verifyObservationReceipt(receipt, later);
    expect(fork.ok).toBe(false);
    expect(fork.differences).toEqual([
      'body.authority',
      'body.decision',
      'body.evaluated_at_unix_ms',
      'body.violations',
      'sha256',
    ]);
    expect(mustValidate(later).receipt.body.violations).toEqual(['observation_stale']);
  });
});
