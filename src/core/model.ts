/**
 * The types of the authorization boundary (spec ch. 11), as strict zod schemas.
 *
 * Guarantees: each schema is the only way a transport object enters the core; unknown fields
 * are rejected at every level, optional authority-bearing fields are explicit `null`, never
 * absent, so every object has exactly one canonical form and one digest.
 * Never: reads a clock, does I/O, or decides anything (deciding is `authorize.ts`).
 */
import { z } from 'zod';
import { deepFreeze } from './canonical/digest-cache.js';
import { Count, Identifier, Label, Sha256, UnixMs, strict } from './schema.js';
import { CONTROL_CHARS } from './text.js';

// ---------------------------------------------------------------------------------------------
// Effects, capabilities, resources

export const TOOL_EFFECTS = ['read_only', 'creates_draft', 'external_write', 'irreversible'] as const;
export const ToolEffect = z.enum(TOOL_EFFECTS);
export type ToolEffect = z.infer<typeof ToolEffect>;

/** Effects whose authorization always needs an idempotency key and an exact approval. */
export const WRITE_EFFECTS: ReadonlySet<ToolEffect> = new Set<ToolEffect>(['external_write', 'irreversible']);

/**
 * A narrow power, `<resource_type>:<action>`, e.g. `deployment:read`, `deployment:rollback`.
 * Capabilities are compared for equality only: never by prefix.
 */
export const ToolCapability = z
  .string()
  .max(64)
  .regex(/^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$/, 'must look like "resource_type:action"');
export type ToolCapability = z.infer<typeof ToolCapability>;

export const IdempotencyMode = z.enum(['not_required', 'key_required']);
export type IdempotencyMode = z.infer<typeof IdempotencyMode>;

// Shared with the hand-written hot-path parser (`invocation.ts`).
export const ATTRIBUTE_NAME_PATTERN = /^[a-z][a-z0-9_]*$/;
export const ATTRIBUTE_NAME_MAX = 64;
// No C0, DEL or C1 control (`CONTROL_CHARS`), and no "*" (a value is never a pattern).
export const ATTRIBUTE_VALUE_PATTERN = new RegExp(`^[^${CONTROL_CHARS}*]+$`);
export const ATTRIBUTE_VALUE_MAX = 128;
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:-]+$/;
export const IDEMPOTENCY_KEY_MIN = 8;
export const IDEMPOTENCY_KEY_MAX = 128;

/** Name of a resource attribute (`service`, `environment`, ...). */
export const AttributeName = z
  .string()
  .max(ATTRIBUTE_NAME_MAX)
  .regex(ATTRIBUTE_NAME_PATTERN, 'must be a lowercase attribute name');

/** A concrete attribute value. Exact-match only; never a pattern. */
export const AttributeValue = z
  .string()
  .min(1)
  .max(ATTRIBUTE_VALUE_MAX)
  .regex(ATTRIBUTE_VALUE_PATTERN, 'must not contain control characters or "*"')
  .refine((s) => s.isWellFormed(), 'must be well-formed unicode');

/**
 * The concrete target of an invocation, e.g.
 * `{ type: "deployment", attributes: { service: "api", environment: "production" } }`.
 * Derived from the exact input by the contract's `resource` map, never chosen separately.
 */
export const ResourceRef = strict({
  type: AttributeName,
  attributes: z.record(AttributeName, AttributeValue),
});
export type ResourceRef = z.infer<typeof ResourceRef>;

/**
 * A structured selector in a grant: the resource type and, for every attribute of the target,
 * the exact values allowed. A selector matches only a target with exactly the same attribute
 * names, each value in its allowed set. There are no wildcards, so removing anything from a
 * selector can only narrow it.
 */
export const ResourceSelector = strict({
  type: AttributeName,
  attributes: z.record(AttributeName, z.array(AttributeValue).min(1).max(64)),
});
export type ResourceSelector = z.infer<typeof ResourceSelector>;

/** A capability held for a bounded set of resources. */
export const CapabilityGrant = strict({
  capability: ToolCapability,
  resources: z.array(ResourceSelector).min(1).max(64),
});
export type CapabilityGrant = z.infer<typeof CapabilityGrant>;

// ---------------------------------------------------------------------------------------------
// Contract

