/**
 * Issue 15: an identical retry of an observation recorded under receipt version 1 replays the
 * stored version 1 receipt (it used to be recomputed under the current version, differ, and
 * answer 500 "stored observation receipt does not replay"). The same for version 3, whose signals
 * version 4 changed for JSON content holding a quoted secret: the retry replays the stored version
 * 3 receipt (no signal), a new observation of the same bytes is flagged. And for version 4, whose
 * signals version 5 changed for a secret two JSON strings deep, and for version 5, whose signals
 * version 6 changed for a key ended by a soft hyphen and a letter.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import {
  type ObservationReceiptVersion,
  type ObservationTrustedContext,
  type RawToolObservation,
  observationPolicyFromTenantPolicy,
  validateObservation,
} from '../../../src/core/observation/index.js';
import { AuthorizationReceipt, ExecutionReceipt, ToolExecutionObservation } from '../../../src/core/model.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { tenantRef } from '../platform/harness.js';
import type { Seeded } from '../../../scripts/seed.js';
import { seedTenant } from '../executions/helpers.js';
import { type Executed, executed, postObservation, rawOutput } from './observation-helpers.js';

/** Record `raw` as the service did when `version` was current: that receipt and its evidence. */
async function recordUnder(
  s: Seeded,
  e: Executed,
  raw: RawToolObservation,
  version: ObservationReceiptVersion,
) {
  const store = tenantStore(env, tenantRef(s));
  const [exec, inForce, pinned] = await Promise.all([
    store.getReceipt(e.execution.sha256),
    store.currentPolicy(),
    store.getContract(s.rollback_contract_sha256),
  ]);
  if (exec === null || pinned === null) throw new Error('upstream missing');
  const trusted: ObservationTrustedContext = {
    tenant_id: s.tenant_id,
    policy_sha256: inForce.policy_sha256,
    observation_id_conflict: false,
    min_source_generation: null,
    artifact_record: null,
  };
  const policy = observationPolicyFromTenantPolicy(inForce.policy);
  const now = Date.now();
  const decided = validateObservation(
    {
      trusted,
      policy,
      contract: pinned.contract,
      authorization: AuthorizationReceipt.parse(e.authorization),
      execution: {
        receipt: ExecutionReceipt.parse(exec.receipt),
        observation: ToolExecutionObservation.parse((exec.evidence as { observation: unknown }).observation),
      },
      now,
      observation: raw,
    },
    { receiptVersion: version },
  );
  if (!decided.ok) throw new Error(decided.error.message);
  const receipt = decided.value.receipt;
  expect(receipt.body.receipt_version).toBe(version);
  const stored = await store.insertObservationReceipt({
    kind: 'observation',
    receipt,
    outcome: receipt.body.decision,
    principal_id: s.executor.principal_id,
    evidence: { kind: 'output', trusted, policy, observation: raw, evaluated_at_unix_ms: now },
    created_at_unix_ms: now,
    observation_id: raw.observation_id,
    raw_observation_sha256: digestOf(raw),
    holds_id: true,
  });
  expect(stored).toBe('stored');
  return receipt;
}

describe('retry of an observation recorded under receipt version 1', () => {
  it('replays the stored version 1 receipt, accepted or rejected, instead of answering 500', async () => {
    const s = await seedTenant('obs-v1');
    const e = await executed(s);

    const accepted = rawOutput(s, e);
    const v1 = await recordUnder(s, e, accepted, 1);
    expect(v1.body.decision).toBe('accepted_untrusted_evidence');
    const again = await postObservation(s, accepted);
    expect(again.status).toBe(200);
    expect(again.body.receipt).toEqual(v1);
    expect(again.body.candidate.observation_receipt_sha256).toBe(v1.sha256);

    // A refusal recorded under version 1 (the reporter's digest is not the executor's) replays too.
    const wrong = { ...rawOutput(s, e), payload_sha256: 'f'.repeat(64) };
    const refused = await recordUnder(s, e, wrong, 1);
    expect(refused.body.violations).toContain('payload_digest_mismatch');
    const retry = await postObservation(s, wrong);
    expect(retry.status).toBe(403);
    expect(retry.body.receipt).toEqual(refused);

    // A new observation is still issued under the current version.
    const fresh = await postObservation(s, rawOutput(s, e));
    expect(fresh.status).toBe(201);
    expect(fresh.body.receipt.body.receipt_version).toBe(7);
  });
});

/** A tool result whose text item is a JSON document with a secret: quoted, so `\"` in the payload. */
const QUOTED_SECRET = JSON.stringify({
  content: [{ type: 'text', text: '{"client_secret": "Zq8vT3mX9pL2rW7nK4bY6cF1hJ5dS0aG"}' }],
});

