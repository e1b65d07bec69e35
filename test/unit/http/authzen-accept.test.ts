/**
 * The AuthZEN evaluation acceptor (src/http/authzen/translate.ts `acceptEvaluation`): its
 * hand-written path for well-formed evaluations must accept exactly what the `Evaluation` zod
 * schema accepts, into the same values, and every rejection must be zod's own. The same for the
 * Writ fields `translateEvaluation` reads from the context, and for the batch
 * (`acceptEvaluations` against `EvaluationsRequest`) and action search (`acceptActionSearch`
 * against `ActionSearchRequest`) acceptors.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ActionSearchRequest,
  Evaluation,
  EvaluationsRequest,
  MAX_EVALUATIONS,
  acceptActionSearch,
  acceptEvaluation,
  acceptEvaluations,
  translateEvaluation,
} from '../../../src/http/authzen/translate.js';

// Values around every rule: string length bounds (1..256 for type and name, 0..1024 for id),
// null/absent free-form members, arrays and scalars where objects belong.
const str = fc.oneof(
  fc.constantFrom('', 'a', 'x'.repeat(256), 'x'.repeat(257), 'y'.repeat(1024), 'y'.repeat(1025)),
  fc.string({ maxLength: 8 }),
);
const boundary = fc.constantFrom('', 'x'.repeat(256), 'x'.repeat(257), 'y'.repeat(1024), 'y'.repeat(1025));
const scalar = fc.oneof(str, fc.integer(), fc.boolean(), fc.constant(null));
const free = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.dictionary(fc.string({ maxLength: 4 }), scalar, { maxKeys: 3 }),
  fc.array(scalar, { maxLength: 2 }),
  scalar,
);
const member = fc.oneof(str, scalar, fc.constant(undefined));
const withExtras = (base: fc.Arbitrary<Record<string, unknown>>) =>
  fc
    .tuple(base, fc.dictionary(fc.constantFrom('extra', 'other', 'decision'), scalar, { maxKeys: 2 }))
    .map(([b, extra]) => ({ ...extra, ...b }));
const dropUndefined = (o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
const entity = fc.oneof(
  withExtras(fc.record({ type: member, id: member, properties: free }).map(dropUndefined)),
  scalar,
  fc.constant(undefined),
  fc.array(scalar, { maxLength: 1 }),
);
const action = fc.oneof(
  withExtras(fc.record({ name: member, properties: free }).map(dropUndefined)),
  scalar,
  fc.constant(undefined),
);
const evaluation = fc.oneof(
  withExtras(fc.record({ subject: entity, action, resource: entity, context: free }).map(dropUndefined)),
  scalar,
  fc.array(scalar, { maxLength: 1 }),
);

// A well-formed evaluation with at most one member replaced: most inputs sit next to a boundary.
const valid = fc.record({
  subject: fc.record({ type: fc.constantFrom('agent', 'x'.repeat(256)), id: fc.constantFrom('', 'p') }),
  action: fc.record({ name: fc.constantFrom('tool', 'x'.repeat(256)) }),
  resource: fc.record({ type: fc.constant('deployment'), id: fc.constantFrom('d', 'y'.repeat(1024)) }),
  context: fc.constant({ input: {}, run_id: 'run-1' }),
});
const paths = [
  ['subject'],
  ['subject', 'type'],
  ['subject', 'id'],
  ['subject', 'properties'],
  ['action'],
  ['action', 'name'],
  ['action', 'properties'],
  ['resource'],
  ['resource', 'type'],
  ['resource', 'id'],
  ['resource', 'properties'],
  ['context'],
] as const;
const nearValid = fc
  .tuple(valid, fc.option(fc.tuple(fc.constantFrom(...paths), fc.oneof(boundary, member, free)), { freq: 8 }))
  .map(([v, change]) => {
    const out: Record<string, Record<string, unknown>> = structuredClone(v);
    if (change === null) return out;
    const [path, value] = change;
    const [top, inner] = path;
    if (inner === undefined) out[top] = value as Record<string, unknown>;
    else if (value === undefined) delete out[top]![inner];
    else out[top]![inner] = value;
    return out;
  });

describe('acceptEvaluation', () => {
  it('decides as Evaluation.safeParse does, with the same values and the same issues', () => {
    fc.assert(
      fc.property(fc.oneof(evaluation, nearValid), (value) => {
        const fast = acceptEvaluation(value);
        const zod = Evaluation.safeParse(value);
        expect(fast.success).toBe(zod.success);
        if (fast.success && zod.success) {
          expect(fast.data).toEqual(zod.data);
          // Free-form members are passed on as sent, as zod's custom check does.
          expect(fast.data.context).toBe(zod.data.context);
          expect(fast.data.resource.properties).toBe(zod.data.resource.properties);
        }
        if (!fast.success && !zod.success) expect(fast.error.issues).toEqual(zod.error.issues);
      }),
      { numRuns: 2000 },
    );
  });

  it('drops unknown members and reads null free-form members as absent', () => {
    const r = acceptEvaluation({
      subject: { type: 'agent', id: 'p', extra: 1 },
      action: { name: 'tool', properties: null },
      resource: { type: 'deployment', id: 'd', properties: { a: 1 } },
      context: null,
      extra: true,
    });
    expect(r).toEqual({
      success: true,
      data: {
        subject: { type: 'agent', id: 'p' },
        action: { name: 'tool' },
        resource: { type: 'deployment', id: 'd', properties: { a: 1 } },
      },
    });
  });

  it.each([
    ['an empty subject type', { subject: { type: '', id: 'p' } }],
    ['a 257-character action name', { action: { name: 'x'.repeat(257) } }],
    ['a 1025-character resource id', { resource: { type: 'deployment', id: 'y'.repeat(1025) } }],
    ['an array context', { context: [] }],
    ['a string as properties', { action: { name: 'tool', properties: 'p' } }],
    ['a missing resource', { resource: undefined }],
  ])('rejects %s with zod’s issues', (_, patch) => {
    const value = {
      subject: { type: 'agent', id: 'p' },
      action: { name: 'tool' },
      resource: { type: 'deployment', id: 'd' },
      ...patch,
    };
    const r = acceptEvaluation(value);
    const z = Evaluation.safeParse(value);
    expect(r.success).toBe(false);
    expect(z.success).toBe(false);
    if (!r.success && !z.success) expect(r.error.issues).toEqual(z.error.issues);
  });
});

describe('translateEvaluation reads the Writ context fields by the same rules', () => {
  const digest = 'a'.repeat(64);
  const field = fc.oneof(
    fc.constant(undefined),
    fc.constantFrom(null, 'r', '', digest, digest.toUpperCase(), `${digest}0`, 1, {}),
  );
  it('accepts exactly an input, a string run_id and an absent or well-formed digest', () => {
    fc.assert(
      fc.property(field, field, field, (input, run_id, tool_contract_sha256) => {
        const context = Object.fromEntries(
          Object.entries({ input, run_id, tool_contract_sha256 }).filter(([, v]) => v !== undefined),
        );
        const e = acceptEvaluation({
          subject: { type: 'agent', id: 'p' },
          action: { name: 'tool' },
          resource: { type: 'deployment', id: 'd' },
          context,
        });
        if (!e.success) throw new Error('evaluation refused');
        const t = translateEvaluation(e.data);
        const valid =
          input !== undefined &&
          typeof run_id === 'string' &&
          (tool_contract_sha256 === undefined || tool_contract_sha256 === digest);
        expect(t.ok).toBe(valid);
        if (t.ok) {
          expect(t.tool_contract_sha256).toBe(tool_contract_sha256);
          expect(t.request).toEqual({ input, run_id, principal_id: 'p' });
        } else {
          expect(t.message).toMatch(/^context/);
        }
      }),
    );
  });
});

// -------------------------------------------------------------------------------------------------
// The batch and the action search (the same pattern)

/** Both sides decide alike, into the same values, with zod's own issues on a rejection. */
function sameAs<T>(
  fast: { success: true; data: T } | { success: false; error: { issues: unknown[] } },
  zod: { success: true; data: T } | { success: false; error: { issues: unknown[] } },
) {
  expect(fast.success).toBe(zod.success);
  if (fast.success && zod.success) expect(fast.data).toEqual(zod.data);
  if (!fast.success && !zod.success) expect(fast.error.issues).toEqual(zod.error.issues);
}

