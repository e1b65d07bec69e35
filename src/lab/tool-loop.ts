/**
 * The authorized tool loop lab (spec ch. 11, "MP-23 · Authorized Tool Loop", in Writ's terms).
 *
 * One fixed rollback scenario (tenant `acme` rolls service `api` in `production` back from
 * generation 8 to generation 7), authorized and execution-verified end to end, its two receipts
 * replayed, then ten mutations of it, each with its outcome class and exact violation codes
 * declared before it runs. The report is a JSON value whose RFC 8785 bytes are the lab's output.
 *
 * Guarantees: deterministic. Every timestamp is a constant and every digest comes from
 * `digestOf`, so two runs give byte-identical reports; a change to canonical encoding, to a
 * check, or to a violation code changes a pinned digest. Every input goes through the same
 * strict schemas a transport object would.
 * Never: reads a clock, does I/O (the CLI in `scripts/lab-tools.ts` writes the file), or
 * caches a decision. It throws only when its own constant fixture is broken (a baseline that does
 * not verify): that is a bug in the lab, never an outcome to report.
 */
import { authorizeToolCall } from '../core/authorization/authorize.js';
import { canonicalBytes, canonicalize, digestOf, sha256Hex } from '../core/canonical/canonical.js';
import { contractDigest, deriveTarget } from '../core/contracts/contract.js';
import { cachedDigest } from '../core/canonical/digest-cache.js';
import { verifyExecution } from '../core/execution/execution.js';
import { decodeJsonText, type JsonObject, type JsonValue } from '../core/canonical/json.js';
import {
  type AuthorizationReceipt,
  type ExecutionReceipt,
  type ToolApproval,
  ToolContract,
  ToolExecutionObservation,
  ToolGrant,
  ToolInvocation,
} from '../core/model.js';
import {
  verifyAuthorizationReceipt,
  verifyExecutionReceipt,
  type ReplayReport,
} from '../core/receipts/replay.js';

export const LAB_ID = 'writ.tool-loop';
export const LAB_VERSION = 1;

// ---------------------------------------------------------------------------------------------
// Fixed clock: the lab never reads one.

/** Every instant of the scenario, in Unix milliseconds (UTC). */
export const LAB_TIMES = {
  grantNotBefore: 1_793_491_200_000, // 2026-11-01T00:00:00Z
  grantExpires: 1_796_083_200_000, // 2026-12-01T00:00:00Z
  requestedAt: 1_794_906_000_000, // 2026-11-17T09:00:00Z
  evaluatedAt: 1_794_906_000_250, // authorization 250 ms after the proposal
  approvalExpires: 1_794_906_900_000, // 2026-11-17T09:15:00Z, a 15-minute approval
  startedAt: 1_794_906_001_000,
  completedAt: 1_794_906_042_000, // 41 s rollout, within the 120 s timeout
} as const;

// ---------------------------------------------------------------------------------------------
// Fixture

/** The reviewed input schema of `execute_rollback`: concrete generations, never "previous". */
const INPUT_SCHEMA: JsonValue = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  additionalProperties: false,
  required: ['environment', 'from_generation', 'service', 'to_generation'],
  properties: {
    service: { type: 'string', minLength: 1, maxLength: 128 },
    environment: { type: 'string', enum: ['staging', 'production'] },
    from_generation: { type: 'integer', minimum: 1 },
    to_generation: { type: 'integer', minimum: 1 },
  },
};

const OUTPUT_SCHEMA: JsonValue = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  additionalProperties: false,
  required: ['environment', 'observed_generation', 'operation_id', 'service', 'status'],
  properties: {
    service: { type: 'string' },
    environment: { type: 'string' },
    status: { type: 'string', enum: ['rolled_back'] },
    operation_id: { type: 'string' },
    observed_generation: { type: 'integer', minimum: 1 },
  },
};

/** The tenant policy document the grant was compiled under; only its digest travels. */
const POLICY: JsonValue = {
  policy_id: 'acme-production-rollbacks',
  policy_version: 3,
  tenant_id: 'acme',
  rules: ['external_write requires approval by a distinct principal', 'rollbacks bind concrete generations'],
};

