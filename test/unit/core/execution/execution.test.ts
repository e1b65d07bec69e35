/**
 * `verifyExecution`: the three verified statuses, and every rejection with an ordinary, a boundary
 * and a mutation case. Observations come from `buildObservation` (an honest executor) and are then
 * edited one field at a time.
 */
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../../src/core/canonical/canonical.js';
import { contractDigest } from '../../../../src/core/contracts/contract.js';
import { verifyExecution } from '../../../../src/core/execution/execution.js';
import {
  type AuthorizationReceipt,
  EXECUTION_VIOLATIONS,
  ExecutionReceipt,
  type ToolContract,
  ToolExecutionObservation,
} from '../../../../src/core/model.js';
import {
  type ExecutionOutcome,
  LIMITS,
  ROLLBACK_OUTPUT,
  type Scenario,
  T,
  UNRELATED_SHA256,
  baselineRun,
  buildObservation,
  buildReadOnlyScenario,
  buildScenario,
  mustAuthorize,
  mustVerify,
  rebind,
} from '../fixtures.js';

interface Run {
  contract: ToolContract;
  authorization: AuthorizationReceipt;
  observation: ToolExecutionObservation;
}

/** Authorize `scenario` (after `prepare`), build the honest observation for `outcome`. */
function setup(
  outcome: ExecutionOutcome = 'succeeded',
  prepare: (s: Scenario) => void = () => {},
  base: () => Scenario = buildScenario,
): Run {
  const s = base();
  prepare(s);
  const authorization = mustAuthorize(s);
  return {
    contract: s.contract,
    authorization,
    observation: buildObservation(s.contract, authorization, outcome),
  };
}

/** Verify after editing the observation; returns the receipt body. */
function verify(edit: (o: ToolExecutionObservation, r: Run) => void = () => {}, run: Run = setup()) {
  edit(run.observation, run);
  return mustVerify(run.contract, run.authorization, run.observation).body;
}
const rejectedWith = (edit: (o: ToolExecutionObservation, r: Run) => void, run?: Run) => {
  const body = verify(edit, run);
  expect(body.status === 'rejected').toBe(body.violations.length > 0);
  return body.violations;
};

const draft = (s: Scenario) => {
  s.contract.effect = 'creates_draft';
  s.grant.allowed_effects.push('creates_draft');
  rebind(s, { reapprove: true });
};
const irreversible = (s: Scenario) => {
  s.contract.effect = 'irreversible';
  s.contract.reversible = false;
  s.grant.allowed_effects.push('irreversible');
  rebind(s, { reapprove: true });
};

describe('verified outcomes', () => {
  it('verified_succeeded: a write with complete evidence', () => {
    const { authorization, observation, execution, scenario } = baselineRun();
    expect(execution.sha256).toBe(digestOf(execution.body));
    expect(execution.body).toEqual({
      receipt_kind: 'execution',
      receipt_version: 1,
      tenant_id: 'acme',
      tool_contract_sha256: contractDigest(scenario.contract),
      authorization_receipt_sha256: authorization.sha256,
      observation_sha256: digestOf(observation),
      invocation_sha256: authorization.body.invocation_sha256,
      status: 'verified_succeeded',
      reconciliation_required: false,
      output_sha256: observation.output_sha256,
      output_bytes: new TextEncoder().encode(ROLLBACK_OUTPUT).byteLength,
      effect_id: 'rollout-7781',
      idempotency_key: authorization.body.idempotency_key,
      completed_at_unix_ms: T.completedAt,
      violations: [],
    });
    expect(ExecutionReceipt.safeParse(execution).success).toBe(true);
  });

  it('verified_failed_no_effect: a failure with no effect ID and no after-state', () => {
    const body = verify(() => {}, setup('failed_no_effect'));
    expect(body).toMatchObject({
      status: 'verified_failed_no_effect',
      reconciliation_required: false,
      effect_id: null,
    });
  });

  it('indeterminate: verified, with reconciliation required', () => {
    const body = verify(() => {}, setup('indeterminate'));
    expect(body).toMatchObject({ status: 'indeterminate', reconciliation_required: true, violations: [] });
  });

  it('indeterminate may carry partial effect evidence (it proves nothing either way)', () => {
    const body = verify((o) => {
      o.effect_id = 'rollout-7781';
      o.after_state_sha256 = UNRELATED_SHA256;
    }, setup('indeterminate'));
    expect(body.status).toBe('indeterminate');
  });

  it('a read-only call verifies without effect evidence', () => {
    expect(
      verify(
        () => {},
        setup('succeeded', () => {}, buildReadOnlyScenario),
      ).status,
    ).toBe('verified_succeeded');
  });

  it('a draft verifies with its draft ID and no before/after state', () => {
    const body = verify(() => {}, setup('succeeded', draft));
    expect(body).toMatchObject({ status: 'verified_succeeded', effect_id: 'rollout-7781' });
  });

  it('an irreversible write verifies with complete evidence', () => {
    expect(verify(() => {}, setup('succeeded', irreversible)).status).toBe('verified_succeeded');
  });

  it('a rejected receipt never requires reconciliation, even for an indeterminate outcome', () => {
    const body = verify((o) => (o.output_bytes = LIMITS.maxOutputBytes + 1), setup('indeterminate'));
    expect(body).toMatchObject({ status: 'rejected', reconciliation_required: false });
  });
});

