import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CLAIM_LEASE_GRACE_MS,
  type ClaimEvent,
  type DispatchRefusal,
  type DispatchState,
  OPERATION_NAME_TAG,
  OPERATION_NAME_TAG_V1,
  OPERATION_STATUSES,
  type Operation,
  type OperationStatus,
  type ReportEvent,
  advance,
  claim,
  constantTimeEqual,
  dispatchRefusal,
  formatFencingToken,
  leaseMs,
  legacyKeyClaim,
  legacyOperationId,
  nextAlarmAt,
  operationId,
  reconcile,
  report,
  startedBeforeClaim,
  tick,
  viewOf,
} from '../../../../src/core/execution/idempotency.js';
import { canonicalize, digestOf } from '../../../../src/core/canonical/canonical.js';
import type { ExecutionStatus, ToolExecutionObservation } from '../../../../src/core/model.js';
import { ReconciliationReceipt, reconcileOperation } from '../../../../src/core/execution/reconciliation.js';
import { baselineRun, buildObservation } from '../fixtures.js';

const h = (c: string) => c.repeat(64);
const NONCE = 'a'.repeat(32);
const OTHER_NONCE = 'b'.repeat(32);
const T0 = 1_700_000_000_000;
const LEASE = 60_000;
const WINDOW = 3_600_000;

const claimEvent = (over: Partial<ClaimEvent> = {}): ClaimEvent => ({
  operation_id: h('0'),
  tenant_id: 'tenant-a',
  tool_contract_sha256: h('1'),
  tool_name: 'execute_rollback',
  idempotency_key: 'key-00000001',
  input_sha256: h('2'),
  authorization_receipt_sha256: h('3'),
  principal_id: 'executor-1',
  lease_ms: LEASE,
  reconciliation_owner: 'oncall-1',
  reconciliation_window_ms: WINDOW,
  fencing_nonce: NONCE,
  ...over,
});

const TOKEN = formatFencingToken(1, NONCE);

const reportEvent = (status: ExecutionStatus, over: Partial<ReportEvent> = {}): ReportEvent => ({
  principal_id: 'executor-1',
  fencing_token: TOKEN,
  execution_receipt_sha256: h('4'),
  execution_status: status,
  ...over,
});

function fresh(): Operation {
  const t = claim(null, claimEvent(), T0);
  if (t.state === null) throw new Error('no state');
  return t.state;
}

/** One stored operation in each state, with the time at which to send it the next event. */
function inState(status: OperationStatus): Operation {
  const p = fresh();
  const at = T0 + 1000;
  const reported = (s: ExecutionStatus) => report(p, reportEvent(s), at).state as Operation;
  switch (status) {
    case 'pending':
      return p;
    case 'succeeded':
      return reported('verified_succeeded');
    case 'failed_no_effect':
      return reported('verified_failed_no_effect');
    case 'reconciliation_required':
      return reported('indeterminate');
    case 'escalated':
      return advance(reported('indeterminate'), at + WINDOW);
    case 'reconciled_succeeded':
      return reconcile(
        reported('indeterminate'),
        { reconciliation_receipt_sha256: h('5'), resolution: 'verified_succeeded' },
        at + 1,
      ).state as Operation;
    case 'reconciled_no_effect':
      return reconcile(
        reported('indeterminate'),
        { reconciliation_receipt_sha256: h('5'), resolution: 'verified_failed_no_effect' },
        at + 1,
      ).state as Operation;
  }
}

