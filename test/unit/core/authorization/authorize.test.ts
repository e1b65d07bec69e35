/// <reference types="vite/client" />
/**
 * `authorizeToolCall`: every check with an ordinary, a boundary and a mutation case; the receipt it
 * binds; the malformed inputs it refuses to evaluate; and the data-driven decision cases in
 * `test/data/decisions/*.json` (which run the whole pipeline, execution included).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  authorizeToolCall,
  selectorMatches,
  validateGrant,
} from '../../../../src/core/authorization/authorize.js';
import { canonicalize, digestOf } from '../../../../src/core/canonical/canonical.js';
import { contractDigest, pinContract } from '../../../../src/core/contracts/contract.js';
import { deepFreeze } from '../../../../src/core/canonical/digest-cache.js';
import { decodeJsonText } from '../../../../src/core/canonical/json.js';
import {
  AUTHORIZATION_VIOLATIONS,
  AuthorizationReceipt,
  EMPTY_TRUSTED_STATE,
  EXECUTION_OUTCOMES,
  EXECUTION_VIOLATIONS,
  ToolContract,
  ToolGrant,
  ToolInvocation,
} from '../../../../src/core/model.js';
import { verifyAuthorizationReceipt } from '../../../../src/core/receipts/replay.js';
import {
  APPROVER,
  LIMITS,
  OTHER_TENANT,
  type PatchOp,
  PRINCIPAL,
  READ_TOOL,
  type Scenario,
  T,
  TOOL,
  UNRELATED_SHA256,
  applyPatch,
  authorize,
  buildContract,
  buildGrant,
  buildInvocation,
  buildObservation,
  buildReadOnlyScenario,
  buildScenario,
  mustAuthorize,
  rebind,
  runPipeline,
} from '../fixtures.js';

/** The decision body for the baseline scenario after `mutate`. */
function decide(mutate: (s: Scenario) => void = () => {}, base: () => Scenario = buildScenario) {
  const s = base();
  mutate(s);
  return mustAuthorize(s).body;
}
const violationsOf = (mutate: (s: Scenario) => void, base: () => Scenario = buildScenario) =>
  decide(mutate, base).violations;

function approvalOf(s: Scenario) {
  if (s.invocation.approval === null) throw new Error('fixture has no approval');
  return s.invocation.approval;
}

/** Selector of capability `i`, selector `j` of a grant. */
function selector(g: ToolGrant, i: number, j = 0) {
  const sel = g.capabilities[i]?.resources[j];
  if (sel === undefined) throw new Error(`no selector ${i}/${j}`);
  return sel;
}

/** Scope both capabilities of the grant to `attributes`. */
function scopeAll(s: Scenario, attributes: Record<string, string[]>) {
  for (const c of s.grant.capabilities)
    c.resources = [{ type: 'deployment', attributes: structuredClone(attributes) }];
}

describe('baseline', () => {
  it('authorizes the reviewed rollback with no violations', () => {
    const body = decide();
    expect(body.decision).toBe('authorized');
    expect(body.violations).toEqual([]);
  });

  it('binds the exact contract, grant, invocation and trusted-state digests', () => {
    const s = buildScenario();
    const r = mustAuthorize(s);
    expect(r.sha256).toBe(digestOf(r.body));
    expect(r.body).toEqual({
      receipt_kind: 'authorization',
      receipt_version: 1,
      tenant_id: 'acme',
      principal_id: PRINCIPAL,
      policy_sha256: s.invocation.policy_sha256,
      tool_contract_sha256: contractDigest(s.contract),
      grant_sha256: digestOf(s.grant),
      invocation_sha256: digestOf(s.invocation),
      trusted_state_sha256: digestOf(s.trusted),
      invocation_id: s.invocation.invocation_id,
      run_envelope_sha256: s.invocation.run_envelope_sha256,
      input_sha256: s.invocation.input_sha256,
      input_bytes: s.invocation.input_bytes,
      effect: 'external_write',
      target: { type: 'deployment', attributes: { environment: 'production', service: 'api' } },
      idempotency_key: s.invocation.idempotency_key,
      approval_id: 'approval-0001',
      requested_at_unix_ms: T.requestedAt,
      evaluated_at_unix_ms: T.now,
      decision: 'authorized',
      violations: [],
    });
    expect(AuthorizationReceipt.safeParse(r).success).toBe(true);
  });

  it('a change to any bound input changes the receipt identity, even when still authorized', () => {
    const base = mustAuthorize(buildScenario()).sha256;
    const edits: ((s: Scenario) => void)[] = [
      (s) => (s.grant.grant_id = 'grant-acme-ops-0002'),
      (s) => (s.invocation.invocation_id = 'invocation-0002'),
      (s) => (s.trusted.approval_required_effects = ['read_only']),
      (s) => (s.now += 1),
    ];
    for (const edit of edits) {
      const s = buildScenario();
      edit(s);
      const r = mustAuthorize(s);
      expect(r.body.decision).toBe('authorized');
      expect(r.sha256).not.toBe(base);
    }
  });

  it('the read-only tool needs no approval and no idempotency key', () => {
    const body = decide(() => {}, buildReadOnlyScenario);
    expect(body).toMatchObject({
      decision: 'authorized',
      effect: 'read_only',
      approval_id: null,
      idempotency_key: null,
    });
  });

  it('omitting trusted state is the same as passing the empty trusted state', () => {
    const s = buildScenario();
    const implicit = authorizeToolCall(s.contract, s.grant, s.invocation, s.now);
    const explicit = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, EMPTY_TRUSTED_STATE);
    expect(implicit).toEqual(explicit);
  });
});

