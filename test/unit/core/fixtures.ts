/**
 * The reference rollback scenario (spec ch. 11), shared by the core unit tests, the decision data
 * cases in `test/data/decisions/` and the authorized tool-loop lab.
 *
 * Tenant `acme` asks to roll service `api` in `production` back one version (v42 -> v41) through the
 * pinned `execute_rollback` contract: effect `external_write`, capabilities `deployment:read` and
 * `deployment:rollback`, idempotency key required, approved by `user:bob@acme` for a request by
 * `user:alice@acme`. Every instant is fixed (see `T`), so every digest is stable across runs.
 *
 * Guarantees: every builder returns a fresh, unfrozen object that a test may mutate freely; the
 * baseline scenario authorizes, and the baseline observation verifies as `verified_succeeded`.
 * Never: reads a clock, randomness or the network; never caches a decision.
 */
import { authorizeToolCall } from '../../../src/core/authorization/authorize.js';
import {
  canonicalBytes,
  digestOf,
  sha256Hex,
  sha256HexOfText,
} from '../../../src/core/canonical/canonical.js';
import { contractDigest, deriveTarget } from '../../../src/core/contracts/contract.js';
import { type CoreError, type CoreErrorReason, fromZodError } from '../../../src/core/errors.js';
import { verifyExecution } from '../../../src/core/execution/execution.js';
import type { JsonObject, JsonValue } from '../../../src/core/canonical/json.js';
import type { Result } from '../../../src/core/result.js';
import {
  AuthorizationReceipt,
  EMPTY_TRUSTED_STATE,
  type ExecutionReceipt,
  type ResourceRef,
  type ToolApproval,
  ToolContract,
  ToolExecutionObservation,
  ToolGrant,
  ToolInvocation,
  TrustedState,
} from '../../../src/core/model.js';

// ---------------------------------------------------------------------------------------------
// Identities and instants

export const TENANT = 'acme';
export const OTHER_TENANT = 'globex';
export const PRINCIPAL = 'user:alice@acme';
export const APPROVER = 'user:bob@acme';
export const TOOL = 'execute_rollback';
export const READ_TOOL = 'get_deployment';
export const EXECUTOR_RELEASE = 'rollback-executor 1.4.2';
/** One logical rollback operation. Opaque: receipts carry it, so it must not embed the arguments. */
export const IDEMPOTENCY_KEY = 'acme:execute_rollback:op-7f3a9c';

/** Digest of the tenant policy the run was compiled under (stands in for a real policy document). */
export const POLICY_SHA256 = digestOf({ policy: 'acme-production-change', version: 3 });
/** A well-formed digest that names nothing in the fixture: the value to use for "some other digest". */
export const UNRELATED_SHA256 = 'f'.repeat(64);

const EPOCH = 1_767_225_600_000; // 2026-01-01T00:00:00.000Z

/**
 * Every instant of the scenario, in ms since the epoch. Ordered:
 * grant valid from `grantNotBefore`; the agent proposes at `requestedAt`; Writ evaluates at `now`;
 * the executor starts at `startedAt` and completes at `completedAt`; the approval expires at
 * `approvalExpiresAt`, the grant at `grantExpiresAt`.
 */
export const T = {
  grantNotBefore: EPOCH,
  requestedAt: EPOCH + 60_000,
  now: EPOCH + 61_000,
  startedAt: EPOCH + 62_000,
  completedAt: EPOCH + 66_000,
  approvalExpiresAt: EPOCH + 15 * 60_000,
  grantExpiresAt: EPOCH + 60 * 60_000,
} as const;

/** The contract's bounds, named so boundary tests read as `LIMITS.maxInputBytes + 1`. */
export const LIMITS = { timeoutMs: 30_000, maxInputBytes: 4_096, maxOutputBytes: 65_536 } as const;

// ---------------------------------------------------------------------------------------------
// Transport objects

/** The exact tool input the model proposed: a concrete from/to version, never "previous". */
export function rollbackInput(): JsonObject {
  return { service: 'api', environment: 'production', from_version: 'v42', to_version: 'v41' };
}

