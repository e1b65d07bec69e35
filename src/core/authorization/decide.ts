/**
 * `decideAuthorization`: the one entry point of the authorization decision (as Cedar's
 * `is_authorized`). Every door (`/v1/authorize`, and later MCP, AuthZEN, the console) and every
 * service calls this and nothing else to decide a tool call.
 *
 * In: the validated request and the stored state it depends on (the authenticated caller, the
 * policy in force, the pinned contract, the run, the approval it names, the candidate grants),
 * a server-generated invocation id and the evaluation time.
 * Out: the decision with its receipt, the invocation and trusted state the receipt binds, the
 * grant that decided, and the state changes the decision implies (consume the approval, charge
 * the run) together with the guards the store must re-check when it commits them.
 *
 * Guarantees:
 * - default deny: a principal without grants is evaluated against the empty grant and denied;
 * - tenant, principal, policy and time come from `state` and `now`, never from the request: the
 *   invocation and the receipt always carry the authenticated caller; a tenant or principal the
 *   request names is recorded beside it (`named_*`) and, when it differs, is its own violation;
 * - receipts are version 2: they bind the executor audience (the contract's executor release)
 *   and the dispatch deadline (the policy's `authorization_max_dispatch_ms` after evaluation);
 * - grants are tried in the order given (the store returns them by `grant_id`): the first
 *   authorized one decides; if none authorizes, the first evaluated one's denial is the receipt;
 *   unrevoked grants are tried before revoked ones, so a denial says `grant_revoked` only when
 *   every grant of the principal is revoked;
 * - a well-formed request always yields a receipt (authorized or denied); only a request the core
 *   cannot evaluate (unknown contract or named grant, a target the input does not name, malformed
 *   metadata) is a typed `CoreError`.
 * Never: reads a clock, does I/O, generates randomness, throws for a denial, or caches a decision.
 */
import { z } from 'zod';
import { canonicalize, digestOf, guardCanonical, sha256Hex } from '../canonical/canonical.js';
import { utf8Encode } from '../canonical/json.js';
import { resolveTarget } from '../contracts/target.js';
import { coreError, type CoreError } from '../errors.js';
import {
  type AuthorizationReceipt,
  IdempotencyKey,
  ResourceRef,
  type ToolApproval,
  type ToolContract,
  type ToolEffect,
  type ToolGrant,
  type ToolInvocation,
  type TrustedState,
  WRITE_EFFECTS,
} from '../model.js';
import type { TenantPolicy } from '../policy.js';
import { err, ok, type Result } from '../result.js';
import { Identifier, JsonInput, Sha256 } from '../schema.js';
import { type AuthorizationReceiptOptions, authorizeToolCall } from './authorize.js';

/** The authorize request every door translates into (the body of `POST /v1/authorize`). */
export const AuthorizeRequest = z.strictObject({
  tool_contract_sha256: Sha256,
  input: JsonInput,
  /** Optional; must equal the target the contract derives from `input` (`target_mismatch`). */
  target: ResourceRef.optional(),
  idempotency_key: IdempotencyKey.nullable().optional(),
  approval_id: Identifier.nullable().optional(),
  run_id: Identifier,
  /** Evaluate only this grant; otherwise every grant of the principal, first authorized wins. */
  grant_id: Identifier.optional(),
  /** Checked, never selecting: a mismatch is a `tenant_mismatch` / `principal_mismatch` violation. */
  tenant_id: Identifier.optional(),
  principal_id: Identifier.optional(),
});
export type AuthorizeRequest = z.infer<typeof AuthorizeRequest>;

/** Id of the grant evaluated when a principal holds none: it grants nothing, so it denies. */
export const EMPTY_GRANT_ID = 'grant-none';

/** The authenticated caller, from the API key and trusted storage. */
export interface CallerRecord {
  readonly tenant_id: string;
  readonly principal_id: string;
  /** The caller's principal row is revoked (a revocation that raced the key lookup). */
  readonly revoked: boolean;
}

export interface PolicyRecord {
  readonly policy_sha256: string;
  readonly policy: TenantPolicy;
}

export interface ContractRecord {
  readonly tool_contract_sha256: string;
  readonly contract: ToolContract;
  readonly quarantined: boolean;
}

export interface RunRecord {
  readonly run_id: string;
  readonly principal_id: string;
  readonly run_envelope_sha256: string;
  readonly max_calls: number;
  readonly max_external_writes: number;
  readonly deadline_unix_ms: number;
  readonly calls_used: number;
  readonly writes_used: number;
}