describe('a denial is a value', () => {
  it('returns ok with a denied receipt, never an error', () => {
    const s = buildScenario();
    s.grant.allowed_tools = [];
    const r = authorize(s);
    expect(r.ok).toBe(true);
    if (r.ok) {
      expect(r.value.body.decision).toBe('denied');
      expect(r.value.body.violations).toEqual(['tool_not_allowed']);
      expect(r.value.sha256).toBe(digestOf(r.value.body));
      expect(AuthorizationReceipt.safeParse(r.value).success).toBe(true);
    }
  });

  it('accumulates every failed check, sorted and de-duplicated', () => {
    const body = decide((s) => {
      s.grant.allowed_tools = ['get_deployment'];
      s.grant.allowed_effects = ['read_only'];
      // deployment:rollback missing, deployment:read held but for another service.
      s.grant.capabilities = [
        {
          capability: 'deployment:read',
          resources: [{ type: 'deployment', attributes: { service: ['web'] } }],
        },
      ];
      s.invocation.target.attributes.region = 'eu';
      s.grant.tenant_id = OTHER_TENANT;
      s.grant.policy_sha256 = UNRELATED_SHA256;
      s.grant.principal_id = 'user:mallory@acme';
      s.invocation.tool_contract_sha256 = UNRELATED_SHA256;
      s.invocation.input_bytes = LIMITS.maxInputBytes + 1;
      s.invocation.idempotency_key = null;
      const a = approvalOf(s);
      a.tenant_id = OTHER_TENANT;
      a.policy_sha256 = UNRELATED_SHA256;
      a.tool_contract_sha256 = UNRELATED_SHA256;
      a.input_sha256 = UNRELATED_SHA256;
      a.effect = 'irreversible';
      a.expires_at_unix_ms = T.now;
      a.approver_principal_id = PRINCIPAL;
      s.now = T.grantExpiresAt;
      s.trusted = {
        approval_required_effects: ['read_only'],
        contract_quarantined: true,
        grant_revoked: true,
        approval_unusable: true,
        run_violations: ['run_write_budget_spent', 'run_expired', 'run_unknown', 'run_call_budget_spent'],
        principal_revoked: true,
      };
    });
    // Every code except the three that contradict codes present (input_empty vs input_too_large,
    // approval_missing vs an approval presented, grant_not_yet_valid vs grant_expired), sorted, each once.
    // The named-identity codes exist only in version 2 receipts (options name the identities).
    const contradicted = new Set([
      'input_empty',
      'approval_missing',
      'grant_not_yet_valid',
      'named_principal_mismatch',
      'named_tenant_mismatch',
    ]);
    const expected = AUTHORIZATION_VIOLATIONS.filter((c) => !contradicted.has(c));
    expect(body.decision).toBe('denied');
    expect(body.violations).toEqual([...expected].sort());
  });

  it('the violation order is the sorted code order, whatever order the checks fail in', () => {
    const body = decide((s) => {
      s.trusted.run_violations = ['run_unknown', 'run_call_budget_spent'];
      s.invocation.input_bytes = 0;
    });
    expect(body.violations).toEqual(['input_empty', 'run_call_budget_spent', 'run_unknown']);
    expect([...body.violations].sort()).toEqual(body.violations);
  });

  it('every code the core can emit is a documented violation', () => {
    expect(new Set(AUTHORIZATION_VIOLATIONS).size).toBe(AUTHORIZATION_VIOLATIONS.length);
  });
});

describe('tool membership', () => {
  it('ordinary: a grant without the tool denies', () => {
    expect(violationsOf((s) => (s.grant.allowed_tools = [READ_TOOL]))).toEqual(['tool_not_allowed']);
  });
  it('boundary: a grant listing only this tool authorizes; an empty list denies', () => {
    expect(violationsOf((s) => (s.grant.allowed_tools = [TOOL]))).toEqual([]);
    expect(violationsOf((s) => (s.grant.allowed_tools = []))).toEqual(['tool_not_allowed']);
  });
  it.each(['execute_rollback_admin', 'execute_rollbac', 'EXECUTE_ROLLBACK', 'execute_rollback '])(
    'mutation: tool names compare exactly (allowed %j)',
    (allowed) => {
      expect(violationsOf((s) => (s.grant.allowed_tools = [allowed]))).toEqual(['tool_not_allowed']);
    },
  );
  it('mutation: a reviewed contract renamed to an unlisted tool is denied even with every capability', () => {
    const body = decide((s) => {
      s.contract.tool_name = 'execute_rollback_v2';
      rebind(s, { reapprove: true });
    });
    expect(body.violations).toEqual(['tool_not_allowed']);
  });
});

