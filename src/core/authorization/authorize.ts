/**
 * `authorizeToolCall`: the per-call decision (spec ch. 11, "Re-evaluate the current grant per
 * invocation").
 *
 * Guarantees: default deny. Malformed metadata is a `CoreError` ("cannot evaluate"); a
 * well-formed call always yields a receipt whose `violations` are every failed check, sorted and
 * unique, and `decision` is `authorized` only when that list is empty. The receipt binds the
 * exact contract, grant, invocation and trusted-state digests. Without options the receipt is
 * version 1, byte for byte what it always was; with options it is version 2, which also binds the
 * executor audience (the contract's executor release and, optionally, one executor principal) and
 * the dispatch deadline, so the executor can refuse a receipt meant for another executor or found
 * too late.
 * Never: reads a clock (`now` is an argument), does I/O, throws for a denial, caches a decision,
 * or takes tenant, principal, policy or time from anything but its arguments.
 */
import { guardCanonical, sha256HexOfText } from '../canonical/canonical.js';
import {
  authorizationBodyText,
  invocationText,
  isValidatedInvocation,
} from '../canonical/canonical-forms.js';
import { contractDigest, validateContract } from '../contracts/contract.js';
import { cachedDigest, isDeepFrozen } from '../canonical/digest-cache.js';
import { coreError, quoted, type CoreError, type FieldIssue } from '../errors.js';
import {
  type AuthorizationReceipt,
  type AuthorizationReceiptBody,
  type AuthorizationViolation,
  AUDIENCE_RECEIPT_VERSION,
  EMPTY_TRUSTED_STATE,
  RECEIPT_VERSION,
  type ResourceRef,
  type ResourceSelector,
  type ToolContract,
  type ToolGrant,
  type ToolInvocation,
  type TrustedState,
  WRITE_EFFECTS,
} from '../model.js';
import { POLICY_LIMITS } from '../policy.js';
import { err, ok, type Result } from '../result.js';
import { IDENTIFIER_MAX, IDENTIFIER_PATTERN } from '../schema.js';

/**
 * Selects authorization receipt version 2 (`AuthorizationReceiptBodyV2`). The service passes the
 * policy's dispatch window; leaving the options out yields version 1.
 */
export interface AuthorizationReceiptOptions {
  /** The policy's `authorization_max_dispatch_ms`: the receipt's deadline is `now` + this. */
  readonly dispatch_window_ms: number;
  /** The one executor principal that may act on the receipt, or `null` for any running the release. */
  readonly executor_principal_id: string | null;
  /**
   * Identities the request named beside the authenticated ones (untrusted): each is recorded in
   * the receipt and, when it differs from the invocation's (authenticated) identity, adds its own
   * violation. Absent or null: nothing was named.
   */
  readonly named?: { readonly tenant_id: string | null; readonly principal_id: string | null };
}

export function authorizeToolCall(
  contract: ToolContract,
  grant: ToolGrant,
  invocation: ToolInvocation,
  now: number,
  trusted: TrustedState = EMPTY_TRUSTED_STATE,
  options?: AuthorizationReceiptOptions,
): Result<AuthorizationReceipt, CoreError> {
  return guardCanonical(() => authorizeToolCallUnchecked(contract, grant, invocation, now, trusted, options));
}

