/**
 * Helpers for the observation tests (storage and executions): an executed rollback, an honest raw
 * output observation of it, and a POST of one.
 */
import { expect } from 'vitest';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import type { ToolExecutionObservation } from '../../../src/core/model.js';
import type { RawToolObservation } from '../../../src/core/observation/index.js';
import { DEMO_POLICY, type Seeded } from '../../../scripts/seed.js';
import {
  type Json,
  authorizedRollback,
  call,
  claim,
  observe,
  report,
  uniqueName,
} from '../executions/helpers.js';

export const OUTPUT = '{"generation":8,"status":"rolled_back"}';

export interface Executed {
  readonly authorization: Json;
  readonly execution: Json;
}

/**
 * An authorized rollback, claimed and reported with `outcome` by the seeded executor; with
 * `output`, the report commits to that payload's digest and size (as an executor whose tool
 * returned it).
 */
export async function executed(
  s: Seeded,
  outcome: ToolExecutionObservation['outcome'] = 'succeeded',
  output?: string,
): Promise<Executed> {
  const a = await authorizedRollback(s);
  const c = await claim(s, a.sha256);
  const reported =
    output === undefined
      ? observe(a.receipt, outcome)
      : {
          ...observe(a.receipt, outcome),
          output_sha256: sha256HexOfText(output),
          output_bytes: new TextEncoder().encode(output).byteLength,
        };
  const r = await report(s, c.body.operation_id, c.body.fencing_token, reported);
  expect(r.status).toBe(200);
  return { authorization: a.receipt, execution: r.body.execution_receipt as Json };
}

/** The honest raw output observation of `e` (the payload the executor returned, unless given). */
export function rawOutput(s: Seeded, e: Executed, payload = OUTPUT): RawToolObservation {
  const at = e.execution.body.completed_at_unix_ms as number;
  return {
    observation_id: uniqueName('obs'),
    tenant_id: s.tenant_id,
    policy_sha256: s.policy_sha256,
    tool_contract_sha256: s.rollback_contract_sha256,
    invocation_sha256: e.authorization.body.invocation_sha256,
    execution_receipt_sha256: e.execution.sha256,
    source_release: 'deploy-api 2026.11.3',
    source_generation: 8,
    source_as_of_unix_ms: at,
    media_type: 'application/json',
    payload,
    artifact: null,
    payload_sha256: sha256HexOfText(payload),
    payload_bytes: new TextEncoder().encode(payload).byteLength,
    locators: [],
    observed_at_unix_ms: at,
  };
}

/**
 * Put `DEMO_POLICY` with `extra` fields and re-issue the agent's grant under it (a grant binds the
 * policy it was issued under); returns `s` with the new policy digest.
 */
export async function withPolicy(s: Seeded, extra: Record<string, unknown>): Promise<Seeded> {
  const put = await call('PUT', '/v1/policy', { key: s.admin.api_key, body: { ...DEMO_POLICY, ...extra } });
  if (put.status !== 200) throw new Error(`policy failed: ${JSON.stringify(put.body)}`);
  const scope = [
    { type: 'deployment', attributes: { environment: ['production', 'staging'], service: ['api'] } },
  ];
  const grant = await call('POST', '/v1/grants', {
    key: s.admin.api_key,
    body: {
      principal_id: s.agent.principal_id,
      allowed_tools: ['execute_rollback', 'get_deployment'],
      allowed_effects: ['external_write', 'read_only'],
      capabilities: [
        { capability: 'deployment:read', resources: scope },
        { capability: 'deployment:rollback', resources: scope },
      ],
      expires_at_unix_ms: Date.now() + 24 * 60 * 60_000,
    },
  });
  if (grant.status !== 201) throw new Error(`grant failed: ${JSON.stringify(grant.body)}`);
  return { ...s, policy_sha256: put.body.policy_sha256 as string };
}

export function postObservation(s: Seeded, observation: RawToolObservation, key = s.executor.api_key) {
  return call('POST', '/v1/observations', { key, body: { kind: 'output', observation } });
}