describe('effect membership', () => {
  it('ordinary: a grant for reads only denies a write', () => {
    expect(violationsOf((s) => (s.grant.allowed_effects = ['read_only']))).toEqual(['effect_not_allowed']);
  });
  it('boundary: exactly the contract effect authorizes; no effects deny', () => {
    expect(violationsOf((s) => (s.grant.allowed_effects = ['external_write']))).toEqual([]);
    expect(violationsOf((s) => (s.grant.allowed_effects = []))).toEqual(['effect_not_allowed']);
  });
  it('mutation: allowing a stronger effect does not allow a weaker one (no effect ordering)', () => {
    expect(violationsOf((s) => (s.grant.allowed_effects = ['irreversible', 'creates_draft']))).toEqual([
      'effect_not_allowed',
    ]);
  });
  it('mutation: a read tool re-declared as a write is denied under the read grant', () => {
    const body = decide((s) => {
      s.grant.allowed_effects = ['read_only'];
      s.contract.effect = 'external_write';
      s.contract.idempotency = 'key_required';
      s.invocation.idempotency_key = 'acme:get_deployment:0001';
      rebind(s);
    }, buildReadOnlyScenario);
    expect(body.violations).toEqual(['approval_missing', 'effect_not_allowed']);
  });
});

describe('required capabilities', () => {
  it.each(['deployment:read', 'deployment:rollback'])('ordinary: missing %s denies', (cap) => {
    expect(
      violationsOf((s) => (s.grant.capabilities = s.grant.capabilities.filter((c) => c.capability !== cap))),
    ).toEqual(['capability_not_granted']);
  });
  it('boundary: no capabilities at all yields one code; an extra capability is harmless', () => {
    expect(violationsOf((s) => (s.grant.capabilities = []))).toEqual(['capability_not_granted']);
    expect(
      violationsOf((s) =>
        s.grant.capabilities.push({
          capability: 'deployment:delete',
          resources: [{ type: 'deployment', attributes: { service: ['web'] } }],
        }),
      ),
    ).toEqual([]);
  });
  it('mutation: a similar capability does not stand in for the required one', () => {
    const body = decide((s) => {
      const c = s.grant.capabilities[1];
      if (c) c.capability = 'deployment:rollbacks';
    });
    expect(body.violations).toEqual(['capability_not_granted']);
  });
  it('mutation: holding the write capability does not cover the supporting read', () => {
    expect(violationsOf((s) => s.grant.capabilities.shift())).toEqual(['capability_not_granted']);
  });
});