describe('operation names', () => {
  const scope = (tool_name: string, c = h('1')) => ({ tool_name, tool_contract_sha256: c });
  const k = (key: string) => ({ kind: 'idempotency_key', idempotency_key: key }) as const;

  it('hash a versioned JSON array of tenant, tool and key, not a concatenation', () => {
    const id = operationId('t', scope('deploy'), k('key-00000001'));
    expect(id).toBe(digestOf([OPERATION_NAME_TAG, 't', 'deploy', 'key-00000001']));
    expect(canonicalize([OPERATION_NAME_TAG, 't', 'deploy', 'key-00000001'])).toContain(
      '"writ.idempotency.v2"',
    );
    expect(legacyOperationId('t', h('1'), 'key-00000001')).toBe(
      digestOf([OPERATION_NAME_TAG_V1, 't', h('1'), 'key-00000001']),
    );
  });

  it('give one name to every contract of a tool under one key (one logical operation)', () => {
    expect(operationId('a', scope('deploy', h('1')), k('key-0000000b'))).toBe(
      operationId('a', scope('deploy', h('2')), k('key-0000000b')),
    );
    // A v2 name never equals the v1 name of the same key, so old objects are never re-used silently.
    expect(operationId('a', scope('deploy'), k('key-0000000b'))).not.toBe(
      legacyOperationId('a', h('1'), 'key-0000000b'),
    );
  });

  it('separate tenants, tools and keys, and cannot be forged by shifting a separator', () => {
    const ids = new Set([
      operationId('a', scope('deploy'), k('key-0000000b')),
      operationId('b', scope('deploy'), k('key-0000000b')),
      operationId('a', scope('rollback'), k('key-0000000b')),
      operationId('a', scope('deploy'), k('key-0000000c')),
      operationId('a:', scope('deploy'), k('key-0000000b')),
      operationId('a', scope(':deploy'), k('key-0000000b')),
    ]);
    expect(ids.size).toBe(6);
  });

  it('keep single-use names apart from a key that spells a receipt digest, per contract', () => {
    const keyed = operationId('a', scope('deploy'), k(h('3')));
    const single = operationId('a', scope('deploy'), {
      kind: 'authorization',
      authorization_receipt_sha256: h('3'),
    });
    expect(keyed).not.toBe(single);
    expect(
      operationId('a', scope('deploy', h('2')), {
        kind: 'authorization',
        authorization_receipt_sha256: h('3'),
      }),
    ).not.toBe(single);
  });
});

describe('claim', () => {
  it('proceeds exactly once, with a fenced lease', () => {
    const t = claim(null, claimEvent(), T0);
    expect(t.changed).toBe(true);
    expect(t.answer).toEqual({ kind: 'proceed', fencing_token: TOKEN, lease_expires_at_unix_ms: T0 + LEASE });
    expect(t.state?.status).toBe('pending');
    const again = claim(t.state, claimEvent({ fencing_nonce: OTHER_NONCE }), T0 + 1);
    expect(again.answer).toEqual({ kind: 'refused', reason: 'in_progress' });
    expect(again.changed).toBe(false);
  });

  it('refuses a different input before looking at the state, in every state', () => {
    for (const status of OPERATION_STATUSES) {
      const t = claim(inState(status), claimEvent({ input_sha256: h('9') }), T0 + 2000);
      expect(t.answer, status).toEqual({ kind: 'refused', reason: 'idempotency_key_reused' });
      // The refusal carries the reason only: nothing of the stored input.
      expect(JSON.stringify(t.answer)).not.toContain(h('2'));
    }
  });

  it('never hands a pending operation past its lease to a new owner', () => {
    const t = claim(fresh(), claimEvent({ fencing_nonce: OTHER_NONCE }), T0 + LEASE);
    expect(t.answer).toEqual({ kind: 'refused', reason: 'reconciliation_required' });
    expect(t.changed).toBe(true);
    expect(t.state).toMatchObject({
      status: 'reconciliation_required',
      reconciliation_reason: 'lease_expired',
      reconciliation_deadline_unix_ms: T0 + LEASE + WINDOW,
      fencing_nonce: NONCE,
    });
  });
});

describe('one logical operation per tenant, tool and key', () => {
  const underB = (over: Partial<ClaimEvent> = {}) =>
    claimEvent({ tool_contract_sha256: h('8'), fencing_nonce: OTHER_NONCE, ...over });

  it('refuses a claim under another contract of the tool by the state of the first', () => {
    const expected: Record<OperationStatus, string> = {
      pending: 'in_progress',
      reconciliation_required: 'reconciliation_required',
      escalated: 'reconciliation_required',
      // Settled under contract A: the key named that contract's operation; B needs a new key.
      succeeded: 'idempotency_key_reused',
      failed_no_effect: 'idempotency_key_reused',
      reconciled_succeeded: 'idempotency_key_reused',
      reconciled_no_effect: 'idempotency_key_reused',
    };
    for (const status of OPERATION_STATUSES) {
      const t = claim(inState(status), underB(), T0 + 2000);
      expect(t.answer, status).toEqual({ kind: 'refused', reason: expected[status] });
      expect(t.state?.tool_contract_sha256).toBe(h('1'));
    }
  });

  it('never proceeds twice whatever contracts the claims name (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ c: fc.constantFrom('1', '8', 'c'), dt: fc.nat(LEASE * 2) }), {
          minLength: 1,
          maxLength: 12,
        }),
        (claims) => {
          let state: Operation | null = null;
          let now = T0;
          let proceeds = 0;
          for (const x of claims) {
            now += x.dt;
            const t = claim(state, claimEvent({ tool_contract_sha256: h(x.c) }), now);
            if (t.answer.kind === 'proceed') proceeds++;
            state = t.state;
          }
          return proceeds === 1;
        },
      ),
    );
  });
});

