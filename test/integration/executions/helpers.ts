/**
 * Helpers for the execution tests: a seeded tenant (through the public API, as a user would),
 * an authorized rollback, and honest executor observations built from the receipt.
 */
import { env } from 'cloudflare:workers';
import { operationStub } from '../../../durable-objects/idempotency.js';
import { digestOf, sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import type { ToolExecutionObservation } from '../../../src/core/model.js';
import type { Seeded } from '../../../scripts/seed.js';
import { DEMO_EXECUTOR_RELEASE, DEMO_POLICY, ROLLBACK_CONTRACT } from '../../../scripts/seed.js';
import {
  type Json,
  type Reply,
  ROLLBACK_INPUT,
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  uniqueName,
} from '../platform/harness.js';

export { call, seedTenant, uniqueName, READ_INPUT, ROLLBACK_INPUT } from '../platform/harness.js';
export type { Json, Reply } from '../platform/harness.js';

export interface Authorized {
  readonly receipt: Json;
  readonly sha256: string;
  readonly idempotency_key: string;
}

/** An authorized, approved rollback of `input` under `idempotency_key` (fresh unless given). */
export async function authorizedRollback(
  s: Seeded,
  input: Record<string, unknown> = { ...ROLLBACK_INPUT },
  idempotency_key = `rollback-${uniqueName('k')}`,
): Promise<Authorized> {
  const run = await createRun(s);
  const approval_id = await approvedApproval(s, input);
  const r = await authorize(s, authorizeBody(s, run, { input, approval_id, idempotency_key }));
  if (r.status !== 200) throw new Error(`authorization failed: ${JSON.stringify(r.body)}`);
  return { receipt: r.body.receipt, sha256: r.body.receipt.sha256 as string, idempotency_key };
}

/**
 * An approved rollback authorized through the MCP door (`/mcp/v1/authorize`, a fresh run and
 * idempotency key): the stored authorization receipt, not yet claimed.
 */
export async function mcpAuthorizedRollback(s: Seeded): Promise<Json> {
  const run_id = await createRun(s);
  const approval_id = await approvedApproval(s);
  const r = await call('POST', '/mcp/v1/authorize', {
    key: s.agent.api_key,
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name: 'execute_rollback',
        arguments: ROLLBACK_INPUT,
        _meta: {
          'dev.writ/run_id': run_id,
          'dev.writ/idempotency_key': `rollback-${uniqueName('k')}`,
          'dev.writ/approval_id': approval_id,
        },
      },
    },
  });
  if (r.body.decision !== 'allow') throw new Error(`MCP authorization failed: ${JSON.stringify(r.body)}`);
  return r.body.receipt as Json;
}

export function claim(
  s: Seeded,
  authorization_receipt_sha256: string,
  key = s.executor.api_key,
): Promise<Reply> {
  return call('POST', '/v1/executions/claim', { key, body: { authorization_receipt_sha256 } });
}

export function report(
  s: Seeded,
  operation_id: string,
  fencing_token: string,
  observation: ToolExecutionObservation,
  key = s.executor.api_key,
): Promise<Reply> {
  return call('POST', '/v1/executions/report', { key, body: { operation_id, fencing_token, observation } });
}

export function reconcile(
  s: Seeded,
  operation_id: string,
  observation: ToolExecutionObservation,
  key = s.executor.api_key,
): Promise<Reply> {
  return call('POST', '/v1/reconciliations', { key, body: { operation_id, observation } });
}

export function stateDigest(version: string): string {
  return digestOf({ deployment: 'api/production', version });
}

/**
 * What an honest rollback executor reports for `receipt`: started after the authorization,
 * completed `tookMs` later, effect-shaped fields only where the outcome proves them.
 */
export function observe(
  receipt: Json,
  outcome: ToolExecutionObservation['outcome'],
  o: {
    at?: number;
    tookMs?: number;
    effect_id?: string | null;
    executor_release?: string;
    read_only?: boolean;
  } = {},
): ToolExecutionObservation {
  const body = receipt.body;
  const started = o.at ?? (body.evaluated_at_unix_ms as number);
  const output =
    outcome === 'succeeded'
      ? '{"generation":8,"status":"rolled_back"}'
      : outcome === 'failed_no_effect'
        ? '{"error":"conflict"}'
        : '';
  const write = o.read_only !== true;
  return {
    observation_id: `obs-${uniqueName(outcome)}`,
    authorization_receipt_sha256: receipt.sha256,
    invocation_sha256: body.invocation_sha256,
    executor_release: o.executor_release ?? DEMO_EXECUTOR_RELEASE,
    outcome,
    started_at_unix_ms: started,
    completed_at_unix_ms: started + (o.tookMs ?? 5),
    output_sha256: output === '' ? null : sha256HexOfText(output),
    output_bytes: new TextEncoder().encode(output).byteLength,
    effect_id:
      o.effect_id !== undefined ? o.effect_id : write && outcome === 'succeeded' ? 'rollout-7781' : null,
    before_state_sha256: write && outcome !== 'indeterminate' ? stateDigest('v42') : null,
    after_state_sha256: write && outcome === 'succeeded' ? stateDigest('v41') : null,
    idempotency_key: body.idempotency_key,
  };
}

export function stub(operation_id: string) {
  return operationStub(env, operation_id);
}

/** An executor principal of `s` running `executor_release` (another release than the contract's). */
export async function otherExecutor(s: Seeded, executor_release: string): Promise<string> {
  const r = await call('POST', '/v1/principals', {
    key: s.admin.api_key,
    body: { name: uniqueName('executor'), roles: ['executor'], executor_release },
  });
  if (r.status !== 201) throw new Error(`principal creation failed: ${JSON.stringify(r.body)}`);
  return r.body.api_key as string;
}

/** Put a policy whose reconciliation owner is `owner`, and re-issue the agent's grant under it. */
export async function putReconciliationOwner(s: Seeded, owner: string): Promise<void> {
  const put = await call('PUT', '/v1/policy', {
    key: s.admin.api_key,
    body: { ...DEMO_POLICY, reconciliation: { ...DEMO_POLICY.reconciliation, owner } },
  });
  if (put.status !== 200) throw new Error(`policy failed: ${JSON.stringify(put.body)}`);
  // A grant binds the policy it was issued under; authorizations need one under the new policy.
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
}

/** Pin a second reviewed contract of the same tool (as after drift was quarantined). */
export async function pinSecondRollbackContract(s: Seeded): Promise<string> {
  const r = await call('POST', '/v1/contracts', {
    key: s.admin.api_key,
    body: { ...ROLLBACK_CONTRACT, contract_release: 'execute_rollback 2026.02.0' },
  });
  if (r.status !== 201 && r.status !== 200) throw new Error(`pin failed: ${JSON.stringify(r.body)}`);
  return r.body.tool_contract_sha256 as string;
}

/** A second executor principal of the contract's release. */
export function secondExecutor(s: Seeded): Promise<{ principal_id: string; api_key: string }> {
  return call('POST', '/v1/principals', {
    key: s.admin.api_key,
    body: { name: uniqueName('executor-2'), roles: ['executor'], executor_release: DEMO_EXECUTOR_RELEASE },
  }).then((r) => {
    if (r.status !== 201) throw new Error(`principal creation failed: ${JSON.stringify(r.body)}`);
    return { principal_id: r.body.principal_id as string, api_key: r.body.api_key as string };
  });
}