describe('resource scope', () => {
  it('ordinary: a grant for service web does not reach service api', () => {
    expect(violationsOf((s) => scopeAll(s, { environment: ['production'], service: ['web'] }))).toEqual([
      'resource_out_of_scope',
    ]);
  });
  it('ordinary: a grant for api does not reach a web target (input names the target)', () => {
    const body = decide((s) => {
      s.input.service = 'web';
      rebind(s, { reapprove: true });
    });
    expect(body.target.attributes.service).toBe('web');
    expect(body.violations).toEqual(['resource_out_of_scope']);
  });
  it('ordinary: staging does not reach production', () => {
    expect(violationsOf((s) => scopeAll(s, { environment: ['staging'], service: ['api'] }))).toEqual([
      'resource_out_of_scope',
    ]);
  });
  it('one capability out of scope is enough to deny', () => {
    expect(
      violationsOf((s) => {
        selector(s.grant, 1).attributes.environment = ['staging'];
      }),
    ).toEqual(['resource_out_of_scope']);
  });
  it.each([
    ['api', 'api-internal', 'service'],
    ['prod', 'production', 'environment'],
    ['production', 'prod', 'environment'],
    ['api', 'API', 'service'],
    ['api', 'ap', 'service'],
  ])('mutation: allowed %j never matches target %j (no prefix or case folding)', (allowed, target, attr) => {
    const body = decide((s) => {
      scopeAll(s, { environment: ['production'], service: ['api'], [attr]: [allowed] });
      s.input[attr] = target;
      rebind(s, { reapprove: true });
    });
    expect(body.target.attributes[attr]).toBe(target);
    expect(body.violations).toEqual(['resource_out_of_scope']);
  });
  it('boundary: the target value anywhere in the allowed set matches', () => {
    expect(
      violationsOf((s) => scopeAll(s, { environment: ['staging', 'production'], service: ['web', 'api'] })),
    ).toEqual([]);
  });
  it('boundary: any one matching selector among several matches', () => {
    expect(
      violationsOf((s) => {
        for (const c of s.grant.capabilities) {
          c.resources = [
            { type: 'deployment', attributes: { environment: ['staging'], service: ['api'] } },
            { type: 'deployment', attributes: { environment: ['production'], service: ['api'] } },
          ];
        }
      }),
    ).toEqual([]);
  });
  it('mutation: a selector with an extra attribute does not match', () => {
    expect(
      violationsOf((s) => scopeAll(s, { environment: ['production'], region: ['eu'], service: ['api'] })),
    ).toEqual(['resource_out_of_scope']);
  });
  it('mutation: a selector missing an attribute does not match (no implicit wildcard)', () => {
    expect(violationsOf((s) => scopeAll(s, { service: ['api'] }))).toEqual(['resource_out_of_scope']);
  });
  it('mutation: a target with an extra attribute is the wrong shape', () => {
    expect(violationsOf((s) => (s.invocation.target.attributes.region = 'eu'))).toEqual([
      'resource_out_of_scope',
      'resource_type_mismatch',
    ]);
  });
  it('mutation: a target missing an attribute is the wrong shape', () => {
    expect(violationsOf((s) => delete s.invocation.target.attributes.environment)).toEqual([
      'resource_out_of_scope',
      'resource_type_mismatch',
    ]);
  });
  it('mutation: a target with a renamed attribute (same count) is the wrong shape', () => {
    expect(
      violationsOf((s) => (s.invocation.target.attributes = { env: 'production', service: 'api' })),
    ).toEqual(['resource_out_of_scope', 'resource_type_mismatch']);
  });
  it('mutation: a target of another type is the wrong shape, even when a selector matches it', () => {
    const body = decide((s) => {
      s.invocation.target.type = 'database';
      s.grant.capabilities.push({
        capability: 'database:rollback',
        resources: [{ type: 'database', attributes: { environment: ['production'], service: ['api'] } }],
      });
    });
    expect(body.violations).toEqual(['resource_out_of_scope', 'resource_type_mismatch']);
  });
  it('mutation: a wrong-shape target with matching selectors is still out of scope', () => {
    // The selector was widened to the forged shape: the shape check alone still refuses it.
    const body = decide((s) => {
      s.invocation.target.attributes.region = 'eu';
      scopeAll(s, { environment: ['production'], region: ['eu'], service: ['api'] });
    });
    expect(body.violations).toEqual(['resource_out_of_scope', 'resource_type_mismatch']);
  });
  it('a read-only contract that requires no capability is not resource-scoped (only shape-checked)', () => {
    // Documents current behaviour: with no required capability there is no selector to intersect.
    const body = decide((s) => {
      s.contract.required_capabilities = [];
      s.grant.capabilities = [];
      s.input.service = 'web';
      rebind(s);
    }, buildReadOnlyScenario);
    expect(body.violations).toEqual([]);
  });

  describe('selectorMatches', () => {
    const target = { type: 'deployment', attributes: { environment: 'production', service: 'api' } };
    it.each([
      [{ environment: ['production'], service: ['api'] }, true],
      [{ environment: ['production'], service: ['api', 'web'] }, true],
      [{ environment: ['production'], service: ['web'] }, false],
      [{ environment: ['production'] }, false],
      [{ environment: ['production'], service: ['api'], region: ['eu'] }, false],
      [{ environment: ['production'], services: ['api'] }, false],
      [{ environment: ['prod'], service: ['api'] }, false],
    ])('%j -> %s', (attributes, expected) => {
      expect(selectorMatches({ type: 'deployment', attributes }, target)).toBe(expected);
    });
    it('compares the type', () => {
      expect(
        selectorMatches(
          { type: 'database', attributes: { environment: ['production'], service: ['api'] } },
          target,
        ),
      ).toBe(false);
    });
    it('does not find attribute names on the prototype chain', () => {
      const t = { type: 'deployment', attributes: { environment: 'production', service: 'api' } };
      expect(
        selectorMatches({ type: 'deployment', attributes: { constructor: ['x'], service: ['api'] } }, t),
      ).toBe(false);
    });
  });
});

describe('tenant, principal and policy', () => {
  it('ordinary: a grant for another tenant denies', () => {
    expect(violationsOf((s) => (s.grant.tenant_id = OTHER_TENANT))).toEqual(['tenant_mismatch']);
  });
  it('mutation: an invocation for another tenant also breaks the approval tenant binding', () => {
    expect(violationsOf((s) => (s.invocation.tenant_id = OTHER_TENANT))).toEqual([
      'approval_tenant_mismatch',
      'tenant_mismatch',
    ]);
  });
  it('boundary: tenants compare exactly (no case folding)', () => {
    expect(violationsOf((s) => (s.grant.tenant_id = 'ACME'))).toEqual(['tenant_mismatch']);
  });
  it('ordinary: the grant of another principal does not cover this one', () => {
    expect(violationsOf((s) => (s.invocation.principal_id = 'user:mallory@acme'))).toEqual([
      'principal_mismatch',
    ]);
  });
  it('ordinary: a grant compiled under another policy denies', () => {
    expect(violationsOf((s) => (s.grant.policy_sha256 = UNRELATED_SHA256))).toEqual(['policy_mismatch']);
  });
  it('mutation: an invocation under another policy also breaks the approval policy binding', () => {
    expect(violationsOf((s) => (s.invocation.policy_sha256 = UNRELATED_SHA256))).toEqual([
      'approval_policy_mismatch',
      'policy_mismatch',
    ]);
  });
});

describe('grant validity window [not_before, expires_at)', () => {
  it('boundary: not_before == now is valid', () => {
    expect(violationsOf((s) => (s.grant.not_before_unix_ms = s.now))).toEqual([]);
  });
  it('boundary: not_before == now + 1 is not yet valid', () => {
    expect(violationsOf((s) => (s.grant.not_before_unix_ms = s.now + 1))).toEqual(['grant_not_yet_valid']);
  });
  it('ordinary: evaluated before the grant starts', () => {
    expect(violationsOf((s) => (s.now = T.grantNotBefore - 1))).toEqual(['grant_not_yet_valid']);
  });
  it('boundary: expires_at == now + 1 is still valid', () => {
    expect(violationsOf((s) => (s.grant.expires_at_unix_ms = s.now + 1))).toEqual([]);
  });
  it('boundary: expires_at == now is expired', () => {
    expect(violationsOf((s) => (s.grant.expires_at_unix_ms = s.now))).toEqual(['grant_expired']);
  });
  it('mutation: a plan evaluated after the grant (and approval) expired', () => {
    expect(violationsOf((s) => (s.now = T.grantExpiresAt))).toEqual(['approval_expired', 'grant_expired']);
  });
});