describe('legacyKeyClaim (objects named before v2)', () => {
  const T = 'tenant-a';
  const KEY = 'key-00000001';
  const V2 = h('e');
  const row = (contract: string, state: string, input = h('2')) => ({
    operation_id: legacyOperationId(T, contract, KEY),
    tool_contract_sha256: contract,
    input_sha256: input,
    state,
  });
  const c = { tenant_id: T, tool_contract_sha256: h('8'), idempotency_key: KEY, input_sha256: h('2') };

  it('routes the same contract to its v1 object, whatever its state', () => {
    for (const state of ['pending', 'succeeded', 'escalated']) {
      expect(legacyKeyClaim([row(h('8'), state)], V2, c)).toEqual({
        kind: 'route',
        operation_id: legacyOperationId(T, h('8'), KEY),
      });
    }
  });

  it('refuses another contract: live, unresolved (naming it), settled or another input', () => {
    const a = legacyOperationId(T, h('1'), KEY);
    expect(legacyKeyClaim([row(h('1'), 'pending')], V2, c)).toEqual({
      kind: 'refused',
      reason: 'in_progress',
      operation_id: a,
    });
    for (const state of ['reconciliation_required', 'escalated']) {
      expect(legacyKeyClaim([row(h('1'), state)], V2, c)).toEqual({
        kind: 'refused',
        reason: 'reconciliation_required',
        operation_id: a,
      });
    }
    expect(legacyKeyClaim([row(h('1'), 'succeeded')], V2, c)).toEqual({
      kind: 'refused',
      reason: 'idempotency_key_reused',
      operation_id: null,
    });
    expect(legacyKeyClaim([row(h('1'), 'escalated', h('9'))], V2, c)).toEqual({
      kind: 'refused',
      reason: 'idempotency_key_reused',
      operation_id: null,
    });
  });

  it('ignores the v2 row and rows whose id is not a v1 name of their key', () => {
    const v2row = { ...row(h('1'), 'escalated'), operation_id: V2 };
    const stray = { ...row(h('1'), 'escalated'), operation_id: h('f') };
    expect(legacyKeyClaim([v2row, stray], V2, c)).toEqual({ kind: 'none' });
    expect(legacyKeyClaim([], V2, c)).toEqual({ kind: 'none' });
  });
});

describe('startedBeforeClaim', () => {
  it('refuses an execution that started before the claim, beyond the clock skew', () => {
    const op = { created_at_unix_ms: T0 };
    expect(startedBeforeClaim(op, T0, 5_000)).toBe(false);
    expect(startedBeforeClaim(op, T0 - 5_000, 5_000)).toBe(false);
    expect(startedBeforeClaim(op, T0 - 5_001, 5_000)).toBe(true);
    expect(startedBeforeClaim(op, T0 - 1, 0)).toBe(true);
  });
});

describe('report', () => {
  it.each([
    ['verified_succeeded', 'succeeded', null],
    ['verified_failed_no_effect', 'failed_no_effect', null],
    ['indeterminate', 'reconciliation_required', 'indeterminate'],
    ['rejected', 'reconciliation_required', 'rejected'],
  ] as const)('records %s as %s', (status, next, reason) => {
    const t = report(fresh(), reportEvent(status), T0 + 10);
    expect(t.answer).toEqual({ kind: 'recorded' });
    expect(t.state).toMatchObject({
      status: next,
      reconciliation_reason: reason,
      execution_receipt_sha256: h('4'),
      execution_status: status,
      reconciliation_deadline_unix_ms: reason === null ? null : T0 + 10 + WINDOW,
    });
  });

  it('refuses a stale or foreign token, another principal, and a report after the lease', () => {
    const p = fresh();
    const stale = [
      reportEvent('verified_succeeded', { fencing_token: formatFencingToken(1, OTHER_NONCE) }),
      reportEvent('verified_succeeded', { fencing_token: formatFencingToken(2, NONCE) }),
      reportEvent('verified_succeeded', { principal_id: 'executor-2' }),
    ];
    for (const e of stale) {
      expect(report(p, e, T0 + 10).answer).toEqual({ kind: 'refused', reason: 'stale_fencing_token' });
    }
    const late = report(p, reportEvent('verified_succeeded'), T0 + LEASE);
    expect(late.answer).toEqual({ kind: 'refused', reason: 'stale_fencing_token' });
    expect(late.state?.status).toBe('reconciliation_required');
  });

  it('replays the same report and refuses a different second one', () => {
    const done = report(fresh(), reportEvent('indeterminate'), T0 + 10).state;
    expect(report(done, reportEvent('indeterminate'), T0 + 20)).toMatchObject({
      answer: { kind: 'replay' },
      changed: false,
    });
    const other = report(
      done,
      reportEvent('verified_succeeded', { execution_receipt_sha256: h('6') }),
      T0 + 20,
    );
    expect(other.answer).toEqual({ kind: 'refused', reason: 'stale_fencing_token' });
    expect(other.state?.status).toBe('reconciliation_required');
  });

  it('answers not_found without an operation', () => {
    expect(report(null, reportEvent('verified_succeeded'), T0).answer).toEqual({
      kind: 'refused',
      reason: 'not_found',
    });
  });
});

