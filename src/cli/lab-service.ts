/**
 * The tool-loop laboratory against a running Writ, over its HTTP API (`writ lab tools --service`).
 *
 * The in-process lab (src/lab/tool-loop.ts) mutates the objects the core evaluates. Over HTTP the
 * same mutations are expressed the way a client or an operator would cause them: a grant issued
 * without the tool or a capability, a body naming another tenant, no idempotency key, no approval,
 * an input changed after its approval, an executor report without the after-state, under another
 * key, or indeterminate. Each case keeps the lab's declared class and violations (`LAB_CASES`),
 * declared before it runs. A case the HTTP API cannot express (the pinned contract changing under
 * an approval that names it: a pinned contract is immutable, a change is another digest) is listed
 * as not expressible, never counted as passed; so are the lab's replay checks that need a stored
 * receipt rewritten.
 *
 * Set-up uses a tenant admin key: it creates its own agent, approver and executor principals, pins
 * a lab contract and issues three grants, all named with a run suffix, in the key's tenant. It
 * never changes the tenant's policy. Keys it creates stay in memory and are never printed.
 */
import {
  type AuthorizationResult,
  type ClaimProceed,
  WritApiError,
  type WritClient,
  createWritClient,
  executionObservation,
  type paths,
} from '../client/index.js';
import { LAB_CASES, type OutcomeClass } from '../lab/tool-loop.js';

type ContractBody = paths['/v1/contracts']['post']['requestBody']['content']['application/json'];

export const LAB_EXECUTOR_RELEASE = 'writ-lab-executor 1.0.0';
const TOOL = 'writ_lab_rollback';

export const HTTP_LAB_CONTRACT: ContractBody = {
  schema_version: 1,
  contract_release: 'writ_lab_rollback 2026.01.0',
  tool_name: TOOL,
  executor_release: LAB_EXECUTOR_RELEASE,
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
};

const INPUT = { service: 'api', environment: 'production', from_version: 'v42', to_version: 'v41' } as const;
const OUTPUT = '{"deployment":"api","environment":"production","revision":"v41","status":"rolled_back"}';

export type HttpClass = OutcomeClass | 'error';

export interface HttpCaseResult {
  readonly id: string;
  readonly mutation: string;
  readonly expected: { readonly class: OutcomeClass; readonly violations: readonly string[] };
  readonly status: 'passed' | 'failed' | 'not_expressible';
  /** How the case was expressed over HTTP, or why it cannot be. */
  readonly over_http: string;
  readonly actual: {
    readonly class: HttpClass;
    readonly violations: readonly string[];
    readonly detail: string;
  } | null;
}

export interface HttpLabReport {
  readonly lab: 'writ.tool-loop';
  readonly mode: 'http';
  readonly service: string;
  readonly tenant_id: string;
  readonly contract_sha256: string;
  readonly baseline: {
    readonly authorization: string;
    readonly execution: string;
    readonly authorization_receipt_replay: 'ok' | 'differences' | 'error';
  };
  readonly not_expressible_checks: readonly string[];
  readonly cases: readonly HttpCaseResult[];
  readonly summary: {
    readonly cases: number;
    readonly passed: number;
    readonly failed: number;
    readonly not_expressible: number;
  };
}

export interface HttpLabOptions {
  readonly baseUrl: string;
  /** A tenant admin key of the tenant the lab runs in. */
  readonly adminKey: string;
  readonly fetch?: (request: Request) => Promise<Response>;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly now?: () => number;
  /** Names this run's principals, grants and keys (default: the clock in base 36). */
  readonly suffix?: string;
  /** Progress lines (the CLI prints them on stderr). */
  readonly progress?: (line: string) => void;
}

type Scenario =
  | {
      readonly kind: 'authorize';
      readonly how: string;
      readonly grant: 'full' | 'no_tool' | 'no_read';
      readonly tenant_id?: string;
      readonly key: boolean;
      readonly approval: boolean;
      readonly input: Record<string, string>;
      /**
       * Where the service's own semantics differ from the library lab's prediction by design:
       * the same class, other violation codes, and why.
       */
      readonly over_http_violations?: { readonly violations: readonly string[]; readonly why: string };
    }
  | {
      readonly kind: 'execute';
      readonly how: string;
      readonly mutate: (
        o: ReturnType<typeof executionObservation>,
      ) => ReturnType<typeof executionObservation>;
    }
  | { readonly kind: 'not_expressible'; readonly why: string };

const AUTH = { grant: 'full', key: true, approval: true, input: INPUT } as const;