const partial = fc.oneof(
  withExtras(fc.record({ subject: entity, action, resource: entity, context: free }).map(dropUndefined)),
  fc.record({ subject: valid.map((v) => v.subject) }).map((r) => r as Record<string, unknown>),
  fc.constant({}),
  scalar,
  fc.constant(undefined),
);
const options = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.record({
    evaluations_semantic: fc.constantFrom(
      undefined,
      'execute_all',
      'deny_on_first_deny',
      'permit_on_first_permit',
      'EXECUTE_ALL',
      '',
      null,
      1,
    ),
  }),
  fc.constant({ evaluations_semantic: 'execute_all', extra: 1 }),
  scalar,
  fc.array(scalar, { maxLength: 1 }),
);
const items = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.array(partial, { maxLength: 3 }),
  fc.array(valid, { maxLength: 3 }),
  // The length bound, from both sides.
  fc.constantFrom(MAX_EVALUATIONS, MAX_EVALUATIONS + 1).map((n) => Array.from({ length: n }, () => ({}))),
  scalar,
  fc.constant({}),
);
const batch = fc.oneof(
  fc
    .tuple(
      fc.oneof(partial, nearValid),
      options,
      items,
      fc.dictionary(fc.constantFrom('extra', 'decision'), scalar, { maxKeys: 1 }),
    )
    .map(([top, o, e, extra]) => {
      if (typeof top !== 'object' || top === null || Array.isArray(top)) return top;
      return dropUndefined({ ...extra, ...top, options: o, evaluations: e });
    }),
  scalar,
  fc.array(scalar, { maxLength: 1 }),
);