/** The pinned, reviewed rollback contract. */
export function buildContract(): ToolContract {
  return {
    schema_version: 1,
    contract_release: 'execute_rollback 2026.01.0',
    tool_name: TOOL,
    executor_release: EXECUTOR_RELEASE,
    input_schema_sha256: digestOf({ schema: 'execute_rollback.input', version: 1 }),
    output_schema_sha256: digestOf({ schema: 'execute_rollback.output', version: 1 }),
    effect: 'external_write',
    required_capabilities: ['deployment:read', 'deployment:rollback'],
    idempotency: 'key_required',
    reversible: true,
    timeout_ms: LIMITS.timeoutMs,
    max_input_bytes: LIMITS.maxInputBytes,
    max_output_bytes: LIMITS.maxOutputBytes,
    resource: { type: 'deployment', attributes: { environment: '/environment', service: '/service' } },
  };
}

/** A read-only companion tool over the same resource (no approval, no idempotency key). */
export function buildReadOnlyContract(): ToolContract {
  return {
    ...buildContract(),
    contract_release: 'get_deployment 2026.01.0',
    tool_name: READ_TOOL,
    executor_release: 'deployment-reader 2.0.1',
    input_schema_sha256: digestOf({ schema: 'get_deployment.input', version: 1 }),
    output_schema_sha256: digestOf({ schema: 'get_deployment.output', version: 1 }),
    effect: 'read_only',
    required_capabilities: ['deployment:read'],
    idempotency: 'not_required',
    reversible: false,
  };
}

/** Alice's grant: both tools, read and write effects, both capabilities for api/production only. */
export function buildGrant(): ToolGrant {
  const scope = () => [{ type: 'deployment', attributes: { environment: ['production'], service: ['api'] } }];
  return {
    grant_id: 'grant-acme-ops-0001',
    principal_id: PRINCIPAL,
    tenant_id: TENANT,
    policy_sha256: POLICY_SHA256,
    allowed_tools: [TOOL, READ_TOOL],
    allowed_effects: ['external_write', 'read_only'],
    capabilities: [
      { capability: 'deployment:read', resources: scope() },
      { capability: 'deployment:rollback', resources: scope() },
    ],
    not_before_unix_ms: T.grantNotBefore,
    expires_at_unix_ms: T.grantExpiresAt,
  };
}

/** Canonical-bytes identity of a tool input: what the approval, invocation and executor all bind. */
export function inputIdentity(input: JsonValue): { input_sha256: string; input_bytes: number } {
  const bytes = canonicalBytes(input);
  return { input_sha256: sha256Hex(bytes), input_bytes: bytes.byteLength };
}

/** Bob's approval of exactly this contract, input and effect. */
export function buildApproval(
  contract: ToolContract = buildContract(),
  input: JsonValue = rollbackInput(),
): ToolApproval {
  return {
    approval_id: 'approval-0001',
    approver_principal_id: APPROVER,
    tenant_id: TENANT,
    policy_sha256: POLICY_SHA256,
    tool_contract_sha256: contractDigest(contract),
    input_sha256: inputIdentity(input).input_sha256,
    effect: contract.effect,
    expires_at_unix_ms: T.approvalExpiresAt,
  };
}

/** The target the contract's resource map derives from the input; throws if the input names none. */
export function targetOf(contract: ToolContract, input: JsonValue): ResourceRef {
  const r = deriveTarget(contract, input);
  if (!r.ok) throw new Error(`fixture input does not name a target: ${r.error.message}`);
  return r.value;
}

/** The invocation the edge service builds from the model's proposal and trusted state. */
export function buildInvocation(
  contract: ToolContract = buildContract(),
  input: JsonValue = rollbackInput(),
  approval: ToolApproval | null = buildApproval(contract, input),
): ToolInvocation {
  return {
    invocation_id: 'invocation-0001',
    run_envelope_sha256: digestOf({ run_id: 'run-0001', tenant_id: TENANT }),
    tenant_id: TENANT,
    principal_id: PRINCIPAL,
    policy_sha256: POLICY_SHA256,
    tool_contract_sha256: contractDigest(contract),
    ...inputIdentity(input),
    target: targetOf(contract, input),
    requested_at_unix_ms: T.requestedAt,
    idempotency_key: contract.idempotency === 'key_required' ? IDEMPOTENCY_KEY : null,
    approval,
  };
}