/** How each LAB_CASES id is expressed over HTTP. A case missing here fails the run (never passes). */
export const HTTP_SCENARIOS: Readonly<Record<string, Scenario>> = {
  tool_denied: {
    kind: 'authorize',
    ...AUTH,
    grant: 'no_tool',
    how: 'grant_id of a grant whose allowed_tools omit the tool',
  },
  capability_denied: {
    kind: 'authorize',
    ...AUTH,
    grant: 'no_read',
    how: 'grant_id of a grant without deployment:read',
  },
  tenant_drift: {
    kind: 'authorize',
    ...AUTH,
    tenant_id: 'globex',
    how: 'authorize body names tenant_id "globex"',
    over_http_violations: {
      violations: ['named_tenant_mismatch'],
      why: 'over HTTP the tenant comes from the key: the receipt names the caller and records the named tenant beside it as its own violation (receipt v2)',
    },
  },
  contract_drift: {
    kind: 'not_expressible',
    why: 'a pinned contract is immutable over HTTP: a changed executor_release is another digest, so the invocation and the approval cannot name one contract while another is pinned under it',
  },
  missing_idempotency_key: {
    kind: 'authorize',
    ...AUTH,
    key: false,
    how: 'authorize body with idempotency_key null',
  },
  missing_approval: {
    kind: 'authorize',
    ...AUTH,
    approval: false,
    how: 'authorize body without approval_id',
  },
  stale_approval_parameters: {
    kind: 'authorize',
    ...AUTH,
    input: { ...INPUT, to_version: 'v40' },
    how: 'approval for v42 -> v41, authorize body with to_version v40',
  },
  incomplete_write_effect: {
    kind: 'execute',
    how: 'report with after_state_sha256 null',
    mutate: (o) => ({ ...o, after_state_sha256: null }),
  },
  retry_key_drift: {
    kind: 'execute',
    how: 'report observation with another idempotency_key',
    mutate: (o) => ({ ...o, idempotency_key: `${o.idempotency_key ?? 'lab'}-retry` }),
  },
  indeterminate_execution: {
    kind: 'execute',
    how: 'report outcome indeterminate, no output, no effect id, no after-state',
    mutate: (o) => ({
      ...o,
      outcome: 'indeterminate',
      output_sha256: null,
      output_bytes: 0,
      effect_id: null,
      after_state_sha256: null,
    }),
  },
};

interface Actors {
  readonly agent: WritClient;
  readonly approver: WritClient;
  readonly executor: WritClient;
  readonly contract: string;
  readonly grants: Readonly<Record<'full' | 'no_tool' | 'no_read', string>>;
  readonly tenant_id: string;
}

export async function runToolLoopOverHttp(o: HttpLabOptions): Promise<HttpLabReport> {
  const now = o.now ?? Date.now;
  const suffix = o.suffix ?? now().toString(36);
  const progress = o.progress ?? (() => undefined);
  const make = (key: string) =>
    createWritClient({
      baseUrl: o.baseUrl,
      key,
      ...(o.fetch === undefined ? {} : { fetch: o.fetch }),
      ...(o.sleep === undefined ? {} : { sleep: o.sleep }),
    });
  progress('setting up: principals, lab contract, grants');
  const actors = await setUp(make(o.adminKey), make, suffix, now());

  progress('baseline: authorize, claim, report');
  const base = await executeCase(actors, `${suffix}-baseline`, (x) => x, now);
  const replay =
    base.authorization === null
      ? 'error'
      : await replayOf(actors.approver, base.authorization.receipt.sha256);

  const cases: HttpCaseResult[] = [];
  for (const [i, c] of LAB_CASES.entries()) {
    progress(`[${i + 1}/${LAB_CASES.length}] ${c.id}`);
    const s = HTTP_SCENARIOS[c.id];
    const httpViolations = s?.kind === 'authorize' ? s.over_http_violations : undefined;
    const expected = {
      class: c.expected.class,
      violations: [...(httpViolations?.violations ?? c.expected.violations)],
    };
    if (s === undefined || s.kind === 'not_expressible') {
      cases.push({
        id: c.id,
        mutation: c.mutation,
        expected,
        status: s === undefined ? 'failed' : 'not_expressible',
        over_http: s === undefined ? 'no HTTP scenario for this case' : s.why,
        actual: null,
      });
      continue;
    }
    const actual =
      s.kind === 'authorize'
        ? await authorizeCase(actors, `${suffix}-${c.id}`, s)
        : (await executeCase(actors, `${suffix}-${c.id}`, s.mutate, now)).outcome;
    const passed = actual.class === expected.class && sameList(actual.violations, expected.violations);
    cases.push({
      id: c.id,
      mutation: c.mutation,
      expected,
      status: passed ? 'passed' : 'failed',
      over_http: httpViolations === undefined ? s.how : `${s.how}; ${httpViolations.why}`,
      actual,
    });
  }
  const count = (s: HttpCaseResult['status']) => cases.filter((c) => c.status === s).length;
  return {
    lab: 'writ.tool-loop',
    mode: 'http',
    service: o.baseUrl,
    tenant_id: actors.tenant_id,
    contract_sha256: actors.contract,
    baseline: {
      authorization: base.authorization?.decision ?? base.outcome.detail,
      execution:
        base.outcome.class === 'verified'
          ? 'verified_succeeded'
          : `${base.outcome.class} ${base.outcome.detail}`,
      authorization_receipt_replay: replay,
    },
    not_expressible_checks: [
      'execution receipt replay: the service replays authorization receipts only (GET /v1/receipts answers replay null for execution receipts)',
      'forged authorization receipt: needs a stored receipt rewritten and re-hashed, which no HTTP call can do',
    ],
    cases,
    summary: {
      cases: cases.length,
      passed: count('passed'),
      failed: count('failed'),
      not_expressible: count('not_expressible'),
    },
  };
}

