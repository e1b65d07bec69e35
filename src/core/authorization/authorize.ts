/**
 * `authorizeToolCall`: the per-call decision (spec ch. 11, "Re-evaluate the current grant per
 * invocation").
 *
 * Guarantees: default deny. Malformed metadata is a `CoreError` ("cannot evaluate"); a
 * well-formed call always yields a receipt whose `violations` are every failed check, sorted and
 * unique, and `decision` is `authorized` only when that list is empty. The receipt binds the
 * exact contract, grant, invocation and trusted-state digests.
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
import { err, ok, type Result } from '../result.js';

export function authorizeToolCall(
  contract: ToolContract,
  grant: ToolGrant,
  invocation: ToolInvocation,
  now: number,
  trusted: TrustedState = EMPTY_TRUSTED_STATE,
): Result<AuthorizationReceipt, CoreError> {
  return guardCanonical(() => authorizeToolCallUnchecked(contract, grant, invocation, now, trusted));
}

function authorizeToolCallUnchecked(
  contract: ToolContract,
  grant: ToolGrant,
  invocation: ToolInvocation,
  now: number,
  trusted: TrustedState = EMPTY_TRUSTED_STATE,
): Result<AuthorizationReceipt, CoreError> {
  const checked = validateContract(contract);
  if (!checked.ok) return checked;
  const grantCheck = validateGrant(grant);
  if (!grantCheck.ok) return grantCheck;
  if (!Number.isSafeInteger(now) || now < 0) {
    return err(coreError('invalid_request', 'evaluation time must be a non-negative integer'));
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
    if (approvalRequired) v.push('approval_missing');
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
    if (trusted.approval_unusable) v.push('approval_unusable');
  }

  // Trusted state the adapter looked up: revocation and quarantine apply on the next call.
  if (trusted.contract_quarantined) v.push('contract_quarantined');
  if (trusted.grant_revoked) v.push('grant_revoked');
  if (trusted.principal_revoked) v.push('principal_revoked');
  for (const r of trusted.run_violations) v.push(r);

  const violations = v.length === 0 ? v : [...new Set(v)].sort();
  // Keys in RFC 8785 order: as authorizationBodyText writes them, and canonicalize of a stored body
  // takes its fast path.
  const body: AuthorizationReceiptBody = {
    approval_id: approval === null ? null : approval.approval_id,
    decision: violations.length === 0 ? 'authorized' : 'denied',
    effect: contract.effect,
    evaluated_at_unix_ms: now,
    grant_sha256: cachedDigest(grant),
    idempotency_key: invocation.idempotency_key,
    input_bytes: invocation.input_bytes,
    input_sha256: invocation.input_sha256,
    invocation_id: invocation.invocation_id,
    invocation_sha256: sha256HexOfText(invocationText(invocation)),
    policy_sha256: invocation.policy_sha256,
    principal_id: invocation.principal_id,
    receipt_kind: 'authorization',
    receipt_version: RECEIPT_VERSION,
    requested_at_unix_ms: invocation.requested_at_unix_ms,
    run_envelope_sha256: invocation.run_envelope_sha256,
    target: invocation.target,
    tenant_id: invocation.tenant_id,
    tool_contract_sha256: contractSha,
    trusted_state_sha256: cachedDigest(trusted),
    violations,
  };
  // One-pass canonical text (canonical-forms.ts): the same bytes as canonicalize(body).
  const text = authorizationBodyText(body, isValidatedInvocation(invocation));
  return ok({ sha256: sha256HexOfText(text), body });
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