// Well formed but for at most the options or the items: most inputs sit next to a boundary.
const nearValidBatch = fc
  .tuple(valid, options, fc.oneof(fc.constant(undefined), fc.array(valid, { maxLength: 2 }), items))
  .map(([top, o, e]) => dropUndefined({ ...top, options: o, evaluations: e }));

describe('acceptEvaluations', () => {
  it('decides as EvaluationsRequest.safeParse does, with the same values and the same issues', () => {
    fc.assert(
      fc.property(fc.oneof(batch, nearValidBatch), (value) =>
        sameAs(acceptEvaluations(value), EvaluationsRequest.safeParse(value)),
      ),
      { numRuns: 2000 },
    );
  });

  it('keeps the batch order and drops unknown members', () => {
    const r = acceptEvaluations({
      subject: { type: 'agent', id: 'p', extra: 1 },
      options: { evaluations_semantic: 'deny_on_first_deny', other: true },
      evaluations: [{ action: { name: 'a' } }, { action: { name: 'b' }, context: null }],
      extra: true,
    });
    expect(r).toEqual({
      success: true,
      data: {
        subject: { type: 'agent', id: 'p' },
        options: { evaluations_semantic: 'deny_on_first_deny' },
        evaluations: [{ action: { name: 'a' } }, { action: { name: 'b' } }],
      },
    });
  });

  it.each([
    ['an unknown semantic', { options: { evaluations_semantic: 'first' } }],
    ['65 evaluations', { evaluations: Array.from({ length: MAX_EVALUATIONS + 1 }, () => ({})) }],
    ['a null item', { evaluations: [null] }],
    ['a null subject', { subject: null }],
    ['an item with an empty action name', { evaluations: [{ action: { name: '' } }] }],
  ])('rejects %s with zod’s issues', (_, value) => {
    const r = acceptEvaluations(value);
    expect(r.success).toBe(false);
    sameAs(r, EvaluationsRequest.safeParse(value));
  });
});

describe('acceptActionSearch', () => {
  const search = fc.oneof(
    evaluation,
    nearValid.map((v) => {
      const { action: _, ...rest } = v;
      return rest;
    }),
  );
  it('decides as ActionSearchRequest.safeParse does, with the same values and the same issues', () => {
    fc.assert(
      fc.property(search, (value) => sameAs(acceptActionSearch(value), ActionSearchRequest.safeParse(value))),
      { numRuns: 2000 },
    );
  });

  it('ignores an action, and rejects a missing resource with zod’s issues', () => {
    const ok = acceptActionSearch({
      subject: { type: 'agent', id: 'p' },
      action: { name: 'ignored' },
      resource: { type: 'deployment', id: 'd' },
    });
    expect(ok).toEqual({
      success: true,
      data: { subject: { type: 'agent', id: 'p' }, resource: { type: 'deployment', id: 'd' } },
    });
    const bad = { subject: { type: 'agent', id: 'p' } };
    const r = acceptActionSearch(bad);
    expect(r.success).toBe(false);
    sameAs(r, ActionSearchRequest.safeParse(bad));
  });
});