describe('retry of an observation recorded under receipt version 3', () => {
  it('replays the stored version 3 receipt; the same bytes observed anew are version 7 and flagged', async () => {
    const s = await seedTenant('obs-v3');
    const e = await executed(s, 'succeeded', QUOTED_SECRET);
    const raw = rawOutput(s, e, QUOTED_SECRET);
    const v3 = await recordUnder(s, e, raw, 3);
    expect(v3.body).toMatchObject({ decision: 'accepted_untrusted_evidence', signals: [] });
    const again = await postObservation(s, raw);
    expect(again.status).toBe(200);
    expect(again.body.receipt).toEqual(v3);

    // Another execution returning the same bytes: observed under version 7, which reads the string.
    const e2 = await executed(s, 'succeeded', QUOTED_SECRET);
    const fresh = await postObservation(s, rawOutput(s, e2, QUOTED_SECRET));
    expect(fresh.status).toBe(201);
    expect(fresh.body.receipt.body).toMatchObject({
      receipt_version: 7,
      signals_release: 'writ-signals/6',
      signals: ['credential_like_text'],
    });
    expect(fresh.body.candidate.signals).toEqual(['credential_like_text']);
  });
});

/** The same secret one string deeper: JSON text held in a string of the text item's JSON text. */
const SECRET_TWO_DEEP = JSON.stringify({
  content: [
    { type: 'text', text: JSON.stringify({ log: '{"client_secret": "Zq8vT3mX9pL2rW7nK4bY6cF1hJ5dS0aG"}' }) },
  ],
});

describe('retry of an observation recorded under receipt version 4', () => {
  it('replays the stored version 4 receipt; the same bytes observed anew are version 7 and flagged', async () => {
    const s = await seedTenant('obs-v4');
    const e = await executed(s, 'succeeded', SECRET_TWO_DEEP);
    const raw = rawOutput(s, e, SECRET_TWO_DEEP);
    const v4 = await recordUnder(s, e, raw, 4);
    expect(v4.body).toMatchObject({
      decision: 'accepted_untrusted_evidence',
      signals_release: 'writ-signals/3',
      signals: [],
    });
    const again = await postObservation(s, raw);
    expect(again.status).toBe(200);
    expect(again.body.receipt).toEqual(v4);

    // Another execution returning the same bytes: version 7 (as 5 and 6) reads JSON text held in the strings.
    const e2 = await executed(s, 'succeeded', SECRET_TWO_DEEP);
    const fresh = await postObservation(s, rawOutput(s, e2, SECRET_TWO_DEEP));
    expect(fresh.status).toBe(201);
    expect(fresh.body.receipt.body).toMatchObject({
      receipt_version: 7,
      signals_release: 'writ-signals/6',
      signals: ['credential_like_text'],
    });
    expect(fresh.body.candidate.signals).toEqual(['credential_like_text']);
  });
});

/** A text item with an AWS key id ended by a soft hyphen and a letter: a key to the redactor only, until version 6. */
const KEY_ENDED_BY_SOFT_HYPHEN = JSON.stringify({
  content: [{ type: 'text', text: 'rolled back by AKIAZ7Q4WJ2M5NXR8K3T\u00adb at 12:00' }],
});

describe('retry of an observation recorded under receipt version 5', () => {
  it('replays the stored version 5 receipt; the same bytes observed anew are version 7 and flagged', async () => {
    const s = await seedTenant('obs-v5');
    const e = await executed(s, 'succeeded', KEY_ENDED_BY_SOFT_HYPHEN);
    const raw = rawOutput(s, e, KEY_ENDED_BY_SOFT_HYPHEN);
    const v5 = await recordUnder(s, e, raw, 5);
    expect(v5.body).toMatchObject({
      decision: 'accepted_untrusted_evidence',
      signals_release: 'writ-signals/4',
      signals: [],
    });
    const again = await postObservation(s, raw);
    expect(again.status).toBe(200);
    expect(again.body.receipt).toEqual(v5);

    // Another execution returning the same bytes: version 6 (and 7) reads the credentials as
    // written; version 7 also flags the soft hyphen itself.
    const e2 = await executed(s, 'succeeded', KEY_ENDED_BY_SOFT_HYPHEN);
    const fresh = await postObservation(s, rawOutput(s, e2, KEY_ENDED_BY_SOFT_HYPHEN));
    expect(fresh.status).toBe(201);
    expect(fresh.body.receipt.body).toMatchObject({
      receipt_version: 7,
      signals_release: 'writ-signals/6',
      signals: ['credential_like_text', 'hidden_characters'],
    });
    expect(fresh.body.candidate.signals).toEqual(['credential_like_text', 'hidden_characters']);
  });
});
