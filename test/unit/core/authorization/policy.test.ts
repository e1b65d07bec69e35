import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/core/canonical/canonical.js';
import type { JsonObject, JsonValue } from '../../../../src/core/canonical/json.js';
import { DEFAULT_POLICY, parsePolicy, policyDigest } from '../../../../src/core/policy.js';

const doc = (): JsonObject => JSON.parse(JSON.stringify(DEFAULT_POLICY)) as JsonObject;

describe('tenant policy', () => {
  it('the default policy is valid and has a stable digest', () => {
    const parsed = parsePolicy(doc());
    expect(parsed.ok).toBe(true);
    expect(policyDigest(DEFAULT_POLICY)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('cannot waive approval for a write effect', () => {
    const r = parsePolicy({ ...doc(), approval_required_effects: ['external_write'] });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.reason).toBe('invalid_policy');
      expect(r.error.issues).toEqual([
        { path: 'policy.approval_required_effects', message: 'must include "irreversible"' },
      ]);
    }
  });

  it('rejects unsorted or repeated lists, unknown fields, missing fields and absurd bounds', () => {
    const bad: JsonValue[] = [
      { ...doc(), approval_required_effects: ['irreversible', 'external_write'] },
      { ...doc(), allowed_media_types: ['application/json', 'application/json'] },
      { ...doc(), allowed_media_types: ['Application/JSON'] },
      { ...doc(), extra: true },
      { ...doc(), reconciliation: { owner: 'team:sre', deadline_ms: 1, escalate: true } },
      { ...doc(), approval_max_lifetime_ms: 0 },
      { ...doc(), authorization_max_dispatch_ms: 2 * 3_600_000 },
      { ...doc(), run_budget_limits: { max_calls: 0, max_external_writes: 0, max_duration_ms: 1 } },
      { ...doc(), policy_version: 2 },
      (() => {
        const d = doc();
        delete d.observation_limits;
        return d;
      })(),
    ];
    for (const b of bad) expect(parsePolicy(b).ok, JSON.stringify(b)).toBe(false);
  });

  it('the digest does not depend on key order', () => {
    fc.assert(
      fc.property(
        fc.shuffledSubarray(Object.keys(DEFAULT_POLICY), { minLength: Object.keys(DEFAULT_POLICY).length }),
        (keys) => {
          const reordered: JsonObject = {};
          for (const k of keys) reordered[k] = (DEFAULT_POLICY as unknown as JsonObject)[k] as JsonValue;
          const parsed = parsePolicy(reordered);
          expect(parsed.ok).toBe(true);
          if (parsed.ok) expect(policyDigest(parsed.value)).toBe(policyDigest(DEFAULT_POLICY));
          expect(canonicalize(reordered)).toBe(canonicalize(DEFAULT_POLICY));
        },
      ),
    );
  });
});