describe('contract identity', () => {
  it('ordinary: an invocation pinned to another contract digest is denied', () => {
    expect(violationsOf((s) => (s.invocation.tool_contract_sha256 = UNRELATED_SHA256))).toEqual([
      'contract_mismatch',
    ]);
  });
  it('mutation: a contract changed after the proposal and approval (executor drift) is denied', () => {
    expect(violationsOf((s) => (s.contract.executor_release = 'rollback-executor 1.5.0'))).toEqual([
      'approval_contract_mismatch',
      'contract_mismatch',
    ]);
  });
  it('boundary: an equal contract built separately has the same identity', () => {
    expect(violationsOf((s) => (s.contract = pinContract(buildContract())))).toEqual([]);
  });
});

describe('input byte bound', () => {
  it('boundary: input_bytes == max_input_bytes is allowed', () => {
    expect(violationsOf((s) => (s.invocation.input_bytes = LIMITS.maxInputBytes))).toEqual([]);
  });
  it('boundary: max_input_bytes + 1 is denied', () => {
    expect(violationsOf((s) => (s.invocation.input_bytes = LIMITS.maxInputBytes + 1))).toEqual([
      'input_too_large',
    ]);
  });
  it('mutation: a contract bound tightened to exactly the input size allows it, one byte less denies', () => {
    const size = buildInvocation().input_bytes;
    const at = (max: number) =>
      violationsOf((s) => {
        s.contract.max_input_bytes = max;
        rebind(s, { reapprove: true });
      });
    expect(at(size)).toEqual([]);
    expect(at(size - 1)).toEqual(['input_too_large']);
  });
  it('boundary: an empty input is denied, one byte is allowed', () => {
    expect(violationsOf((s) => (s.invocation.input_bytes = 0))).toEqual(['input_empty']);
    expect(violationsOf((s) => (s.invocation.input_bytes = 1))).toEqual([]);
  });
});

describe('idempotency key', () => {
  it('ordinary: an external write without a key is denied', () => {
    expect(violationsOf((s) => (s.invocation.idempotency_key = null))).toEqual(['idempotency_key_missing']);
  });
  it('mutation: an irreversible write without a key is denied', () => {
    const body = decide((s) => {
      s.contract.effect = 'irreversible';
      s.contract.reversible = false;
      s.grant.allowed_effects.push('irreversible');
      rebind(s, { reapprove: true });
      s.invocation.idempotency_key = null;
    });
    expect(body.violations).toEqual(['idempotency_key_missing']);
  });
  it('boundary: a read-only call needs no key, and an unneeded key is harmless', () => {
    expect(violationsOf(() => {}, buildReadOnlyScenario)).toEqual([]);
    expect(
      violationsOf((s) => (s.invocation.idempotency_key = 'acme:get:00000001'), buildReadOnlyScenario),
    ).toEqual([]);
  });
});

describe('approval requirement', () => {
  it('ordinary: an external write without approval is denied', () => {
    expect(violationsOf((s) => (s.invocation.approval = null))).toEqual(['approval_missing']);
  });
  it('mutation: an irreversible write without approval is denied', () => {
    const body = decide((s) => {
      s.contract.effect = 'irreversible';
      s.contract.reversible = false;
      s.grant.allowed_effects.push('irreversible');
      rebind(s, { reapprove: true });
      s.invocation.approval = null;
    });
    expect(body.violations).toEqual(['approval_missing']);
  });
  it('boundary: a read and a draft need no approval by default', () => {
    expect(violationsOf(() => {}, buildReadOnlyScenario)).toEqual([]);
    const draft = decide((s) => {
      s.contract.effect = 'creates_draft';
      s.grant.allowed_effects.push('creates_draft');
      rebind(s);
      s.invocation.approval = null;
    });
    expect(draft.violations).toEqual([]);
  });
  it('mutation: tenant policy can put a read behind approval (trusted state)', () => {
    expect(
      violationsOf((s) => (s.trusted.approval_required_effects = ['read_only']), buildReadOnlyScenario),
    ).toEqual(['approval_missing']);
  });
  it('trusted state cannot lift the approval requirement of a write', () => {
    expect(
      violationsOf((s) => {
        s.trusted.approval_required_effects = [];
        s.invocation.approval = null;
      }),
    ).toEqual(['approval_missing']);
  });
});

