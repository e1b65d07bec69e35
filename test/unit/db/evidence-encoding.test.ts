/**
 * Authorization evidence's positional storage encoding (src/db/evidence-encoding.ts): a stored
 * array reads back as exactly the evidence that was written, is written only when it does, and an
 * array changed after the write (any one byte) is refused, never read as other evidence.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../src/core/canonical/canonical.js';
import { ToolEffect, TrustedState } from '../../../src/core/model.js';
import { StoredDocumentError } from '../../../src/db/documents.js';
import {
  EVIDENCE_LAYOUTS,
  evidenceFromStored,
  invocationFromReceiptBody,
  storedEvidenceText,
} from '../../../src/db/evidence-encoding.js';
import { CompactEvidence } from '../../../src/services/receipts.js';

const id = fc.stringMatching(/^[a-z]{3}-[a-z2-7]{4,26}$/);
const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
// Not the names the stored-JSON decoder refuses (src/core/canonical/json.ts): no row holds them.
const key = fc.stringMatching(/^[a-z]{1,10}$/).filter((k) => k !== 'constructor' && k !== 'prototype');
const scalar = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean(), fc.constant(null));
const document = fc.dictionary(
  key,
  fc.oneof(scalar, fc.array(fc.string({ maxLength: 8 }), { maxLength: 3 })),
  {
    minKeys: 1,
    maxKeys: 6,
  },
);

const trusted = fc.record({
  approval_required_effects: fc.subarray([...ToolEffect.options]),
  approval_unusable: fc.boolean(),
  contract_quarantined: fc.boolean(),
  grant_revoked: fc.boolean(),
  principal_revoked: fc.boolean(),
  run_violations: fc.subarray([
    'run_unknown',
    'run_expired',
    'run_call_budget_spent',
    'run_write_budget_spent',
  ]),
});

/**
 * Evidence version 2 as `authorizationEvidence` (src/db/tenant-store.ts) writes it, with a body
 * binding it: the trusted state always, the empty grant or not, then the approval (the invocation
 * rebuilt from the body), no approval, or the invocation stored whole.
 */
const evidenceAndBody = fc
  .record({
    version: fc.constantFrom(1, 2),
    body: fc.record({
      tenant_id: id,
      principal_id: id,
      invocation_id: id,
      run_envelope_sha256: hex,
      policy_sha256: hex,
      tool_contract_sha256: hex,
      input_sha256: hex,
      input_bytes: fc.nat(),
      target: document,
      requested_at_unix_ms: fc.nat(),
      idempotency_key: fc.oneof(id, fc.constant(null)),
      evaluated_at_unix_ms: fc.nat(),
      decision: fc.constantFrom('authorized', 'denied'),
    }),
    trusted_state: trusted,
    grant: fc.option(document, { nil: undefined }),
    invocation: fc.oneof(
      fc.constant({ how: 'rebuilt' as const }),
      document.map((approval) => ({ how: 'approval' as const, approval })),
      document.map((invocation) => ({ how: 'whole' as const, invocation })),
    ),
  })
  .map(({ version, body, trusted_state, grant, invocation }) => {
    const evidence: Record<string, unknown> = {
      evidence_version: 2,
      ...(grant === undefined ? {} : { grant }),
      ...(invocation.how === 'approval' ? { approval: invocation.approval } : {}),
      ...(invocation.how === 'whole' ? { invocation: invocation.invocation } : {}),
      trusted_state,
    };
    const b = {
      ...body,
      receipt_kind: 'authorization',
      receipt_version: version,
      grant_sha256: grant === undefined ? digestOf({ grant_id: body.invocation_id }) : digestOf(grant),
      trusted_state_sha256: digestOf(trusted_state),
      invocation_sha256: '',
    };
    b.invocation_sha256 = digestOf(
      invocation.how === 'whole'
        ? invocation.invocation
        : invocationFromReceiptBody(
            b as never,
            (invocation.how === 'approval' ? invocation.approval : null) as never,
          ),
    );
    return { evidence, body: b as Record<string, unknown> };
  });

const read = (text: string, body: unknown) => evidenceFromStored('authorization', text, body);

