/**
 * Contract metadata validation, contract identity, target derivation, and strict decoding of every
 * transport schema (unknown fields rejected at every level, no coercion, no absent nullables).
 */
import { describe, expect, it } from 'vitest';
import { authorizeToolCall } from '../../../../src/core/authorization/authorize.js';
import { digestOf } from '../../../../src/core/canonical/canonical.js';
import {
  contractDigest,
  deriveTarget,
  pinContract,
  resolvePointer,
  validateContract,
} from '../../../../src/core/contracts/contract.js';
import { verifyExecution } from '../../../../src/core/execution/execution.js';
import {
  AuthorizationReceipt,
  CONTRACT_LIMITS,
  ExecutionReceipt,
  ToolApproval,
  ToolContract,
  ToolExecutionObservation,
  ToolGrant,
  ToolInvocation,
  TrustedState,
} from '../../../../src/core/model.js';
import {
  baselineRun,
  buildApproval,
  buildContract,
  buildGrant,
  buildInvocation,
  buildReadOnlyContract,
  buildScenario,
  buildTrustedState,
  mustAuthorize,
  rollbackInput,
} from '../fixtures.js';

/** Paths of a failed `validateContract`, or `[]` when it passes. */
function contractIssues(c: ToolContract): string[] {
  const r = validateContract(c);
  return r.ok ? [] : r.error.issues.map((i) => i.path);
}

function contractWith(patch: Partial<ToolContract>): ToolContract {
  return { ...buildContract(), ...patch };
}

describe('fixture', () => {
  it('the baseline and read-only contracts are valid', () => {
    expect(contractIssues(buildContract())).toEqual([]);
    expect(contractIssues(buildReadOnlyContract())).toEqual([]);
    expect(ToolContract.safeParse(buildContract()).success).toBe(true);
  });

  it('builders return fresh objects', () => {
    const a = buildScenario();
    const b = buildScenario();
    a.grant.capabilities[0]?.resources[0]?.attributes.service?.push('web');
    a.contract.required_capabilities.pop();
    expect(b.grant).toEqual(buildGrant());
    expect(b.contract).toEqual(buildContract());
  });

  it('the invocation target is what the contract derives from the input', () => {
    const s = buildScenario();
    expect(deriveTarget(s.contract, s.input)).toEqual({ ok: true, value: s.invocation.target });
  });
});

