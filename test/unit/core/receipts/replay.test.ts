/**
 * Receipt replay: a stored receipt is recomputed from its original inputs and every differing
 * field is named. Also pins the fixture's receipt identities (stored receipts are a format: a change
 * to these digests is a breaking change to every receipt already issued).
 */
import { describe, expect, it } from 'vitest';
import { canonicalize, digestOf } from '../../../../src/core/canonical/canonical.js';
import { contractDigest } from '../../../../src/core/contracts/contract.js';
import { deepFreeze } from '../../../../src/core/canonical/digest-cache.js';
import { verifyExecution } from '../../../../src/core/execution/execution.js';
import { decodeJsonText } from '../../../../src/core/canonical/json.js';
import {
  type AuthorizationReceipt,
  EMPTY_TRUSTED_STATE,
  type ExecutionReceipt,
} from '../../../../src/core/model.js';
import {
  type AuthorizationInputs,
  type ExecutionInputs,
  compare,
  verifyAuthorizationReceipt,
  verifyExecutionReceipt,
} from '../../../../src/core/receipts/replay.js';
import {
  UNRELATED_SHA256,
  baselineRun,
  buildObservation,
  buildScenario,
  mustAuthorize,
  mustVerify,
  type Scenario,
} from '../fixtures.js';

function authInputs(s: Scenario): AuthorizationInputs {
  return { contract: s.contract, grant: s.grant, invocation: s.invocation, now: s.now, trusted: s.trusted };
}

function fixture() {
  const run = baselineRun();
  const auth: AuthorizationInputs = authInputs(run.scenario);
  const exec: ExecutionInputs = {
    contract: run.scenario.contract,
    authorization: run.authorization,
    observation: run.observation,
  };
  return { ...run, auth, exec };
}

/** A deep copy as plain JSON, like a receipt read back from storage. */
const stored = <T>(v: T): Record<string, unknown> => JSON.parse(JSON.stringify(v)) as Record<string, unknown>;
const bodyOf = (r: Record<string, unknown>) => r.body as Record<string, unknown>;

/** A different JSON value of the same kind, so the edit is plausible rather than a type error. */
function changed(v: unknown): unknown {
  if (typeof v === 'string') return /^[0-9a-f]{64}$/.test(v) ? UNRELATED_SHA256 : `${v}x`;
  if (typeof v === 'number') return v + 1;
  if (typeof v === 'boolean') return !v;
  if (v === null) return 'not-null';
  if (Array.isArray(v)) return [...v, 'extra'];
  return { ...(v as object), extra: 'x' };
}

describe('golden identities (stable receipt format)', () => {
  it('the fixture digests are pinned', () => {
    const { scenario, authorization, execution } = fixture();
    expect({
      contract: contractDigest(scenario.contract),
      grant: digestOf(scenario.grant),
      invocation: digestOf(scenario.invocation),
      authorization: authorization.sha256,
      execution: execution.sha256,
    }).toEqual({
      contract: 'c89c159750b008e107c5696366637d78d8cacef1ca1ab150caea3ebbbfa1fb8b',
      grant: '2afe260b8180a93daad947a686009e19ea56d93c19ede8b9529f7f1028783aec',
      invocation: '6952bbea6c9c187996224d91bf99d17399e330f655c2e6869eecb9c5267dc019',
      authorization: 'bb2a55dc0c069fe5248e62006777203c8f574a94322cd5299eeae9e2c776f100',
      execution: 'b87b70332c449bd9825442a6379ed873b4769e20830edb2fdf7fdedb3d74c77f',
    });
  });
});