describe('positional authorization evidence', () => {
  it('has one frozen layout per evidence version written, naming exactly its schema members', () => {
    // Version 2 is the only version written today (`authorizationEvidence`).
    expect([...EVIDENCE_LAYOUTS.keys()]).toEqual([2]);
    const layout = EVIDENCE_LAYOUTS.get(2) ?? [];
    const paths = layout.map((m) => m.path);
    const expected = Object.keys(CompactEvidence.shape)
      .filter((k) => k !== 'evidence_version')
      .flatMap((k) =>
        k === 'trusted_state' ? Object.keys(TrustedState.shape).map((m) => `trusted_state.${m}`) : [k],
      );
    expect([...paths].sort()).toEqual(expected.sort());
    expect(new Set(paths).size).toBe(paths.length);
    // Each member's form is its schema type: optional members of the evidence, the trusted
    // state's booleans as flags and its lists as names; required members before optional ones.
    for (const { path, form } of layout) {
      const [top, member] = path.split('.') as [keyof typeof CompactEvidence.shape, string | undefined];
      if (member === undefined) {
        expect(form).toBe('optional');
        expect(CompactEvidence.shape[top].safeParse(undefined).success).toBe(true);
      } else {
        const schema = TrustedState.shape[member as keyof typeof TrustedState.shape];
        expect(form).toBe(schema.safeParse(true).success ? 'flag' : 'names');
        expect(schema.safeParse([]).success).toBe(form === 'names');
      }
    }
    const forms = layout.map((m) => m.form);
    expect(forms.indexOf('optional')).toBe(forms.length - 3);
  });

  it('reads back exactly the evidence written, and is shorter than the object', () => {
    fc.assert(
      fc.property(evidenceAndBody, ({ evidence, body }) => {
        const text = storedEvidenceText('authorization', evidence, body);
        expect(text.startsWith('[')).toBe(true);
        expect(text.length).toBeLessThan(canonicalize(evidence).length);
        const back = read(text, body);
        expect(back).toEqual(evidence);
        expect(canonicalize(back)).toBe(canonicalize(evidence));
        // The replay schema still takes it.
        expect(CompactEvidence.safeParse(back).success || !isSchemaShaped(evidence)).toBe(true);
      }),
    );
  });

  it('stores the common read-only evidence in under a third of its object bytes', () => {
    const evidence = {
      evidence_version: 2,
      trusted_state: {
        approval_required_effects: ['external_write', 'irreversible'],
        approval_unusable: false,
        contract_quarantined: false,
        grant_revoked: false,
        principal_revoked: false,
        run_violations: [],
      },
    };
    const [sample] = fc.sample(evidenceAndBody, { numRuns: 1, seed: 3 });
    const body = sample?.body ?? {};
    const b = {
      ...body,
      trusted_state_sha256: digestOf(evidence.trusted_state),
      invocation_sha256: digestOf(invocationFromReceiptBody(body as never, null)),
    };
    const text = storedEvidenceText('authorization', evidence, b);
    expect(text).toBe('[2,["external_write","irreversible"],0,0,0,0,[]]');
    expect(canonicalize(evidence).length).toBe(225);
    expect(read(text, b)).toEqual(evidence);
  });

  it('is not written for evidence it could not give back exactly, or not bound to the body', () => {
    fc.assert(
      fc.property(evidenceAndBody, fc.integer({ min: 0, max: 7 }), ({ evidence, body }, how) => {
        let e: Record<string, unknown> = { ...evidence };
        let b = body;
        let kind = 'authorization';
        if (how === 0) e.extra = 1;
        if (how === 1) e.approval = null; // null stands for absent in the array
        if (how === 2) e.evidence_version = 3; // no layout
        if (how === 3) e = { ...e, trusted_state: { ...(e.trusted_state as object), extra: false } };
        if (how === 4) b = { ...body, trusted_state_sha256: '0'.repeat(64) };
        if (how === 5) b = { ...body, invocation_sha256: '0'.repeat(64) };
        if (how === 6) kind = 'execution';
        if (how === 7) e.trusted_state = { ...(e.trusted_state as object), grant_revoked: 0 };
        const text = storedEvidenceText(kind, e, b);
        expect(text).toBe(canonicalize(e));
        expect(evidenceFromStored(kind, text, b)).toEqual(e);
      }),
    );
  });

  it('refuses every one-byte change of a stored array, or reads back the same evidence', () => {
    const bytes = [...' ",.-0123456789:[]{}abefilnrstuxENT\\'];
    fc.assert(
      fc.property(evidenceAndBody, ({ evidence, body }) => {
        const text = storedEvidenceText('authorization', evidence, body);
        expect(text.startsWith('[')).toBe(true);
        const outcome = (changed: string) => {
          try {
            return canonicalize(read(changed, body)) === canonicalize(evidence) ? 'same' : 'different';
          } catch (e) {
            if (e instanceof StoredDocumentError) return 'refused';
            throw e;
          }
        };
        for (let i = 0; i < text.length; i++) {
          expect(outcome(text.slice(0, i) + text.slice(i + 1))).toBe('refused');
          for (const c of bytes) {
            const replaced = text.slice(0, i) + c + text.slice(i + 1);
            if (replaced !== text) expect(outcome(replaced)).toBe('refused');
            expect(outcome(text.slice(0, i) + c + text.slice(i))).toBe('refused');
          }
        }
      }),
      { numRuns: 6 },
    );
  });

  it('refuses an array against another receipt body, and unknown versions or lengths', () => {
    const [a, other] = fc.sample(evidenceAndBody, { numRuns: 2, seed: 11 }) as [
      { evidence: Record<string, unknown>; body: Record<string, unknown> },
      { evidence: Record<string, unknown>; body: Record<string, unknown> },
    ];
    const text = storedEvidenceText('authorization', a.evidence, a.body);
    expect(() => read(text, other.body)).toThrow(StoredDocumentError);
    expect(() => read(text, null)).toThrow(StoredDocumentError);
    expect(() => read(text, { ...a.body, receipt_kind: 'execution' })).toThrow(StoredDocumentError);
    const values = JSON.parse(text) as unknown[];
    for (const changed of [
      [3, ...values.slice(1)],
      ['2', ...values.slice(1)],
      [...values, null],
      values.slice(0, 6), // a required member missing
      [...values.slice(0, 7), null, null, null, null],
      [2],
      [],
    ]) {
      expect(() => read(JSON.stringify(changed), a.body)).toThrow(StoredDocumentError);
    }
    // Object text keeps reading as it always did, whatever the kind.
    expect(read(canonicalize(a.evidence), a.body)).toEqual(a.evidence);
    expect(evidenceFromStored('execution', '[1,2]', a.body)).toEqual([1, 2]);
  });
});

/** Whether generated evidence has the schema's shapes (generated documents are not real grants). */
function isSchemaShaped(e: Record<string, unknown>): boolean {
  return e.grant === undefined && e.approval === undefined && e.invocation === undefined;
}
