/**
 * `permittedTools` (search doors): it never lists a tool the per-call check would deny for a
 * grant dimension, and it lists every tool some live grant fully allows on the target.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { authorizeToolCall } from '../../../../src/core/authorization/authorize.js';
import { permittedTools } from '../../../../src/core/authorization/permitted.js';
import { contractDigest } from '../../../../src/core/contracts/contract.js';
import { DEFAULT_POLICY } from '../../../../src/core/policy.js';
import {
  POLICY_SHA256,
  PRINCIPAL,
  T,
  TENANT,
  buildContract,
  buildInvocation,
  buildReadOnlyContract,
  buildTrustedState,
} from '../fixtures.js';
import { grantRecord } from './state-fixtures.js';

const GRANT_DIMENSIONS = new Set([
  'tool_not_allowed',
  'effect_not_allowed',
  'capability_not_granted',
  'resource_out_of_scope',
  'resource_type_mismatch',
  'tenant_mismatch',
  'principal_mismatch',
  'policy_mismatch',
  'grant_not_yet_valid',
  'grant_expired',
]);

const caller = { tenant_id: TENANT, principal_id: PRINCIPAL, revoked: false };
const policy = { policy_sha256: POLICY_SHA256, policy: DEFAULT_POLICY };
const contracts = [buildContract(), buildReadOnlyContract()].map((contract) => ({
  tool_contract_sha256: contractDigest(contract),
  contract,
  quarantined: false,
}));

describe('permittedTools', () => {
  it('lists both tools for Alice on api/production, with approval needed for the write', () => {
    const out = permittedTools({
      caller,
      policy,
      contracts,
      grants: [grantRecord()],
      target: { type: 'deployment', attributes: { environment: 'production', service: 'api' } },
      now: T.now,
    });
    expect(out.map((t) => [t.tool_name, t.approval_required])).toEqual([
      ['execute_rollback', true],
      ['get_deployment', false],
    ]);
  });

  it('lists nothing for a revoked caller, a quarantined contract, or only revoked grants', () => {
    const target = { type: 'deployment', attributes: { environment: 'production', service: 'api' } };
    const base = { caller, policy, contracts, grants: [grantRecord()], target, now: T.now };
    expect(permittedTools({ ...base, caller: { ...caller, revoked: true } })).toEqual([]);
    expect(permittedTools({ ...base, grants: [grantRecord({}, true)] })).toEqual([]);
    expect(
      permittedTools({ ...base, contracts: contracts.map((c) => ({ ...c, quarantined: true })) }),
    ).toEqual([]);
  });

  it('never lists a tool the per-call check denies for a grant dimension (property)', () => {
    const attr = fc.constantFrom('api', 'billing', 'production', 'staging');
    fc.assert(
      fc.property(
        fc.record({
          tools: fc.subarray(['execute_rollback', 'get_deployment']),
          effects: fc.subarray(['external_write', 'read_only'] as const),
          caps: fc.subarray(['deployment:read', 'deployment:rollback']),
          services: fc.subarray(['api', 'billing'], { minLength: 1 }),
          envs: fc.subarray(['production', 'staging'], { minLength: 1 }),
          expired: fc.boolean(),
        }),
        attr,
        attr,
        (g, service, environment) => {
          const scope = [{ type: 'deployment', attributes: { environment: g.envs, service: g.services } }];
          const grant = grantRecord({
            allowed_tools: g.tools,
            allowed_effects: [...g.effects],
            capabilities: g.caps.map((capability) => ({ capability, resources: scope })),
            ...(g.expired ? { expires_at_unix_ms: T.now } : {}),
          });
          const target = { type: 'deployment', attributes: { environment, service } };
          const listed = permittedTools({ caller, policy, contracts, grants: [grant], target, now: T.now });
          for (const c of contracts) {
            const input = { service, environment, from_version: 'v42', to_version: 'v41' };
            const inv = buildInvocation(c.contract, input);
            const r = authorizeToolCall(c.contract, grant.grant, inv, T.now, buildTrustedState());
            if (!r.ok) throw new Error(r.error.message);
            const grantDenies = r.value.body.violations.some((v) => GRANT_DIMENSIONS.has(v));
            const isListed = listed.some((t) => t.tool_contract_sha256 === c.tool_contract_sha256);
            expect(isListed).toBe(!grantDenies);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