describe('validateContract', () => {
  it('accepts the reviewed contract and returns it unchanged', () => {
    const c = buildContract();
    const r = validateContract(c);
    expect(r).toEqual({ ok: true, value: c });
  });

  describe('schema version', () => {
    it.each([0, 2, -1, 1000])('rejects schema_version %i', (v) => {
      expect(contractIssues(contractWith({ schema_version: v }))).toEqual(['contract.schema_version']);
    });
    it('accepts exactly the supported version', () => {
      expect(contractIssues(contractWith({ schema_version: 1 }))).toEqual([]);
    });
  });

  describe.each([
    ['timeout_ms', CONTRACT_LIMITS.maxTimeoutMs],
    ['max_input_bytes', CONTRACT_LIMITS.maxInputBytes],
    ['max_output_bytes', CONTRACT_LIMITS.maxOutputBytes],
  ] as const)('limit %s', (field, max) => {
    it('rejects zero', () => {
      const r = validateContract(contractWith({ [field]: 0 }));
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.issues).toEqual([
          { path: `contract.${field}`, message: `${field} must be greater than zero` },
        ]);
      }
    });
    it('rejects a negative limit', () => {
      expect(contractIssues(contractWith({ [field]: -1 }))).toEqual([`contract.${field}`]);
    });
    it('accepts the boundaries 1 and the maximum', () => {
      expect(contractIssues(contractWith({ [field]: 1 }))).toEqual([]);
      expect(contractIssues(contractWith({ [field]: max }))).toEqual([]);
    });
    it('rejects an absurd limit (maximum + 1)', () => {
      const r = validateContract(contractWith({ [field]: max + 1 }));
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.issues).toEqual([
          { path: `contract.${field}`, message: `${field} must be at most ${max}` },
        ]);
      }
    });
  });

  describe('required capabilities', () => {
    it.each(['creates_draft', 'external_write', 'irreversible'] as const)(
      'rejects an empty capability list for the write effect %s',
      (effect) => {
        const c = contractWith({ effect, required_capabilities: [], reversible: effect !== 'irreversible' });
        expect(contractIssues(c)).toEqual(['contract.required_capabilities']);
      },
    );
    it('accepts an empty capability list for a read-only contract', () => {
      expect(contractIssues({ ...buildReadOnlyContract(), required_capabilities: [] })).toEqual([]);
    });
    it('rejects a duplicate capability, naming it', () => {
      const r = validateContract(
        contractWith({
          required_capabilities: ['deployment:read', 'deployment:read', 'deployment:rollback'],
        }),
      );
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.issues).toEqual([
          { path: 'contract.required_capabilities[1]', message: 'duplicate capability "deployment:read"' },
        ]);
      }
    });
    it('rejects capabilities out of sorted order (one contract, one identity)', () => {
      const r = validateContract(
        contractWith({ required_capabilities: ['deployment:rollback', 'deployment:read'] }),
      );
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.issues).toEqual([
          {
            path: 'contract.required_capabilities[1]',
            message: 'capabilities must be listed in sorted order',
          },
        ]);
      }
    });
    it('rejects a capability for another resource type than the target', () => {
      expect(
        contractIssues(contractWith({ required_capabilities: ['database:read', 'deployment:rollback'] })),
      ).toEqual(['contract.required_capabilities[0]']);
      // `deploymentx:read` starts with "deployment" but is not for type `deployment`.
      expect(
        contractIssues(contractWith({ required_capabilities: ['deployment:rollback', 'deploymentx:read'] })),
      ).toEqual(['contract.required_capabilities[1]']);
    });
  });

  describe('idempotency', () => {
    it.each(['external_write', 'irreversible'] as const)('rejects %s without key_required', (effect) => {
      const c = contractWith({ effect, idempotency: 'not_required', reversible: false });
      expect(contractIssues(c)).toEqual(['contract.idempotency']);
    });
    it.each(['read_only', 'creates_draft'] as const)('allows %s without a key', (effect) => {
      expect(contractIssues(contractWith({ effect, idempotency: 'not_required' }))).toEqual([]);
    });
  });

  describe('reversibility', () => {
    it('rejects an irreversible contract that claims to be reversible', () => {
      expect(contractIssues(contractWith({ effect: 'irreversible', reversible: true }))).toEqual([
        'contract.reversible',
      ]);
    });
    it('accepts an irreversible, non-reversible contract and a reversible external write', () => {
      expect(contractIssues(contractWith({ effect: 'irreversible', reversible: false }))).toEqual([]);
      expect(contractIssues(contractWith({ effect: 'external_write', reversible: true }))).toEqual([]);
    });
  });

  it('rejects a resource map with no attributes', () => {
    expect(contractIssues(contractWith({ resource: { type: 'deployment', attributes: {} } }))).toEqual([
      'contract.resource.attributes',
    ]);
  });

  it('reports every problem at once, sorted by path, as invalid_contract', () => {
    const r = validateContract(
      contractWith({
        schema_version: 2,
        timeout_ms: 0,
        max_output_bytes: CONTRACT_LIMITS.maxOutputBytes + 1,
        idempotency: 'not_required',
        required_capabilities: [],
      }),
    );
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.reason).toBe('invalid_contract');
      expect(r.error.message).toBe('contract metadata is not valid');
      expect(r.error.issues.map((i) => i.path)).toEqual([
        'contract.idempotency',
        'contract.max_output_bytes',
        'contract.required_capabilities',
        'contract.schema_version',
        'contract.timeout_ms',
      ]);
    }
  });

  it('a validation result is reused only for a deeply frozen contract', () => {
    // An unfrozen (or only shallow-frozen) contract can change after it was validated: it must be
    // validated again, never answered from the cache of valid contracts.
    const mutable = buildContract();
    expect(validateContract(mutable).ok).toBe(true);
    mutable.required_capabilities.push('deployment:rollback');
    expect(contractIssues(mutable)).toEqual(['contract.required_capabilities[2]']);

    const shallow = Object.freeze(buildContract());
    expect(validateContract(shallow).ok).toBe(true);
    shallow.required_capabilities.unshift('deployment:rollback');
    expect(contractIssues(shallow)).toEqual(['contract.required_capabilities[1]']);

    const pinned = pinContract(buildContract());
    expect(validateContract(pinned)).toEqual({ ok: true, value: pinned });
    expect(validateContract(pinned)).toEqual({ ok: true, value: pinned });
    const badPinned = pinContract(contractWith({ timeout_ms: 0 }));
    expect(contractIssues(badPinned)).toEqual(['contract.timeout_ms']);
    expect(contractIssues(badPinned)).toEqual(['contract.timeout_ms']);
  });

  it('an invalid contract cannot be evaluated: authorize and verify return the error, not a receipt', () => {
    const { scenario, authorization, observation } = baselineRun();
    const bad = { ...scenario.contract, schema_version: 2 };
    const a = authorizeToolCall(bad, scenario.grant, scenario.invocation, scenario.now, scenario.trusted);
    const e = verifyExecution(bad, authorization, observation);
    for (const r of [a, e]) {
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.reason).toBe('invalid_contract');
    }
  });
});

