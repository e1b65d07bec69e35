/**
 * Demo seed over the public HTTP API: a tenant with an admin, an agent, an approver and an
 * executor, a policy, the reviewed rollback contract (and its read-only companion), and a grant
 * for the agent. Used by `npm run dev`, the HTTP benchmark and the integration tests (which pass
 * the Worker's own `fetch`), so the three exercise the same path a user's curl does.
 *
 * Re-running against a database that already has `acme`: API keys are shown once and only their
 * hashes are stored, so existing keys cannot be printed again. The seed therefore creates the next
 * free name (`acme-2`, `acme-3`, ...) with fresh keys; earlier tenants stay as they were.
 *
 * No Node APIs here (the tests run it inside workerd); time comes from the caller.
 */

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export const DEMO_EXECUTOR_RELEASE = 'rollback-executor 1.4.2';

/** The reviewed rollback contract (spec ch. 11): a reversible external write with two capabilities. */
export const ROLLBACK_CONTRACT = {
  schema_version: 1,
  contract_release: 'execute_rollback 2026.01.0',
  tool_name: 'execute_rollback',
  executor_release: DEMO_EXECUTOR_RELEASE,
  input_schema_sha256: '3f1b9c8d0e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c',
  output_schema_sha256: '7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d',
  effect: 'external_write',
  required_capabilities: ['deployment:read', 'deployment:rollback'],
  idempotency: 'key_required',
  reversible: true,
  timeout_ms: 30_000,
  max_input_bytes: 4_096,
  max_output_bytes: 65_536,
  resource: { type: 'deployment', attributes: { environment: '/environment', service: '/service' } },
} as const;

/** A read-only companion over the same resource: no approval, no idempotency key. */
export const READ_CONTRACT = {
  ...ROLLBACK_CONTRACT,
  contract_release: 'get_deployment 2026.01.0',
  tool_name: 'get_deployment',
  executor_release: 'deployment-reader 2.0.1',
  input_schema_sha256: '0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9',
  output_schema_sha256: 'f9e8d7c6b5a40312f9e8d7c6b5a40312f9e8d7c6b5a40312f9e8d7c6b5a40312',
  effect: 'read_only',
  required_capabilities: ['deployment:read'],
  idempotency: 'not_required',
  reversible: false,
} as const;

/**
 * An irreversible companion (not pinned by `seedDemo`): under the demo policy it needs two
 * distinct approvers (issue 14). Used by the second-approver tests and the browser test.
 */
export const PURGE_CONTRACT = {
  ...ROLLBACK_CONTRACT,
  contract_release: 'purge_deployment 2026.01.0',
  tool_name: 'purge_deployment',
  effect: 'irreversible',
  reversible: false,
} as const;

/** The demo policy: the defaults, with the SRE team owning reconciliation. */
export const DEMO_POLICY = {
  policy_version: 1,
  approval_required_effects: ['external_write', 'irreversible'],
  approval_max_lifetime_ms: 15 * 60_000,
  authorization_max_dispatch_ms: 60_000,
  observation_max_age_ms: 5 * 60_000,
  reconciliation: { owner: 'team:sre', deadline_ms: 60 * 60_000 },
  allowed_media_types: ['application/json'],
  run_budget_limits: { max_calls: 100, max_external_writes: 10, max_duration_ms: 60 * 60_000 },
  observation_limits: { max_observation_bytes: 65_536, max_clock_skew_ms: 5_000 },
} as const;

export const DEMO_GRANT_DAYS = 30;

export interface SeededPrincipal {
  readonly principal_id: string;
  readonly api_key: string;
}

export interface Seeded {
  readonly tenant_id: string;
  readonly tenant_name: string;
  readonly policy_sha256: string;
  readonly admin: SeededPrincipal;
  readonly agent: SeededPrincipal;
  readonly approver: SeededPrincipal;
  readonly executor: SeededPrincipal;
  readonly rollback_contract_sha256: string;
  readonly read_contract_sha256: string;
  readonly grant_id: string;
}

export interface SeedOptions {
  readonly baseUrl: string;
  readonly adminToken: string;
  readonly fetch: FetchLike;
  readonly now: number;
  /** First name to try; `-2`, `-3`, ... are appended while the name is taken. */
  readonly name?: string;
  /** The policy to put in force before the grant is issued (default `DEMO_POLICY`). */
  readonly policy?: unknown;
}