/** Upper bounds on contract limits: a limit above these is "absurd" and rejected. */
export const CONTRACT_LIMITS = {
  maxTimeoutMs: 15 * 60 * 1000,
  maxInputBytes: 1024 * 1024,
  maxOutputBytes: 16 * 1024 * 1024,
  maxCapabilities: 32,
} as const;

export const CONTRACT_SCHEMA_VERSION = 1;

/** JSON Pointer (RFC 6901) into the tool input. */
export const InputPointer = z
  .string()
  .max(256)
  .regex(/^(\/([^~/]|~[01])*)+$/, 'must be a non-empty RFC 6901 JSON Pointer');

/**
 * How the contract derives the invocation's target from the exact input: the resource type
 * and, for each attribute, the JSON Pointer whose string value names it.
 */
export const ResourceMap = strict({
  type: AttributeName,
  attributes: z.record(AttributeName, InputPointer),
});
export type ResourceMap = z.infer<typeof ResourceMap>;

export const ToolContract = strict({
  schema_version: z.number().int(),
  contract_release: Label,
  tool_name: Identifier,
  executor_release: Label,
  input_schema_sha256: Sha256,
  output_schema_sha256: Sha256,
  effect: ToolEffect,
  required_capabilities: z.array(ToolCapability).max(CONTRACT_LIMITS.maxCapabilities),
  idempotency: IdempotencyMode,
  reversible: z.boolean(),
  timeout_ms: z.number().int(),
  max_input_bytes: z.number().int(),
  max_output_bytes: z.number().int(),
  resource: ResourceMap,
});
export type ToolContract = z.infer<typeof ToolContract>;

// ---------------------------------------------------------------------------------------------
// Grant, approval, invocation

export const ToolGrant = strict({
  grant_id: Identifier,
  principal_id: Identifier,
  tenant_id: Identifier,
  policy_sha256: Sha256,
  allowed_tools: z.array(Identifier).max(256),
  allowed_effects: z.array(ToolEffect).max(4),
  capabilities: z.array(CapabilityGrant).max(64),
  not_before_unix_ms: UnixMs,
  expires_at_unix_ms: UnixMs,
});
export type ToolGrant = z.infer<typeof ToolGrant>;

export const ToolApproval = strict({
  approval_id: Identifier,
  approver_principal_id: Identifier,
  tenant_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  input_sha256: Sha256,
  effect: ToolEffect,
  expires_at_unix_ms: UnixMs,
  /**
   * The first of two distinct approvers, present only on an approval that needed two (an
   * `irreversible` effect); `approver_principal_id` is then the second. Absent otherwise, so an
   * approval of one approver is byte for byte what it always was.
   */
  first_approver_principal_id: Identifier.optional(),
});
export type ToolApproval = z.infer<typeof ToolApproval>;

export const IdempotencyKey = z
  .string()
  .min(IDEMPOTENCY_KEY_MIN)
  .max(IDEMPOTENCY_KEY_MAX)
  .regex(IDEMPOTENCY_KEY_PATTERN, 'must be 8-128 chars of [A-Za-z0-9._:-]');

export const ToolInvocation = strict({
  invocation_id: Identifier,
  run_envelope_sha256: Sha256,
  tenant_id: Identifier,
  principal_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  input_sha256: Sha256,
  input_bytes: Count,
  target: ResourceRef,
  requested_at_unix_ms: UnixMs,
  idempotency_key: IdempotencyKey.nullable(),
  approval: ToolApproval.nullable(),
});
export type ToolInvocation = z.infer<typeof ToolInvocation>;

/**
 * Trusted state an adapter (the edge service) checked and passes in, so the decision and its
 * receipt cover it. Each flag comes from trusted storage, never from a request body.
 * Every field is optional so the pure library can be used without a service.
 */
export const TrustedState = strict({
  /** Effects the tenant policy additionally puts behind approval (the write effects always are). */
  approval_required_effects: z.array(ToolEffect).max(4),
  /** The pinned contract is quarantined. */
  contract_quarantined: z.boolean(),
  /** The grant was revoked. */
  grant_revoked: z.boolean(),
  /** The approval was already consumed by another authorization, or denied. */
  approval_unusable: z.boolean(),
  /** The run envelope named by the invocation is unknown, over, or out of budget. */
  run_violations: z
    .array(z.enum(['run_unknown', 'run_expired', 'run_call_budget_spent', 'run_write_budget_spent']))
    .max(4),
  /** Principal identity is suspended or revoked. */
  principal_revoked: z.boolean(),
});
export type TrustedState = z.infer<typeof TrustedState>;

