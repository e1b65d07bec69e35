/**
 * Property tests (fast-check) for the claims that matter:
 * (a) removing any grant dimension never turns a denial into an authorization, and removing what
 *     a call depends on always denies it; adding capabilities (or tools and effects) never bypasses
 *     tenant, policy, approval or time checks;
 * (c) every single-field mutation of a stored authorization or execution receipt fails replay, with
 *     that field named.
 * (b) canonical key-order independence is tested with the canonical module.
 *
 * Worlds are generated, not taken from the fixture: random resource types, attribute sets, target
 * values, effects, capability sets, decoy selectors, extra tools and effects. A fixed seed keeps runs
 * reproducible; change it locally to explore.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { authorizeToolCall } from '../../../../src/core/authorization/authorize.js';
import { canonicalize, digestOf } from '../../../../src/core/canonical/canonical.js';
import { contractDigest, pinContract, validateContract } from '../../../../src/core/contracts/contract.js';
import { deepFreeze } from '../../../../src/core/canonical/digest-cache.js';
import {
  AUTHORIZATION_VIOLATIONS,
  type AuthorizationViolation,
  type CapabilityGrant,
  EXECUTION_VIOLATIONS,
  type ResourceSelector,
  TOOL_EFFECTS,
  type ToolContract,
  type ToolEffect,
  type ToolGrant,
  type ToolInvocation,
  type TrustedState,
  WRITE_EFFECTS,
} from '../../../../src/core/model.js';
import { verifyAuthorizationReceipt, verifyExecutionReceipt } from '../../../../src/core/receipts/replay.js';
import {
  type ExecutionOutcome,
  OTHER_TENANT,
  PRINCIPAL,
  T,
  UNRELATED_SHA256,
  buildApproval,
  buildContract,
  buildGrant,
  buildInvocation,
  buildObservation,
  buildTrustedState,
  mustVerify,
} from '../fixtures.js';

const RUNS = { numRuns: 200, seed: 0x5717, endOnFailure: true } as const;

const TYPES = ['deployment', 'database', 'queue'] as const;
const ATTRS = ['service', 'environment', 'region', 'cluster'] as const;
const VALUES = ['api', 'web', 'api-internal', 'prod', 'production', 'staging', 'eu', 'us', 'a', 'b'] as const;
const ACTIONS = ['read', 'write', 'rollback', 'delete', 'publish'] as const;
const TOOLS = ['execute_rollback', 'get_deployment', 'drop_table', 'send_message'] as const;

// ---------------------------------------------------------------------------------------------
// Worlds: a contract, a grant that authorizes exactly one call, and that call

interface World {
  contract: ToolContract;
  grant: ToolGrant;
  invocation: ToolInvocation;
  now: number;
  trusted: TrustedState;
}

const unique = <X>(xs: readonly X[]): X[] => [...new Set(xs)];

const worldSpec = fc.record({
  type: fc.constantFrom(...TYPES),
  attrs: fc.shuffledSubarray([...ATTRS], { minLength: 1, maxLength: 3 }),
  targetValues: fc.array(fc.constantFrom(...VALUES), { minLength: 4, maxLength: 4 }),
  widen: fc.array(fc.array(fc.constantFrom(...VALUES), { maxLength: 3 }), { minLength: 4, maxLength: 4 }),
  effect: fc.constantFrom(...TOOL_EFFECTS),
  required: fc.shuffledSubarray([...ACTIONS], { maxLength: 3 }),
  extraHeld: fc.shuffledSubarray([...ACTIONS], { maxLength: 2 }),
  tool: fc.constantFrom(...TOOLS),
  extraTools: fc.shuffledSubarray([...TOOLS], { maxLength: 3 }),
  extraEffects: fc.shuffledSubarray([...TOOL_EFFECTS], { maxLength: 3 }),
  decoys: fc.nat({ max: 2 }),
  matchAt: fc.nat({ max: 2 }),
  keyRequired: fc.boolean(),
  policyApproval: fc.boolean(),
  nowOffset: fc.integer({ min: 0, max: T.grantExpiresAt - T.grantNotBefore - 1 }),
  inputBytes: fc.integer({ min: 1, max: 4_096 }),
});
type WorldSpec = typeof worldSpec extends fc.Arbitrary<infer S> ? S : never;

/** A selector of `type` over `attrs` that never matches `target` (one attribute excludes its value). */
function decoy(
  type: string,
  attrs: readonly string[],
  target: Record<string, string>,
  k: number,
): ResourceSelector {
  const attributes: Record<string, string[]> = {};
  attrs.forEach((a, i) => {
    const own = target[a] as string;
    attributes[a] = i === k % attrs.length ? VALUES.filter((v) => v !== own).slice(k, k + 2) : [own];
  });
  return { type, attributes };
}

