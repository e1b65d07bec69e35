/**
 * The one-pass serializers of `canonical-forms.ts`, held to the reference serializer:
 * `authorizationBodyText` writes exactly `canonicalizeReference(body)` for every body (or throws a
 * `CanonicalizationError` exactly when the reference throws), and `invocationText` exactly
 * `canonicalizeReference(inv)`, including for validated invocations whose strings it quotes
 * without scanning. And `decodeToolInvocation`, the text entry to the hot path, held to the strict
 * decoder followed by the schema.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { authorizeToolCall } from '../../../../src/core/authorization/authorize.js';
import {
  CanonicalizationError,
  canonicalizeReference,
  digestOf,
  sha256HexOfText,
} from '../../../../src/core/canonical/canonical.js';
import { isValidatedInvocation } from '../../../../src/core/canonical/canonical-forms.js';
import { decodeToolInvocation, parseToolInvocation } from '../../../../src/library/invocation.js';
import { decodeJsonText } from '../../../../src/core/canonical/json.js';
import { buildToolLoopFixture, LAB_CASES } from '../../../../src/lab/tool-loop.js';
import {
  AUTHORIZATION_VIOLATIONS,
  type AuthorizationReceiptBody,
  type ToolInvocation,
} from '../../../../src/core/model.js';
import { authorizationBodyText, invocationText } from '../../../../src/core/canonical/canonical-forms.js';
import { buildContract, buildGrant, buildInvocation, buildScenario, mustAuthorize, T } from '../fixtures.js';

const RUNS = { seed: 0x7e57, numRuns: 3000, endOnFailure: true } as const;

type Outcome = { text: string } | { threw: string };

function outcome(f: () => string): Outcome {
  try {
    return { text: f() };
  } catch (e) {
    return { threw: e instanceof CanonicalizationError ? 'CanonicalizationError' : String(e) };
  }
}

function expectSameText(body: AuthorizationReceiptBody): void {
  expect(outcome(() => authorizationBodyText(body, false))).toStrictEqual(
    outcome(() => canonicalizeReference(body)),
  );
}

const baseline = (): AuthorizationReceiptBody => mustAuthorize(buildScenario()).body;

describe('authorizationBodyText writes the reference canonical text', () => {
  it('for the receipts of the lab baseline and every lab case, and authorize hashes that text', () => {
    const fixtures = [buildToolLoopFixture(), ...LAB_CASES.map((c) => c.apply(buildToolLoopFixture()))];
    for (const f of fixtures) {
      const r = authorizeToolCall(f.contract, f.grant, f.invocation, f.now);
      expect(r.ok).toBe(true);
      if (!r.ok) continue;
      expectSameText(r.value.body);
      expect(r.value.sha256).toBe(digestOf(r.value.body));
      expect(r.value.sha256).toBe(sha256HexOfText(canonicalizeReference(r.value.body)));
    }
  });

  it('escapes every string that is not one of Writ’s own digests', () => {
    const body = {
      ...baseline(),
      tenant_id: 'a"b\\c\u0000\u001f\u007f\u2028é😀',
      principal_id: '</script>',
      invocation_id: '\ud83d\ude00',
      approval_id: 'quote"',
      idempotency_key: 'back\\slash',
      input_sha256: 'NOT-HEX "',
      policy_sha256: '\n',
      run_envelope_sha256: '\t',
      violations: ['tool_not_allowed', 'x"y'],
      target: { type: 'deployment', attributes: { z: 'é"', a: '\\', m: '\u0001' } },
    } as unknown as AuthorizationReceiptBody;
    expectSameText(body);
  });

  it('throws where the reference throws: lone surrogates, non-finite numbers, bad types', () => {
    const cases: Record<string, unknown>[] = [
      { tenant_id: 'a\ud800' },
      { approval_id: '\udc00' },
      { violations: ['\ud800'] },
      { target: { type: 'deployment', attributes: { service: '\ud800' } } },
      { input_bytes: Number.NaN },
      { requested_at_unix_ms: Number.POSITIVE_INFINITY },
      { evaluated_at_unix_ms: -Infinity },
      { decision: undefined },
      { target: new Map() },
    ];
    for (const change of cases) {
      const body = { ...baseline(), ...change } as unknown as AuthorizationReceiptBody;
      const got = outcome(() => authorizationBodyText(body, false));
      expect(got).toStrictEqual(outcome(() => canonicalizeReference(body)));
      expect(got).toStrictEqual({ threw: 'CanonicalizationError' });
    }
  });

  it('members of an unexpected type serialize (or throw) as the reference does', () => {
    const cases: Record<string, unknown>[] = [
      { tenant_id: 7 },
      { input_bytes: '84' },
      { grant_sha256: null },
      { violations: 'none' },
      // eslint-disable-next-line no-sparse-arrays
      { violations: [, 'tool_not_allowed'] },
      { approval_id: { nested: ['x'] } },
    ];
    for (const change of cases) {
      expectSameText({ ...baseline(), ...change } as unknown as AuthorizationReceiptBody);
    }
  });

  it('numbers: -0, fractions, exponents and large values as the reference writes them', () => {
    for (const n of [-0, 0, 1.5, 1e21, 1e-7, Number.MAX_SAFE_INTEGER, -5, 0.1 + 0.2]) {
      expectSameText({ ...baseline(), input_bytes: n, requested_at_unix_ms: n } as AuthorizationReceiptBody);
    }
  });

  it('on generated bodies: any strings, numbers, violations and targets', () => {
    const anyString = fc.string({ unit: 'binary', maxLength: 24 });
    const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
    const num = fc.oneof(
      fc.integer(),
      fc.double(),
      fc.constantFrom(-0, Number.MAX_SAFE_INTEGER, Number.NaN, Number.POSITIVE_INFINITY),
    );
    const body = fc.record({
      approval_id: fc.option(anyString, { nil: null }),
      decision: fc.oneof(fc.constantFrom('authorized', 'denied'), anyString),
      effect: anyString,
      evaluated_at_unix_ms: num,
      // Writ's own digests: always lowercase hex (raw-quoted by design).
      grant_sha256: hex,
      idempotency_key: fc.option(anyString, { nil: null }),
      input_bytes: num,
      input_sha256: anyString,
      invocation_id: anyString,
      invocation_sha256: hex,
      policy_sha256: anyString,
      principal_id: anyString,
      receipt_kind: anyString,
      receipt_version: num,
      requested_at_unix_ms: num,
      run_envelope_sha256: anyString,
      target: fc.record({
        type: anyString,
        attributes: fc.dictionary(anyString, anyString, { maxKeys: 5 }),
      }),
      tenant_id: anyString,
      tool_contract_sha256: hex,
      trusted_state_sha256: hex,
      violations: fc.array(fc.oneof(fc.constantFrom(...AUTHORIZATION_VIOLATIONS), anyString), {
        maxLength: 4,
      }),
    });
    fc.assert(
      fc.property(body, (b) => {
        expectSameText(b as unknown as AuthorizationReceiptBody);
      }),
      RUNS,
    );
  });
});

const V2_OPTIONS = { dispatch_window_ms: 60_000, executor_principal_id: null } as const;

const baselineV2 = (): AuthorizationReceiptBody => {
  const s = buildScenario();
  const r = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted, V2_OPTIONS);
  if (!r.ok) throw new Error(r.error.message);
  return r.value.body;
};

describe('authorizationBodyText writes the reference canonical text for version 2 bodies', () => {
  it('for the v2 receipts of the lab baseline and every lab case', () => {
    const fixtures = [buildToolLoopFixture(), ...LAB_CASES.map((c) => c.apply(buildToolLoopFixture()))];
    for (const f of fixtures) {
      const r = authorizeToolCall(f.contract, f.grant, f.invocation, f.now, undefined, {
        dispatch_window_ms: 1000,
        executor_principal_id: 'executor:one',
      });
      expect(r.ok).toBe(true);
      if (!r.ok) continue;
      expectSameText(r.value.body);
      expect(r.value.sha256).toBe(sha256HexOfText(canonicalizeReference(r.value.body)));
    }
  });

  it('escapes the executor release and principal; bad values throw or serialize as the reference', () => {
    for (const change of [
      { executor_release: 'rel "quoted" \\ \u0001 é😀' },
      { executor_principal_id: 'a"b' },
      { executor_principal_id: 7 },
      { named_principal_id: 'p"\\q\u0007' },
      { named_tenant_id: 8 },
      { executor_release: '\ud800' },
      { dispatch_deadline_unix_ms: Number.NaN },
      { dispatch_deadline_unix_ms: -0 },
      { dispatch_deadline_unix_ms: '5' },
    ] as Record<string, unknown>[]) {
      expectSameText({ ...baselineV2(), ...change } as unknown as AuthorizationReceiptBody);
    }
  });

  it('writes exactly the members present: none, all three, or (through the reference) some', () => {
    const two = baselineV2() as unknown as Record<string, unknown>;
    for (const drop of [
      ['executor_release'],
      ['executor_principal_id'],
      ['dispatch_deadline_unix_ms'],
      ['executor_release', 'executor_principal_id'],
      ['executor_release', 'executor_principal_id', 'dispatch_deadline_unix_ms'],
      ['named_principal_id'],
      ['named_tenant_id', 'named_principal_id'],
    ]) {
      const b = { ...two };
      for (const k of drop) delete b[k];
      expectSameText(b as unknown as AuthorizationReceiptBody);
    }
    // The version number does not choose the layout: a mislabelled body is still serialized faithfully.
    expectSameText({ ...baseline(), receipt_version: 2 } as unknown as AuthorizationReceiptBody);
    expectSameText({ ...baselineV2(), receipt_version: 1 } as unknown as AuthorizationReceiptBody);
  });

  it('on generated v2 bodies, with any subset of the audience members', () => {
    const anyString = fc.string({ unit: 'binary', maxLength: 24 });
    const num = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(-0, Number.MAX_SAFE_INTEGER, Number.NaN));
    const audience = fc.record(
      {
        dispatch_deadline_unix_ms: num,
        executor_principal_id: fc.option(anyString, { nil: null }),
        executor_release: anyString,
        named_principal_id: fc.option(anyString, { nil: null }),
        named_tenant_id: fc.option(anyString, { nil: null }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(audience, fc.constantFrom(1, 2), anyString, (a, version, tenant) => {
        const one = baseline() as unknown as Record<string, unknown>;
        expectSameText({
          ...one,
          ...a,
          receipt_version: version,
          tenant_id: tenant,
        } as unknown as AuthorizationReceiptBody);
      }),
      { ...RUNS, numRuns: 500 },
    );
  });
});

describe('decodeToolInvocation: the strict decoder, then the schema', () => {
  const text = JSON.stringify(buildToolLoopFixture().invocation);

  it('gives what decodeJsonText then parseToolInvocation give', () => {
    const got = decodeToolInvocation(text);
    const decoded = decodeJsonText(text);
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    expect(got).toStrictEqual(parseToolInvocation(decoded.value));
  });

  it('malformed text is malformed_json; a bad field is invalid_invocation', () => {
    const dup = text.replace('{', '{"tenant_id":"acme",');
    for (const bad of ['', '{', dup, text.replace('"acme"', '"\\ud800"'), 'x'.repeat(300_000)]) {
      const r = decodeToolInvocation(bad);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.reason).toBe('malformed_json');
    }
    const r = decodeToolInvocation(text.replace('"acme"', '"ac me"'));
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.reason).toBe('invalid_invocation');
      expect(r.error.issues.map((i) => i.path)).toContain('invocation.tenant_id');
    }
  });

  it('applies the caller’s limits', () => {
    expect(decodeToolInvocation(text, { maxBytes: text.length - 1, maxDepth: 32 }).ok).toBe(false);
    expect(decodeToolInvocation(text, { maxBytes: text.length, maxDepth: 32 }).ok).toBe(true);
    expect(decodeToolInvocation(text, { maxBytes: text.length, maxDepth: 2 }).ok).toBe(false);
    expect(decodeToolInvocation(text, { maxBytes: text.length, maxDepth: 3 }).ok).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Validated invocations: strings quoted without scanning

const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
const identifier = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,40}$/);
/** Attribute values may hold quotes, backslashes and any well-formed non-control text. */
const attributeValue = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 12 })
  .map((s) => s.replace(/[\u0000-\u001f\u007f-\u009f*]/g, '"') || '\\');