/** Deep-frozen, so its digest is computed once (`cachedDigest`). */
export const EMPTY_TRUSTED_STATE: TrustedState = deepFreeze({
  // Keys in RFC 8785 order, so canonicalization takes its fast path.
  approval_required_effects: [],
  approval_unusable: false,
  contract_quarantined: false,
  grant_revoked: false,
  principal_revoked: false,
  run_violations: [],
});

// ---------------------------------------------------------------------------------------------
// Violations

/**
 * Every reason an evaluated call can be denied. The receipt lists them sorted and unique; the
 * list is stable across releases (new codes may be added, existing ones never change meaning).
 */
export const AUTHORIZATION_VIOLATIONS = [
  'approval_contract_mismatch',
  'approval_effect_mismatch',
  'approval_expired',
  'approval_input_mismatch',
  'approval_missing',
  'approval_policy_mismatch',
  'approval_self_approved',
  'approval_tenant_mismatch',
  'approval_unusable',
  'capability_not_granted',
  'contract_mismatch',
  'contract_quarantined',
  'effect_not_allowed',
  'grant_expired',
  'grant_not_yet_valid',
  'grant_revoked',
  'idempotency_key_missing',
  'input_too_large',
  'input_empty',
  'named_principal_mismatch',
  'named_tenant_mismatch',
  'policy_mismatch',
  'principal_mismatch',
  'principal_revoked',
  'resource_out_of_scope',
  'resource_type_mismatch',
  'run_call_budget_spent',
  'run_expired',
  'run_unknown',
  'run_write_budget_spent',
  'tenant_mismatch',
  'tool_not_allowed',
] as const;
export const AuthorizationViolation = z.enum(AUTHORIZATION_VIOLATIONS);
export type AuthorizationViolation = z.infer<typeof AuthorizationViolation>;

// ---------------------------------------------------------------------------------------------
// Authorization receipt

export const RECEIPT_VERSION = 1;

/**
 * Authorization receipt versions. Version 1 binds the decision's inputs; version 2 also binds the
 * executor audience and the dispatch deadline (spec ch. 11, "Bind an authorization receipt to an
 * executor audience and maximum dispatch time"), so an executor can check them itself.
 * A stored receipt replays under the version written in its own body.
 */
export const AUTHORIZATION_RECEIPT_VERSIONS = [1, 2] as const;
export type AuthorizationReceiptVersion = (typeof AUTHORIZATION_RECEIPT_VERSIONS)[number];
/** The first authorization receipt version that names its executor audience. */
export const AUDIENCE_RECEIPT_VERSION = 2;

const authorizationBodyFields = {
  receipt_kind: z.literal('authorization'),
  tenant_id: Identifier,
  principal_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  grant_sha256: Sha256,
  invocation_sha256: Sha256,
  trusted_state_sha256: Sha256,
  invocation_id: Identifier,
  run_envelope_sha256: Sha256,
  input_sha256: Sha256,
  input_bytes: Count,
  effect: ToolEffect,
  target: ResourceRef,
  idempotency_key: IdempotencyKey.nullable(),
  approval_id: Identifier.nullable(),
  requested_at_unix_ms: UnixMs,
  evaluated_at_unix_ms: UnixMs,
  decision: z.enum(['authorized', 'denied']),
  violations: z.array(AuthorizationViolation),
};

/** What is hashed. Any envelope (issuer, key id, signature, log position) wraps it, never joins it. */
export const AuthorizationReceiptBodyV1 = strict({
  ...authorizationBodyFields,
  receipt_version: z.literal(RECEIPT_VERSION),
});
export type AuthorizationReceiptBodyV1 = z.infer<typeof AuthorizationReceiptBodyV1>;