/** The run envelope the proposal belongs to; only its digest travels. */
const RUN_ENVELOPE: JsonValue = {
  run_id: 'run-acme-2026-11-17-0007',
  tenant_id: 'acme',
  principal_id: 'agent',
  task: 'restore api in production after a failed release',
  started_at_unix_ms: 1_794_905_400_000,
};

export const LAB_IDS = {
  tenant: 'acme',
  principal: 'agent',
  approver: 'sre-oncall',
  grant: 'grant-acme-agent-rollback-api',
  approval: 'approval-acme-0042',
  invocation: 'invocation-acme-0042',
  observation: 'observation-acme-0042',
  effect: 'op-acme-api-production-0042',
  idempotencyKey: 'rollback:acme:api:production:8-to-7',
  retryKey: 'rollback:acme:api:production:8-to-7:retry-2',
} as const;

export interface ToolLoopFixture {
  readonly contract: ToolContract;
  readonly grant: ToolGrant;
  readonly input: JsonObject;
  readonly approval: ToolApproval;
  readonly invocation: ToolInvocation;
  /** Evaluation time passed to `authorizeToolCall`. */
  readonly now: number;
  readonly output: JsonValue;
  readonly beforeState: JsonValue;
  readonly afterState: JsonValue;
  readonly policySha256: string;
}

/** Build the baseline scenario. Returns fresh, unfrozen objects on every call. */
export function buildToolLoopFixture(): ToolLoopFixture {
  const contract: ToolContract = {
    schema_version: 1,
    contract_release: 'execute_rollback@1.0.0',
    tool_name: 'execute_rollback',
    executor_release: 'rollback-executor@2.4.1',
    input_schema_sha256: digestOf(INPUT_SCHEMA),
    output_schema_sha256: digestOf(OUTPUT_SCHEMA),
    effect: 'external_write',
    required_capabilities: ['deployment:read', 'deployment:rollback'],
    idempotency: 'key_required',
    reversible: true,
    timeout_ms: 120_000,
    max_input_bytes: 4_096,
    max_output_bytes: 65_536,
    resource: { type: 'deployment', attributes: { service: '/service', environment: '/environment' } },
  };
  const policySha256 = digestOf(POLICY);
  const scope = () => [{ type: 'deployment', attributes: { service: ['api'], environment: ['production'] } }];
  const grant: ToolGrant = {
    grant_id: LAB_IDS.grant,
    principal_id: LAB_IDS.principal,
    tenant_id: LAB_IDS.tenant,
    policy_sha256: policySha256,
    allowed_tools: ['execute_rollback'],
    allowed_effects: ['external_write'],
    capabilities: [
      { capability: 'deployment:read', resources: scope() },
      { capability: 'deployment:rollback', resources: scope() },
    ],
    not_before_unix_ms: LAB_TIMES.grantNotBefore,
    expires_at_unix_ms: LAB_TIMES.grantExpires,
  };
  const input = rollbackInput(8, 7);
  const contractSha = contractDigest(contract);
  const approval: ToolApproval = {
    approval_id: LAB_IDS.approval,
    approver_principal_id: LAB_IDS.approver,
    tenant_id: LAB_IDS.tenant,
    policy_sha256: policySha256,
    tool_contract_sha256: contractSha,
    input_sha256: digestOf(input),
    effect: 'external_write',
    expires_at_unix_ms: LAB_TIMES.approvalExpires,
  };
  const invocation: ToolInvocation = {
    invocation_id: LAB_IDS.invocation,
    run_envelope_sha256: digestOf(RUN_ENVELOPE),
    tenant_id: LAB_IDS.tenant,
    principal_id: LAB_IDS.principal,
    policy_sha256: policySha256,
    tool_contract_sha256: contractSha,
    input_sha256: digestOf(input),
    input_bytes: canonicalBytes(input).byteLength,
    target: unwrapTarget(contract, input),
    requested_at_unix_ms: LAB_TIMES.requestedAt,
    idempotency_key: LAB_IDS.idempotencyKey,
    approval,
  };
  return {
    contract,
    grant,
    input,
    approval,
    invocation,
    now: LAB_TIMES.evaluatedAt,
    output: {
      service: 'api',
      environment: 'production',
      status: 'rolled_back',
      operation_id: LAB_IDS.effect,
      observed_generation: 7,
    },
    beforeState: { service: 'api', environment: 'production', generation: 8, release: 'api@2026.11.17-1' },
    afterState: { service: 'api', environment: 'production', generation: 7, release: 'api@2026.11.16-2' },
    policySha256,
  };
}