/** A valid invocation as a JSON value, keys in an arbitrary order at every level. */
const invocationJson = fc
  .record({
    approval: fc.option(
      fc.record({
        approval_id: identifier,
        approver_principal_id: identifier,
        effect: fc.constantFrom('read_only', 'creates_draft', 'external_write', 'irreversible'),
        expires_at_unix_ms: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
        input_sha256: hex,
        policy_sha256: hex,
        tenant_id: identifier,
        tool_contract_sha256: hex,
      }),
      { nil: null },
    ),
    idempotency_key: fc.option(fc.stringMatching(/^[A-Za-z0-9._:-]{8,40}$/), { nil: null }),
    input_bytes: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    input_sha256: hex,
    invocation_id: identifier,
    policy_sha256: hex,
    principal_id: identifier,
    requested_at_unix_ms: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    run_envelope_sha256: hex,
    target: fc.record({
      type: fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/),
      attributes: fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/), attributeValue, { maxKeys: 5 }),
    }),
    tenant_id: identifier,
    tool_contract_sha256: hex,
  })
  .chain((v) =>
    fc.shuffledSubarray(Object.keys(v), { minLength: 12, maxLength: 12 }).map((order) => ({ v, order })),
  )
  // Through JSON text, as a request arrives: plain objects, in the generated key order.
  .map(
    ({ v, order }) =>
      JSON.parse(
        JSON.stringify(Object.fromEntries(order.map((k) => [k, v[k as keyof typeof v]]))),
      ) as unknown,
  );