/** Version 1 plus the executor audience and the dispatch deadline. */
export const AuthorizationReceiptBodyV2 = strict({
  ...authorizationBodyFields,
  receipt_version: z.literal(AUDIENCE_RECEIPT_VERSION),
  /** The contract's executor release: only that implementation may act on the receipt. */
  executor_release: Label,
  /** One executor principal, or `null`: any principal running `executor_release`. */
  executor_principal_id: Identifier.nullable(),
  /** `evaluated_at_unix_ms` + the policy's `authorization_max_dispatch_ms`; dispatch must start before. */
  dispatch_deadline_unix_ms: UnixMs,
  /** The principal the request named beside the authenticated one (untrusted; checked), or null. */
  named_principal_id: Identifier.nullable(),
  /** The tenant the request named beside the authenticated one (untrusted; checked), or null. */
  named_tenant_id: Identifier.nullable(),
});
export type AuthorizationReceiptBodyV2 = z.infer<typeof AuthorizationReceiptBodyV2>;

/** Strict for each version: a v1 body with v2 fields (or the reverse) is rejected. */
export const AuthorizationReceiptBody = z.discriminatedUnion('receipt_version', [
  AuthorizationReceiptBodyV1,
  AuthorizationReceiptBodyV2,
]);
export type AuthorizationReceiptBody = z.infer<typeof AuthorizationReceiptBody>;

/** A receipt body with its identity. `sha256` is `digestOf(body)`. */
export const AuthorizationReceipt = strict({
  sha256: Sha256,
  body: AuthorizationReceiptBody,
});
export type AuthorizationReceipt = z.infer<typeof AuthorizationReceipt>;

// ---------------------------------------------------------------------------------------------
// Execution observation and receipt

export const EXECUTION_OUTCOMES = ['succeeded', 'failed_no_effect', 'indeterminate'] as const;

/** What the executor observed, reported by webhook. Authority-free: it is checked, not believed. */
export const ToolExecutionObservation = strict({
  observation_id: Identifier,
  authorization_receipt_sha256: Sha256,
  invocation_sha256: Sha256,
  executor_release: Label,
  outcome: z.enum(EXECUTION_OUTCOMES),
  started_at_unix_ms: UnixMs,
  completed_at_unix_ms: UnixMs,
  output_sha256: Sha256.nullable(),
  output_bytes: Count,
  effect_id: Identifier.nullable(),
  before_state_sha256: Sha256.nullable(),
  after_state_sha256: Sha256.nullable(),
  idempotency_key: IdempotencyKey.nullable(),
});
export type ToolExecutionObservation = z.infer<typeof ToolExecutionObservation>;

export const EXECUTION_VIOLATIONS = [
  'authorization_altered',
  'authorization_contract_mismatch',
  'authorization_denied',
  'authorization_mismatch',
  'completed_after_timeout',
  'completed_before_request',
  'completed_before_start',
  'draft_effect_id_missing',
  'effect_claimed_on_no_effect_failure',
  'effect_claimed_on_read_only',
  'executor_release_mismatch',
  'idempotency_key_mismatch',
  'invocation_mismatch',
  'output_empty',
  'output_missing_digest',
  'output_too_large',
  'started_before_authorization',
  'write_after_state_missing',
  'write_before_state_missing',
  'write_effect_id_missing',
] as const;
export const ExecutionViolation = z.enum(EXECUTION_VIOLATIONS);
export type ExecutionViolation = z.infer<typeof ExecutionViolation>;

export const EXECUTION_STATUSES = [
  'verified_succeeded',
  'verified_failed_no_effect',
  'indeterminate',
  'rejected',
] as const;
export const ExecutionStatus = z.enum(EXECUTION_STATUSES);
export type ExecutionStatus = z.infer<typeof ExecutionStatus>;

export const ExecutionReceiptBody = strict({
  receipt_kind: z.literal('execution'),
  receipt_version: z.literal(RECEIPT_VERSION),
  tenant_id: Identifier,
  tool_contract_sha256: Sha256,
  authorization_receipt_sha256: Sha256,
  observation_sha256: Sha256,
  invocation_sha256: Sha256,
  status: ExecutionStatus,
  reconciliation_required: z.boolean(),
  output_sha256: Sha256.nullable(),
  output_bytes: Count,
  effect_id: Identifier.nullable(),
  idempotency_key: IdempotencyKey.nullable(),
  completed_at_unix_ms: UnixMs,
  violations: z.array(ExecutionViolation),
});
export type ExecutionReceiptBody = z.infer<typeof ExecutionReceiptBody>;

export const ExecutionReceipt = strict({
  sha256: Sha256,
  body: ExecutionReceiptBody,
});
export type ExecutionReceipt = z.infer<typeof ExecutionReceipt>;