function rollbackInput(from: number, to: number): JsonObject {
  return { service: 'api', environment: 'production', from_generation: from, to_generation: to };
}

function unwrapTarget(contract: ToolContract, input: JsonObject): ToolInvocation['target'] {
  const t = deriveTarget(contract, input);
  // The fixture is constant: a failure here is a bug in the lab, not an outcome.
  if (!t.ok) throw new Error(`lab fixture input does not name a target: ${t.error.message}`);
  return t.value;
}

/** What the executor reports for an authorization: the verified-success baseline. */
export function baselineObservation(
  f: ToolLoopFixture,
  auth: AuthorizationReceipt,
): ToolExecutionObservation {
  return {
    observation_id: LAB_IDS.observation,
    authorization_receipt_sha256: auth.sha256,
    invocation_sha256: auth.body.invocation_sha256,
    executor_release: f.contract.executor_release,
    outcome: 'succeeded',
    started_at_unix_ms: LAB_TIMES.startedAt,
    completed_at_unix_ms: LAB_TIMES.completedAt,
    output_sha256: digestOf(f.output),
    output_bytes: canonicalBytes(f.output).byteLength,
    effect_id: LAB_IDS.effect,
    before_state_sha256: digestOf(f.beforeState),
    after_state_sha256: digestOf(f.afterState),
    idempotency_key: LAB_IDS.idempotencyKey,
  };
}

// ---------------------------------------------------------------------------------------------
// Cases

export const OUTCOME_CLASSES = [
  'malformed',
  'denied',
  'rejected',
  'verified',
  'reconciliation_required',
] as const;
export type OutcomeClass = (typeof OUTCOME_CLASSES)[number];

/** Everything one pass through the loop consumes. */
export interface LoopInputs {
  readonly contract: ToolContract;
  readonly grant: ToolGrant;
  readonly invocation: ToolInvocation;
  readonly now: number;
  readonly observe: (auth: AuthorizationReceipt) => ToolExecutionObservation;
}

export interface LabCase {
  readonly id: string;
  /** One line: what the mutation changes relative to the baseline. */
  readonly mutation: string;
  /** Declared before the case runs. */
  readonly expected: { readonly class: OutcomeClass; readonly violations: readonly string[] };
  readonly apply: (f: ToolLoopFixture) => LoopInputs;
}

function baselineInputs(f: ToolLoopFixture): LoopInputs {
  return {
    contract: f.contract,
    grant: f.grant,
    invocation: f.invocation,
    now: f.now,
    observe: (auth) => baselineObservation(f, auth),
  };
}