describe('authorization receipt checks', () => {
  it('ordinary: a denied authorization never verifies an execution', () => {
    const run = setup('succeeded', (s) => (s.grant.allowed_tools = []));
    expect(run.authorization.body.decision).toBe('denied');
    expect(rejectedWith(() => {}, run)).toEqual(['authorization_denied']);
  });

  it('mutation: a receipt marked authorized that still lists violations is denied', () => {
    const run = setup();
    run.authorization.body.violations = ['tool_not_allowed'];
    run.authorization.sha256 = digestOf(run.authorization.body);
    run.observation.authorization_receipt_sha256 = run.authorization.sha256;
    expect(rejectedWith(() => {}, run)).toEqual(['authorization_denied']);
  });

  it('mutation: a decision flipped after issue is both altered and denied', () => {
    const run = setup();
    run.authorization.body.decision = 'denied';
    expect(rejectedWith(() => {}, run)).toEqual(['authorization_altered', 'authorization_denied']);
  });

  it.each<[string, (b: AuthorizationReceipt['body']) => unknown]>([
    ['input_bytes', (b: AuthorizationReceipt['body']) => (b.input_bytes += 1)],
    ['target', (b: AuthorizationReceipt['body']) => (b.target.attributes.service = 'web')],
    ['approval_id', (b: AuthorizationReceipt['body']) => (b.approval_id = null)],
    [
      'trusted_state_sha256',
      (b: AuthorizationReceipt['body']) => (b.trusted_state_sha256 = UNRELATED_SHA256),
    ],
  ])('mutation: a receipt whose %s was edited after issue is altered', (_f, edit) => {
    const run = setup();
    edit(run.authorization.body);
    expect(rejectedWith(() => {}, run)).toEqual(['authorization_altered']);
  });

  it('mutation: a receipt whose identity was replaced is altered and no longer the observed one', () => {
    const run = setup();
    const observed = run.authorization.sha256;
    run.authorization.sha256 = UNRELATED_SHA256;
    expect(rejectedWith((o) => (o.authorization_receipt_sha256 = observed), run)).toEqual([
      'authorization_altered',
      'authorization_mismatch',
    ]);
  });

  it('ordinary: an authorization for one contract does not cover another contract', () => {
    const run = setup();
    run.contract = { ...run.contract, contract_release: 'execute_rollback 2026.02.0' };
    expect(rejectedWith(() => {}, run)).toEqual(['authorization_contract_mismatch']);
  });

  it('mutation: an authorization receipt re-pointed at another contract and re-hashed', () => {
    const run = setup();
    run.authorization.body.tool_contract_sha256 = UNRELATED_SHA256;
    run.authorization.sha256 = digestOf(run.authorization.body);
    expect(rejectedWith((o) => (o.authorization_receipt_sha256 = run.authorization.sha256), run)).toEqual([
      'authorization_contract_mismatch',
    ]);
  });

  it('ordinary: output of call A attached to the authorization of call B', () => {
    expect(rejectedWith((o) => (o.authorization_receipt_sha256 = UNRELATED_SHA256))).toEqual([
      'authorization_mismatch',
    ]);
  });

  it('ordinary: an observation of another invocation', () => {
    expect(rejectedWith((o) => (o.invocation_sha256 = UNRELATED_SHA256))).toEqual(['invocation_mismatch']);
  });

  it('boundary: the observation of a different invocation under the same receipt sha is still refused', () => {
    const other = setup('succeeded', (s) => (s.invocation.invocation_id = 'invocation-0099'));
    expect(rejectedWith((o) => (o.invocation_sha256 = other.authorization.body.invocation_sha256))).toEqual([
      'invocation_mismatch',
    ]);
  });
});