export function buildTrustedState(): TrustedState {
  return { ...EMPTY_TRUSTED_STATE, approval_required_effects: [], run_violations: [] };
}

// ---------------------------------------------------------------------------------------------
// Scenario

/** Everything `authorizeToolCall` needs, plus the raw input the invocation digests. */
export interface Scenario {
  contract: ToolContract;
  grant: ToolGrant;
  input: JsonObject;
  invocation: ToolInvocation;
  now: number;
  trusted: TrustedState;
}

/** The baseline: authorizes with no violations. */
export function buildScenario(): Scenario {
  const contract = buildContract();
  const input = rollbackInput();
  return {
    contract,
    grant: buildGrant(),
    input,
    invocation: buildInvocation(contract, input),
    now: T.now,
    trusted: buildTrustedState(),
  };
}

/** The baseline for the read-only tool: no approval, no idempotency key. */
export function buildReadOnlyScenario(): Scenario {
  const contract = buildReadOnlyContract();
  const input: JsonObject = { service: 'api', environment: 'production' };
  return {
    contract,
    grant: buildGrant(),
    input,
    invocation: { ...buildInvocation(contract, input, null), invocation_id: 'invocation-0002' },
    now: T.now,
    trusted: buildTrustedState(),
  };
}

/**
 * Re-derive the invocation from the scenario's current contract and input (contract digest, input
 * digest and size, target), as the edge service would for a fresh proposal. The approval is a stored
 * object issued earlier and is left as it is unless `reapprove` is set, in which case it is
 * re-issued for the current contract, input and effect. Mutates and returns `s`.
 */
export function rebind(s: Scenario, opts: { reapprove?: boolean } = {}): Scenario {
  const inv = s.invocation;
  inv.tool_contract_sha256 = contractDigest(s.contract);
  Object.assign(inv, inputIdentity(s.input));
  inv.target = targetOf(s.contract, s.input);
  if (opts.reapprove === true && inv.approval !== null) {
    const fresh = buildApproval(s.contract, s.input);
    inv.approval = { ...inv.approval, ...pick(fresh, ['tool_contract_sha256', 'input_sha256', 'effect']) };
  }
  return s;
}

function pick<O extends object, K extends keyof O>(o: O, keys: readonly K[]): Pick<O, K> {
  const out = {} as Pick<O, K>;
  for (const k of keys) out[k] = o[k];
  return out;
}

/** `authorizeToolCall` over a scenario. */
export function authorize(s: Scenario): Result<AuthorizationReceipt, CoreError> {
  return authorizeToolCall(s.contract, s.grant, s.invocation, s.now, s.trusted);
}

/** Authorize a scenario that must be evaluable; throws (failing the test) on a `CoreError`. */
export function mustAuthorize(s: Scenario): AuthorizationReceipt {
  const r = authorize(s);
  if (!r.ok) throw new Error(`expected a receipt, got ${r.error.reason}: ${JSON.stringify(r.error.issues)}`);
  return r.value;
}

// ---------------------------------------------------------------------------------------------
// Observations

/** The JSON output the rollback executor returns on success. */
export const ROLLBACK_OUTPUT = '{"from_version":"v42","generation":8,"service":"api","to_version":"v41"}';

/** Identity of the deployment's observed state at a version (what before/after digests name). */
export function stateDigest(version: string): string {
  return digestOf({ environment: 'production', service: 'api', tenant: TENANT, version });
}

export type ExecutionOutcome = ToolExecutionObservation['outcome'];

/**
 * What an honest executor reports for `receipt` and `outcome`, consistent with `contract`:
 * - `succeeded`: output, and for a write an effect ID with before/after state (a draft: effect ID);
 * - `failed_no_effect`: no effect ID, no after-state (the unchanged before-state is evidence);
 * - `indeterminate`: the connection dropped; nothing proven either way.
 * A read-only contract never gets effect-shaped fields. Times follow `T`, relative to the receipt.
 */