export interface ApprovalRecord {
  readonly approval_id: string;
  readonly tenant_id: string;
  readonly requester_principal_id: string;
  readonly status: 'pending' | 'approved' | 'denied' | 'consumed';
  /** The `ToolApproval` it became once decided (approved or consumed), else null. */
  readonly approval: ToolApproval | null;
  /** The approver's principal is revoked: its approvals stop working. */
  readonly approver_revoked: boolean;
}

export interface GrantRecord {
  readonly grant: ToolGrant;
  readonly revoked: boolean;
}

/** Everything stored that one authorization depends on, all of the caller's tenant. */
export interface AuthorizationState {
  readonly caller: CallerRecord;
  readonly policy: PolicyRecord;
  readonly contract: ContractRecord | null;
  readonly run: RunRecord | null;
  /** The approval the request names (null when it names none or it does not exist). */
  readonly approval: ApprovalRecord | null;
  /** The grant named by `grant_id` (at most one), else every grant of the caller, by grant_id. */
  readonly grants: readonly GrantRecord[];
}

/** What an authorized decision changes, and what must still hold when that change commits. */
export interface AuthorizationEffects {
  readonly consume_approval_id: string | null;
  readonly charge_run: { readonly run_id: string; readonly writes: 0 | 1 } | null;
  /** Re-checked at commit: a revocation or quarantine that committed first wins. */
  readonly guards: {
    readonly contract_sha256: string;
    readonly principal_id: string;
    /** Null for the synthetic empty grant, which has no stored row. */
    readonly grant_id: string | null;
  };
}

export interface AuthorizationDecision {
  readonly receipt: AuthorizationReceipt;
  readonly invocation: ToolInvocation;
  readonly trusted: TrustedState;
  /** The receipt options it was issued with: replay needs them (version 2). */
  readonly options: AuthorizationReceiptOptions;
  readonly grant: ToolGrant;
  /** Null for a denial: a denial changes nothing but storing its receipt. */
  readonly effects: AuthorizationEffects | null;
}

type RunViolation = TrustedState['run_violations'][number];

export function decideAuthorization(
  request: AuthorizeRequest,
  state: AuthorizationState,
  ids: { readonly invocation_id: string },
  now: number,
): Result<AuthorizationDecision, CoreError> {
  return guardCanonical(() => decide(request, state, ids.invocation_id, now));
}

function decide(
  request: AuthorizeRequest,
  state: AuthorizationState,
  invocation_id: string,
  now: number,
): Result<AuthorizationDecision, CoreError> {
  const pinned = state.contract;
  if (pinned === null) return err(coreError('not_found', 'contract not found'));
  const contract = pinned.contract;
  const caller = state.caller;
  const input = utf8Encode(canonicalize(request.input));
  const target = resolveTarget(contract, request.input, request.target);
  if (!target.ok) return target;

  const run = state.run;
  // Another principal's run is as unknown as a missing one.
  const runKnown = run !== null && run.principal_id === caller.principal_id;
  const run_violations: RunViolation[] = [];
  if (!runKnown) run_violations.push('run_unknown');
  else {
    if (now >= run.deadline_unix_ms) run_violations.push('run_expired');
    if (run.calls_used >= run.max_calls) run_violations.push('run_call_budget_spent');
    if (WRITE_EFFECTS.has(contract.effect) && run.writes_used >= run.max_external_writes) {
      run_violations.push('run_write_budget_spent');
    }
  }

  // An approval is usable only by the request it was issued for: same tenant, same requester,
  // approved, not consumed, and its approver not revoked. Anything else is missing or unusable.
  let approval: ToolApproval | null = null;
  let approval_unusable = false;
  if ((request.approval_id ?? null) !== null) {
    const a = state.approval;
    if (a === null || a.tenant_id !== caller.tenant_id || a.requester_principal_id !== caller.principal_id) {
      approval_unusable = true;
    } else {
      approval = a.approval;
      approval_unusable =
        a.status !== 'approved' || a.approver_revoked || !enoughApprovers(a.approval, contract.effect);
    }
  }

  const candidates = grantCandidates(state, request);
  if (!candidates.ok) return candidates;
  const options: AuthorizationReceiptOptions = {
    dispatch_window_ms: state.policy.policy.authorization_max_dispatch_ms,
    executor_principal_id: null,
    named: { tenant_id: request.tenant_id ?? null, principal_id: request.principal_id ?? null },
  };
  const invocation: ToolInvocation = {
    invocation_id,
    run_envelope_sha256: runKnown
      ? run.run_envelope_sha256
      : unknownRunDigest(caller.tenant_id, request.run_id),
    // Who actually called: a named tenant or principal never enters the invocation (audit must
    // never blame the principal a body named), only the receipt's `named_*` fields.
    tenant_id: caller.tenant_id,
    principal_id: caller.principal_id,
    policy_sha256: state.policy.policy_sha256,
    tool_contract_sha256: pinned.tool_contract_sha256,
    input_sha256: sha256Hex(input),
    input_bytes: input.byteLength,
    target: target.value,
    requested_at_unix_ms: now,
    idempotency_key: request.idempotency_key ?? null,
    approval,
  };

  let first: AuthorizationDecision | undefined;
  for (const candidate of candidates.value) {
    // Keys in RFC 8785 order: its digest takes the canonicalizer's fast path.
    const trusted: TrustedState = {
      approval_required_effects: [...state.policy.policy.approval_required_effects],
      approval_unusable,
      contract_quarantined: pinned.quarantined,
      grant_revoked: candidate.revoked,
      principal_revoked: caller.revoked,
      run_violations: [...run_violations].sort(),
    };
    const decided = authorizeToolCall(contract, candidate.grant, invocation, now, trusted, options);
    if (!decided.ok) return decided;
    const receipt = decided.value;
    if (receipt.body.decision === 'authorized') {
      return ok({
        receipt,
        invocation,
        trusted,
        options,
        grant: candidate.grant,
        effects: effectsOf(receipt.body.effect, invocation, candidate, run, caller.principal_id),
      });
    }
    first ??= { receipt, invocation, trusted, options, grant: candidate.grant, effects: null };
  }
  // grantCandidates never returns an empty list.
  if (first === undefined) return err(coreError('invalid_request', 'no grant was evaluated'));
  return ok(first);
}