describe('approval binding', () => {
  it.each<[string, string, (s: Scenario) => unknown]>([
    ['tenant', 'approval_tenant_mismatch', (s: Scenario) => (approvalOf(s).tenant_id = OTHER_TENANT)],
    ['policy', 'approval_policy_mismatch', (s: Scenario) => (approvalOf(s).policy_sha256 = UNRELATED_SHA256)],
    [
      'contract',
      'approval_contract_mismatch',
      (s: Scenario) => (approvalOf(s).tool_contract_sha256 = UNRELATED_SHA256),
    ],
    [
      'input digest',
      'approval_input_mismatch',
      (s: Scenario) => (approvalOf(s).input_sha256 = UNRELATED_SHA256),
    ],
    ['effect', 'approval_effect_mismatch', (s: Scenario) => (approvalOf(s).effect = 'creates_draft')],
    ['expiry', 'approval_expired', (s: Scenario) => (approvalOf(s).expires_at_unix_ms = s.now)],
    [
      'approver',
      'approval_self_approved',
      (s: Scenario) => (approvalOf(s).approver_principal_id = PRINCIPAL),
    ],
  ])('mutation: an approval bound to another %s is refused (%s)', (_field, code, mutate) => {
    expect(violationsOf(mutate)).toEqual([code]);
  });
  it('boundary: an approval expiring at now + 1 is still valid; at now it has expired', () => {
    expect(violationsOf((s) => (approvalOf(s).expires_at_unix_ms = s.now + 1))).toEqual([]);
    expect(violationsOf((s) => (approvalOf(s).expires_at_unix_ms = s.now))).toEqual(['approval_expired']);
  });
  it('ordinary: changing the arguments after approval (post-approval repair) is refused', () => {
    const body = decide((s) => {
      s.input.to_version = 'v40';
      rebind(s);
    });
    expect(body.violations).toEqual(['approval_input_mismatch']);
  });
  it('ordinary: a re-reviewed contract needs a new approval', () => {
    const body = decide((s) => {
      s.contract.timeout_ms = 60_000;
      rebind(s);
    });
    expect(body.violations).toEqual(['approval_contract_mismatch']);
  });
  it('boundary: any distinct approver is independent; only the requesting principal is self-approval', () => {
    expect(violationsOf((s) => (approvalOf(s).approver_principal_id = 'user:carol@acme'))).toEqual([]);
    expect(violationsOf((s) => (approvalOf(s).approver_principal_id = APPROVER))).toEqual([]);
  });
  it('mutation: an approval is checked even where none is required (tampering evidence)', () => {
    const body = decide((s) => {
      s.invocation.approval = { ...approvalOf(buildScenario()), input_sha256: UNRELATED_SHA256 };
    }, buildReadOnlyScenario);
    expect(body.violations).toEqual([
      'approval_contract_mismatch',
      'approval_effect_mismatch',
      'approval_input_mismatch',
    ]);
  });
  it('an approval marked unusable by trusted state (consumed or denied) is refused', () => {
    expect(violationsOf((s) => (s.trusted.approval_unusable = true))).toEqual(['approval_unusable']);
  });
  it('approval_unusable applies only to a presented approval', () => {
    expect(
      violationsOf((s) => {
        s.trusted.approval_unusable = true;
        s.invocation.approval = null;
      }),
    ).toEqual(['approval_missing']);
    expect(violationsOf((s) => (s.trusted.approval_unusable = true), buildReadOnlyScenario)).toEqual([]);
  });
});

describe('trusted state', () => {
  it.each<[string, (s: Scenario) => unknown]>([
    ['contract_quarantined', (s: Scenario) => (s.trusted.contract_quarantined = true)],
    ['grant_revoked', (s: Scenario) => (s.trusted.grant_revoked = true)],
    ['principal_revoked', (s: Scenario) => (s.trusted.principal_revoked = true)],
  ])('%s denies', (code, mutate) => {
    expect(violationsOf(mutate)).toEqual([code]);
  });
  it.each(['run_unknown', 'run_expired', 'run_call_budget_spent', 'run_write_budget_spent'] as const)(
    'run violation %s is carried into the receipt',
    (code) => {
      expect(violationsOf((s) => (s.trusted.run_violations = [code]))).toEqual([code]);
    },
  );
  it('the trusted state is bound into the receipt', () => {
    const a = decide();
    const b = decide((s) => (s.trusted.approval_required_effects = ['creates_draft']));
    expect(b.decision).toBe('authorized');
    expect(b.trusted_state_sha256).not.toBe(a.trusted_state_sha256);
  });
});