export function buildObservation(
  contract: ToolContract,
  receipt: AuthorizationReceipt,
  outcome: ExecutionOutcome = 'succeeded',
): ToolExecutionObservation {
  const started = receipt.body.evaluated_at_unix_ms + (T.startedAt - T.now);
  const writes = contract.effect !== 'read_only';
  const succeeded = outcome === 'succeeded';
  const output = succeeded ? ROLLBACK_OUTPUT : outcome === 'failed_no_effect' ? '{"error":"conflict"}' : '';
  return {
    observation_id: `observation-${outcome}`,
    authorization_receipt_sha256: receipt.sha256,
    invocation_sha256: receipt.body.invocation_sha256,
    executor_release: contract.executor_release,
    outcome,
    started_at_unix_ms: started,
    completed_at_unix_ms: started + (T.completedAt - T.startedAt),
    output_sha256: output === '' ? null : sha256HexOfText(output),
    output_bytes: new TextEncoder().encode(output).byteLength,
    effect_id: writes && succeeded ? 'rollout-7781' : null,
    before_state_sha256:
      writes && contract.effect !== 'creates_draft' && outcome !== 'indeterminate'
        ? stateDigest('v42')
        : null,
    after_state_sha256:
      writes && contract.effect !== 'creates_draft' && succeeded ? stateDigest('v41') : null,
    idempotency_key: receipt.body.idempotency_key,
  };
}

/** `verifyExecution` that must be evaluable; throws (failing the test) on a `CoreError`. */
export function mustVerify(
  contract: ToolContract,
  receipt: AuthorizationReceipt,
  observation: ToolExecutionObservation,
): ExecutionReceipt {
  const r = verifyExecution(contract, receipt, observation);
  if (!r.ok) throw new Error(`expected a receipt, got ${r.error.reason}: ${JSON.stringify(r.error.issues)}`);
  return r.value;
}

/** Authorize the baseline and verify the honest observation for `outcome`: the whole happy path. */
export function baselineRun(outcome: ExecutionOutcome = 'succeeded') {
  const s = buildScenario();
  const authorization = mustAuthorize(s);
  const observation = buildObservation(s.contract, authorization, outcome);
  const execution = mustVerify(s.contract, authorization, observation);
  return { scenario: s, authorization, observation, execution };
}

// ---------------------------------------------------------------------------------------------
// Decision pipeline (used by the data-driven cases and the tool-loop lab)

/** The five outcome classes of the failure laboratory (spec ch. 11). */
export type DecisionClass = 'malformed' | 'denied' | 'rejected' | 'verified' | 'reconciliation_required';

export interface PipelineInput {
  /** Raw transport objects: strict-parsed here, as the edge service does once at its boundary. */
  readonly contract: unknown;
  readonly grant: unknown;
  readonly invocation: unknown;
  readonly now: number;
  readonly trusted: unknown;
  /** Hand a denied receipt to the executor anyway (models a dispatcher that skips the check). */
  readonly dispatchDenied?: boolean;
  /** Edit the authorization receipt between issue and the executor (tampering in transit). */
  readonly editReceipt?: (receipt: AuthorizationReceipt) => unknown;
  /** Build the executor's report; defaults to the honest `succeeded` observation. */
  readonly observe?: (contract: ToolContract, receipt: AuthorizationReceipt) => unknown;
}

export interface PipelineOutcome {
  readonly class: DecisionClass;
  /** Violation codes for denied/rejected; sorted field paths of the `CoreError` for malformed. */
  readonly violations: readonly string[];
  readonly reason?: CoreErrorReason;
  readonly authorization?: AuthorizationReceipt;
  readonly execution?: ExecutionReceipt;
}

function malformed(e: CoreError): PipelineOutcome {
  return {
    class: 'malformed',
    reason: e.reason,
    violations: [...new Set(e.issues.map((i) => i.path))].sort(),
  };
}

/**
 * Run one call through parse -> authorize -> (dispatch) -> verify and classify the outcome:
 * malformed (cannot evaluate), denied (authorization receipt with violations), rejected (execution
 * receipt with violations), verified (succeeded or failed with no effect), reconciliation_required
 * (indeterminate).
 */
