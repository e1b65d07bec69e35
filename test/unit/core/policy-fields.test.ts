/**
 * Issue 9, finding 5: the policy fields added to version 1 (`approval_request_ttl_ms`,
 * `run_budget_limits.max_open_runs_per_principal`) are optional, so every stored version 1
 * document still parses to itself and keeps its digest; their absence means fixed defaults.
 */
import { describe, expect, it } from 'vitest';
import { DEMO_POLICY } from '../../../scripts/seed.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import {
  approvalRequestTtlMs,
  DEFAULT_POLICY,
  maxOpenRunsPerPrincipal,
  parsePolicy,
  POLICY_V1_DEFAULTS,
  policyDigest,
} from '../../../src/core/policy.js';

describe('policy version 1 with the new optional fields', () => {
  it('the default policy keeps the digest it had before the fields were added', () => {
    expect(policyDigest(DEFAULT_POLICY)).toBe(
      '2336871518bc9a5b2b0c0e4142c5fac58fe05a60da72118f4b438569f2a49d14',
    );
  });

  it('a stored document without the fields parses to itself, with the same digest, and the defaults apply', () => {
    for (const doc of [DEMO_POLICY, DEFAULT_POLICY]) {
      const r = parsePolicy(JSON.parse(JSON.stringify(doc)));
      expect(r.ok).toBe(true);
      if (!r.ok) continue;
      expect(r.value).toStrictEqual(JSON.parse(JSON.stringify(doc)));
      expect(policyDigest(r.value)).toBe(digestOf(doc));
      expect(approvalRequestTtlMs(r.value)).toBe(POLICY_V1_DEFAULTS.approval_request_ttl_ms);
      expect(maxOpenRunsPerPrincipal(r.value)).toBe(POLICY_V1_DEFAULTS.max_open_runs_per_principal);
    }
  });

  it('a document with the fields enforces them and has a digest of its own', () => {
    const doc = {
      ...DEMO_POLICY,
      approval_request_ttl_ms: 60_000,
      run_budget_limits: { ...DEMO_POLICY.run_budget_limits, max_open_runs_per_principal: 3 },
    };
    const r = parsePolicy(JSON.parse(JSON.stringify(doc)));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(approvalRequestTtlMs(r.value)).toBe(60_000);
    expect(maxOpenRunsPerPrincipal(r.value)).toBe(3);
    expect(policyDigest(r.value)).not.toBe(digestOf(DEMO_POLICY));
  });

  it('out-of-range values are refused', () => {
    for (const doc of [
      { ...DEMO_POLICY, approval_request_ttl_ms: 0 },
      { ...DEMO_POLICY, approval_request_ttl_ms: 31 * 24 * 3600_000 },
      { ...DEMO_POLICY, approval_request_ttl_ms: null },
      {
        ...DEMO_POLICY,
        run_budget_limits: { ...DEMO_POLICY.run_budget_limits, max_open_runs_per_principal: 0 },
      },
      {
        ...DEMO_POLICY,
        run_budget_limits: { ...DEMO_POLICY.run_budget_limits, max_open_runs_per_principal: 1001 },
      },
    ]) {
      const r = parsePolicy(JSON.parse(JSON.stringify(doc)));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.reason).toBe('invalid_policy');
    }
  });
});