/**
 * An `irreversible` call needs two distinct approvers (issue 14): one approval of it, however it
 * came to be stored, is unusable. The first approver must differ from the second; neither may be
 * the requester (checked by `authorizeToolCall` as `approval_self_approved`). Checked here, in the
 * trusted state, so receipts issued before the rule still replay as they were.
 */
function enoughApprovers(approval: ToolApproval | null, effect: ToolEffect): boolean {
  if (effect !== 'irreversible' || approval === null) return true;
  const first = approval.first_approver_principal_id;
  return first !== undefined && first !== approval.approver_principal_id;
}

interface Candidate extends GrantRecord {
  /** False for the synthetic empty grant, which has no row to guard. */
  readonly stored: boolean;
}

/**
 * The grants to evaluate, in the store's grant_id order: the named one; else the caller's
 * unrevoked grants; else its revoked ones (so the denial says `grant_revoked`); else the empty
 * grant.
 */
function grantCandidates(
  state: AuthorizationState,
  request: AuthorizeRequest,
): Result<readonly Candidate[], CoreError> {
  if (request.grant_id !== undefined) {
    const named = state.grants[0];
    if (named === undefined || named.grant.grant_id !== request.grant_id) {
      return err(coreError('not_found', 'grant not found'));
    }
    return ok([{ ...named, stored: true }]);
  }
  const live = state.grants.filter((g) => !g.revoked);
  const rows = live.length > 0 ? live : state.grants;
  if (rows.length > 0) return ok(rows.map((g) => ({ ...g, stored: true })));
  return ok([{ grant: emptyGrant(state.caller, state.policy.policy_sha256), revoked: false, stored: false }]);
}

function effectsOf(
  effect: ToolEffect,
  invocation: ToolInvocation,
  candidate: Candidate,
  run: RunRecord | null,
  principal_id: string,
): AuthorizationEffects {
  return {
    consume_approval_id: invocation.approval === null ? null : invocation.approval.approval_id,
    // An authorized call always names a known run (`run_unknown` denies otherwise).
    charge_run: run === null ? null : { run_id: run.run_id, writes: WRITE_EFFECTS.has(effect) ? 1 : 0 },
    guards: {
      contract_sha256: invocation.tool_contract_sha256,
      principal_id,
      grant_id: candidate.stored ? candidate.grant.grant_id : null,
    },
  };
}

function emptyGrant(caller: CallerRecord, policy_sha256: string): ToolGrant {
  return {
    grant_id: EMPTY_GRANT_ID,
    principal_id: caller.principal_id,
    tenant_id: caller.tenant_id,
    policy_sha256,
    allowed_tools: [],
    allowed_effects: [],
    capabilities: [],
    not_before_unix_ms: 0,
    expires_at_unix_ms: Number.MAX_SAFE_INTEGER,
  };
}

/** Stand-in run digest for an unknown run: versioned, tenant-scoped, never a real envelope's. */
function unknownRunDigest(tenant_id: string, run_id: string): string {
  return digestOf(['writ.run-unknown.v1', tenant_id, run_id]);
}