describe('malformed inputs are not evaluated', () => {
  function errorOf(mutate: (s: Scenario) => void) {
    const s = buildScenario();
    mutate(s);
    const r = authorize(s);
    if (r.ok) throw new Error(`expected an error, got ${r.value.body.decision}`);
    return r.error;
  }

  it.each([
    [
      'expires_at == not_before',
      (g: ToolGrant) => (g.expires_at_unix_ms = g.not_before_unix_ms),
      'grant.expires_at_unix_ms',
    ],
    [
      'expires_at < not_before',
      (g: ToolGrant) => (g.expires_at_unix_ms = g.not_before_unix_ms - 1),
      'grant.expires_at_unix_ms',
    ],
    ['a duplicate tool', (g: ToolGrant) => g.allowed_tools.push(TOOL), 'grant.allowed_tools'],
    ['a duplicate effect', (g: ToolGrant) => g.allowed_effects.push('read_only'), 'grant.allowed_effects'],
    [
      'a duplicate capability',
      (g: ToolGrant) => g.capabilities.push(structuredClone(g.capabilities[0]!)),
      'grant.capabilities',
    ],
    [
      'a selector with no attributes',
      (g: ToolGrant) => (selector(g, 1).attributes = {}),
      'grant.capabilities[1].resources[0].attributes',
    ],
    [
      'a selector for another type',
      (g: ToolGrant) => (selector(g, 0).type = 'database'),
      'grant.capabilities[0].resources[0].type',
    ],
    [
      'a selector for a type that merely prefixes the capability',
      (g: ToolGrant) => (selector(g, 0).type = 'deploy'),
      'grant.capabilities[0].resources[0].type',
    ],
  ])('an invalid grant (%s) is invalid_grant', (_name, mutate, path) => {
    const e = errorOf((s) => mutate(s.grant));
    expect(e.reason).toBe('invalid_grant');
    expect(e.issues.map((i) => i.path)).toEqual([path]);
  });

  it('validateGrant accepts the fixture grant and reports every problem', () => {
    expect(validateGrant(buildGrant()).ok).toBe(true);
    const g = buildGrant();
    g.allowed_tools.push(TOOL);
    g.expires_at_unix_ms = g.not_before_unix_ms;
    const r = validateGrant(g);
    expect(r.ok ? [] : r.error.issues.map((i) => i.path)).toEqual([
      'grant.expires_at_unix_ms',
      'grant.allowed_tools',
    ]);
  });

  it('a grant validation is reused only for a deeply frozen grant', () => {
    const mutable = buildGrant();
    expect(validateGrant(mutable).ok).toBe(true);
    mutable.allowed_tools.push(TOOL);
    expect(validateGrant(mutable).ok).toBe(false);

    const shallow = Object.freeze(buildGrant());
    expect(validateGrant(shallow).ok).toBe(true);
    selector(shallow, 0).type = 'database';
    const r = validateGrant(shallow);
    expect(r.ok ? [] : r.error.issues.map((i) => i.path)).toEqual([
      'grant.capabilities[0].resources[0].type',
    ]);

    const frozenBad = deepFreeze({
      ...buildGrant(),
      allowed_effects: ['read_only', 'read_only'],
    } as ToolGrant);
    expect(validateGrant(frozenBad).ok).toBe(false);
    expect(validateGrant(frozenBad).ok).toBe(false);
    const frozenGood = deepFreeze(buildGrant());
    expect(validateGrant(frozenGood)).toEqual({ ok: true, value: frozenGood });
    expect(validateGrant(frozenGood)).toEqual({ ok: true, value: frozenGood });
  });

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 1])(
    'an evaluation time of %s is invalid_request',
    (now) => {
      const e = errorOf((s) => (s.now = now));
      expect(e.reason).toBe('invalid_request');
    },
  );

  it('boundary: now == 0 is evaluable (and before the grant)', () => {
    expect(violationsOf((s) => (s.now = 0))).toEqual(['grant_not_yet_valid']);
  });

  it.each([
    ['a target attribute value', (s: Scenario) => (s.invocation.target.attributes.service = 'api\ud800')],
    ['a contract release label', (s: Scenario) => (s.contract.executor_release = 'rollback-executor \udc00')],
    ['a grant identifier', (s: Scenario) => (s.grant.principal_id = 'user:\ud800')],
  ])('a value with no canonical form (%s) is refused, never thrown', (_name, mutate) => {
    // Regression: a lone UTF-16 surrogate has no UTF-8 form. The schemas refuse it at the boundary,
    // and a caller that bypasses them gets a typed error instead of a CanonicalizationError.
    const s = buildScenario();
    mutate(s);
    const accepted =
      ToolInvocation.safeParse(s.invocation).success &&
      ToolContract.safeParse(s.contract).success &&
      ToolGrant.safeParse(s.grant).success;
    expect(accepted).toBe(false);
    expect(() => authorize(s)).not.toThrow();
    const r = authorize(s);
    expect(r.ok ? r.value.body.decision : r.error.reason).toBe('canonicalization_failed');
  });

  it('an exception that is not a canonicalization failure still propagates (fail closed)', () => {
    const s = buildScenario();
    Object.defineProperty(s.invocation, 'invocation_id', {
      enumerable: true,
      get: () => {
        throw new RangeError('storage fault');
      },
    });
    expect(() => authorize(s)).toThrow(RangeError);
  });

  it('an invalid contract is reported before an invalid grant', () => {
    const e = errorOf((s) => {
      s.contract.schema_version = 2;
      s.grant.allowed_tools.push(TOOL);
    });
    expect(e.reason).toBe('invalid_contract');
  });
});

describe('decisions are never cached', () => {
  it('the same frozen inputs evaluated at different times decide differently', () => {
    const s = buildScenario();
    const contract = pinContract(s.contract);
    const grant = deepFreeze(s.grant);
    const at = (now: number) => authorizeToolCall(contract, grant, s.invocation, now);
    const before = at(T.now);
    const after = at(T.grantExpiresAt);
    expect(before.ok && before.value.body.decision).toBe('authorized');
    expect(after.ok && after.value.body.violations).toEqual(['approval_expired', 'grant_expired']);
    expect(before.ok && before.value.body.grant_sha256).toBe(digestOf(buildGrant()));
  });
});

// ---------------------------------------------------------------------------------------------
// Decision cases kept as data (test/data/decisions/*.json)