describe('reconcile', () => {
  const ev = (
    sha: string,
    resolution: 'verified_succeeded' | 'verified_failed_no_effect' = 'verified_succeeded',
  ) => ({
    reconciliation_receipt_sha256: sha,
    resolution,
  });

  it('resolves reconciliation_required and escalated, keeping the original receipt and escalation', () => {
    const esc = inState('escalated');
    const t = reconcile(esc, ev(h('5'), 'verified_failed_no_effect'), T0 + WINDOW * 2);
    expect(t.answer).toEqual({ kind: 'recorded' });
    expect(t.state).toMatchObject({
      status: 'reconciled_no_effect',
      execution_receipt_sha256: h('4'),
      reconciliation_receipt_sha256: h('5'),
      escalated_at_unix_ms: esc.escalated_at_unix_ms,
    });
  });

  it('replays the same resolution and refuses a second, different one', () => {
    const done = inState('reconciled_succeeded');
    expect(reconcile(done, ev(h('5')), T0 + 5000).answer).toEqual({ kind: 'replay' });
    expect(reconcile(done, ev(h('6')), T0 + 5000).answer).toEqual({
      kind: 'refused',
      reason: 'not_reconcilable',
    });
  });

  it('refuses a live pending operation and settled ones, but takes a crashed one', () => {
    for (const s of ['pending', 'succeeded', 'failed_no_effect'] as const) {
      expect(reconcile(inState(s), ev(h('5')), T0 + 5000).answer, s).toEqual({
        kind: 'refused',
        reason: 'not_reconcilable',
      });
    }
    const crashed = reconcile(fresh(), ev(h('5')), T0 + LEASE + 1);
    expect(crashed.answer).toEqual({ kind: 'recorded' });
    expect(crashed.state).toMatchObject({ status: 'reconciled_succeeded', execution_receipt_sha256: null });
  });
});

describe('time', () => {
  it('escalates an unresolved operation at its deadline, once', () => {
    const r = inState('reconciliation_required');
    const deadline = r.reconciliation_deadline_unix_ms as number;
    expect(tick(r, deadline - 1).changed).toBe(false);
    const t = tick(r, deadline);
    expect(t.state).toMatchObject({ status: 'escalated', escalated_at_unix_ms: deadline });
    expect(tick(t.state, deadline + 10).changed).toBe(false);
  });

  it('takes a crashed pending operation through reconciliation to escalation in one late step', () => {
    const t = tick(fresh(), T0 + LEASE + WINDOW + 5);
    expect(t.state).toMatchObject({ status: 'escalated', reconciliation_reason: 'lease_expired' });
  });

  it('schedules the next alarm only while something is due', () => {
    const due: Record<OperationStatus, number | null> = {
      pending: T0 + LEASE,
      succeeded: null,
      failed_no_effect: null,
      reconciliation_required: T0 + 1000 + WINDOW,
      escalated: null,
      reconciled_succeeded: null,
      reconciled_no_effect: null,
    };
    for (const s of OPERATION_STATUSES) expect(nextAlarmAt(inState(s)), s).toBe(due[s]);
  });
});