export function runPipeline(p: PipelineInput): PipelineOutcome {
  const contract = ToolContract.safeParse(p.contract);
  if (!contract.success) return malformed(fromZodError('invalid_contract', 'contract', contract.error));
  const grant = ToolGrant.safeParse(p.grant);
  if (!grant.success) return malformed(fromZodError('invalid_grant', 'grant', grant.error));
  const invocation = ToolInvocation.safeParse(p.invocation);
  if (!invocation.success)
    return malformed(fromZodError('invalid_invocation', 'invocation', invocation.error));
  const trusted = TrustedState.safeParse(p.trusted);
  if (!trusted.success) return malformed(fromZodError('invalid_request', 'trusted', trusted.error));

  const auth = authorizeToolCall(contract.data, grant.data, invocation.data, p.now, trusted.data);
  if (!auth.ok) return malformed(auth.error);
  const authorization = auth.value;
  if (authorization.body.decision === 'denied' && p.dispatchDenied !== true) {
    return { class: 'denied', violations: authorization.body.violations, authorization };
  }

  const presented = AuthorizationReceipt.safeParse(
    p.editReceipt ? p.editReceipt(structuredClone(authorization)) : authorization,
  );
  if (!presented.success) return malformed(fromZodError('invalid_receipt', 'receipt', presented.error));
  const raw = p.observe
    ? p.observe(contract.data, presented.data)
    : buildObservation(contract.data, presented.data);
  const observation = ToolExecutionObservation.safeParse(raw);
  if (!observation.success) {
    return malformed(fromZodError('invalid_observation', 'observation', observation.error));
  }
  const exec = verifyExecution(contract.data, presented.data, observation.data);
  if (!exec.ok) return malformed(exec.error);
  const execution = exec.value;
  const cls: DecisionClass =
    execution.body.status === 'rejected'
      ? 'rejected'
      : execution.body.status === 'indeterminate'
        ? 'reconciliation_required'
        : 'verified';
  return { class: cls, violations: execution.body.violations, authorization, execution };
}

/** The baseline scenario as pipeline input. */
export function pipelineInput(s: Scenario = buildScenario()): PipelineInput {
  return { contract: s.contract, grant: s.grant, invocation: s.invocation, now: s.now, trusted: s.trusted };
}

// ---------------------------------------------------------------------------------------------
// JSON patch (the subset the decision data files use)

/** One edit: RFC 6902 `replace` / `add` / `remove`, by RFC 6901 pointer. */
export type PatchOp =
  | { readonly op: 'replace' | 'add'; readonly path: string; readonly value: JsonValue }
  | { readonly op: 'remove'; readonly path: string };

function splitPointer(path: string): string[] {
  if (!path.startsWith('/')) throw new Error(`patch path "${path}" is not a json pointer`);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/**
 * Apply `ops` to a deep copy of `doc` and return it. Throws on a path that does not exist (for
 * `replace`/`remove`) so a typo in a data file fails loudly instead of testing nothing.
 */
export function applyPatch<T>(doc: T, ops: readonly PatchOp[]): T {
  const root = structuredClone(doc) as unknown;
  for (const op of ops) {
    const tokens = splitPointer(op.path);
    const last = tokens.pop() as string;
    let parent: unknown = root;
    for (const t of tokens) {
      if (parent === null || typeof parent !== 'object' || !Object.hasOwn(parent, t)) {
        throw new Error(`patch path "${op.path}" does not exist`);
      }
      parent = (parent as Record<string, unknown>)[t];
    }
    if (parent === null || typeof parent !== 'object')
      throw new Error(`patch path "${op.path}" has no parent`);
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (!Number.isInteger(i) || i < 0 || i > parent.length || (op.op !== 'add' && i >= parent.length)) {
        throw new Error(`patch path "${op.path}" is out of range`);
      }
      if (op.op === 'remove') parent.splice(i, 1);
      else if (op.op === 'add') parent.splice(i, 0, structuredClone(op.value));
      else parent[i] = structuredClone(op.value);
      continue;
    }
    const obj = parent as Record<string, unknown>;
    if (op.op !== 'add' && !Object.hasOwn(obj, last))
      throw new Error(`patch path "${op.path}" does not exist`);
    if (op.op === 'remove') delete obj[last];
    else obj[last] = structuredClone(op.value);
  }
  return root as T;
}