function buildWorld(w: WorldSpec): World {
  const actions = w.effect !== 'read_only' && w.required.length === 0 ? ['read'] : w.required;
  const caps = actions.map((a) => `${w.type}:${a}`).sort();
  const write = WRITE_EFFECTS.has(w.effect);
  const contract: ToolContract = {
    ...buildContract(),
    tool_name: w.tool,
    effect: w.effect,
    required_capabilities: caps,
    idempotency: write || w.keyRequired ? 'key_required' : 'not_required',
    reversible: w.effect !== 'irreversible',
    resource: { type: w.type, attributes: Object.fromEntries(w.attrs.map((a) => [a, `/${a}`])) },
  };
  const target = Object.fromEntries(w.attrs.map((a, i) => [a, w.targetValues[i] as string]));
  const matching = (): ResourceSelector => ({
    type: w.type,
    attributes: Object.fromEntries(
      w.attrs.map((a, i) => [a, unique([target[a] as string, ...(w.widen[i] ?? [])]).sort()]),
    ),
  });
  const scoped = (): ResourceSelector[] => {
    const rs = Array.from({ length: w.decoys }, (_, k) => decoy(w.type, w.attrs, target, k));
    rs.splice(w.matchAt % (w.decoys + 1), 0, matching());
    return rs;
  };
  const capabilities: CapabilityGrant[] = [
    ...caps.map((capability) => ({ capability, resources: scoped() })),
    ...w.extraHeld
      .map((a) => `${w.type}:${a}`)
      .filter((c) => !caps.includes(c))
      .map((capability) => ({ capability, resources: [matching()] })),
  ];
  const grant: ToolGrant = {
    ...buildGrant(),
    allowed_tools: unique([...w.extraTools, w.tool]),
    allowed_effects: unique([...w.extraEffects, w.effect]),
    capabilities,
  };
  const approvalRequired = write || w.policyApproval;
  const base = buildInvocation();
  const invocation: ToolInvocation = {
    ...base,
    tool_contract_sha256: contractDigest(contract),
    input_bytes: w.inputBytes,
    target: { type: w.type, attributes: target },
    idempotency_key: contract.idempotency === 'key_required' ? 'acme:generated:00000001' : null,
    approval: approvalRequired
      ? {
          ...buildApproval(),
          tool_contract_sha256: contractDigest(contract),
          input_sha256: base.input_sha256,
          effect: w.effect,
          expires_at_unix_ms: T.grantExpiresAt,
        }
      : null,
  };
  const trusted = { ...buildTrustedState(), approval_required_effects: w.policyApproval ? [w.effect] : [] };
  // The contract never changes within a property: freezing it lets the core reuse its digest.
  return { contract: pinContract(contract), grant, invocation, now: T.grantNotBefore + w.nowOffset, trusted };
}

const worldArb = worldSpec.map(buildWorld);

function decide(w: World, grant: ToolGrant = w.grant) {
  return authorizeToolCall(w.contract, grant, w.invocation, w.now, w.trusted);
}
const isAuthorized = (r: ReturnType<typeof decide>) => r.ok && r.value.body.decision === 'authorized';
const isDenied = (r: ReturnType<typeof decide>) => r.ok && r.value.body.decision === 'denied';

// ---------------------------------------------------------------------------------------------
// Removing one element of one grant dimension