describe('the state × event table', () => {
  // Every state against every kind of event; expected answers kept as data.
  type Row = [OperationStatus, string, string, OperationStatus];
  const at = T0 + 2000;
  const events: Record<string, (op: Operation) => { answer: unknown; state: Operation | null }> = {
    'claim same input': (op) => claim(op, claimEvent({ fencing_nonce: OTHER_NONCE }), at),
    'claim other input': (op) => claim(op, claimEvent({ input_sha256: h('9') }), at),
    'report owner ok': (op) =>
      report(op, reportEvent('verified_succeeded', { execution_receipt_sha256: h('7') }), at),
    'report stale token': (op) =>
      report(
        op,
        reportEvent('verified_succeeded', { fencing_token: formatFencingToken(1, OTHER_NONCE) }),
        at,
      ),
    reconcile: (op) =>
      reconcile(op, { reconciliation_receipt_sha256: h('8'), resolution: 'verified_succeeded' }, at),
    tick: (op) => ({ ...tick(op, at), answer: 'none' }),
  };
  const rows: Row[] = [
    ['pending', 'claim same input', 'refused:in_progress', 'pending'],
    ['pending', 'claim other input', 'refused:idempotency_key_reused', 'pending'],
    ['pending', 'report owner ok', 'recorded', 'succeeded'],
    ['pending', 'report stale token', 'refused:stale_fencing_token', 'pending'],
    ['pending', 'reconcile', 'refused:not_reconcilable', 'pending'],
    ['pending', 'tick', 'none', 'pending'],
    ['succeeded', 'claim same input', 'replay', 'succeeded'],
    ['succeeded', 'claim other input', 'refused:idempotency_key_reused', 'succeeded'],
    ['succeeded', 'report owner ok', 'refused:stale_fencing_token', 'succeeded'],
    ['succeeded', 'report stale token', 'refused:stale_fencing_token', 'succeeded'],
    ['succeeded', 'reconcile', 'refused:not_reconcilable', 'succeeded'],
    ['succeeded', 'tick', 'none', 'succeeded'],
    ['failed_no_effect', 'claim same input', 'replay', 'failed_no_effect'],
    ['failed_no_effect', 'claim other input', 'refused:idempotency_key_reused', 'failed_no_effect'],
    ['failed_no_effect', 'report owner ok', 'refused:stale_fencing_token', 'failed_no_effect'],
    ['failed_no_effect', 'report stale token', 'refused:stale_fencing_token', 'failed_no_effect'],
    ['failed_no_effect', 'reconcile', 'refused:not_reconcilable', 'failed_no_effect'],
    ['failed_no_effect', 'tick', 'none', 'failed_no_effect'],
    [
      'reconciliation_required',
      'claim same input',
      'refused:reconciliation_required',
      'reconciliation_required',
    ],
    [
      'reconciliation_required',
      'claim other input',
      'refused:idempotency_key_reused',
      'reconciliation_required',
    ],
    ['reconciliation_required', 'report owner ok', 'refused:stale_fencing_token', 'reconciliation_required'],
    [
      'reconciliation_required',
      'report stale token',
      'refused:stale_fencing_token',
      'reconciliation_required',
    ],
    ['reconciliation_required', 'reconcile', 'recorded', 'reconciled_succeeded'],
    ['reconciliation_required', 'tick', 'none', 'reconciliation_required'],
    ['escalated', 'claim same input', 'refused:reconciliation_required', 'escalated'],
    ['escalated', 'claim other input', 'refused:idempotency_key_reused', 'escalated'],
    ['escalated', 'report owner ok', 'refused:stale_fencing_token', 'escalated'],
    ['escalated', 'report stale token', 'refused:stale_fencing_token', 'escalated'],
    ['escalated', 'reconcile', 'recorded', 'reconciled_succeeded'],
    ['escalated', 'tick', 'none', 'escalated'],
    ['reconciled_succeeded', 'claim same input', 'replay', 'reconciled_succeeded'],
    ['reconciled_succeeded', 'claim other input', 'refused:idempotency_key_reused', 'reconciled_succeeded'],
    ['reconciled_succeeded', 'report owner ok', 'refused:stale_fencing_token', 'reconciled_succeeded'],
    ['reconciled_succeeded', 'report stale token', 'refused:stale_fencing_token', 'reconciled_succeeded'],
    ['reconciled_succeeded', 'reconcile', 'refused:not_reconcilable', 'reconciled_succeeded'],
    ['reconciled_succeeded', 'tick', 'none', 'reconciled_succeeded'],
    ['reconciled_no_effect', 'claim same input', 'replay', 'reconciled_no_effect'],
    ['reconciled_no_effect', 'claim other input', 'refused:idempotency_key_reused', 'reconciled_no_effect'],
    ['reconciled_no_effect', 'report owner ok', 'refused:stale_fencing_token', 'reconciled_no_effect'],
    ['reconciled_no_effect', 'report stale token', 'refused:stale_fencing_token', 'reconciled_no_effect'],
    ['reconciled_no_effect', 'reconcile', 'refused:not_reconcilable', 'reconciled_no_effect'],
    ['reconciled_no_effect', 'tick', 'none', 'reconciled_no_effect'],
  ];

  it('covers every state and every event', () => {
    expect(new Set(rows.map((r) => r[0]))).toEqual(new Set(OPERATION_STATUSES));
    expect(rows.length).toBe(OPERATION_STATUSES.length * Object.keys(events).length);
  });

  it.each(rows)('%s + %s -> %s, %s', (status, event, answer, next) => {
    const run = events[event];
    if (run === undefined) throw new Error(`unknown event ${event}`);
    const t = run(inState(status));
    const a = t.answer as { kind?: string; reason?: string } | string;
    const got = typeof a === 'string' ? a : a.kind === 'refused' ? `refused:${a.reason}` : a.kind;
    expect(got).toBe(answer);
    expect(t.state?.status).toBe(next);
  });
});