function authorizeToolCallUnchecked(
  contract: ToolContract,
  grant: ToolGrant,
  invocation: ToolInvocation,
  now: number,
  trusted: TrustedState,
  options: AuthorizationReceiptOptions | undefined,
): Result<AuthorizationReceipt, CoreError> {
  const checked = validateContract(contract);
  if (!checked.ok) return checked;
  const grantCheck = validateGrant(grant);
  if (!grantCheck.ok) return grantCheck;
  if (!Number.isSafeInteger(now) || now < 0) {
    return err(coreError('invalid_request', 'evaluation time must be a non-negative integer'));
  }
  if (options !== undefined) {
    const bad = checkOptions(options, now);
    if (bad !== null) return err(bad);
  }

  // Every failed check, in check order; sorted and de-duplicated below.
  const v: AuthorizationViolation[] = [];
  const contractSha = contractDigest(contract);

  // Tool, effect and capability are independent: holding one never implies another.
  if (!grant.allowed_tools.includes(contract.tool_name)) v.push('tool_not_allowed');
  if (!grant.allowed_effects.includes(contract.effect)) v.push('effect_not_allowed');

  // The target must have exactly the shape the contract names, or selectors cannot be trusted.
  const targetShapeOk = targetMatchesContract(contract, invocation.target);
  if (!targetShapeOk) v.push('resource_type_mismatch');
  for (const cap of contract.required_capabilities) {
    let held = false;
    let inScope = false;
    for (const c of grant.capabilities) {
      if (c.capability !== cap) continue;
      held = true;
      // An ill-shaped target is in no selector's scope.
      if (targetShapeOk && !inScope) inScope = c.resources.some((s) => selectorMatches(s, invocation.target));
    }
    // A write must not pass because a supporting read capability is merely absent from the check.
    if (!held) v.push('capability_not_granted');
    // Cross-resource use of a held capability (the confused-deputy path).
    else if (!inScope) v.push('resource_out_of_scope');
  }

  // Authority-bearing identities must agree with trusted state, never select it.
  if (grant.tenant_id !== invocation.tenant_id) v.push('tenant_mismatch');
  if (grant.principal_id !== invocation.principal_id) v.push('principal_mismatch');
  if (grant.policy_sha256 !== invocation.policy_sha256) v.push('policy_mismatch');

  // A plan made earlier does not preserve a grant that is not yet, or no longer, valid.
  if (now < grant.not_before_unix_ms) v.push('grant_not_yet_valid');
  if (now >= grant.expires_at_unix_ms) v.push('grant_expired');

  // Approval of an old definition must not authorize a changed one (definition drift).
  if (invocation.tool_contract_sha256 !== contractSha) v.push('contract_mismatch');

  // The contract's input bound is part of its denial-of-service behaviour.
  if (invocation.input_bytes > contract.max_input_bytes) v.push('input_too_large');
  if (invocation.input_bytes === 0) v.push('input_empty');

  // A write without a stable retry key can repeat its effect after a lost response.
  if (contract.idempotency === 'key_required' && invocation.idempotency_key === null) {
    v.push('idempotency_key_missing');
  }

  const approvalRequired =
    WRITE_EFFECTS.has(contract.effect) || trusted.approval_required_effects.includes(contract.effect);
  const approval = invocation.approval;
  if (approval === null) {
    // Version 2: a named approval that is unusable in any state (unknown, another agent's,
    // pending, denied, consumed, approver revoked) is `approval_unusable`, whether or not the
    // call needs one; `approval_missing` means none was named. Version 1 kept its old rule.
    if (options !== undefined && trusted.approval_unusable) v.push('approval_unusable');
    else if (approvalRequired) v.push('approval_missing');
  } else {
    // An approval is checked whenever present: a mismatched approval is evidence of tampering.
    // Each binding stops "I approved a rollback" from authorizing a different one.
    if (approval.tenant_id !== invocation.tenant_id) v.push('approval_tenant_mismatch');
    if (approval.policy_sha256 !== invocation.policy_sha256) v.push('approval_policy_mismatch');
    if (approval.tool_contract_sha256 !== contractSha) v.push('approval_contract_mismatch');
    if (approval.input_sha256 !== invocation.input_sha256) v.push('approval_input_mismatch');
    if (approval.effect !== contract.effect) v.push('approval_effect_mismatch');
    if (now >= approval.expires_at_unix_ms) v.push('approval_expired');
    // A principal approving its own request is no independent review.
    if (approval.approver_principal_id === invocation.principal_id) v.push('approval_self_approved');
    if (approval.first_approver_principal_id === invocation.principal_id) v.push('approval_self_approved');
    if (trusted.approval_unusable) v.push('approval_unusable');
  }

  // A tenant or principal named in the request is checked against the authenticated identity
  // the invocation carries; it never selects anything, and its mismatch has its own code.
  const named = options?.named;
  const namedTenant = named?.tenant_id ?? null;
  const namedPrincipal = named?.principal_id ?? null;
  if (namedTenant !== null && namedTenant !== invocation.tenant_id) v.push('named_tenant_mismatch');
  if (namedPrincipal !== null && namedPrincipal !== invocation.principal_id)
    v.push('named_principal_mismatch');

  // Trusted state the adapter looked up: revocation and quarantine apply on the next call.
  if (trusted.contract_quarantined) v.push('contract_quarantined');
  if (trusted.grant_revoked) v.push('grant_revoked');
  if (trusted.principal_revoked) v.push('principal_revoked');
  for (const r of trusted.run_violations) v.push(r);

  const violations = v.length === 0 ? v : [...new Set(v)].sort();
  // Keys in RFC 8785 order: as authorizationBodyText writes them, and canonicalize of a stored body
  // takes its fast path. Version 2 differs only by its three audience members, in their sorted places.
  const approval_id = approval === null ? null : approval.approval_id;
  const decision = violations.length === 0 ? 'authorized' : 'denied';
  const grant_sha256 = cachedDigest(grant);
  const invocation_sha256 = sha256HexOfText(invocationText(invocation));
  const trusted_state_sha256 = cachedDigest(trusted);
  const body: AuthorizationReceiptBody =
    options === undefined
      ? {
          approval_id,
          decision,
          effect: contract.effect,
          evaluated_at_unix_ms: now,
          grant_sha256,
          idempotency_key: invocation.idempotency_key,
          input_bytes: invocation.input_bytes,
          input_sha256: invocation.input_sha256,
          invocation_id: invocation.invocation_id,
          invocation_sha256,
          policy_sha256: invocation.policy_sha256,
          principal_id: invocation.principal_id,
          receipt_kind: 'authorization',
          receipt_version: RECEIPT_VERSION,
          requested_at_unix_ms: invocation.requested_at_unix_ms,
          run_envelope_sha256: invocation.run_envelope_sha256,
          target: invocation.target,
          tenant_id: invocation.tenant_id,
          tool_contract_sha256: contractSha,
          trusted_state_sha256,
          violations,
        }
      : {
          approval_id,
          decision,
          dispatch_deadline_unix_ms: now + options.dispatch_window_ms,
          effect: contract.effect,
          evaluated_at_unix_ms: now,
          executor_principal_id: options.executor_principal_id,
          executor_release: contract.executor_release,
          grant_sha256,
          idempotency_key: invocation.idempotency_key,
          input_bytes: invocation.input_bytes,
          input_sha256: invocation.input_sha256,
          invocation_id: invocation.invocation_id,
          invocation_sha256,
          named_principal_id: namedPrincipal,
          named_tenant_id: namedTenant,
          policy_sha256: invocation.policy_sha256,
          principal_id: invocation.principal_id,
          receipt_kind: 'authorization',
          receipt_version: AUDIENCE_RECEIPT_VERSION,
          requested_at_unix_ms: invocation.requested_at_unix_ms,
          run_envelope_sha256: invocation.run_envelope_sha256,
          target: invocation.target,
          tenant_id: invocation.tenant_id,
          tool_contract_sha256: contractSha,
          trusted_state_sha256,
          violations,
        };
  // One-pass canonical text (canonical-forms.ts): the same bytes as canonicalize(body).
  const text = authorizationBodyText(body, isValidatedInvocation(invocation));
  return ok({ sha256: sha256HexOfText(text), body });
}