export async function seedDemo(o: SeedOptions): Promise<Seeded> {
  const call = async (method: string, path: string, key: string, body?: unknown) => {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${key}` } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { ...init.headers, 'content-type': 'application/json' };
    }
    const res = await o.fetch(`${o.baseUrl}${path}`, init);
    const json = (await res.json()) as Record<string, unknown>;
    return { status: res.status, json };
  };
  const must = (r: { status: number; json: Record<string, unknown> }, what: string) => {
    if (r.status !== 200 && r.status !== 201)
      throw new Error(`seed: ${what} failed (${r.status}): ${JSON.stringify(r.json)}`);
    return r.json;
  };

  const base = o.name ?? 'acme';
  let created: Record<string, unknown> | undefined;
  for (let n = 1; n <= 100 && created === undefined; n++) {
    const name = n === 1 ? base : `${base}-${n}`;
    const r = await call('POST', '/v1/tenants', o.adminToken, { name, admin_name: `${name} admin` });
    if (r.status === 409) continue;
    created = must(r, 'tenant creation');
  }
  if (created === undefined) throw new Error('seed: no free tenant name');
  const tenant = created.tenant as { tenant_id: string; name: string };
  const adminP = created.admin as SeededPrincipal;

  const principal = async (name: string, roles: string[], executor_release?: string) => {
    const body = executor_release === undefined ? { name, roles } : { name, roles, executor_release };
    const j = must(await call('POST', '/v1/principals', adminP.api_key, body), `principal ${name}`);
    return { principal_id: j.principal_id as string, api_key: j.api_key as string };
  };
  const agent = await principal('deploy-agent', ['agent']);
  const approver = await principal('sre-on-call', ['approver']);
  const executor = await principal('rollback-executor', ['executor'], DEMO_EXECUTOR_RELEASE);

  const policy = must(await call('PUT', '/v1/policy', adminP.api_key, o.policy ?? DEMO_POLICY), 'policy');
  const rollback = must(
    await call('POST', '/v1/contracts', adminP.api_key, ROLLBACK_CONTRACT),
    'rollback contract',
  );
  const read = must(await call('POST', '/v1/contracts', adminP.api_key, READ_CONTRACT), 'read contract');
  const scope = [
    { type: 'deployment', attributes: { environment: ['production', 'staging'], service: ['api'] } },
  ];
  const grant = must(
    await call('POST', '/v1/grants', adminP.api_key, {
      principal_id: agent.principal_id,
      allowed_tools: ['execute_rollback', 'get_deployment'],
      allowed_effects: ['external_write', 'read_only'],
      capabilities: [
        { capability: 'deployment:read', resources: scope },
        { capability: 'deployment:rollback', resources: scope },
      ],
      expires_at_unix_ms: o.now + DEMO_GRANT_DAYS * 24 * 60 * 60_000,
    }),
    'grant',
  );
  return {
    tenant_id: tenant.tenant_id,
    tenant_name: tenant.name,
    policy_sha256: policy.policy_sha256 as string,
    admin: { principal_id: adminP.principal_id, api_key: adminP.api_key },
    agent,
    approver,
    executor,
    rollback_contract_sha256: rollback.tool_contract_sha256 as string,
    read_contract_sha256: read.tool_contract_sha256 as string,
    grant_id: grant.grant_id as string,
  };
}

/** Shell lines that export the seeded identities (sourced by docs/walkthrough.md). */
export function seedEnvLines(baseUrl: string, s: Seeded): string[] {
  return [
    `export WRIT=${baseUrl}`,
    `export TENANT_ID=${s.tenant_id}`,
    `export ADMIN_KEY=${s.admin.api_key}`,
    `export AGENT_KEY=${s.agent.api_key}`,
    `export AGENT_ID=${s.agent.principal_id}`,
    `export APPROVER_KEY=${s.approver.api_key}`,
    `export APPROVER_ID=${s.approver.principal_id}`,
    `export EXECUTOR_KEY=${s.executor.api_key}`,
    `export EXECUTOR_ID=${s.executor.principal_id}`,
    `export CONTRACT=${s.rollback_contract_sha256}`,
    `export READ_CONTRACT=${s.read_contract_sha256}`,
    `export GRANT_ID=${s.grant_id}`,
  ];
}