type Dimension = 'tool' | 'effect' | 'capability' | 'selector' | 'attribute' | 'value';
interface Removal {
  readonly dimension: Dimension;
  readonly label: string;
  /** True when the removed element is one the world's call depends on. */
  readonly essential: boolean;
  readonly apply: (g: ToolGrant) => ToolGrant;
}

function without<X>(xs: readonly X[], i: number): X[] {
  return xs.filter((_, j) => j !== i);
}

/** Remove selector j of capability i; an emptied capability is removed (a grant never holds an empty one). */
function dropSelector(g: ToolGrant, i: number, j: number): ToolGrant {
  const c = g.capabilities[i] as CapabilityGrant;
  if (c.resources.length === 1) return { ...g, capabilities: without(g.capabilities, i) };
  const capabilities = g.capabilities.map((x, k) =>
    k === i ? { ...x, resources: without(x.resources, j) } : x,
  );
  return { ...g, capabilities };
}

function editSelector(g: ToolGrant, i: number, j: number, edit: (s: ResourceSelector) => void): ToolGrant {
  const copy = structuredClone(g);
  edit(copy.capabilities[i]?.resources[j] as ResourceSelector);
  return copy;
}

/** Every way to remove exactly one element from one dimension of `g`. */
function removals(g: ToolGrant, w?: World): Removal[] {
  const out: Removal[] = [];
  const target = w?.invocation.target;
  const required = new Set(w?.contract.required_capabilities ?? []);
  g.allowed_tools.forEach((t, i) =>
    out.push({
      dimension: 'tool',
      label: `tool ${t}`,
      essential: t === w?.contract.tool_name,
      apply: (x) => ({ ...x, allowed_tools: without(x.allowed_tools, i) }),
    }),
  );
  g.allowed_effects.forEach((e, i) =>
    out.push({
      dimension: 'effect',
      label: `effect ${e}`,
      essential: e === w?.contract.effect,
      apply: (x) => ({ ...x, allowed_effects: without(x.allowed_effects, i) }),
    }),
  );
  g.capabilities.forEach((c, i) => {
    out.push({
      dimension: 'capability',
      label: `capability ${c.capability}`,
      essential: required.has(c.capability),
      apply: (x) => ({ ...x, capabilities: without(x.capabilities, i) }),
    });
    c.resources.forEach((s, j) => {
      // By construction exactly one selector of each required capability matches the target.
      const matches =
        target !== undefined &&
        required.has(c.capability) &&
        Object.entries(target.attributes).every(([a, v]) => s.attributes[a]?.includes(v) === true) &&
        Object.keys(s.attributes).length === Object.keys(target.attributes).length;
      out.push({
        dimension: 'selector',
        label: `selector ${c.capability}[${j}]`,
        essential: matches,
        apply: (x) => dropSelector(x, i, j),
      });
      for (const [a, values] of Object.entries(s.attributes)) {
        out.push({
          dimension: 'attribute',
          label: `attribute ${c.capability}[${j}].${a}`,
          essential: matches,
          apply: (x) => editSelector(x, i, j, (sel) => delete sel.attributes[a]),
        });
        values.forEach((v, k) =>
          out.push({
            dimension: 'value',
            label: `value ${c.capability}[${j}].${a}=${v}`,
            essential: matches && target?.attributes[a] === v,
            // An emptied allowed set matches nothing: that is removing the selector.
            apply: (x) =>
              values.length === 1
                ? dropSelector(x, i, j)
                : editSelector(x, i, j, (sel) => (sel.attributes[a] = without(values, k))),
          }),
        );
      }
    });
  });
  return out;
}

/** The codes that removing an essential element of `dimension` can cause. */
const EXPECTED: Record<Dimension, readonly AuthorizationViolation[]> = {
  tool: ['tool_not_allowed'],
  effect: ['effect_not_allowed'],
  capability: ['capability_not_granted'],
  selector: ['resource_out_of_scope', 'capability_not_granted'],
  attribute: ['resource_out_of_scope'],
  value: ['resource_out_of_scope', 'capability_not_granted'],
};

