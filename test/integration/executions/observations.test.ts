/**
 * `POST /v1/observations` end to end: the output of a recorded execution admitted only as untrusted
 * evidence, with a stored receipt; rejections as receipts; replay; tenant isolation.
 */
import { describe, expect, it } from 'vitest';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import type { RawToolErrorObservation } from '../../../src/core/observation/index.js';
import type { Seeded } from '../../../scripts/seed.js';
import { call, seedTenant, uniqueName } from './helpers.js';
import { executed, rawOutput } from '../storage/observation-helpers.js';

/** Each test seeds a tenant over HTTP; with every test file running in parallel that takes seconds. */
const SLOW_MS = 30_000;

const ERROR_DETAIL = '{"error":"conflict"}';

function post(s: Seeded, body: unknown, key = s.executor.api_key) {
  return call('POST', '/v1/observations', { key, body });
}

describe('POST /v1/observations', { timeout: SLOW_MS }, () => {
  it('admits the output of a verified success as untrusted evidence, stores the receipt, replays it', async () => {
    const s = await seedTenant('obs');
    const e = await executed(s, 'succeeded');
    const raw = rawOutput(s, e);
    const r = await post(s, { kind: 'output', observation: raw });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      decision: 'accepted_untrusted_evidence',
      violations: [],
      candidate: { authority: 'untrusted_evidence_only', execution_receipt_sha256: e.execution.sha256 },
    });
    const receipt = r.body.receipt;
    expect(receipt.body).toMatchObject({
      tenant_id: s.tenant_id,
      authorization_receipt_sha256: e.authorization.sha256,
    });
    const stored = await call('GET', `/v1/receipts/${receipt.sha256}`, { key: s.admin.api_key });
    expect(stored.body).toMatchObject({
      kind: 'observation',
      outcome: 'accepted_untrusted_evidence',
      receipt,
    });

    // The same observation again: the same receipt, decided as it was.
    const again = await post(s, { kind: 'output', observation: raw });
    expect(again.status).toBe(200);
    expect(again.body.receipt).toEqual(receipt);
    expect(again.body.candidate).toEqual(r.body.candidate);
  });

  it('rejects, with a stored receipt, a reused id, a substituted payload and a non-success', async () => {
    const s = await seedTenant('obs-reject');
    const e = await executed(s, 'succeeded');
    const raw = rawOutput(s, e);
    expect((await post(s, { kind: 'output', observation: raw })).status).toBe(201);

    const swapped = rawOutput(s, e, '{"generation":9,"status":"rolled_back"}');
    const reused = await post(s, {
      kind: 'output',
      observation: { ...swapped, observation_id: raw.observation_id },
    });
    expect(reused.status).toBe(403);
    expect(reused.body.decision).toBe('rejected');
    expect(reused.body.violations).toEqual(
      expect.arrayContaining(['observation_id_conflict', 'payload_digest_mismatch']),
    );
    expect(reused.body.candidate).toBeNull();

    const ind = await executed(s, 'indeterminate');
    const r = await post(s, { kind: 'output', observation: rawOutput(s, ind, '') });
    expect(r.status).toBe(403);
    expect(r.body.violations).toContain('execution_not_succeeded');
  });

  it('admits the diagnostics of a verified no-effect failure through the error contract only', async () => {
    const s = await seedTenant('obs-error');
    const e = await executed(s, 'failed_no_effect');
    const at = e.execution.body.completed_at_unix_ms as number;
    const raw: RawToolErrorObservation = {
      observation_id: uniqueName('err'),
      tenant_id: s.tenant_id,
      policy_sha256: s.policy_sha256,
      tool_contract_sha256: s.rollback_contract_sha256,
      invocation_sha256: e.authorization.body.invocation_sha256,
      execution_receipt_sha256: e.execution.sha256,
      source_release: 'deploy-api 2026.11.3',
      error_code: 'conflict',
      media_type: 'application/json',
      detail: ERROR_DETAIL,
      detail_sha256: sha256HexOfText(ERROR_DETAIL),
      detail_bytes: ERROR_DETAIL.length,
      observed_at_unix_ms: at,
    };
    const r = await post(s, { kind: 'error', observation: raw });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      decision: 'accepted_error_diagnostic',
      evidence: { evidence_kind: 'execution_error_diagnostic', authority: 'untrusted_evidence_only' },
    });
    // The success channel refuses it.
    const asOutput = await post(s, { kind: 'output', observation: rawOutput(s, e, ERROR_DETAIL) });
    expect(asOutput.status).toBe(403);
    expect(asOutput.body.violations).toContain('execution_not_succeeded');
  });

  it("answers 404 for another tenant's execution receipt, 400 for a malformed body, 403 for non-executors", async () => {
    const s = await seedTenant('obs-iso');
    const other = await seedTenant('obs-iso-b');
    const e = await executed(s, 'succeeded');
    const raw = rawOutput(s, e);
    const r = await post(other, { kind: 'output', observation: raw });
    expect(r.status).toBe(404);
    expect((await post(s, { kind: 'output', observation: { ...raw, extra: 1 } })).status).toBe(400);
    expect((await post(s, { kind: 'output', observation: raw }, s.agent.api_key)).status).toBe(403);
  });
});
