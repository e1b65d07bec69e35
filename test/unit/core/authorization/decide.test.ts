/**
 * `decideAuthorization`, the one entry point of the decision: every rule it adds on top of the
 * per-call check (runs, approvals as stored, grant candidates and their order, the empty grant,
 * identities from trusted state, the effects an authorization implies) as data cases
 * (test/data/decisions/state/*.json), and the properties that matter at this level.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  type AuthorizationState,
  EMPTY_GRANT_ID,
  decideAuthorization,
} from '../../../../src/core/authorization/decide.js';
import { AUTHORIZATION_VIOLATIONS } from '../../../../src/core/model.js';
import { applyPatch, type PatchOp } from '../fixtures.js';
import {
  INVOCATION_ID,
  type StateScenario,
  buildApprovalRecord,
  buildReadStateScenario,
  buildStateScenario,
  grantRecord,
} from './state-fixtures.js';

const JsonOp = z.union([
  z.strictObject({ op: z.enum(['replace', 'add']), path: z.string(), value: z.json() }),
  z.strictObject({ op: z.literal('remove'), path: z.string() }),
  // The stored approval of the rollback (state-fixtures.ts), e.g. named on another call.
  z.strictObject({ op: z.literal('use_rollback_approval') }),
  z.strictObject({
    op: z.literal('add_grant'),
    overrides: z.record(z.string(), z.json()),
    revoked: z.boolean().optional(),
  }),
]);
const StateCase = z.strictObject({
  name: z.string().min(1),
  note: z.string().optional(),
  scenario: z.enum(['rollback', 'read_only']).optional(),
  ops: z.array(JsonOp).optional(),
  expect: z.strictObject({
    class: z.enum(['authorized', 'denied', 'error']),
    violations: z.array(z.string()),
    reason: z.string().optional(),
    grant_id: z.string().optional(),
    effects: z
      .strictObject({
        consume_approval_id: z.string().nullable(),
        charge_run: z
          .strictObject({ run_id: z.string(), writes: z.union([z.literal(0), z.literal(1)]) })
          .nullable(),
        guards: z.strictObject({ grant_id: z.string().nullable(), principal_id: z.string() }),
      })
      .optional(),
  }),
});
type StateCase = z.infer<typeof StateCase>;
const StateFile = z.strictObject({ description: z.string().min(1), cases: z.array(StateCase).min(1) });

const files = import.meta.glob('../../../data/decisions/state/*.json', { eager: true, import: 'default' });

function scenarioOf(c: StateCase): StateScenario {
  let s = c.scenario === 'read_only' ? buildReadStateScenario() : buildStateScenario();
  for (const op of c.ops ?? []) {
    if (op.op === 'use_rollback_approval') {
      s = { ...s, state: { ...s.state, approval: buildApprovalRecord() } };
      continue;
    }
    if (op.op === 'add_grant') {
      const g = grantRecord(op.overrides as never, op.revoked === true);
      s = { ...s, state: { ...s.state, grants: [...s.state.grants, g] } };
      continue;
    }
    const root = op.path.split('/')[1];
    if (root !== 'request' && root !== 'state' && root !== 'now')
      throw new Error(`case "${c.name}": bad path ${op.path}`);
    s = applyPatch(s, [op as PatchOp]);
  }
  return s;
}

function decide(s: StateScenario) {
  return decideAuthorization(s.request, s.state, { invocation_id: INVOCATION_ID }, s.now);
}

const cases = Object.entries(files).flatMap(([file, raw]) =>
  StateFile.parse(raw).cases.map((c) => [`${file.replace(/^.*\//, '')}: ${c.name}`, c] as const),
);

describe('decision cases at the entry point (test/data/decisions/state)', () => {
  it('loads the data files, with unique case names', () => {
    expect(cases.length).toBeGreaterThanOrEqual(25);
    expect(new Set(cases.map(([n]) => n)).size).toBe(cases.length);
  });

  it.each(cases)('%s', (_name, c) => {
    for (const v of c.expect.violations) expect(AUTHORIZATION_VIOLATIONS).toContain(v);
    const s = scenarioOf(c);
    const out = decide(s);
    if (c.expect.class === 'error') {
      expect(out.ok).toBe(false);
      if (!out.ok) expect(out.error.reason).toBe(c.expect.reason);
      return;
    }
    if (!out.ok) throw new Error(`unexpected error: ${out.error.message}`);
    const d = out.value;
    expect(d.receipt.body.decision).toBe(c.expect.class);
    // Who actually called, whatever the request named.
    expect([d.receipt.body.tenant_id, d.receipt.body.principal_id]).toEqual([
      s.state.caller.tenant_id,
      s.state.caller.principal_id,
    ]);
    expect(d.receipt.body.violations).toEqual(c.expect.violations);
    if (c.expect.grant_id !== undefined) expect(d.grant.grant_id).toBe(c.expect.grant_id);
    // A denial changes nothing but storing its receipt.
    if (c.expect.class === 'denied') expect(d.effects).toBeNull();
    else expect(d.effects).not.toBeNull();
    if (c.expect.effects !== undefined && d.effects !== null) {
      expect({
        consume_approval_id: d.effects.consume_approval_id,
        charge_run: d.effects.charge_run,
        guards: { grant_id: d.effects.guards.grant_id, principal_id: d.effects.guards.principal_id },
      }).toEqual(c.expect.effects);
      expect(d.effects.guards.contract_sha256).toBe(s.request.tool_contract_sha256);
    }
  });
});

const s0 = buildStateScenario;

describe('entry point properties', () => {
  // A grant that authorizes on its own, or one of several that deny for some dimension.
  const grantVariant = fc.record({
    id: fc.integer({ min: 0, max: 99 }),
    revoked: fc.boolean(),
    drop: fc.constantFrom('none', 'tools', 'effects', 'capabilities', 'expired'),
  });
  const toRecord = (v: { id: number; revoked: boolean; drop: string }) =>
    grantRecord(
      {
        grant_id: `grant-${String(v.id).padStart(2, '0')}-${v.drop}`,
        ...(v.drop === 'tools' ? { allowed_tools: [] } : {}),
        ...(v.drop === 'effects' ? { allowed_effects: ['read_only'] } : {}),
        ...(v.drop === 'capabilities' ? { capabilities: [] } : {}),
        ...(v.drop === 'expired' ? { expires_at_unix_ms: s0().now } : {}),
      },
      v.revoked,
    );
  const withGrants = (grants: AuthorizationState['grants']): StateScenario => {
    const s = s0();
    return { ...s, state: { ...s.state, grants } };
  };

  it('authorized iff some live grant authorizes alone (first authorized wins; a revoked grant never does)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(grantVariant, { minLength: 1, maxLength: 6, selector: (v) => v.id }),
        (vs) => {
          const grants = vs.map(toRecord);
          const out = decide(withGrants(grants));
          if (!out.ok) throw new Error(out.error.message);
          const aloneAuthorizes = grants.some((g) => {
            const r = decide(withGrants([g]));
            return r.ok && r.value.receipt.body.decision === 'authorized';
          });
          expect(out.value.receipt.body.decision === 'authorized').toBe(aloneAuthorizes);
          if (aloneAuthorizes)
            expect(out.value.grant.grant_id).toBe(
              grants.find((g) => !g.revoked && g.grant.grant_id === out.value.grant.grant_id)?.grant.grant_id,
            );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('removing a grant candidate never turns a denial into an authorization', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(grantVariant, { minLength: 1, maxLength: 6, selector: (v) => v.id }),
        fc.nat(),
        (vs, k) => {
          const grants = vs.map(toRecord);
          const full = decide(withGrants(grants));
          const fewer = decide(withGrants(grants.filter((_, i) => i !== k % grants.length)));
          if (!full.ok || !fewer.ok) throw new Error('unexpected error');
          if (full.value.receipt.body.decision === 'denied') {
            expect(fewer.value.receipt.body.decision).toBe('denied');
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('a tenant or principal named in the request never turns a denial into an authorization', () => {
    const denying = fc.constantFrom<(s: StateScenario) => void>(
      (s) => void (s.state.run = null),
      (s) => void (s.state.grants = []),
      (s) => void (s.state.contract = s.state.contract && { ...s.state.contract, quarantined: true }),
      (s) => void (s.state.caller = { ...s.state.caller, revoked: true }),
      (s) => void (s.state.approval = null),
    );
    const name = fc.constantFrom('acme', 'globex', 'user:alice@acme', 'user:bob@acme', 'user:mallory@acme');
    fc.assert(
      fc.property(
        denying,
        fc.option(name, { nil: undefined }),
        fc.option(name, { nil: undefined }),
        (deny, t, p) => {
          const s = s0();
          deny(s);
          const named = structuredClone(s);
          if (t !== undefined) named.request.tenant_id = t;
          if (p !== undefined) named.request.principal_id = p;
          const out = decide(named);
          expect(out.ok && out.value.receipt.body.decision).toBe('denied');
        },
      ),
      { numRuns: 100 },
    );
  });

  it('the empty grant is evaluated only when the caller holds no grant at all', () => {
    const none = decide(withGrants([]));
    expect(none.ok && none.value.grant.grant_id).toBe(EMPTY_GRANT_ID);
    const revokedOnly = decide(withGrants([grantRecord({}, true)]));
    expect(revokedOnly.ok && revokedOnly.value.grant.grant_id).toBe('grant-acme-ops-0001');
  });

  it('is deterministic: the same inputs give the same receipt', () => {
    const a = decide(s0());
    const b = decide(s0());
    expect(a.ok && b.ok && a.value.receipt.sha256 === b.value.receipt.sha256).toBe(true);
  });
});