describe('executor release', () => {
  it('ordinary: another executor release is drift', () => {
    expect(rejectedWith((o) => (o.executor_release = 'rollback-executor 1.5.0'))).toEqual([
      'executor_release_mismatch',
    ]);
  });
  it('boundary: releases compare exactly (no trimming, no case folding)', () => {
    expect(rejectedWith((o) => (o.executor_release = `${o.executor_release} `))).toEqual([
      'executor_release_mismatch',
    ]);
    expect(rejectedWith((o) => (o.executor_release = o.executor_release.toUpperCase()))).toEqual([
      'executor_release_mismatch',
    ]);
  });
  it('mutation: the executor of the read tool cannot report a rollback', () => {
    expect(rejectedWith((o) => (o.executor_release = 'deployment-reader 2.0.1'))).toEqual([
      'executor_release_mismatch',
    ]);
  });
});

describe('idempotency key', () => {
  it('ordinary: a retry under another key is another operation', () => {
    expect(rejectedWith((o) => (o.idempotency_key = 'acme:execute_rollback:op-7f3a9c:2'))).toEqual([
      'idempotency_key_mismatch',
    ]);
  });
  it('mutation: an executor that drops the key', () => {
    expect(rejectedWith((o) => (o.idempotency_key = null))).toEqual(['idempotency_key_mismatch']);
  });
  it('boundary: a keyless read with a keyless observation verifies; an added key does not', () => {
    const read = () => setup('succeeded', () => {}, buildReadOnlyScenario);
    expect(rejectedWith(() => {}, read())).toEqual([]);
    expect(rejectedWith((o) => (o.idempotency_key = 'acme:get:00000001'), read())).toEqual([
      'idempotency_key_mismatch',
    ]);
  });
});

describe('timeline', () => {
  it('boundary: started exactly at evaluation is fine; one ms earlier is before authorization', () => {
    expect(rejectedWith((o) => (o.started_at_unix_ms = T.now))).toEqual([]);
    expect(rejectedWith((o) => (o.started_at_unix_ms = T.now - 1))).toEqual(['started_before_authorization']);
  });
  it('ordinary: completion before the request', () => {
    expect(
      rejectedWith((o) => {
        o.started_at_unix_ms = T.now;
        o.completed_at_unix_ms = T.requestedAt - 1;
      }),
    ).toEqual(['completed_before_request', 'completed_before_start']);
  });
  it('boundary: completion exactly at the request time is allowed, one ms earlier is not', () => {
    // The request is stamped later than the evaluation here, so only the request bound is in play.
    const at = (requested: number) =>
      rejectedWith(
        () => {},
        setup('succeeded', (s) => (s.invocation.requested_at_unix_ms = requested)),
      );
    expect(at(T.completedAt)).toEqual([]);
    expect(at(T.completedAt + 1)).toEqual(['completed_before_request']);
  });
  it('boundary: completion exactly at start is allowed, one ms earlier is before start', () => {
    expect(rejectedWith((o) => (o.completed_at_unix_ms = o.started_at_unix_ms))).toEqual([]);
    expect(rejectedWith((o) => (o.completed_at_unix_ms = o.started_at_unix_ms - 1))).toEqual([
      'completed_before_start',
    ]);
  });
  it('boundary: completion exactly at the timeout is allowed, one ms later is rejected', () => {
    expect(rejectedWith((o) => (o.completed_at_unix_ms = o.started_at_unix_ms + LIMITS.timeoutMs))).toEqual(
      [],
    );
    expect(
      rejectedWith((o) => (o.completed_at_unix_ms = o.started_at_unix_ms + LIMITS.timeoutMs + 1)),
    ).toEqual(['completed_after_timeout']);
  });
  it('mutation: a completion hours later is past the timeout, whatever the outcome', () => {
    for (const outcome of ['succeeded', 'failed_no_effect', 'indeterminate'] as const) {
      expect(rejectedWith((o) => (o.completed_at_unix_ms += 3_600_000), setup(outcome))).toEqual([
        'completed_after_timeout',
      ]);
    }
  });
});