describe('(a) monotonic denial', { timeout: 120_000 }, () => {
  it('every generated world authorizes its call (generator self-check)', () => {
    fc.assert(
      fc.property(worldArb, (w) => {
        expect(validateContract(w.contract).ok).toBe(true);
        const r = decide(w);
        expect(r.ok && r.value.body.violations).toEqual([]);
      }),
      RUNS,
    );
  });

  it('removing one element denies exactly when the call depends on it', () => {
    const seen = new Set<Dimension>();
    fc.assert(
      fc.property(worldArb, (w) => {
        for (const r of removals(w.grant, w)) {
          const out = decide(w, r.apply(w.grant));
          if (!out.ok) {
            // Only an emptied selector (no attributes left) is an invalid grant: cannot evaluate.
            expect(out.error.reason, r.label).toBe('invalid_grant');
            continue;
          }
          if (!r.essential) {
            expect(out.value.body.violations, r.label).toEqual([]);
            continue;
          }
          seen.add(r.dimension);
          expect(out.value.body.decision, r.label).toBe('denied');
          expect(
            out.value.body.violations.some((v) => EXPECTED[r.dimension].includes(v)),
            r.label,
          ).toBe(true);
        }
      }),
      RUNS,
    );
    expect([...seen].sort()).toEqual(['attribute', 'capability', 'effect', 'selector', 'tool', 'value']);
  });

  it('if a grant denies, every grant with one element removed denies too', () => {
    let denials = 0;
    fc.assert(
      fc.property(worldArb, fc.array(fc.nat(), { maxLength: 3 }), (w, noise) => {
        // Noise: remove a few random elements, so G ranges over authorizing and denying grants.
        let g = w.grant;
        for (const n of noise) {
          const rs = removals(g);
          if (rs.length > 0) g = (rs[n % rs.length] as Removal).apply(g);
        }
        if (!isDenied(decide(w, g))) return;
        denials++;
        for (const r of removals(g)) expect(isAuthorized(decide(w, r.apply(g))), r.label).toBe(false);
      }),
      RUNS,
    );
    expect(denials).toBeGreaterThan(RUNS.numRuns / 4);
  });
});

// ---------------------------------------------------------------------------------------------
// Adding authority never bypasses tenant, policy, approval or time (or tool and effect)

type Block =
  'tenant' | 'grant_tenant' | 'policy' | 'not_yet_valid' | 'expired' | 'approval' | 'tool' | 'effect';

const APPROVAL_BLOCKS = [
  'missing',
  'expired',
  'input',
  'contract',
  'effect',
  'policy',
  'tenant',
  'self',
  'unusable',
] as const;

const selectorArb = (type: string) =>
  fc.record({
    type: fc.constant(type),
    attributes: fc.dictionary(
      fc.constantFrom(...ATTRS),
      fc.uniqueArray(fc.constantFrom(...VALUES), { minLength: 1, maxLength: 4 }),
      { minKeys: 1, maxKeys: 4 },
    ),
  });

const extraCapabilityArb = fc
  .tuple(fc.constantFrom(...TYPES), fc.constantFrom(...ACTIONS))
  .chain(([type, action]) =>
    fc.record({
      capability: fc.constant(`${type}:${action}`),
      resources: fc.array(selectorArb(type), { minLength: 1, maxLength: 3 }),
    }),
  );

/** Add capabilities: new ones are appended, held ones get the extra selectors. */
function addCapabilities(g: ToolGrant, extra: readonly CapabilityGrant[]): ToolGrant {
  const copy = structuredClone(g);
  for (const e of extra) {
    const held = copy.capabilities.find((c) => c.capability === e.capability);
    if (held) held.resources.push(...structuredClone(e.resources));
    else copy.capabilities.push(structuredClone(e));
  }
  return copy;
}