describe('contract identity', () => {
  const variants: Record<keyof ToolContract, (c: ToolContract) => void> = {
    schema_version: (c) => (c.schema_version = 2),
    contract_release: (c) => (c.contract_release = 'execute_rollback 2026.02.0'),
    tool_name: (c) => (c.tool_name = 'execute_rollback_v2'),
    executor_release: (c) => (c.executor_release = 'rollback-executor 1.5.0'),
    input_schema_sha256: (c) => (c.input_schema_sha256 = '0'.repeat(64)),
    output_schema_sha256: (c) => (c.output_schema_sha256 = '0'.repeat(64)),
    effect: (c) => (c.effect = 'irreversible'),
    required_capabilities: (c) => c.required_capabilities.pop(),
    idempotency: (c) => (c.idempotency = 'not_required'),
    reversible: (c) => (c.reversible = false),
    timeout_ms: (c) => (c.timeout_ms += 1),
    max_input_bytes: (c) => (c.max_input_bytes += 1),
    max_output_bytes: (c) => (c.max_output_bytes += 1),
    resource: (c) => (c.resource.attributes.region = '/region'),
  };

  it.each(Object.entries(variants))('changing %s changes the digest', (_field, mutate) => {
    const c = buildContract();
    mutate(c);
    expect(contractDigest(c)).not.toBe(contractDigest(buildContract()));
  });

  it('covers every contract field', () => {
    expect(Object.keys(variants).sort()).toEqual(Object.keys(buildContract()).sort());
  });

  it('is the digest of the canonical contract, stable across builds', () => {
    expect(contractDigest(buildContract())).toBe(digestOf(buildContract()));
    expect(contractDigest(buildContract())).toBe(contractDigest(buildContract()));
  });

  it('a pinned contract is deeply frozen and keeps the same identity', () => {
    const pinned = pinContract(buildContract());
    expect(Object.isFrozen(pinned)).toBe(true);
    expect(Object.isFrozen(pinned.required_capabilities)).toBe(true);
    expect(Object.isFrozen(pinned.resource.attributes)).toBe(true);
    expect(contractDigest(pinned)).toBe(contractDigest(buildContract()));
    expect(contractDigest(pinned)).toBe(contractDigest(pinned));
    expect(() => {
      (pinned.required_capabilities as string[]).push('deployment:delete');
    }).toThrow(TypeError);
  });

  it('pinning a contract that is already shallow-frozen still freezes it deeply', () => {
    // Regression: a shallow freeze used to stop `deepFreeze`, leaving the pinned definition mutable.
    const pinned = pinContract(Object.freeze(buildContract()));
    expect(Object.isFrozen(pinned.required_capabilities)).toBe(true);
    expect(Object.isFrozen(pinned.resource.attributes)).toBe(true);
  });

  it('a pinned contract authorizes exactly as the unfrozen one', () => {
    const s = buildScenario();
    const plain = mustAuthorize(s);
    const pinned = mustAuthorize({ ...s, contract: pinContract(buildContract()) });
    expect(pinned).toEqual(plain);
  });
});