describe('output', () => {
  it('boundary: output of exactly max_output_bytes is allowed; one more is too large', () => {
    expect(rejectedWith((o) => (o.output_bytes = LIMITS.maxOutputBytes))).toEqual([]);
    expect(rejectedWith((o) => (o.output_bytes = LIMITS.maxOutputBytes + 1))).toEqual(['output_too_large']);
  });
  it('ordinary: the output bound applies to failures and indeterminate outcomes too', () => {
    for (const outcome of ['failed_no_effect', 'indeterminate'] as const) {
      expect(
        rejectedWith((o) => {
          o.output_bytes = LIMITS.maxOutputBytes + 1;
          o.output_sha256 = UNRELATED_SHA256;
        }, setup(outcome)),
      ).toEqual(['output_too_large']);
    }
  });
  it('boundary: success with one byte of output is allowed; with none it is empty', () => {
    expect(rejectedWith((o) => (o.output_bytes = 1))).toEqual([]);
    expect(rejectedWith((o) => (o.output_bytes = 0))).toEqual(['output_empty']);
  });
  it('mutation: success with no output and no digest reports both, once each', () => {
    expect(
      rejectedWith((o) => {
        o.output_bytes = 0;
        o.output_sha256 = null;
      }),
    ).toEqual(['output_empty', 'output_missing_digest']);
  });
  it('ordinary: success output without a digest', () => {
    expect(rejectedWith((o) => (o.output_sha256 = null))).toEqual(['output_missing_digest']);
  });
  it('mutation: a failure with output bytes but no digest', () => {
    expect(rejectedWith((o) => (o.output_sha256 = null), setup('failed_no_effect'))).toEqual([
      'output_missing_digest',
    ]);
  });
  it('boundary: a failure or indeterminate outcome may have no output at all', () => {
    const none = (o: ToolExecutionObservation) => {
      o.output_bytes = 0;
      o.output_sha256 = null;
    };
    expect(rejectedWith(none, setup('failed_no_effect'))).toEqual([]);
    expect(rejectedWith(none, setup('indeterminate'))).toEqual([]);
  });
});

describe('write evidence', () => {
  it.each<[string, string, (o: ToolExecutionObservation) => unknown]>([
    ['effect ID', 'write_effect_id_missing', (o: ToolExecutionObservation) => (o.effect_id = null)],
    [
      'before state',
      'write_before_state_missing',
      (o: ToolExecutionObservation) => (o.before_state_sha256 = null),
    ],
    [
      'after state',
      'write_after_state_missing',
      (o: ToolExecutionObservation) => (o.after_state_sha256 = null),
    ],
  ])('ordinary: a write success without its %s', (_name, code, edit) => {
    expect(rejectedWith(edit)).toEqual([code]);
  });
  it('mutation: an irreversible success without evidence', () => {
    expect(
      rejectedWith(
        (o) => {
          o.effect_id = null;
          o.before_state_sha256 = null;
          o.after_state_sha256 = null;
        },
        setup('succeeded', irreversible),
      ),
    ).toEqual(['write_after_state_missing', 'write_before_state_missing', 'write_effect_id_missing']);
  });
  it('ordinary: a draft success without its draft ID', () => {
    expect(rejectedWith((o) => (o.effect_id = null), setup('succeeded', draft))).toEqual([
      'draft_effect_id_missing',
    ]);
  });
  it('boundary: a draft needs no before/after state', () => {
    const run = setup('succeeded', draft);
    expect(run.observation.before_state_sha256).toBeNull();
    expect(rejectedWith(() => {}, run)).toEqual([]);
  });
});