/** Apply `block` to a copy of `w`; returns the codes it must cause, or null when it does not apply. */
function applyBlock(
  w: World,
  block: Block,
  which: number,
): { world: World; codes: AuthorizationViolation[] } | null {
  const world: World = {
    ...w,
    grant: structuredClone(w.grant),
    invocation: structuredClone(w.invocation),
    trusted: { ...w.trusted },
  };
  const inv = world.invocation;
  switch (block) {
    case 'tenant':
      inv.tenant_id = OTHER_TENANT;
      return { world, codes: ['tenant_mismatch'] };
    case 'grant_tenant':
      world.grant.tenant_id = OTHER_TENANT;
      return { world, codes: ['tenant_mismatch'] };
    case 'policy':
      world.grant.policy_sha256 = UNRELATED_SHA256;
      return { world, codes: ['policy_mismatch'] };
    case 'not_yet_valid':
      world.now = T.grantNotBefore - 1 - which;
      return { world, codes: ['grant_not_yet_valid'] };
    case 'expired':
      world.now = T.grantExpiresAt + which;
      return { world, codes: ['grant_expired'] };
    case 'tool':
      world.grant.allowed_tools = world.grant.allowed_tools.filter((t) => t !== w.contract.tool_name);
      return { world, codes: ['tool_not_allowed'] };
    case 'effect':
      world.grant.allowed_effects = world.grant.allowed_effects.filter((e) => e !== w.contract.effect);
      return { world, codes: ['effect_not_allowed'] };
    case 'approval': {
      const a = inv.approval;
      if (a === null) return null;
      const kind = APPROVAL_BLOCKS[which % APPROVAL_BLOCKS.length];
      switch (kind) {
        case 'missing':
          inv.approval = null;
          return { world, codes: ['approval_missing'] };
        case 'expired':
          a.expires_at_unix_ms = world.now;
          return { world, codes: ['approval_expired'] };
        case 'input':
          a.input_sha256 = UNRELATED_SHA256;
          return { world, codes: ['approval_input_mismatch'] };
        case 'contract':
          a.tool_contract_sha256 = UNRELATED_SHA256;
          return { world, codes: ['approval_contract_mismatch'] };
        case 'effect':
          a.effect = TOOL_EFFECTS.find((e) => e !== a.effect) as ToolEffect;
          return { world, codes: ['approval_effect_mismatch'] };
        case 'policy':
          a.policy_sha256 = UNRELATED_SHA256;
          return { world, codes: ['approval_policy_mismatch'] };
        case 'tenant':
          a.tenant_id = OTHER_TENANT;
          return { world, codes: ['approval_tenant_mismatch'] };
        case 'self':
          a.approver_principal_id = PRINCIPAL;
          return { world, codes: ['approval_self_approved'] };
        default:
          world.trusted.approval_unusable = true;
          return { world, codes: ['approval_unusable'] };
      }
    }
  }
}