/**
 * Options that would put a meaningless audience or deadline into a signed receipt are a caller bug
 * ("cannot evaluate"), never a receipt.
 */
function checkOptions(o: AuthorizationReceiptOptions, now: number): CoreError | null {
  const w = o.dispatch_window_ms;
  // A zero or unbounded window would make the deadline no limit at all.
  if (!Number.isSafeInteger(w) || w < 1 || w > POLICY_LIMITS.authorizationMaxDispatchMs) {
    return coreError(
      'invalid_request',
      'dispatch window must be a positive integer within the policy limit',
      [
        {
          path: 'options.dispatch_window_ms',
          message: `must be 1..${POLICY_LIMITS.authorizationMaxDispatchMs}`,
        },
      ],
    );
  }
  if (!Number.isSafeInteger(now + w)) {
    return coreError('invalid_request', 'dispatch deadline is not a safe integer');
  }
  const p = o.executor_principal_id;
  if (p !== null && (typeof p !== 'string' || p.length > IDENTIFIER_MAX || !IDENTIFIER_PATTERN.test(p))) {
    return coreError('invalid_request', 'executor principal id is not an identifier', [
      { path: 'options.executor_principal_id', message: 'must be an identifier or null' },
    ]);
  }
  for (const [k, id] of Object.entries(o.named ?? {})) {
    if (
      id !== null &&
      (typeof id !== 'string' || id.length > IDENTIFIER_MAX || !IDENTIFIER_PATTERN.test(id))
    ) {
      return coreError('invalid_request', 'a named identity is not an identifier', [
        { path: `options.named.${k}`, message: 'must be an identifier or null' },
      ]);
    }
  }
  return null;
}