describe('deriveTarget and resolvePointer', () => {
  it('derives the target from the input through the resource map', () => {
    expect(deriveTarget(buildContract(), rollbackInput())).toEqual({
      ok: true,
      value: { type: 'deployment', attributes: { environment: 'production', service: 'api' } },
    });
  });

  it.each([
    ['a missing attribute', { environment: 'production' }, ['input/service']],
    ['a non-string attribute', { service: 7, environment: 'production' }, ['input/service']],
    ['an empty string', { service: '', environment: 'production' }, ['input/service']],
    ['a wildcard', { service: '*', environment: 'production' }, ['input/service']],
    ['a control character', { service: 'api\n', environment: 'production' }, ['input/service']],
    [
      'a value longer than 128 characters',
      { service: 'a'.repeat(129), environment: 'production' },
      ['input/service'],
    ],
    ['an object instead of a string', { service: { name: 'api' }, environment: 'prod' }, ['input/service']],
    ['both attributes missing', {}, ['input/environment', 'input/service']],
  ])('rejects an input with %s as invalid_request', (_name, input, paths) => {
    const r = deriveTarget(buildContract(), input);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.reason).toBe('invalid_request');
      expect(r.error.issues.map((i) => i.path)).toEqual(paths);
    }
  });

  it('accepts a value of exactly 128 characters', () => {
    const r = deriveTarget(buildContract(), { service: 'a'.repeat(128), environment: 'production' });
    expect(r.ok).toBe(true);
  });

  it('follows RFC 6901 escapes and array indices', () => {
    const doc = { 'a/b': { '~k': ['x', 'y'] } };
    expect(resolvePointer(doc, '/a~1b/~0k/1')).toBe('y');
    expect(resolvePointer(doc, '/a~1b/~0k/01')).toBeUndefined();
    expect(resolvePointer(doc, '/a~1b/~0k/2')).toBeUndefined();
    expect(resolvePointer(doc, '/a~1b/~0k/-')).toBeUndefined();
    expect(resolvePointer(doc, '')).toBe(doc);
    expect(resolvePointer('scalar', '/x')).toBeUndefined();
  });

  it('never indexes into a string or through null', () => {
    expect(resolvePointer({ s: 'abc' }, '/s/0')).toBeUndefined();
    expect(resolvePointer({ s: 'abc' }, '/s/length')).toBeUndefined();
    expect(resolvePointer({ a: null }, '/a/b')).toBeUndefined();
    expect(resolvePointer({ n: 7 }, '/n/x')).toBeUndefined();
    // So a contract pointer past a string value names no target rather than a character of it.
    const c = contractWith({ resource: { type: 'deployment', attributes: { service: '/service/0' } } });
    expect(deriveTarget(c, { service: 'api' }).ok).toBe(false);
  });

  it('never reaches the prototype chain', () => {
    expect(resolvePointer({}, '/constructor')).toBeUndefined();
    expect(resolvePointer({}, '/__proto__')).toBeUndefined();
    expect(resolvePointer({ a: {} }, '/a/toString')).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// Strict decoding

/** A deep copy of `obj` with `unexpected: true` added to the object at `path`. */
function withExtra(obj: unknown, path: readonly (string | number)[]): unknown {
  const copy = structuredClone(obj) as Record<string | number, unknown>;
  let cur: Record<string | number, unknown> = copy;
  for (const k of path) cur = cur[k] as Record<string | number, unknown>;
  cur.unexpected = true;
  return copy;
}

function without(obj: object, key: string): unknown {
  const copy = structuredClone(obj) as Record<string, unknown>;
  delete copy[key];
  return copy;
}

interface Schema {
  safeParse(v: unknown): {
    success: boolean;
    error?: { issues: readonly { path: PropertyKey[]; code: string }[] };
  };
}

describe('strict decoding', () => {
  const run = baselineRun();
  const auth = run.authorization;
  const schemas: [string, Schema, unknown, (string | number)[][]][] = [
    ['ToolContract', ToolContract, buildContract(), [[], ['resource']]],
    ['ToolGrant', ToolGrant, buildGrant(), [[], ['capabilities', 0], ['capabilities', 1, 'resources', 0]]],
    ['ToolApproval', ToolApproval, buildApproval(), [[]]],
    ['ToolInvocation', ToolInvocation, buildInvocation(), [[], ['approval'], ['target']]],
    ['TrustedState', TrustedState, buildTrustedState(), [[]]],
    ['ToolExecutionObservation', ToolExecutionObservation, run.observation, [[]]],
    ['AuthorizationReceipt', AuthorizationReceipt, auth, [[], ['body'], ['body', 'target']]],
    ['ExecutionReceipt', ExecutionReceipt, run.execution, [[], ['body']]],
  ];

  describe.each(schemas)('%s', (_name, schema, valid, paths) => {
    it('accepts the fixture', () => {
      expect(schema.safeParse(valid).success).toBe(true);
    });
    it.each(paths.map((p) => [p.join('.') || '(top level)', p] as const))(
      'rejects an unknown field at %s',
      (_label, path) => {
        const r = schema.safeParse(withExtra(valid, path));
        expect(r.success).toBe(false);
        expect(r.error?.issues).toEqual([
          expect.objectContaining({ code: 'unrecognized_keys', path: path as PropertyKey[] }),
        ]);
      },
    );
    it('rejects each missing field (nullable fields must be explicit null)', () => {
      for (const key of Object.keys(valid as object)) {
        expect(schema.safeParse(without(valid as object, key)).success, key).toBe(false);
      }
    });
  });

  it('an unknown field nested deep inside a grant selector is rejected', () => {
    const g = buildGrant() as unknown as { capabilities: { resources: Record<string, unknown>[] }[] };
    (g.capabilities[0]?.resources[0] as Record<string, unknown>).wildcard = true;
    expect(ToolGrant.safeParse(g).success).toBe(false);
  });

  it('never coerces: a numeric string, an uppercase digest or a fractional time is rejected', () => {
    expect(ToolContract.safeParse({ ...buildContract(), schema_version: '1' }).success).toBe(false);
    expect(ToolContract.safeParse({ ...buildContract(), timeout_ms: 1.5 }).success).toBe(false);
    const c = buildContract();
    expect(
      ToolContract.safeParse({ ...c, input_schema_sha256: c.input_schema_sha256.toUpperCase() }).success,
    ).toBe(false);
    expect(ToolInvocation.safeParse({ ...buildInvocation(), requested_at_unix_ms: 1.5 }).success).toBe(false);
    expect(ToolInvocation.safeParse({ ...buildInvocation(), input_bytes: -1 }).success).toBe(false);
    expect(
      ToolGrant.safeParse({ ...buildGrant(), expires_at_unix_ms: Number.MAX_SAFE_INTEGER + 1 }).success,
    ).toBe(false);
  });

  it('rejects an absent approval or idempotency key on an invocation (explicit null only)', () => {
    expect(ToolInvocation.safeParse(without(buildInvocation(), 'approval')).success).toBe(false);
    expect(ToolInvocation.safeParse(without(buildInvocation(), 'idempotency_key')).success).toBe(false);
    expect(
      ToolInvocation.safeParse({ ...buildInvocation(), approval: null, idempotency_key: null }).success,
    ).toBe(true);
  });

  it('an invocation cannot carry its own effect, capability or tenant override', () => {
    for (const extra of [
      { effect: 'read_only' },
      { capabilities: ['deployment:rollback'] },
      { approved: true },
    ]) {
      expect(ToolInvocation.safeParse({ ...buildInvocation(), ...extra }).success).toBe(false);
    }
  });

  it('rejects wildcard, control-character and badly named resource attributes', () => {
    const inv = buildInvocation();
    const target = (attributes: Record<string, string>) => ({
      ...inv,
      target: { type: 'deployment', attributes },
    });
    expect(ToolInvocation.safeParse(target({ service: '*', environment: 'production' })).success).toBe(false);
    expect(ToolInvocation.safeParse(target({ service: 'a\u0000', environment: 'production' })).success).toBe(
      false,
    );
    expect(ToolInvocation.safeParse(target({ Service: 'api', environment: 'production' })).success).toBe(
      false,
    );
    const g = buildGrant();
    const sel = (values: string[]) => ({
      ...g,
      capabilities: [
        {
          capability: 'deployment:read',
          resources: [{ type: 'deployment', attributes: { service: values } }],
        },
      ],
    });
    expect(ToolGrant.safeParse(sel(['*'])).success).toBe(false);
    expect(ToolGrant.safeParse(sel([])).success).toBe(false);
    expect(ToolGrant.safeParse(sel(['api'])).success).toBe(true);
  });

  it('rejects capability strings that are not "resource_type:action"', () => {
    for (const cap of ['deployment', 'deployment:*', 'Deployment:read', 'deployment:read:extra', '*']) {
      expect(ToolContract.safeParse({ ...buildContract(), required_capabilities: [cap] }).success, cap).toBe(
        false,
      );
    }
  });
});