describe('effect claims', () => {
  it.each<[string, (o: ToolExecutionObservation) => unknown]>([
    ['an effect ID', (o: ToolExecutionObservation) => (o.effect_id = 'rollout-7781')],
    ['an after state', (o: ToolExecutionObservation) => (o.after_state_sha256 = UNRELATED_SHA256)],
  ])('ordinary: "no effect" with %s is a contradiction', (_name, edit) => {
    expect(rejectedWith(edit, setup('failed_no_effect'))).toEqual(['effect_claimed_on_no_effect_failure']);
  });
  it('boundary: "no effect" with only the unchanged before state is allowed', () => {
    const run = setup('failed_no_effect');
    expect(run.observation.before_state_sha256).not.toBeNull();
    expect(rejectedWith(() => {}, run)).toEqual([]);
  });
  it.each<[string, (o: ToolExecutionObservation) => unknown]>([
    ['an effect ID', (o: ToolExecutionObservation) => (o.effect_id = 'rollout-7781')],
    ['a before state', (o: ToolExecutionObservation) => (o.before_state_sha256 = UNRELATED_SHA256)],
    ['an after state', (o: ToolExecutionObservation) => (o.after_state_sha256 = UNRELATED_SHA256)],
  ])('mutation: a read-only call claiming %s is suspicious, on every outcome', (_name, edit) => {
    for (const outcome of ['succeeded', 'failed_no_effect', 'indeterminate'] as const) {
      const violations = rejectedWith(
        edit,
        setup(outcome, () => {}, buildReadOnlyScenario),
      );
      expect(violations).toContain('effect_claimed_on_read_only');
    }
  });
});

describe('receipt shape', () => {
  it('violations are sorted, unique, and only documented codes', () => {
    const body = verify((o, r) => {
      r.authorization.body.decision = 'denied';
      o.executor_release = 'other';
      o.invocation_sha256 = UNRELATED_SHA256;
      o.idempotency_key = null;
      o.started_at_unix_ms = T.now - 1;
      o.completed_at_unix_ms = T.requestedAt - 1;
      o.output_bytes = 0;
      o.output_sha256 = null;
      o.effect_id = null;
      o.before_state_sha256 = null;
      o.after_state_sha256 = null;
    });
    expect(body.violations).toEqual([...new Set(body.violations)].sort());
    for (const v of body.violations) expect(EXECUTION_VIOLATIONS).toContain(v);
    expect(body.violations).toEqual([
      'authorization_altered',
      'authorization_denied',
      'completed_before_request',
      'completed_before_start',
      'executor_release_mismatch',
      'idempotency_key_mismatch',
      'invocation_mismatch',
      'output_empty',
      'output_missing_digest',
      'started_before_authorization',
      'write_after_state_missing',
      'write_before_state_missing',
      'write_effect_id_missing',
    ]);
  });

  it('the receipt binds the observation exactly: any field change changes it', () => {
    const base = verify();
    const other = verify((o) => (o.observation_id = 'observation-retry'));
    expect(other.status).toBe('verified_succeeded');
    expect(other.observation_sha256).not.toBe(base.observation_sha256);
  });

  it('the tenant and invocation come from the authorization receipt, not the observation', () => {
    const { execution, authorization } = baselineRun();
    expect(execution.body.tenant_id).toBe(authorization.body.tenant_id);
    expect(execution.body.invocation_sha256).toBe(authorization.body.invocation_sha256);
  });

  it('an observation with no canonical form is refused, never thrown', () => {
    // Regression: a lone surrogate in a label is refused by the schema, and a caller that bypasses
    // the schema gets `canonicalization_failed`, not an exception.
    const run = setup();
    run.observation.executor_release = 'rollback-executor \ud800';
    expect(ToolExecutionObservation.safeParse(run.observation).success).toBe(false);
    const r = verifyExecution(run.contract, run.authorization, run.observation);
    expect(r.ok ? r.value.body.status : r.error.reason).toBe('canonicalization_failed');
  });

  it('an invalid contract cannot be evaluated', () => {
    const run = setup();
    const r = verifyExecution({ ...run.contract, timeout_ms: 0 }, run.authorization, run.observation);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.issues.map((i) => i.path)).toEqual(['contract.timeout_ms']);
  });
});