/** Whether the run passed: a verified baseline whose receipt replays, and no failed case. */
export function httpLabPassed(r: HttpLabReport): boolean {
  return (
    r.baseline.authorization === 'authorized' &&
    r.baseline.execution === 'verified_succeeded' &&
    r.baseline.authorization_receipt_replay === 'ok' &&
    r.summary.failed === 0
  );
}

async function setUp(
  admin: WritClient,
  make: (key: string) => WritClient,
  suffix: string,
  now: number,
): Promise<Actors> {
  const principal = async (
    name: string,
    roles: ('agent' | 'approver' | 'executor')[],
    executor_release?: string,
  ) => {
    const r = await admin.api.POST('/v1/principals', {
      body: {
        name: `${name}-${suffix}`,
        roles,
        ...(executor_release === undefined ? {} : { executor_release }),
      },
    });
    if (r.data === undefined) throw setupError(`principal ${name}`, r.response, r.error);
    return { id: r.data.principal_id, tenant_id: r.data.tenant_id, client: make(r.data.api_key) };
  };
  const agent = await principal('lab-agent', ['agent']);
  const approver = await principal('lab-approver', ['approver']);
  const executor = await principal('lab-executor', ['executor'], LAB_EXECUTOR_RELEASE);
  const pinned = await admin.api.POST('/v1/contracts', { body: HTTP_LAB_CONTRACT });
  if (pinned.data === undefined) throw setupError('lab contract', pinned.response, pinned.error);
  if (pinned.data.quarantined) throw new Error('the lab contract is quarantined in this tenant');
  const scope = [{ type: 'deployment', attributes: { environment: ['production'], service: ['api'] } }];
  const grant = async (allowed_tools: string[], capabilities: string[]) => {
    const r = await admin.api.POST('/v1/grants', {
      body: {
        principal_id: agent.id,
        allowed_tools,
        allowed_effects: ['external_write'],
        capabilities: capabilities.map((capability) => ({ capability, resources: scope })),
        expires_at_unix_ms: now + 60 * 60_000,
      },
    });
    if (r.data === undefined) throw setupError('grant', r.response, r.error);
    return r.data.grant_id;
  };
  const both = ['deployment:read', 'deployment:rollback'];
  const grants = {
    full: await grant([TOOL], both),
    no_tool: await grant(['writ_lab_read'], both),
    no_read: await grant([TOOL], ['deployment:rollback']),
  };
  return {
    agent: agent.client,
    approver: approver.client,
    executor: executor.client,
    contract: pinned.data.tool_contract_sha256,
    grants,
    tenant_id: agent.tenant_id,
  };
}

async function approved(a: Actors): Promise<string> {
  const req = await a.agent.requestApproval({ tool_contract_sha256: a.contract, input: INPUT });
  await a.approver.approve(req.approval_id, {});
  return req.approval_id;
}

async function authorizeWith(
  a: Actors,
  key: string,
  s: Extract<Scenario, { kind: 'authorize' }> | typeof AUTH,
): Promise<AuthorizationResult> {
  const run = await a.agent.openRun({
    max_calls: 1,
    max_external_writes: 1,
    max_duration_ms: 600_000,
    label: `writ lab ${key}`,
  });
  const approval_id = s.approval ? await approved(a) : undefined;
  return a.agent.authorize({
    tool_contract_sha256: a.contract,
    input: s.input,
    idempotency_key: s.key ? `lab-${key}` : null,
    run_id: run.run_id,
    grant_id: a.grants[s.grant],
    ...(approval_id === undefined ? {} : { approval_id }),
    ...('tenant_id' in s && s.tenant_id !== undefined ? { tenant_id: s.tenant_id } : {}),
  });
}