/** The ten mutations of spec ch. 11 ("The supplied ten mutations cover ..."), in its order. */
export const LAB_CASES: readonly LabCase[] = [
  {
    id: 'tool_denied',
    mutation: 'grant allows only read_deployment_status, not execute_rollback',
    expected: { class: 'denied', violations: ['tool_not_allowed'] },
    apply: (f) => ({
      ...baselineInputs(f),
      grant: { ...f.grant, allowed_tools: ['read_deployment_status'] },
    }),
  },
  {
    id: 'capability_denied',
    mutation: 'grant holds deployment:rollback but not the supporting deployment:read',
    expected: { class: 'denied', violations: ['capability_not_granted'] },
    apply: (f) => ({
      ...baselineInputs(f),
      grant: {
        ...f.grant,
        capabilities: f.grant.capabilities.filter((c) => c.capability !== 'deployment:read'),
      },
    }),
  },
  {
    id: 'tenant_drift',
    mutation: 'invocation names tenant globex; grant and approval are for acme',
    expected: { class: 'denied', violations: ['approval_tenant_mismatch', 'tenant_mismatch'] },
    apply: (f) => ({ ...baselineInputs(f), invocation: { ...f.invocation, tenant_id: 'globex' } }),
  },
  {
    id: 'contract_drift',
    mutation:
      'pinned contract now names executor rollback-executor@2.5.0; invocation and approval name the reviewed one',
    expected: { class: 'denied', violations: ['approval_contract_mismatch', 'contract_mismatch'] },
    apply: (f) => ({
      ...baselineInputs(f),
      contract: { ...f.contract, executor_release: 'rollback-executor@2.5.0' },
    }),
  },
  {
    id: 'missing_idempotency_key',
    mutation: 'external_write invocation without an idempotency key',
    expected: { class: 'denied', violations: ['idempotency_key_missing'] },
    apply: (f) => ({ ...baselineInputs(f), invocation: { ...f.invocation, idempotency_key: null } }),
  },
  {
    id: 'missing_approval',
    mutation: 'external_write invocation without an approval',
    expected: { class: 'denied', violations: ['approval_missing'] },
    apply: (f) => ({ ...baselineInputs(f), invocation: { ...f.invocation, approval: null } }),
  },
  {
    id: 'stale_approval_parameters',
    mutation: 'input repaired after approval to roll back to generation 6; approval binds 8 -> 7',
    expected: { class: 'denied', violations: ['approval_input_mismatch'] },
    apply: (f) => {
      const repaired = rollbackInput(8, 6);
      return {
        ...baselineInputs(f),
        invocation: {
          ...f.invocation,
          input_sha256: digestOf(repaired),
          input_bytes: canonicalBytes(repaired).byteLength,
        },
      };
    },
  },
  {
    id: 'incomplete_write_effect',
    mutation: 'executor reports success of the write without an after-state',
    expected: { class: 'rejected', violations: ['write_after_state_missing'] },
    apply: (f) => ({
      ...baselineInputs(f),
      observe: (auth) => ({ ...baselineObservation(f, auth), after_state_sha256: null }),
    }),
  },
  {
    id: 'retry_key_drift',
    mutation: 'executor retried the write under a new idempotency key',
    expected: { class: 'rejected', violations: ['idempotency_key_mismatch'] },
    apply: (f) => ({
      ...baselineInputs(f),
      observe: (auth) => ({ ...baselineObservation(f, auth), idempotency_key: LAB_IDS.retryKey }),
    }),
  },
  {
    id: 'indeterminate_execution',
    mutation: 'connection lost after dispatch: no output, no effect id, no after-state',
    expected: { class: 'reconciliation_required', violations: [] },
    apply: (f) => ({
      ...baselineInputs(f),
      observe: (auth) => ({
        ...baselineObservation(f, auth),
        outcome: 'indeterminate',
        output_sha256: null,
        output_bytes: 0,
        effect_id: null,
        after_state_sha256: null,
      }),
    }),
  },
];

// ---------------------------------------------------------------------------------------------
// The loop

interface LoopOutcome {
  readonly class: OutcomeClass;
  /** Sorted violation codes; for `malformed`, the one `CoreError` reason that stopped evaluation. */
  readonly violations: readonly string[];
  readonly authorization: AuthorizationReceipt | null;
  readonly execution: ExecutionReceipt | null;
  readonly observation: ToolExecutionObservation | null;
}

const malformed = (reason: string, authorization: AuthorizationReceipt | null = null): LoopOutcome => ({
  class: 'malformed',
  violations: [reason],
  authorization,
  execution: null,
  observation: null,
});

/**
 * Propose, authorize, and (only when authorized) verify the executor's observation. Inputs are
 * re-parsed by the strict transport schemas, so a mutation that breaks a shape is `malformed`,
 * never silently evaluated.
 */