// Deep-frozen grants that passed validation: immutable, so the result cannot change.
const validGrants = new WeakSet<object>();

/** Grant metadata a reviewer must fix before any evaluation: these are not denials. */
export function validateGrant(grant: ToolGrant): Result<ToolGrant, CoreError> {
  if (validGrants.has(grant)) return ok(grant);
  const issues: FieldIssue[] = [];
  if (grant.expires_at_unix_ms <= grant.not_before_unix_ms) {
    issues.push({ path: 'grant.expires_at_unix_ms', message: 'must be after not_before_unix_ms' });
  }
  const dup = (path: string, items: readonly string[]) => {
    if (new Set(items).size !== items.length) issues.push({ path, message: 'must not contain duplicates' });
  };
  dup('grant.allowed_tools', grant.allowed_tools);
  dup('grant.allowed_effects', grant.allowed_effects);
  dup(
    'grant.capabilities',
    grant.capabilities.map((c) => c.capability),
  );
  grant.capabilities.forEach((c, i) =>
    c.resources.forEach((s, j) => {
      // A selector with no attributes would match nothing by design; it is almost surely a typo.
      if (Object.keys(s.attributes).length === 0) {
        issues.push({
          path: `grant.capabilities[${i}].resources[${j}].attributes`,
          message: 'must not be empty',
        });
      }
      // The capability is for one resource type; a selector for another could never be meant.
      if (!c.capability.startsWith(`${s.type}:`)) {
        issues.push({
          path: `grant.capabilities[${i}].resources[${j}].type`,
          message: `selector type ${quoted(s.type)} does not match capability ${quoted(c.capability)}`,
        });
      }
    }),
  );
  if (issues.length > 0) return err(coreError('invalid_grant', 'grant is not valid', issues));
  if (isDeepFrozen(grant)) validGrants.add(grant);
  return ok(grant);
}

function targetMatchesContract(contract: ToolContract, target: ResourceRef): boolean {
  if (target.type !== contract.resource.type) return false;
  const want = Object.keys(contract.resource.attributes);
  const have = Object.keys(target.attributes);
  return (
    want.length === have.length &&
    want.every((k) => Object.prototype.hasOwnProperty.call(target.attributes, k))
  );
}

/**
 * Structured predicate intersection: same type, the same attribute names, and each target value
 * in the selector's allowed set. Never a string prefix or a wildcard (spec, "Solution guidance").
 */
export function selectorMatches(selector: ResourceSelector, target: ResourceRef): boolean {
  if (selector.type !== target.type) return false;
  const names = Object.keys(selector.attributes);
  if (names.length !== Object.keys(target.attributes).length) return false;
  for (const name of names) {
    if (!Object.prototype.hasOwnProperty.call(target.attributes, name)) return false;
    const value = target.attributes[name] as string;
    const allowed = selector.attributes[name] as readonly string[];
    if (!allowed.includes(value)) return false;
  }
  return true;
}