function mustParse(value: unknown): ToolInvocation {
  const r = parseToolInvocation(value);
  if (!r.ok) throw new Error(`expected a valid invocation: ${r.error.message}`);
  return r.value;
}

describe('invocationText and the receipt of a validated invocation', () => {
  it('a parsed invocation is validated and deep-frozen; a hand-built one is not', () => {
    const inv = mustParse(JSON.parse(JSON.stringify(buildInvocation())));
    expect(isValidatedInvocation(inv)).toBe(true);
    for (const o of [inv, inv.target, inv.target.attributes, inv.approval])
      expect(Object.isFrozen(o)).toBe(true);
    expect(() => {
      (inv as { tenant_id: string }).tenant_id = 'x"y';
    }).toThrow(TypeError);
    expect(isValidatedInvocation(buildInvocation())).toBe(false);
    expect(isValidatedInvocation({ ...inv })).toBe(false);
  });

  it('on generated valid invocations: the same text as the reference, and so is the receipt', () => {
    const contract = buildContract();
    const grant = buildGrant();
    fc.assert(
      fc.property(invocationJson, (json) => {
        const inv = mustParse(json);
        expect(isValidatedInvocation(inv)).toBe(true);
        expect(invocationText(inv)).toBe(canonicalizeReference(inv));
        const r = authorizeToolCall(contract, grant, inv, T.now);
        expect(r.ok).toBe(true);
        if (!r.ok) return;
        expect(r.value.body.invocation_sha256).toBe(digestOf(json));
        expect(authorizationBodyText(r.value.body, true)).toBe(canonicalizeReference(r.value.body));
        expect(r.value.sha256).toBe(digestOf(r.value.body));
      }),
      { ...RUNS, numRuns: 1500 },
    );
  });

  it('on generated valid invocations: the version 2 receipt text is the reference text too', () => {
    const contract = buildContract();
    const grant = buildGrant();
    fc.assert(
      fc.property(invocationJson, (json) => {
        const two = authorizeToolCall(contract, grant, mustParse(json), T.now, undefined, {
          dispatch_window_ms: 60_000,
          executor_principal_id: 'executor:x',
        });
        if (!two.ok) throw new Error(two.error.message);
        expect(authorizationBodyText(two.value.body, true)).toBe(canonicalizeReference(two.value.body));
        expect(two.value.sha256).toBe(digestOf(two.value.body));
      }),
      { ...RUNS, numRuns: 300 },
    );
  });

  it('an unvalidated invocation is serialized by the reference rules, whatever it holds', () => {
    const inv = {
      ...buildInvocation(),
      tenant_id: 'a"b\\',
      target: { type: 'deployment', attributes: { z: '1', a: '\u0001' } },
    } as ToolInvocation;
    expect(invocationText(inv)).toBe(canonicalizeReference(inv));
    expect(() => invocationText({ ...inv, principal_id: '\ud800' })).toThrow(CanonicalizationError);
  });
});
