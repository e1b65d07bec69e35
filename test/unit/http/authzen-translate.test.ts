/**
 * The AuthZEN door's pure translation (src/http/authzen/translate.ts): batch defaults (§7.1.1),
 * short-circuit semantics (§7.1.2.1), lenient envelopes with Writ's fields validated.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Evaluation,
  EvaluationsRequest,
  expandBatch,
  stopsAfter,
  translateEvaluation,
} from '../../../src/http/authzen/translate.js';

const subject = { type: 'agent', id: 'prn-1' };
const action = { name: 'get_deployment' };
const resource = { type: 'deployment', id: 'production/api' };
const context = { input: { service: 'api', environment: 'production' }, run_id: 'run-1' };

describe('expandBatch', () => {
  it('an absent or empty list is one evaluation of the top-level keys', () => {
    for (const evaluations of [undefined, null, []]) {
      const req = EvaluationsRequest.parse({ subject, action, resource, context, evaluations });
      expect(expandBatch(req)).toEqual({ single: true, items: [{ subject, action, resource, context }] });
    }
  });

  it('item keys replace top-level keys whole (no deep merge)', () => {
    const req = EvaluationsRequest.parse({
      subject,
      action,
      resource,
      context,
      evaluations: [{ context: { run_id: 'run-2' } }],
    });
    expect(expandBatch(req)?.items[0]?.context).toEqual({ run_id: 'run-2' });
  });

  it('a required key missing everywhere makes the whole request invalid', () => {
    const req = EvaluationsRequest.parse({ subject, evaluations: [{ action }] });
    expect(expandBatch(req)).toBeNull();
  });
});

describe('stopsAfter', () => {
  it('execute_all never stops; the others stop on their deciding result', () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 20 }), (ds) => {
        const run = (sem: Parameters<typeof stopsAfter>[0]) => {
          const out: boolean[] = [];
          for (const d of ds) {
            out.push(d);
            if (stopsAfter(sem, d)) break;
          }
          return out;
        };
        expect(run('execute_all')).toEqual(ds);
        const firstDeny = ds.indexOf(false);
        expect(run('deny_on_first_deny')).toEqual(firstDeny < 0 ? ds : ds.slice(0, firstDeny + 1));
        const firstPermit = ds.indexOf(true);
        expect(run('permit_on_first_permit')).toEqual(firstPermit < 0 ? ds : ds.slice(0, firstPermit + 1));
      }),
    );
  });
});

describe('translateEvaluation', () => {
  it('maps subject to a named principal, action to a tool, properties to a named target', () => {
    const t = translateEvaluation(
      Evaluation.parse({
        subject,
        action,
        resource: { ...resource, properties: { service: 'api', environment: 'production' } },
        context: { ...context, idempotency_key: 'key-000001', approval_id: 'apr-1', unknown: 1 },
      }),
    );
    expect(t).toEqual({
      ok: true,
      tool_name: 'get_deployment',
      tool_contract_sha256: undefined,
      resource_type: 'deployment',
      resource_id: 'production/api',
      request: {
        input: context.input,
        run_id: 'run-1',
        idempotency_key: 'key-000001',
        approval_id: 'apr-1',
        principal_id: 'prn-1',
        target: { type: 'deployment', attributes: { service: 'api', environment: 'production' } },
      },
    });
  });

  it('refuses a context without input or run_id, or with a malformed Writ field', () => {
    for (const ctx of [
      { run_id: 'r' },
      { input: 1 },
      { input: 1, run_id: 'r', tool_contract_sha256: 'nope' },
    ]) {
      const t = translateEvaluation(Evaluation.parse({ subject, action, resource, context: ctx }));
      expect(t.ok).toBe(false);
    }
    expect(translateEvaluation(Evaluation.parse({ subject, action, resource })).ok).toBe(false);
  });

  it('the subject never selects anything: it is carried only as a principal to check', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }), (id) => {
        const t = translateEvaluation(
          Evaluation.parse({ subject: { type: 'agent', id }, action, resource, context }),
        );
        if (!t.ok) throw new Error('unexpected');
        expect(t.request.principal_id).toBe(id);
        expect('tenant_id' in t.request).toBe(false);
      }),
    );
  });
});
