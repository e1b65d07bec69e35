/**
 * Type-level tests, checked by `tsc` (`npm run typecheck`, part of `npm test`); nothing here runs.
 * Each `Expect<Equal<...>>` fails to compile if a type drifts, and each `@ts-expect-error` fails
 * to compile if the line it guards ever becomes valid (an unused directive is an error).
 */
import type { EnvelopeRejection } from '../../src/library/approval-envelope.js';
import { authorizeToolCall } from '../../src/core/authorization/authorize.js';
import type { DiscoveryStatus } from '../../src/core/contracts/discovery.js';
import type { CoreErrorReason } from '../../src/core/errors.js';
import { type ACCEPTED_FIELDS, parseToolInvocation } from '../../src/library/invocation.js';
import type {
  AuthorizationReceiptBody,
  AuthorizationViolation,
  ResourceRef,
  ToolApproval,
  ToolContract,
  ToolEffect,
  ToolGrant,
  ToolInvocation,
  TrustedState,
} from '../../src/core/model.js';
import type { Result } from '../../src/core/result.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Expect<T extends true> = T;

// The effect classes are exactly the spec's four.
export type EffectsAreTheSpecs = Expect<
  Equal<ToolEffect, 'read_only' | 'creates_draft' | 'external_write' | 'irreversible'>
>;

// A decision is one of two values; a denial is a receipt, not another type.
export type DecisionIsBinary = Expect<Equal<AuthorizationReceiptBody['decision'], 'authorized' | 'denied'>>;

// The hand-written parser's field lists are exactly the schema's keys, at compile time too.
export type InvocationFieldsMatch = Expect<
  Equal<(typeof ACCEPTED_FIELDS.invocation)[number], keyof ToolInvocation>
>;
export type ApprovalFieldsMatch = Expect<
  Equal<(typeof ACCEPTED_FIELDS.approval)[number], keyof ToolApproval>
>;
export type TargetFieldsMatch = Expect<Equal<(typeof ACCEPTED_FIELDS.target)[number], keyof ResourceRef>>;

// Run violations the adapter passes in are authorization violations.
export type RunViolationsAreViolations = Expect<
  Equal<TrustedState['run_violations'][number] extends AuthorizationViolation ? true : false, true>
>;

// Authority-bearing optional fields are explicit null, never absent or undefined.
export type ApprovalIsNullable = Expect<Equal<ToolInvocation['approval'], ToolApproval | null>>;
export type KeyIsNullable = Expect<Equal<ToolInvocation['idempotency_key'], string | null>>;

export type StatusesAreClosed = Expect<
  Equal<
    DiscoveryStatus,
    'matches_reviewed' | 'matches_quarantined' | 'drifted' | 'unreviewed' | 'not_advertised'
  >
>;
export type RejectionsAreClosed = Expect<
  Equal<
    EnvelopeRejection,
    | 'bad_signature'
    | 'unknown_key'
    | 'key_not_valid_at_issue'
    | 'issued_in_future'
    | 'issued_after_approval_expiry'
    | 'approval_outlives_limit'
    | 'replayed'
  >
>;
export type MalformedIsACoreError = Expect<
  Equal<'malformed_json' extends CoreErrorReason ? true : false, true>
>;

export function typeChecks(contract: ToolContract, grant: ToolGrant, invocation: ToolInvocation): void {
  const decided = authorizeToolCall(contract, grant, invocation, 0);
  // @ts-expect-error a result must be narrowed before its value is read
  void decided.value;
  if (decided.ok) void decided.value.body.violations;
  else void decided.error.reason;

  // @ts-expect-error time is a number of milliseconds, never a string or a Date
  authorizeToolCall(contract, grant, invocation, '2026-11-30');

  const { approval: _dropped, ...withoutApproval } = invocation;
  // @ts-expect-error an invocation without its approval field is not an invocation
  authorizeToolCall(contract, grant, withoutApproval, 0);

  // @ts-expect-error undefined is not null: "no approval" is spelled null
  authorizeToolCall(contract, grant, { ...invocation, approval: undefined }, 0);

  // Parsing takes unknown input and hands back a Result, never a bare value.
  const parsed: Result<ToolInvocation, unknown> = parseToolInvocation(JSON.parse('{}') as unknown);
  void parsed;
}