function runLoop(inputs: LoopInputs): LoopOutcome {
  const contract = ToolContract.safeParse(inputs.contract);
  if (!contract.success) return malformed('invalid_contract');
  const grant = ToolGrant.safeParse(inputs.grant);
  if (!grant.success) return malformed('invalid_grant');
  const invocation = ToolInvocation.safeParse(inputs.invocation);
  if (!invocation.success) return malformed('invalid_invocation');

  const auth = authorizeToolCall(contract.data, grant.data, invocation.data, inputs.now);
  if (!auth.ok) return malformed(auth.error.reason);
  const a = auth.value;
  // Denied calls stop here: nothing is dispatched, so there is nothing to observe.
  if (a.body.decision !== 'authorized') {
    return {
      class: 'denied',
      violations: a.body.violations,
      authorization: a,
      execution: null,
      observation: null,
    };
  }

  const observation = ToolExecutionObservation.safeParse(inputs.observe(a));
  if (!observation.success) return malformed('invalid_observation', a);
  const exec = verifyExecution(contract.data, a, observation.data);
  if (!exec.ok) return malformed(exec.error.reason, a);
  const e = exec.value;
  const cls: OutcomeClass =
    e.body.status === 'rejected'
      ? 'rejected'
      : e.body.status === 'indeterminate'
        ? 'reconciliation_required'
        : 'verified';
  return {
    class: cls,
    violations: e.body.violations,
    authorization: a,
    execution: e,
    observation: observation.data,
  };
}

// ---------------------------------------------------------------------------------------------
// Report

export interface CaseResult {
  readonly id: string;
  readonly mutation: string;
  readonly expected: { readonly class: OutcomeClass; readonly violations: readonly string[] };
  readonly actual: { readonly class: OutcomeClass; readonly violations: readonly string[] };
  /** The receipt that decided the case: execution receipt when one was issued, else authorization. */
  readonly receipt_sha256: string | null;
  readonly passed: boolean;
}

export interface ToolLoopReport {
  readonly lab: string;
  readonly lab_version: number;
  readonly scenario: {
    readonly tenant_id: string;
    readonly principal_id: string;
    readonly approver_principal_id: string;
    readonly tool_name: string;
    readonly effect: string;
    readonly input: JsonObject;
    readonly target: ToolInvocation['target'];
    readonly idempotency_key: string;
    readonly evaluated_at_unix_ms: number;
  };
  readonly digests: {
    readonly contract_sha256: string;
    readonly grant_sha256: string;
    readonly policy_sha256: string;
    readonly input_sha256: string;
    readonly invocation_sha256: string;
    readonly observation_sha256: string;
    readonly authorization_receipt_sha256: string;
    readonly execution_receipt_sha256: string;
  };
  readonly baseline: {
    readonly authorization: string;
    readonly authorization_violations: readonly string[];
    readonly execution: string;
    readonly execution_violations: readonly string[];
    readonly reconciliation_required: boolean;
  };
  readonly replay: {
    readonly authorization_receipt: ReplayReport;
    readonly execution_receipt: ReplayReport;
    /** A denied receipt rewritten to `authorized` and consistently re-hashed must fail replay. */
    readonly forged_authorization_receipt: ReplayReport;
  };
  readonly cases: readonly CaseResult[];
  readonly summary: { readonly cases: number; readonly passed: number; readonly failures: readonly string[] };
}

export interface ToolLoopLab {
  readonly report: ToolLoopReport;
  /** RFC 8785 text of the report; `bytes` is its UTF-8. */
  readonly text: string;
  readonly bytes: Uint8Array;
  readonly sha256: string;
}