describe('(a) adding authority never bypasses the other checks', { timeout: 120_000 }, () => {
  const blockArb = fc.constantFrom<Block>(
    'tenant',
    'grant_tenant',
    'policy',
    'not_yet_valid',
    'expired',
    'approval',
    'tool',
    'effect',
  );

  it('adding arbitrary capabilities keeps a denial caused by tenant, policy, approval, time, tool or effect', () => {
    const seen = new Set<Block>();
    fc.assert(
      fc.property(
        worldArb,
        blockArb,
        fc.nat({ max: 1_000_000 }),
        fc.array(extraCapabilityArb, { maxLength: 4 }),
        (w, block, which, extra) => {
          const blocked = applyBlock(w, block, which);
          if (blocked === null) return;
          seen.add(block);
          const before = decide(blocked.world);
          expect(before.ok && before.value.body.violations).toEqual(expect.arrayContaining(blocked.codes));
          // The strongest addition: every required capability again, scoped to exactly this target.
          const covering = w.contract.required_capabilities.map((capability) => ({
            capability,
            resources: [
              {
                type: w.invocation.target.type,
                attributes: Object.fromEntries(
                  Object.entries(w.invocation.target.attributes).map(([a, v]) => [a, [v]]),
                ),
              },
            ],
          }));
          const grant = addCapabilities(blocked.world.grant, [...extra, ...covering]);
          const after = decide(blocked.world, grant);
          if (!after.ok) {
            // Only a generated selector of another shape for a held capability can make it invalid.
            expect(after.error.reason).toBe('invalid_grant');
            return;
          }
          expect(after.value.body.decision).toBe('denied');
          expect(after.value.body.violations).toEqual(expect.arrayContaining(blocked.codes));
        },
      ),
      RUNS,
    );
    expect(seen.size).toBe(8);
  });

  it('adding every tool and effect as well keeps a tenant, policy, approval or time denial', () => {
    fc.assert(
      fc.property(
        worldArb,
        fc.constantFrom<Block>('tenant', 'grant_tenant', 'policy', 'not_yet_valid', 'expired', 'approval'),
        fc.nat({ max: 1_000_000 }),
        (w, block, which) => {
          const blocked = applyBlock(w, block, which);
          if (blocked === null) return;
          const grant = {
            ...blocked.world.grant,
            allowed_tools: unique([...blocked.world.grant.allowed_tools, ...TOOLS]),
            allowed_effects: unique([...blocked.world.grant.allowed_effects, ...TOOL_EFFECTS]),
          };
          const after = decide(blocked.world, grant);
          expect(after.ok && after.value.body.decision).toBe('denied');
          expect(after.ok && after.value.body.violations).toEqual(expect.arrayContaining(blocked.codes));
        },
      ),
      RUNS,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// (c) Receipt mutations fail replay, naming the field

type Stored = Record<string, unknown> & { body: Record<string, unknown> };

interface ReceiptCase {
  kind: 'authorization' | 'execution';
  stored: Stored;
  replay: (s: unknown) => { ok: boolean; differences: readonly string[] };
}

const outcomeArb = fc.constantFrom<ExecutionOutcome>('succeeded', 'failed_no_effect', 'indeterminate');

const receiptCaseArb: fc.Arbitrary<ReceiptCase> = fc
  .tuple(worldArb, fc.boolean(), fc.constantFrom('authorization', 'execution'), outcomeArb, fc.boolean())
  .map(([w, deny, kind, outcome, tamperObservation]) => {
    const world = deny ? { ...w, grant: { ...w.grant, allowed_tools: [] } } : w;
    const r = decide(world);
    if (!r.ok) throw new Error('generated world must be evaluable');
    const auth = r.value;
    if (kind === 'authorization') {
      const inputs = { ...world };
      return {
        kind,
        stored: JSON.parse(JSON.stringify(auth)) as Stored,
        replay: (s: unknown) => verifyAuthorizationReceipt(s, inputs),
      };
    }
    const observation = buildObservation(world.contract, auth, outcome);
    if (tamperObservation) observation.output_bytes = 0;
    const exec = mustVerify(world.contract, auth, observation);
    const inputs = { contract: world.contract, authorization: auth, observation };
    return {
      kind,
      stored: JSON.parse(JSON.stringify(exec)) as Stored,
      replay: (s: unknown) => verifyExecutionReceipt(s, inputs),
    };
  });

const mutationArb = fc.record({
  op: fc.constantFrom('replace', 'remove', 'add_body', 'add_top', 'violations'),
  pick: fc.nat(),
  value: fc.jsonValue({ maxDepth: 2 }),
  name: fc.stringMatching(/^[a-z][a-z_]{0,11}$/),
  listOp: fc.constantFrom('add', 'remove', 'reverse', 'duplicate', 'replace'),
});
type Mutation = typeof mutationArb extends fc.Arbitrary<infer M> ? M : never;

function canon(v: unknown): string | null {
  try {
    return canonicalize(v);
  } catch {
    return null;
  }
}

/** A value canonically different from `old`, preferring the generated one. */
function differentValue(old: unknown, proposed: unknown): unknown {
  const c = canon(proposed);
  if (c !== null && c !== canon(old)) return proposed;
  return typeof old === 'string' ? `${old}x` : typeof old === 'number' ? old + 1 : [old];
}

/** Apply `m` to `s` in place; returns the name replay must report. */
function mutate(rc: ReceiptCase, m: Mutation): string {
  const s = rc.stored;
  const body = s.body;
  const fields = [...Object.keys(body).map((k) => `body.${k}`), 'sha256'];
  switch (m.op) {
    case 'replace': {
      const f = fields[m.pick % fields.length] as string;
      if (f === 'sha256') s.sha256 = differentValue(s.sha256, m.value);
      else body[f.slice(5)] = differentValue(body[f.slice(5)], m.value);
      return f;
    }
    case 'remove': {
      const all = [...fields, 'body'];
      const f = all[m.pick % all.length] as string;
      if (f === 'sha256' || f === 'body') delete s[f];
      else delete body[f.slice(5)];
      return f;
    }
    case 'add_body': {
      const name = Object.hasOwn(body, m.name) ? `${m.name}_extra` : m.name;
      body[name] = m.value;
      return `body.${name}`;
    }
    case 'add_top': {
      const name = m.name === 'body' ? 'body_extra' : m.name;
      s[name] = m.value;
      return name;
    }
    case 'violations': {
      const codes: readonly string[] =
        rc.kind === 'authorization' ? AUTHORIZATION_VIOLATIONS : EXECUTION_VIOLATIONS;
      const old = body.violations as string[];
      const before = JSON.stringify(old);
      const next = [...old];
      if (m.listOp === 'remove' && next.length > 0) next.splice(m.pick % next.length, 1);
      else if (m.listOp === 'reverse' && new Set(next).size > 1) next.reverse();
      else if (m.listOp === 'duplicate' && next.length > 0) next.push(next[m.pick % next.length] as string);
      else if (m.listOp === 'replace') next.splice(0, next.length, codes[m.pick % codes.length] as string);
      if (JSON.stringify(next) === before) next.push(codes[m.pick % codes.length] as string);
      body.violations = next;
      return 'body.violations';
    }
  }
  throw new Error(`unknown mutation ${String(m.op)}`);
}

describe('(c) receipt mutations fail replay', { timeout: 120_000 }, () => {
  it('an untouched receipt replays (baseline for the property)', () => {
    fc.assert(
      fc.property(receiptCaseArb, (rc) => {
        expect(rc.replay(rc.stored)).toEqual({ ok: true, differences: [] });
      }),
      { ...RUNS, numRuns: 50 },
    );
  });

  it('every single-field mutation fails replay with that field listed', () => {
    const ops = new Map<string, number>();
    fc.assert(
      fc.property(receiptCaseArb, mutationArb, (rc, m) => {
        const field = mutate(rc, m);
        ops.set(m.op, (ops.get(m.op) ?? 0) + 1);
        const report = rc.replay(rc.stored);
        expect(report.ok).toBe(false);
        expect(report.differences).toContain(field);
      }),
      RUNS,
    );
    expect([...ops.keys()].sort()).toEqual(['add_body', 'add_top', 'remove', 'replace', 'violations']);
  });

  it('re-hashing the mutated body does not help: the recomputed identity differs', () => {
    fc.assert(
      fc.property(receiptCaseArb, mutationArb, (rc, m) => {
        const field = mutate(rc, m);
        fc.pre(field.startsWith('body.'));
        rc.stored.sha256 = digestOf(rc.stored.body);
        const report = rc.replay(rc.stored);
        expect(report.ok).toBe(false);
        expect(report.differences).toEqual(expect.arrayContaining([field, 'sha256']));
      }),
      RUNS,
    );
  });
});

// Frozen inputs are still evaluated afresh: the cache holds identities, never decisions.
describe('digest cache', { timeout: 120_000 }, () => {
  it('frozen and unfrozen copies of a world decide identically', () => {
    fc.assert(
      fc.property(worldArb, fc.integer({ min: -60_000, max: 60_000 }), (w, shift) => {
        const frozen = deepFreeze(structuredClone({ ...w, now: w.now + shift }));
        const plain = { ...structuredClone(w), now: w.now + shift };
        const a = authorizeToolCall(
          frozen.contract,
          frozen.grant,
          frozen.invocation,
          frozen.now,
          frozen.trusted,
        );
        const b = authorizeToolCall(plain.contract, plain.grant, plain.invocation, plain.now, plain.trusted);
        expect(a).toEqual(b);
      }),
      { ...RUNS, numRuns: 100 },
    );
  });
});