describe('verifyAuthorizationReceipt', () => {
  it('an untouched authorized receipt replays', () => {
    const { authorization, auth } = fixture();
    expect(verifyAuthorizationReceipt(stored(authorization), auth)).toEqual({ ok: true, differences: [] });
  });

  it('an untouched denied receipt replays (denials are receipted too)', () => {
    const s = buildScenario();
    s.grant.allowed_tools = [];
    const r = mustAuthorize(s);
    expect(verifyAuthorizationReceipt(stored(r), authInputs(s))).toEqual({ ok: true, differences: [] });
  });

  it('a receipt read back from its canonical bytes replays', () => {
    const { authorization, auth } = fixture();
    const decoded = decodeJsonText(canonicalize(authorization));
    expect(decoded.ok).toBe(true);
    if (decoded.ok) expect(verifyAuthorizationReceipt(decoded.value, auth).ok).toBe(true);
  });

  it('omitting trusted state replays as the empty trusted state', () => {
    const { authorization, auth } = fixture();
    const { trusted: _omit, ...rest } = auth;
    expect(verifyAuthorizationReceipt(stored(authorization), rest).ok).toBe(true);
    expect(auth.trusted).toEqual(EMPTY_TRUSTED_STATE);
  });

  it('every body field, edited alone, is named together with sha256', () => {
    const { authorization, auth } = fixture();
    for (const key of Object.keys(authorization.body)) {
      const s = stored(authorization);
      bodyOf(s)[key] = changed(bodyOf(s)[key]);
      expect(verifyAuthorizationReceipt(s, auth), key).toEqual({
        ok: false,
        differences: [`body.${key}`, 'sha256'],
      });
    }
  });

  it('every body field, removed, is named together with sha256', () => {
    const { authorization, auth } = fixture();
    for (const key of Object.keys(authorization.body)) {
      const s = stored(authorization);
      delete bodyOf(s)[key];
      expect(verifyAuthorizationReceipt(s, auth), key).toEqual({
        ok: false,
        differences: [`body.${key}`, 'sha256'],
      });
    }
  });

  it('a forged body re-hashed consistently still differs from the recomputation', () => {
    const s = buildScenario();
    s.grant.allowed_tools = [];
    const forged = stored(mustAuthorize(s));
    bodyOf(forged).decision = 'authorized';
    bodyOf(forged).violations = [];
    forged.sha256 = digestOf(forged.body);
    expect(verifyAuthorizationReceipt(forged, authInputs(s))).toEqual({
      ok: false,
      differences: ['body.decision', 'body.violations', 'sha256'],
    });
  });

  it('an edited identity is named', () => {
    const { authorization, auth } = fixture();
    const s = stored(authorization);
    s.sha256 = UNRELATED_SHA256;
    expect(verifyAuthorizationReceipt(s, auth)).toEqual({ ok: false, differences: ['sha256'] });
  });

  it.each([
    ['added', (v: string[]) => v.push('tool_not_allowed')],
    ['duplicated', (v: string[]) => v.push('tool_not_allowed', 'tool_not_allowed')],
  ] as const)('a violation list with a code %s is named', (_name, edit) => {
    const { authorization, auth } = fixture();
    const s = stored(authorization);
    edit(bodyOf(s).violations as string[]);
    expect(verifyAuthorizationReceipt(s, auth).differences).toEqual(['body.violations', 'sha256']);
  });

  it.each([
    ['removed', (v: string[]) => v.pop()],
    ['reordered', (v: string[]) => v.reverse()],
  ] as const)('a denied receipt with a violation %s is named', (_name, edit) => {
    const sc = buildScenario();
    sc.grant.allowed_tools = [];
    sc.grant.tenant_id = 'globex';
    const s = stored(mustAuthorize(sc));
    edit(bodyOf(s).violations as string[]);
    expect(verifyAuthorizationReceipt(s, authInputs(sc)).differences).toEqual(['body.violations', 'sha256']);
  });

  it('an extra body field is named', () => {
    const { authorization, auth } = fixture();
    const s = stored(authorization);
    bodyOf(s).approved_by = 'model';
    expect(verifyAuthorizationReceipt(s, auth).differences).toEqual(['body.approved_by', 'sha256']);
  });

  it('an extra top-level field is named', () => {
    const { authorization, auth } = fixture();
    const s = stored(authorization);
    s.signature = 'deadbeef';
    expect(verifyAuthorizationReceipt(s, auth)).toEqual({ ok: false, differences: ['signature'] });
  });

  it('a missing identity or body is named', () => {
    const { authorization, auth } = fixture();
    const noSha = stored(authorization);
    delete noSha.sha256;
    expect(verifyAuthorizationReceipt(noSha, auth).differences).toEqual(['sha256']);
    const noBody = stored(authorization);
    delete noBody.body;
    expect(verifyAuthorizationReceipt(noBody, auth).differences).toEqual(['body']);
  });

  it.each([null, [], 'receipt', 42, true, undefined])(
    'a stored value that is not an object (%j) fails',
    (v) => {
      const { auth } = fixture();
      expect(verifyAuthorizationReceipt(v, auth)).toEqual({ ok: false, differences: ['receipt'] });
    },
  );

  it.each([null, [], 'body', 7])('a body that is not an object (%j) fails', (body) => {
    const { authorization, auth } = fixture();
    expect(verifyAuthorizationReceipt({ sha256: authorization.sha256, body }, auth)).toEqual({
      ok: false,
      differences: ['body'],
    });
  });

  it('a body holding values JSON cannot carry never replays', () => {
    const { authorization, auth } = fixture();
    const s = stored(authorization);
    bodyOf(s).input_bytes = Number.NaN;
    bodyOf(s).target = () => 'x';
    expect(verifyAuthorizationReceipt(s, auth).differences).toEqual([
      'body.input_bytes',
      'body.target',
      'sha256',
    ]);
  });

  it('replay against different inputs names what changed', () => {
    const { authorization, auth } = fixture();
    expect(
      verifyAuthorizationReceipt(stored(authorization), { ...auth, now: auth.now + 1 }).differences,
    ).toEqual(['body.evaluated_at_unix_ms', 'sha256']);
    const grant = { ...auth.grant, grant_id: 'grant-acme-ops-0002' };
    expect(verifyAuthorizationReceipt(stored(authorization), { ...auth, grant }).differences).toEqual([
      'body.grant_sha256',
      'sha256',
    ]);
    const trusted = { ...EMPTY_TRUSTED_STATE, grant_revoked: true };
    expect(verifyAuthorizationReceipt(stored(authorization), { ...auth, trusted }).differences).toEqual([
      'body.decision',
      'body.trusted_state_sha256',
      'body.violations',
      'sha256',
    ]);
  });

  it('inputs that cannot be evaluated report recompute_failed', () => {
    const { authorization, auth } = fixture();
    const badContract = { ...auth.contract, schema_version: 9 };
    expect(verifyAuthorizationReceipt(stored(authorization), { ...auth, contract: badContract })).toEqual({
      ok: false,
      differences: ['recompute_failed: invalid_contract'],
    });
    expect(verifyAuthorizationReceipt(stored(authorization), { ...auth, now: -5 })).toEqual({
      ok: false,
      differences: ['recompute_failed: invalid_request'],
    });
  });

  it(
    'every single-character edit of the stored bytes is malformed or fails replay',
    { timeout: 60_000 },
    () => {
      const { authorization, auth: raw } = fixture();
      // Frozen inputs let the core reuse their digests across the ~1,400 replays.
      const auth = deepFreeze(structuredClone(raw));
      const text = canonicalize(authorization);
      let decodable = 0;
      for (let i = 0; i < text.length; i++) {
        const edited = text.slice(0, i) + flip(text.charAt(i)) + text.slice(i + 1);
        const decoded = decodeJsonText(edited);
        if (!decoded.ok) continue; // malformed: cannot be read back at all
        decodable++;
        expect(verifyAuthorizationReceipt(decoded.value, auth).ok, `offset ${i}`).toBe(false);
      }
      expect(decodable).toBeGreaterThan(text.length / 2);
    },
  );

  it('an added "__proto__" body field is named like any other field', () => {
    const { authorization, auth } = fixture();
    const text = canonicalize(authorization).replace('{"approval_id"', '{"__proto__":{},"approval_id"');
    const s = JSON.parse(text) as unknown;
    const report = verifyAuthorizationReceipt(s, auth);
    expect(report.ok).toBe(false);
    expect(report.differences).toEqual(['body.__proto__', 'sha256']);
  });
});