describe('properties', () => {
  const arbEvent = fc.oneof(
    fc.record({
      kind: fc.constant('claim' as const),
      input: fc.constantFrom(h('2'), h('9')),
      nonce: fc.constantFrom(NONCE, OTHER_NONCE),
    }),
    fc.record({
      kind: fc.constant('report' as const),
      status: fc.constantFrom<ExecutionStatus>(
        'verified_succeeded',
        'verified_failed_no_effect',
        'indeterminate',
        'rejected',
      ),
      token: fc.constantFrom(TOKEN, formatFencingToken(1, OTHER_NONCE)),
      sha: fc.constantFrom(h('4'), h('6')),
    }),
    fc.record({
      kind: fc.constant('reconcile' as const),
      sha: fc.constantFrom(h('5'), h('6')),
      resolution: fc.constantFrom('verified_succeeded' as const, 'verified_failed_no_effect' as const),
    }),
    fc.record({ kind: fc.constant('tick' as const) }),
  );
  const arbRun = fc.array(fc.tuple(arbEvent, fc.integer({ min: 0, max: 2 * WINDOW })), { maxLength: 30 });

  it('never proceeds twice, never regresses from a settled state, and versions every change', () => {
    fc.assert(
      fc.property(arbRun, (run) => {
        let state: Operation | null = null;
        let now = T0;
        let proceeds = 0;
        for (const [e, dt] of run) {
          now += dt;
          const before: Operation | null = state;
          let t: { state: Operation | null; changed: boolean; answer: unknown };
          switch (e.kind) {
            case 'claim':
              t = claim(state, claimEvent({ input_sha256: e.input, fencing_nonce: e.nonce }), now);
              if ((t.answer as { kind: string }).kind === 'proceed') proceeds++;
              break;
            case 'report':
              t = report(
                state,
                reportEvent(e.status, { fencing_token: e.token, execution_receipt_sha256: e.sha }),
                now,
              );
              break;
            case 'reconcile':
              t = reconcile(state, { reconciliation_receipt_sha256: e.sha, resolution: e.resolution }, now);
              break;
            case 'tick':
              t = tick(state, now);
              break;
          }
          state = t.state;
          if (before !== null && state !== null) {
            // Identity and input never change once the operation exists.
            expect(state.input_sha256).toBe(before.input_sha256);
            expect(state.authorization_receipt_sha256).toBe(before.authorization_receipt_sha256);
            if (t.changed) expect(state.updated_at_unix_ms).toBeGreaterThan(before.updated_at_unix_ms);
            else expect(state).toBe(before);
            // Settled outcomes are final; a recorded execution receipt is never replaced.
            if (
              ['succeeded', 'failed_no_effect', 'reconciled_succeeded', 'reconciled_no_effect'].includes(
                before.status,
              )
            ) {
              expect(state.status).toBe(before.status);
            }
            if (before.execution_receipt_sha256 !== null) {
              expect(state.execution_receipt_sha256).toBe(before.execution_receipt_sha256);
            }
          }
        }
        expect(proceeds).toBeLessThanOrEqual(1);
      }),
    );
  });

  it('keeps the fencing nonce out of the view', () => {
    const view = viewOf(fresh());
    expect(JSON.stringify(view)).not.toContain(NONCE);
    expect(view).not.toHaveProperty('fencing_nonce');
  });

  it('compares in constant time but correctly', () => {
    fc.assert(fc.property(fc.string(), fc.string(), (a, b) => constantTimeEqual(a, b) === (a === b)));
  });
});

