/**
 * Signed approval envelopes (`src/library/approval-envelope.ts`): every signed field is covered by the
 * signature, keys rotate by validity window, a used approval id cannot be replayed, and a valid
 * signature never replaces the approval's binding checks in `authorizeToolCall`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ApprovalEnvelope,
  type ApprovalEnvelopeBody,
  type EnvelopeKey,
  signApprovalEnvelope,
  verifyApprovalEnvelope,
} from '../../../src/library/approval-envelope.js';
import { authorizeToolCall } from '../../../src/core/authorization/authorize.js';
import { POLICY_LIMITS } from '../../../src/core/policy.js';
import { buildApproval, buildScenario, T, UNRELATED_SHA256 } from '../core/fixtures.js';

const HOUR = 3_600_000;
const ISSUED = T.requestedAt - 1_000;

function key(key_id: string, fill: number, not_before: number, retired: number | null = null): EnvelopeKey {
  return {
    key_id,
    secret: new Uint8Array(32).fill(fill),
    not_before_unix_ms: not_before,
    retired_at_unix_ms: retired,
  };
}

const OLD = key('approvals-2026-01', 1, T.grantNotBefore - 10 * HOUR, T.now + HOUR);
const NEW = key('approvals-2026-02', 2, T.now - HOUR);
const KEYRING = [OLD, NEW];
const never = () => false;

function bodyWith(k: EnvelopeKey, patch: Partial<ApprovalEnvelopeBody> = {}): ApprovalEnvelopeBody {
  return {
    envelope_version: 1,
    algorithm: 'hmac-sha256',
    key_id: k.key_id,
    issuer: 'change-console',
    issued_at_unix_ms: ISSUED,
    approval: buildApproval(),
    ...patch,
  };
}

function sign(k: EnvelopeKey, patch: Partial<ApprovalEnvelopeBody> = {}): ApprovalEnvelope {
  const r = signApprovalEnvelope(bodyWith(k, patch), k);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

function verdict(envelope: unknown, now = T.now, used: (id: string) => boolean = never): string {
  const r = verifyApprovalEnvelope(envelope, KEYRING, now, used);
  if (!r.ok) return `error:${r.error.reason}`;
  return r.value.ok ? 'ok' : r.value.rejection;
}

describe('signing and verifying', () => {
  it('verifies an envelope signed with a current key and returns its exact approval', () => {
    const e = sign(OLD);
    const r = verifyApprovalEnvelope(e, KEYRING, T.now, never);
    expect(r).toStrictEqual({ ok: true, value: { ok: true, approval: buildApproval(), key_id: OLD.key_id } });
  });

  it('any change to a signed field, the key id or the signature is bad_signature', () => {
    const e = sign(OLD);
    const a = e.body.approval;
    const changes: Partial<ApprovalEnvelopeBody>[] = [
      { issuer: 'someone-else' },
      { issued_at_unix_ms: ISSUED - 1 },
      { approval: { ...a, input_sha256: UNRELATED_SHA256 } },
      { approval: { ...a, tenant_id: 'globex' } },
      { approval: { ...a, policy_sha256: UNRELATED_SHA256 } },
      { approval: { ...a, tool_contract_sha256: UNRELATED_SHA256 } },
      { approval: { ...a, effect: 'read_only' } },
      { approval: { ...a, expires_at_unix_ms: a.expires_at_unix_ms + 1 } },
      { approval: { ...a, approver_principal_id: 'user:mallory@acme' } },
      { approval: { ...a, approval_id: 'approval-9999' } },
    ];
    for (const change of changes) {
      expect(verdict({ ...e, body: { ...e.body, ...change } })).toBe('bad_signature');
    }
    // Naming the other (valid) key does not help either.
    expect(verdict({ ...e, body: { ...e.body, key_id: NEW.key_id } })).toBe('bad_signature');
    const flipped = (e.signature[0] === '0' ? '1' : '0') + e.signature.slice(1);
    expect(verdict({ ...e, signature: flipped })).toBe('bad_signature');
  });

  it('a key id that is not in the keyring, or the right id with another secret', () => {
    expect(verdict(sign(key('approvals-rogue', 9, 0)))).toBe('unknown_key');
    const impostor = key(OLD.key_id, 7, OLD.not_before_unix_ms, OLD.retired_at_unix_ms);
    expect(verdict(sign(impostor))).toBe('bad_signature');
  });

  it('a keyring entry with a short secret verifies nothing; signing refuses it', () => {
    const short: EnvelopeKey = { ...OLD, secret: new Uint8Array(16) };
    const e = sign(OLD);
    expect(verifyApprovalEnvelope(e, [short], T.now, never)).toStrictEqual({
      ok: true,
      value: { ok: false, rejection: 'unknown_key' },
    });
    expect(signApprovalEnvelope(bodyWith(short), short).ok).toBe(false);
  });

  it('signing refuses a body naming another key, and a malformed body', () => {
    expect(signApprovalEnvelope(bodyWith(NEW), OLD).ok).toBe(false);
    const bad = {
      ...bodyWith(OLD),
      approval: { ...buildApproval(), extra: 1 },
    } as unknown as ApprovalEnvelopeBody;
    const r = signApprovalEnvelope(bad, OLD);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.reason).toBe('invalid_request');
  });

  it('malformed envelopes are errors, not rejections', () => {
    const e = sign(OLD);
    for (const bad of [
      null,
      'envelope',
      { ...e, extra: 1 },
      { ...e, signature: e.signature.toUpperCase() },
      { ...e, signature: e.signature.slice(1) },
      { ...e, body: { ...e.body, envelope_version: 2 } },
      { ...e, body: { ...e.body, algorithm: 'none' } },
      { body: e.body },
    ]) {
      expect(verdict(bad)).toBe('error:invalid_request');
    }
    expect(verifyApprovalEnvelope(e, KEYRING, -1, never).ok).toBe(false);
  });
});

describe('key rotation', () => {
  it('an envelope issued before the old key retired still verifies after the retirement', () => {
    expect(verdict(sign(OLD), (OLD.retired_at_unix_ms as number) + HOUR)).toBe('ok');
  });

  it('an envelope issued at or after the old key retired is refused', () => {
    const retired = OLD.retired_at_unix_ms as number;
    const approval = { ...buildApproval(), expires_at_unix_ms: retired + 10 * HOUR };
    const at = sign(OLD, { issued_at_unix_ms: retired, approval });
    expect(verdict(at, retired + 1)).toBe('key_not_valid_at_issue');
    expect(verdict(sign(OLD, { issued_at_unix_ms: retired - 1, approval }), retired + 1)).toBe('ok');
  });

  it('the new key verifies from its not_before on, never before', () => {
    const from = NEW.not_before_unix_ms;
    expect(verdict(sign(NEW, { issued_at_unix_ms: from }))).toBe('ok');
    expect(verdict(sign(NEW, { issued_at_unix_ms: from - 1 }))).toBe('key_not_valid_at_issue');
  });

  it('removing a key from the keyring revokes every envelope it signed', () => {
    const e = sign(OLD);
    const r = verifyApprovalEnvelope(e, [NEW], T.now, never);
    expect(r.ok && !r.value.ok && r.value.rejection).toBe('unknown_key');
  });
});

describe('time', () => {
  it('an envelope issued in the future is refused; issued now is fine', () => {
    expect(verdict(sign(OLD, { issued_at_unix_ms: T.now + 1 }))).toBe('issued_in_future');
    expect(verdict(sign(OLD, { issued_at_unix_ms: T.now }))).toBe('ok');
  });

  it('an envelope issued at or after its approval expired is refused', () => {
    const expires = buildApproval().expires_at_unix_ms;
    const late = sign(OLD, { issued_at_unix_ms: expires });
    expect(verdict(late, expires + 1)).toBe('issued_after_approval_expiry');
  });
});

describe('a retired key', () => {
  it('an approval living longer than the policy limit from its issue is refused; the limit itself is fine', () => {
    const approval = (expires: number) => ({ ...buildApproval(), expires_at_unix_ms: expires });
    const limit = POLICY_LIMITS.approvalMaxLifetimeMs;
    expect(verdict(sign(OLD, { approval: approval(ISSUED + limit) }))).toBe('ok');
    expect(verdict(sign(OLD, { approval: approval(ISSUED + limit + 1) }))).toBe('approval_outlives_limit');
  });

  it('property: whatever it dates an envelope, it yields no live approval once retired for the policy limit', () => {
    const limit = POLICY_LIMITS.approvalMaxLifetimeMs;
    const retired = OLD.retired_at_unix_ms as number;
    fc.assert(
      fc.property(
        fc.integer({ min: OLD.not_before_unix_ms, max: retired - 1 }),
        fc.integer({ min: 1, max: 2 ** 40 }),
        fc.nat({ max: 2 ** 40 }),
        (issued, lifetime, after) => {
          const e = sign(OLD, {
            issued_at_unix_ms: issued,
            approval: { ...buildApproval(), expires_at_unix_ms: issued + lifetime },
          });
          const now = retired + limit + after;
          const v = verifyApprovalEnvelope(e, KEYRING, now, never);
          // Either refused, or an approval already expired at `now` (authorizeToolCall refuses it).
          if (v.ok && v.value.ok) expect(v.value.approval.expires_at_unix_ms).toBeLessThanOrEqual(now);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('replay', () => {
  it('one envelope authorizes one use: the second presentation is replayed', () => {
    const used = new Set<string>();
    const e = sign(OLD);
    const first = verifyApprovalEnvelope(e, KEYRING, T.now, (id) => used.has(id));
    expect(first.ok && first.value.ok).toBe(true);
    if (first.ok && first.value.ok) used.add(first.value.approval.approval_id);
    expect(verdict(e, T.now, (id) => used.has(id))).toBe('replayed');
    // Re-signing the same approval under the new key does not reset it.
    expect(verdict(sign(NEW), T.now, (id) => used.has(id))).toBe('replayed');
  });

  it('replay is checked only after the signature: a forged envelope is bad_signature, not replayed', () => {
    const e = sign(OLD);
    const forged = { ...e, body: { ...e.body, issuer: 'forger' } };
    expect(verdict(forged, T.now, () => true)).toBe('bad_signature');
  });
});

describe('a valid signature never replaces the binding checks', () => {
  it('a signed approval for another input is still approval_input_mismatch', () => {
    const s = buildScenario();
    const e = sign(OLD, { approval: { ...buildApproval(), input_sha256: UNRELATED_SHA256 } });
    const v = verifyApprovalEnvelope(e, KEYRING, T.now, never);
    expect(v.ok && v.value.ok).toBe(true);
    if (!v.ok || !v.value.ok) return;
    const r = authorizeToolCall(s.contract, s.grant, { ...s.invocation, approval: v.value.approval }, T.now);
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.value.body.violations).toContain('approval_input_mismatch');
  });
});

describe('property: any single-field change of a signed body fails verification', () => {
  it('on generated changes to every approval field and envelope field', () => {
    const e = sign(OLD);
    const fields = [
      'approval_id',
      'approver_principal_id',
      'tenant_id',
      'policy_sha256',
      'tool_contract_sha256',
      'input_sha256',
    ] as const;
    fc.assert(
      fc.property(
        fc.constantFrom(...fields),
        fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,20}$/),
        fc.integer({ min: 1, max: 10_000 }),
        (field, value, delta) => {
          const a = e.body.approval;
          const replacement = field.endsWith('sha256') ? value.padEnd(64, '0').slice(0, 64) : value;
          fc.pre(/^[0-9a-f]{64}$/.test(replacement) || !field.endsWith('sha256'));
          fc.pre(replacement !== a[field]);
          expect(verdict({ ...e, body: { ...e.body, approval: { ...a, [field]: replacement } } })).toBe(
            'bad_signature',
          );
          expect(
            verdict({
              ...e,
              body: { ...e.body, approval: { ...a, expires_at_unix_ms: a.expires_at_unix_ms + delta } },
            }),
          ).toBe('bad_signature');
          expect(verdict({ ...e, body: { ...e.body, issued_at_unix_ms: ISSUED - delta } })).toBe(
            'bad_signature',
          );
        },
      ),
      { seed: 0xe1, numRuns: 400 },
    );
  });
});