type Outcome = NonNullable<HttpCaseResult['actual']>;

async function authorizeCase(
  a: Actors,
  key: string,
  s: Extract<Scenario, { kind: 'authorize' }>,
): Promise<Outcome> {
  try {
    const r = await authorizeWith(a, key, s);
    if (r.decision === 'denied')
      return { class: 'denied', violations: [...r.violations], detail: r.receipt.sha256 };
    return { class: 'verified', violations: [], detail: `authorized ${r.receipt.sha256}` };
  } catch (e) {
    return failure(e);
  }
}

async function executeCase(
  a: Actors,
  key: string,
  mutate: (o: ReturnType<typeof executionObservation>) => ReturnType<typeof executionObservation>,
  now: () => number,
): Promise<{ authorization: AuthorizationResult | null; outcome: Outcome }> {
  let authorization: AuthorizationResult | null = null;
  try {
    authorization = await authorizeWith(a, key, AUTH);
    if (authorization.decision !== 'authorized') {
      return {
        authorization,
        outcome: {
          class: 'denied',
          violations: [...authorization.violations],
          detail: 'authorization denied',
        },
      };
    }
    const claim = await a.executor.claim(authorization.receipt.sha256);
    if (claim.status !== 'proceed')
      return { authorization, outcome: { class: 'error', violations: [], detail: `claim ${claim.status}` } };
    const observation = mutate(observationFor(authorization, claim, now));
    const r = await a.executor.api.POST('/v1/executions/report', {
      body: { operation_id: claim.operation_id, fencing_token: claim.fencing_token, observation },
    });
    const body = (r.data ?? r.error) as
      { status?: unknown; violations?: unknown; operation?: { status?: unknown } } | undefined;
    if (r.response.status !== 200 && r.response.status !== 403) throw errorOf(r.response, r.error);
    const violations = Array.isArray(body?.violations) ? body.violations.map(String) : [];
    const status = String(body?.status);
    const cls: HttpClass =
      status === 'verified_succeeded' || status === 'verified_failed_no_effect'
        ? 'verified'
        : status === 'rejected'
          ? 'rejected'
          : body?.operation?.status === 'reconciliation_required'
            ? 'reconciliation_required'
            : 'error';
    return {
      authorization,
      outcome: { class: cls, violations, detail: `${status}; operation ${String(body?.operation?.status)}` },
    };
  } catch (e) {
    return { authorization, outcome: failure(e) };
  }
}

function observationFor(auth: AuthorizationResult, claim: ClaimProceed, now: () => number) {
  // The effect starts after the claim (an effect started before it is refused).
  const claimedAt =
    typeof claim.operation.created_at_unix_ms === 'number' ? claim.operation.created_at_unix_ms : 0;
  const started = Math.max(now(), claimedAt);
  return executionObservation({
    authorization: auth.receipt,
    observation_id: `obs-${claim.operation_id.slice(0, 16)}`,
    executor_release: LAB_EXECUTOR_RELEASE,
    outcome: 'succeeded',
    started_at_unix_ms: started,
    completed_at_unix_ms: Math.max(now(), started),
    output: OUTPUT,
    effect_id: `lab-effect-${claim.operation_id.slice(0, 16)}`,
    before_state_sha256: 'b'.repeat(64),
    after_state_sha256: 'c'.repeat(64),
  });
}

async function replayOf(c: WritClient, sha: string): Promise<'ok' | 'differences' | 'error'> {
  try {
    const r = await c.getReceipt(sha);
    const replay = r.replay as { ok?: unknown } | null;
    return replay?.ok === true ? 'ok' : 'differences';
  } catch {
    return 'error';
  }
}

function failure(e: unknown): Outcome {
  if (e instanceof WritApiError) {
    const cls: HttpClass = e.status === 400 ? 'malformed' : 'error';
    return { class: cls, violations: [], detail: `${e.status} ${e.code}: ${e.message}` };
  }
  return { class: 'error', violations: [], detail: e instanceof Error ? e.message : String(e) };
}

function errorOf(response: Response, body: unknown): WritApiError {
  const e = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return new WritApiError({
    operation: 'lab',
    status: response.status,
    code: typeof e?.code === 'string' ? e.code : 'malformed_response',
    message: typeof e?.message === 'string' ? e.message : 'unexpected answer',
  });
}

function setupError(what: string, response: Response, body: unknown): Error {
  const e = errorOf(response, body);
  return new Error(`lab set-up: ${what} failed: ${e.status} ${e.code}: ${e.message}`);
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