describe('dispatchRefusal', () => {
  const base: DispatchState = {
    receipt: { decision: 'authorized', violations: [], evaluated_at_unix_ms: T0, policy_sha256: h('p') },
    authorization_max_dispatch_ms: 60_000,
    current_policy_sha256: h('p'),
    grant_expires_at_unix_ms: T0 + WINDOW,
    grant_revoked: false,
    approval_expires_at_unix_ms: T0 + 900_000,
    contract_quarantined: false,
    principal_revoked: false,
    approver_revoked: false,
    contract_executor_release: 'rollback-executor 1.4.2',
    executor_release: 'rollback-executor 1.4.2',
    audience_principal_id: null,
    executor_principal_id: 'prn-executor',
  };

  it.each<[string, Partial<DispatchState>, number, DispatchRefusal | null]>([
    ['a fresh authorized receipt', {}, T0 + 1, null],
    [
      'a denied receipt',
      { receipt: { ...base.receipt, decision: 'denied', violations: ['approval_missing'] } },
      T0 + 1,
      'authorization_denied',
    ],
    ['the dispatch deadline', {}, T0 + 60_000, 'authorization_expired'],
    ['an expired grant', { grant_expires_at_unix_ms: T0 + 10 }, T0 + 10, 'authorization_expired'],
    ['an expired approval', { approval_expires_at_unix_ms: T0 + 10 }, T0 + 10, 'authorization_expired'],
    ['no approval at all', { approval_expires_at_unix_ms: null }, T0 + 1, null],
    ['a revoked grant', { grant_revoked: true }, T0 + 1, 'authorization_revoked'],
    ['a quarantined contract', { contract_quarantined: true }, T0 + 1, 'authorization_revoked'],
    ['a revoked agent', { principal_revoked: true }, T0 + 1, 'authorization_revoked'],
    ['a revoked approver', { approver_revoked: true }, T0 + 1, 'authorization_revoked'],
    ['a new policy', { current_policy_sha256: h('q') }, T0 + 1, 'authorization_revoked'],
    [
      'another executor release',
      { executor_release: 'deployment-reader 2.0.1' },
      T0 + 1,
      'executor_mismatch',
    ],
    ['a principal that is no executor', { executor_release: null }, T0 + 1, 'executor_mismatch'],
    ['the executor principal the receipt names', { audience_principal_id: 'prn-executor' }, T0 + 1, null],
    [
      'another executor principal than the receipt names (same release)',
      { audience_principal_id: 'prn-other-executor' },
      T0 + 1,
      'executor_mismatch',
    ],
    [
      'denied and expired: denial first',
      { receipt: { ...base.receipt, decision: 'denied' } },
      T0 + 60_000,
      'authorization_denied',
    ],
  ])('%s', (_name, over, now, expected) => {
    expect(dispatchRefusal({ ...base, ...over }, now)).toBe(expected);
  });

  it('gives the lease the contract timeout plus a grace period', () => {
    expect(leaseMs({ timeout_ms: 30_000 })).toBe(30_000 + CLAIM_LEASE_GRACE_MS);
  });
});