/** Change one character into another that keeps most JSON lexically valid (digits stay digits). */
function flip(c: string): string {
  if (c >= '0' && c <= '8') return String.fromCharCode(c.charCodeAt(0) + 1);
  if (c === '9') return '0';
  if (c >= 'a' && c <= 'y') return String.fromCharCode(c.charCodeAt(0) + 1);
  if (c === 'z') return 'a';
  if (c >= 'A' && c <= 'Z') return c.toLowerCase();
  return c === 'x' ? 'y' : 'x';
}

describe('verifyExecutionReceipt', () => {
  it('untouched receipts of every status replay', () => {
    for (const outcome of ['succeeded', 'failed_no_effect', 'indeterminate'] as const) {
      const run = baselineRun(outcome);
      const inputs = {
        contract: run.scenario.contract,
        authorization: run.authorization,
        observation: run.observation,
      };
      expect(verifyExecutionReceipt(stored(run.execution), inputs)).toEqual({ ok: true, differences: [] });
    }
  });

  it('an untouched rejected receipt replays', () => {
    const { exec } = fixture();
    const observation = { ...exec.observation, effect_id: null };
    const r = mustVerify(exec.contract, exec.authorization, observation);
    expect(r.body.status).toBe('rejected');
    expect(verifyExecutionReceipt(stored(r), { ...exec, observation }).ok).toBe(true);
  });

  it('every body field, edited alone, is named together with sha256', () => {
    const { execution, exec } = fixture();
    for (const key of Object.keys(execution.body)) {
      const s = stored(execution);
      bodyOf(s)[key] = changed(bodyOf(s)[key]);
      expect(verifyExecutionReceipt(s, exec), key).toEqual({
        ok: false,
        differences: [`body.${key}`, 'sha256'],
      });
    }
  });

  it('every body field, removed, is named together with sha256', () => {
    const { execution, exec } = fixture();
    for (const key of Object.keys(execution.body)) {
      const s = stored(execution);
      delete bodyOf(s)[key];
      expect(verifyExecutionReceipt(s, exec), key).toEqual({
        ok: false,
        differences: [`body.${key}`, 'sha256'],
      });
    }
  });

  it('a rejected execution forged into a verified one is named', () => {
    const { exec } = fixture();
    const observation = { ...exec.observation, after_state_sha256: null };
    const forged = stored(mustVerify(exec.contract, exec.authorization, observation));
    bodyOf(forged).status = 'verified_succeeded';
    bodyOf(forged).violations = [];
    forged.sha256 = digestOf(forged.body);
    expect(verifyExecutionReceipt(forged, { ...exec, observation }).differences).toEqual([
      'body.status',
      'body.violations',
      'sha256',
    ]);
  });

  it('replay against another observation names what changed', () => {
    const { execution, exec, authorization } = fixture();
    const observation = {
      ...buildObservation(exec.contract, authorization),
      observation_id: 'observation-2',
    };
    expect(verifyExecutionReceipt(stored(execution), { ...exec, observation }).differences).toEqual([
      'body.observation_sha256',
      'sha256',
    ]);
  });

  it('the execution receipt replays only against the authorization it was verified under', () => {
    const { execution, exec } = fixture();
    const s = buildScenario();
    s.now += 1;
    const otherAuth = mustAuthorize(s);
    const report = verifyExecutionReceipt(stored(execution), { ...exec, authorization: otherAuth });
    expect(report.ok).toBe(false);
    expect(report.differences).toContain('body.authorization_receipt_sha256');
  });

  it('a self-consistent forged authorization passes verifyExecution but not authorization replay', () => {
    // The executor-side check sees a receipt that hashes to its identity; only recomputation from the
    // trusted inputs (or a signature, or the receipt store) exposes the forgery.
    const s = buildScenario();
    s.grant.allowed_tools = [];
    const denied = mustAuthorize(s);
    const forged: AuthorizationReceipt = structuredClone(denied);
    forged.body.decision = 'authorized';
    forged.body.violations = [];
    forged.sha256 = digestOf(forged.body);
    const r = verifyExecution(s.contract, forged, buildObservation(s.contract, forged));
    expect(r.ok && r.value.body.status).toBe('verified_succeeded');
    expect(verifyAuthorizationReceipt(forged, authInputs(s)).ok).toBe(false);
  });
});

describe('compare', () => {
  const fresh = (): { ok: true; value: ExecutionReceipt } => ({ ok: true, value: fixture().execution });

  it('lists differences sorted and unique', () => {
    const s = stored(fresh().value);
    bodyOf(s).violations = ['output_empty'];
    bodyOf(s).effect_id = null;
    s.z_extra = 1;
    s.a_extra = 2;
    expect(compare(s, fresh()).differences).toEqual([
      'a_extra',
      'body.effect_id',
      'body.violations',
      'sha256',
      'z_extra',
    ]);
  });

  it('reports a failed recomputation by reason', () => {
    const failed = {
      ok: false as const,
      error: { reason: 'invalid_grant' as const, message: 'x', issues: [] },
    };
    expect(compare({}, failed)).toEqual({ ok: false, differences: ['recompute_failed: invalid_grant'] });
  });
});