/** Run the whole lab. Pure and deterministic. */
export function runToolLoopLab(): ToolLoopLab {
  const f = buildToolLoopFixture();
  const failures: string[] = [];

  const base = runLoop(baselineInputs(f));
  const auth = base.authorization;
  const exec = base.execution;
  const obs = base.observation;
  if (base.class !== 'verified' || auth === null || exec === null || obs === null) {
    // Without a verified baseline no mutation is meaningful: report what happened and stop.
    throw new Error(`lab baseline did not verify: ${base.class} ${base.violations.join(',')}`);
  }
  if (auth.body.decision !== 'authorized') failures.push('baseline authorization is not authorized');
  if (exec.body.status !== 'verified_succeeded')
    failures.push('baseline execution is not verified_succeeded');

  // Replay reads the receipts back as stored bytes, exactly as a verifier would get them.
  const authReplay = verifyAuthorizationReceipt(stored(auth), {
    contract: f.contract,
    grant: f.grant,
    invocation: f.invocation,
    now: f.now,
  });
  const execReplay = verifyExecutionReceipt(stored(exec), {
    contract: f.contract,
    authorization: auth,
    observation: obs,
  });
  if (!authReplay.ok) failures.push('baseline authorization receipt failed replay');
  if (!execReplay.ok) failures.push('baseline execution receipt failed replay');
  const forgedReplay = forgeDeniedReceipt();
  if (forgedReplay.ok) failures.push('forged authorization receipt passed replay');

  const cases = LAB_CASES.map((c): CaseResult => {
    const out = runLoop(c.apply(buildToolLoopFixture()));
    const passed = out.class === c.expected.class && sameList(out.violations, c.expected.violations);
    if (!passed) failures.push(`case ${c.id}`);
    return {
      id: c.id,
      mutation: c.mutation,
      expected: { class: c.expected.class, violations: [...c.expected.violations] },
      actual: { class: out.class, violations: [...out.violations] },
      receipt_sha256: out.execution?.sha256 ?? out.authorization?.sha256 ?? null,
      passed,
    };
  });

  const report: ToolLoopReport = {
    lab: LAB_ID,
    lab_version: LAB_VERSION,
    scenario: {
      tenant_id: f.invocation.tenant_id,
      principal_id: f.invocation.principal_id,
      approver_principal_id: f.approval.approver_principal_id,
      tool_name: f.contract.tool_name,
      effect: f.contract.effect,
      input: f.input,
      target: f.invocation.target,
      idempotency_key: LAB_IDS.idempotencyKey,
      evaluated_at_unix_ms: f.now,
    },
    digests: {
      contract_sha256: contractDigest(f.contract),
      grant_sha256: cachedDigest(f.grant),
      policy_sha256: f.policySha256,
      input_sha256: f.invocation.input_sha256,
      invocation_sha256: auth.body.invocation_sha256,
      observation_sha256: exec.body.observation_sha256,
      authorization_receipt_sha256: auth.sha256,
      execution_receipt_sha256: exec.sha256,
    },
    baseline: {
      authorization: auth.body.decision,
      authorization_violations: auth.body.violations,
      execution: exec.body.status,
      execution_violations: exec.body.violations,
      reconciliation_required: exec.body.reconciliation_required,
    },
    replay: {
      authorization_receipt: authReplay,
      execution_receipt: execReplay,
      forged_authorization_receipt: forgedReplay,
    },
    cases,
    summary: { cases: cases.length, passed: cases.filter((c) => c.passed).length, failures },
  };
  const text = canonicalize(report);
  const bytes = canonicalBytes(report);
  return { report, text, bytes, sha256: sha256Hex(bytes) };
}

/** A receipt as a verifier reads it back from storage: canonical bytes, strictly decoded. */
function stored(receipt: AuthorizationReceipt | ExecutionReceipt): unknown {
  const decoded = decodeJsonText(canonicalize(receipt));
  if (!decoded.ok) throw new Error(`lab receipt does not round-trip: ${decoded.error.message}`);
  return decoded.value;
}

/**
 * The stale-approval denial, rewritten to `authorized` with its violations removed and its
 * `sha256` recomputed so the body hashes to its identity: only recomputation from the original
 * inputs can tell it from a genuine receipt.
 */
function forgeDeniedReceipt(): ReplayReport {
  const c = LAB_CASES.find((x) => x.id === 'stale_approval_parameters');
  if (c === undefined) throw new Error('lab case stale_approval_parameters is missing');
  const inputs = c.apply(buildToolLoopFixture());
  const denied = authorizeToolCall(inputs.contract, inputs.grant, inputs.invocation, inputs.now);
  if (!denied.ok) throw new Error('lab forgery base did not evaluate');
  const body = { ...denied.value.body, decision: 'authorized' as const, violations: [] };
  return verifyAuthorizationReceipt(stored({ sha256: digestOf(body), body }), {
    contract: inputs.contract,
    grant: inputs.grant,
    invocation: inputs.invocation,
    now: inputs.now,
  });
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