describe('reconcileOperation', () => {
  /** An edited body under its own digest: a consistent forgery, caught only by what it says. */
  const rehashed = <B extends object>(body: B) => ({ sha256: digestOf(body), body });
  const later = (o: ToolExecutionObservation, dt: number): ToolExecutionObservation => ({
    ...o,
    observation_id: `${o.observation_id}-reconciled`,
    started_at_unix_ms: o.started_at_unix_ms + dt,
    completed_at_unix_ms: o.completed_at_unix_ms + dt,
  });

  function inputs(
    outcome: 'succeeded' | 'failed_no_effect' | 'indeterminate',
    original = baselineRun('indeterminate'),
  ) {
    const target = later(
      buildObservation(original.scenario.contract, original.authorization, outcome),
      600_000,
    );
    return {
      contract: original.scenario.contract,
      authorization: original.authorization,
      operation_id: h('0'),
      original: original.execution,
      observation: target,
      reconciled_by: 'executor-1',
      now: target.completed_at_unix_ms + 1_000,
      max_clock_skew_ms: 5_000,
    };
  }

  it('links a verified resolution to the original and the authorization, and hashes its body', () => {
    const i = inputs('succeeded');
    const r = reconcileOperation(i);
    if (!r.ok || !r.value.ok) throw new Error('expected a receipt');
    const { receipt } = r.value;
    expect(receipt.body).toEqual({
      receipt_kind: 'reconciliation',
      receipt_version: 2,
      tenant_id: i.authorization.body.tenant_id,
      operation_id: h('0'),
      tool_contract_sha256: i.authorization.body.tool_contract_sha256,
      authorization_receipt_sha256: i.authorization.sha256,
      original_execution_receipt_sha256: i.original.sha256,
      target_observation_sha256: digestOf(i.observation),
      resolution: 'verified_succeeded',
      effect_id: 'rollout-7781',
      reconciled_by: 'executor-1',
      reconciled_at_unix_ms: i.now,
      violations: [],
      max_clock_skew_ms: 5_000,
    });
    expect(receipt.sha256).toBe(digestOf(receipt.body));
    expect(ReconciliationReceipt.parse(receipt)).toEqual(receipt);
  });

  it('computes version 1 (no skew bound) only when asked, and refuses an unknown version', () => {
    const i = inputs('succeeded');
    const v1 = reconcileOperation(i, { receiptVersion: 1 });
    const v2 = reconcileOperation(i);
    if (!v1.ok || !v1.value.ok || !v2.ok || !v2.value.ok) throw new Error('expected receipts');
    const {
      max_clock_skew_ms: _skew,
      receipt_version: _v,
      ...rest
    } = v2.value.receipt.body as Record<string, unknown>;
    expect(v1.value.receipt.body).toEqual({ ...rest, receipt_version: 1 });
    expect(ReconciliationReceipt.parse(v1.value.receipt)).toEqual(v1.value.receipt);
    // Version 2 binds the skew: another skew that also passes the check is another receipt.
    const wider = reconcileOperation({ ...i, max_clock_skew_ms: 6_000 });
    expect(wider.ok && wider.value.ok && wider.value.receipt.sha256).not.toBe(v2.value.receipt.sha256);
    // Version 1 does not: the loose binding version 2 exists to close.
    const widerV1 = reconcileOperation({ ...i, max_clock_skew_ms: 6_000 }, { receiptVersion: 1 });
    expect(widerV1.ok && widerV1.value.ok && widerV1.value.receipt.sha256).toBe(v1.value.receipt.sha256);
    // A version 1 body carrying the skew, or a version 2 body without it, is refused by the schema.
    expect(
      ReconciliationReceipt.safeParse({
        ...v1.value.receipt,
        body: { ...v1.value.receipt.body, max_clock_skew_ms: 5_000 },
      }).success,
    ).toBe(false);
    expect(
      ReconciliationReceipt.safeParse({ ...v2.value.receipt, body: { ...rest, receipt_version: 2 } }).success,
    ).toBe(false);
    const unknown = reconcileOperation(i, { receiptVersion: 3 as never });
    expect(!unknown.ok && unknown.error.reason).toBe('invalid_request');
  });

  it('resolves to no effect, and without an original when the owner never reported', () => {
    const r = reconcileOperation({ ...inputs('failed_no_effect'), original: null });
    expect(r.ok && r.value.ok && r.value.receipt.body).toMatchObject({
      resolution: 'verified_failed_no_effect',
      original_execution_receipt_sha256: null,
      effect_id: null,
    });
  });

  it.each<[string, (i: ReturnType<typeof inputs>) => ReturnType<typeof inputs>, string[]]>([
    ['a still indeterminate target', () => inputs('indeterminate'), ['outcome_indeterminate']],
    [
      'a success without its effect',
      (i) => ({ ...i, observation: { ...i.observation, effect_id: null } }),
      ['write_effect_id_missing'],
    ],
    [
      'an observation from the future',
      (i) => ({ ...i, now: i.observation.completed_at_unix_ms - 5_001 }),
      ['observed_after_reconciliation'],
    ],
    [
      'another executor release',
      (i) => ({ ...i, observation: { ...i.observation, executor_release: 'other 1.0' } }),
      ['executor_release_mismatch'],
    ],
    [
      'another effect than the original saw',
      (i) => ({ ...i, original: rehashed({ ...i.original.body, effect_id: 'rollout-0001' }) }),
      ['effect_id_mismatch'],
    ],
    [
      'an original whose body does not hash to its digest',
      (i) => ({ ...i, original: { ...i.original, body: { ...i.original.body, effect_id: 'rollout-0001' } } }),
      ['effect_id_mismatch', 'original_receipt_mismatch'],
    ],
    [
      'an original of another authorization',
      (i) => ({
        ...i,
        original: rehashed({ ...i.original.body, authorization_receipt_sha256: h('e') }),
      }),
      ['original_receipt_mismatch'],
    ],
  ])('refuses %s', (_name, mutate, violations) => {
    const r = reconcileOperation(mutate(inputs('succeeded')));
    expect(r.ok && !r.value.ok && r.value.refusal.violations).toEqual(violations);
  });
});