const JsonOp = z.union([
  z.strictObject({ op: z.enum(['replace', 'add']), path: z.string(), value: z.json() }),
  z.strictObject({ op: z.literal('remove'), path: z.string() }),
]);
const BytesOp = z.strictObject({
  op: z.literal('edit_bytes'),
  path: z.literal('/receipt'),
  find: z.string().min(1),
  replace: z.string(),
});
const CLASSES = ['malformed', 'denied', 'rejected', 'verified', 'reconciliation_required'] as const;
const DecisionCase = z.strictObject({
  name: z.string().min(1),
  note: z.string().optional(),
  scenario: z.enum(['rollback', 'read_only']).optional(),
  ops: z.array(z.union([JsonOp, BytesOp])).optional(),
  rebind: z.boolean().optional(),
  reapprove: z.boolean().optional(),
  dispatch_denied: z.boolean().optional(),
  outcome: z.enum(EXECUTION_OUTCOMES).optional(),
  expect: z.strictObject({
    class: z.enum(CLASSES),
    /** Violation codes (denied, rejected) or the sorted issue paths of the error (malformed). */
    violations: z.array(z.string()),
    reason: z.string().optional(),
  }),
});
type DecisionCase = z.infer<typeof DecisionCase>;
const DecisionFile = z.strictObject({ description: z.string().min(1), cases: z.array(DecisionCase).min(1) });

const files = import.meta.glob('../../../data/decisions/*.json', { eager: true, import: 'default' });

const STAGE1 = new Set(['contract', 'grant', 'input', 'invocation', 'now', 'trusted']);

function runCase(c: DecisionCase) {
  const ops = c.ops ?? [];
  const root = (op: { path: string }) => op.path.split('/')[1] ?? '';
  for (const op of ops) {
    if (!STAGE1.has(root(op)) && root(op) !== 'receipt' && root(op) !== 'observation') {
      throw new Error(`case "${c.name}": unknown root in path "${op.path}"`);
    }
  }
  const strip = (op: PatchOp): PatchOp => ({ ...op, path: op.path.replace(/^\/[^/]+/, '') });
  const inputOps = ops.filter((op): op is PatchOp => op.op !== 'edit_bytes' && STAGE1.has(root(op)));
  const receiptOps = ops.filter((op) => root(op) === 'receipt');
  const observationOps = ops.filter(
    (op): op is PatchOp => op.op !== 'edit_bytes' && root(op) === 'observation',
  );

  const s = applyPatch((c.scenario === 'read_only' ? buildReadOnlyScenario : buildScenario)(), inputOps);
  if (c.rebind === true || c.reapprove === true) rebind(s, { reapprove: c.reapprove === true });

  const out = runPipeline({
    contract: s.contract,
    grant: s.grant,
    invocation: s.invocation,
    now: s.now,
    trusted: s.trusted,
    dispatchDenied: c.dispatch_denied === true,
    editReceipt: (r) => {
      let edited: unknown = r;
      for (const op of receiptOps) {
        if (op.op !== 'edit_bytes') {
          edited = applyPatch(edited, [strip(op)]);
          continue;
        }
        // Tampering with the stored bytes: edit the canonical text, then decode it strictly again.
        const text = canonicalize(edited);
        if (text.split(op.find).length !== 2)
          throw new Error(`case "${c.name}": "${op.find}" must occur once`);
        const decoded = decodeJsonText(text.replace(op.find, op.replace));
        edited = decoded.ok ? decoded.value : text;
      }
      return edited;
    },
    observe: (contract, receipt) =>
      applyPatch(buildObservation(contract, receipt, c.outcome ?? 'succeeded'), observationOps.map(strip)),
  });
  return { s, out };
}

const allCases = Object.entries(files).flatMap(([file, raw]) => {
  const parsed = DecisionFile.parse(raw);
  return parsed.cases.map((c) => [`${file.replace(/^.*\//, '')}: ${c.name}`, c] as const);
});

describe('decision cases (test/data/decisions)', () => {
  it('loads the data files, with unique case names', () => {
    expect(Object.keys(files).length).toBeGreaterThanOrEqual(5);
    const names = allCases.map(([n]) => n);
    expect(new Set(names).size).toBe(names.length);
  });

  it.each(allCases)('%s', (_name, c) => {
    const codes: readonly string[] =
      c.expect.class === 'denied'
        ? AUTHORIZATION_VIOLATIONS
        : c.expect.class === 'malformed'
          ? []
          : EXECUTION_VIOLATIONS;
    if (c.expect.class !== 'malformed') for (const v of c.expect.violations) expect(codes).toContain(v);
    const { s, out } = runCase(c);
    const got: Record<string, unknown> = { class: out.class, violations: out.violations };
    if (out.reason !== undefined) got.reason = out.reason;
    expect(got).toEqual(c.expect);
    // Every receipt the pipeline issued replays from its original inputs.
    if (out.authorization !== undefined) {
      const replay = verifyAuthorizationReceipt(out.authorization, {
        contract: s.contract,
        grant: s.grant,
        invocation: s.invocation,
        now: s.now,
        trusted: s.trusted,
      });
      expect(replay).toEqual({ ok: true, differences: [] });
    }
    if (out.execution !== undefined) {
      expect(out.execution.body.reconciliation_required).toBe(out.class === 'reconciliation_required');
    }
  });
});
