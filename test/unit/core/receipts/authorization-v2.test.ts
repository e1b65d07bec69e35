/**
 * Authorization receipt version 2: the executor audience and dispatch deadline are bound in the
 * body; no options keeps version 1 byte for byte; replay follows the stored version; the schema is
 * strict for each version.
 */
import { describe, expect, it } from 'vitest';
import { authorizeToolCall } from '../../../../src/core/authorization/authorize.js';
import { canonicalizeReference, digestOf } from '../../../../src/core/canonical/canonical.js';
import { AuthorizationReceipt, AuthorizationReceiptBody } from '../../../../src/core/model.js';
import { POLICY_LIMITS } from '../../../../src/core/policy.js';
import { verifyAuthorizationReceipt } from '../../../../src/core/receipts/replay.js';
import { buildScenario, EXECUTOR_RELEASE, mustAuthorize, type Scenario, T } from '../fixtures.js';

const OPTIONS = { dispatch_window_ms: 60_000, executor_principal_id: null } as const;

function v2(s: Scenario = buildScenario(), options: Parameters<typeof authorizeToolCall>[5] = OPTIONS) {
  const r = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted, options);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

describe('authorization receipt version 2', () => {
  it('binds the executor release, principal and deadline; the rest equals version 1', () => {
    const s = buildScenario();
    const one = mustAuthorize(s);
    const two = v2(s);
    expect(two.body).toStrictEqual({
      ...one.body,
      receipt_version: 2,
      executor_release: EXECUTOR_RELEASE,
      executor_principal_id: null,
      dispatch_deadline_unix_ms: T.now + 60_000,
      named_principal_id: null,
      named_tenant_id: null,
    });
    expect(two.sha256).toBe(digestOf(two.body));
    expect(two.sha256).not.toBe(one.sha256);
    expect(AuthorizationReceipt.safeParse(two).success).toBe(true);
    const pinned = v2(s, { dispatch_window_ms: 1, executor_principal_id: 'executor:rollback-1' });
    expect(pinned.body).toMatchObject({
      executor_principal_id: 'executor:rollback-1',
      dispatch_deadline_unix_ms: T.now + 1,
    });
  });

  it('omitting the options (or passing undefined) is exactly version 1', () => {
    const s = buildScenario();
    const a = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted);
    const b = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted, undefined);
    expect(a).toStrictEqual(b);
    if (a.ok) expect(a.value.body.receipt_version).toBe(1);
  });

  it('denied receipts are version 2 too', () => {
    const s = buildScenario();
    s.invocation.principal_id = 'user:mallory@acme';
    const r = v2(s);
    expect(r.body.decision).toBe('denied');
    expect(r.body.receipt_version).toBe(2);
  });

  it('refuses meaningless options as invalid_request', () => {
    const s = buildScenario();
    for (const bad of [
      { dispatch_window_ms: 0, executor_principal_id: null },
      { dispatch_window_ms: -5, executor_principal_id: null },
      { dispatch_window_ms: 1.5, executor_principal_id: null },
      { dispatch_window_ms: POLICY_LIMITS.authorizationMaxDispatchMs + 1, executor_principal_id: null },
      { dispatch_window_ms: 1000, executor_principal_id: '' },
      { dispatch_window_ms: 1000, executor_principal_id: 'has space' },
      { dispatch_window_ms: 1000, executor_principal_id: 'x'.repeat(129) },
    ]) {
      const r = authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted, bad);
      expect(r.ok, JSON.stringify(bad)).toBe(false);
      if (!r.ok) expect(r.error.reason).toBe('invalid_request');
    }
    const edge = authorizeToolCall(
      s.contract,
      s.grant,
      s.invocation,
      Number.MAX_SAFE_INTEGER,
      s.trusted,
      OPTIONS,
    );
    expect(edge.ok).toBe(false);
  });

  it('the schema is strict per version', () => {
    const one = mustAuthorize(buildScenario()).body;
    const two = v2().body;
    expect(AuthorizationReceiptBody.safeParse(one).success).toBe(true);
    expect(AuthorizationReceiptBody.safeParse(two).success).toBe(true);
    // Version 1 with audience fields, version 2 without them, an unknown version: all refused.
    expect(AuthorizationReceiptBody.safeParse({ ...two, receipt_version: 1 }).success).toBe(false);
    const missing: Record<string, unknown> = { ...two };
    delete missing.executor_release;
    expect(AuthorizationReceiptBody.safeParse(missing).success).toBe(false);
    expect(AuthorizationReceiptBody.safeParse({ ...one, receipt_version: 2 }).success).toBe(false);
    expect(AuthorizationReceiptBody.safeParse({ ...one, receipt_version: 3 }).success).toBe(false);
    expect(AuthorizationReceiptBody.safeParse({ ...two, extra: 1 }).success).toBe(false);
  });
});

describe('replay follows the stored version', () => {
  const inputs = (s: Scenario) => ({
    contract: s.contract,
    grant: s.grant,
    invocation: s.invocation,
    now: s.now,
    trusted: s.trusted,
  });
  const stored = (r: object) => JSON.parse(canonicalizeReference(r)) as unknown;

  it('a version 1 receipt replays without options, even when options are passed', () => {
    const s = buildScenario();
    const r = stored(mustAuthorize(s));
    expect(verifyAuthorizationReceipt(r, inputs(s))).toStrictEqual({ ok: true, differences: [] });
    expect(verifyAuthorizationReceipt(r, { ...inputs(s), options: OPTIONS })).toStrictEqual({
      ok: true,
      differences: [],
    });
  });

  it('a version 2 receipt replays with its options and names every changed audience field', () => {
    const s = buildScenario();
    const r = v2(s);
    expect(verifyAuthorizationReceipt(stored(r), { ...inputs(s), options: OPTIONS })).toStrictEqual({
      ok: true,
      differences: [],
    });
    for (const [field, value] of [
      ['executor_release', 'other-executor 9'],
      ['executor_principal_id', 'executor:someone'],
      ['dispatch_deadline_unix_ms', T.now + 3_600_000],
    ] as const) {
      const forged = stored(r) as { body: Record<string, unknown> };
      forged.body[field] = value;
      expect(verifyAuthorizationReceipt(forged, { ...inputs(s), options: OPTIONS })).toStrictEqual({
        ok: false,
        differences: [`body.${field}`, 'sha256'],
      });
    }
    // Another window than the one it was issued with is a difference, not a pass.
    expect(
      verifyAuthorizationReceipt(stored(r), { ...inputs(s), options: { ...OPTIONS, dispatch_window_ms: 1 } })
        .ok,
    ).toBe(false);
  });

  it('a version 2 receipt replayed without options fails, naming the audience fields', () => {
    const s = buildScenario();
    const report = verifyAuthorizationReceipt(stored(v2(s)), inputs(s));
    expect(report.ok).toBe(false);
    expect(report.differences).toEqual(
      expect.arrayContaining([
        'body.dispatch_deadline_unix_ms',
        'body.executor_principal_id',
        'body.executor_release',
        'body.receipt_version',
      ]),
    );
  });
});
