/**
 * The tenant policy document: what a tenant adds on top of the contract and grant rules.
 *
 * Guarantees: a policy that passes `parsePolicy` has every bound in range, the write effects
 * among its approval-required effects, and its lists sorted and unique, so a policy has exactly
 * one canonical form and one digest (`policyDigest`). Every receipt binds the digest in force.
 * Never: reads a clock, does I/O, or merges a document with defaults (a field left out is an
 * error, not a default: what was reviewed is what is enforced). The one exception is a field
 * added to version 1 after documents of it were stored (`approval_request_ttl_ms`,
 * `run_budget_limits.max_open_runs_per_principal`, `observers`, `observation_classifier`): it is
 * optional so every stored document still parses to the same value and digest, and its absence
 * means a fixed, documented value (`POLICY_V1_DEFAULTS`, read through `approvalRequestTtlMs` /
 * `maxOpenRunsPerPrincipal`; no named observers; no classifier).
 */
import { digestOf } from './canonical/canonical.js';
import { coreError, fromZodError, type CoreError, type FieldIssue } from './errors.js';
import type { JsonValue } from './canonical/json.js';
import type { Role } from './identity/identity.js';
import { ToolEffect, WRITE_EFFECTS } from './model.js';
import { err, ok, type Result } from './result.js';
import { Identifier, strict } from './schema.js';
import { z } from 'zod';

export const POLICY_VERSION = 1;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Upper bounds: a policy above them turns a limit into no limit and is rejected. */
export const POLICY_LIMITS = {
  approvalMaxLifetimeMs: 7 * DAY,
  authorizationMaxDispatchMs: HOUR,
  observationMaxAgeMs: 7 * DAY,
  reconciliationDeadlineMs: 30 * DAY,
  runMaxCalls: 100_000,
  runMaxExternalWrites: 10_000,
  runMaxDurationMs: 30 * DAY,
  observationMaxBytes: 1024 * 1024,
  observationMaxClockSkewMs: 10 * MINUTE,
  maxMediaTypes: 64,
  approvalRequestTtlMs: 30 * DAY,
  maxOpenRunsPerPrincipal: 1000,
  maxObservers: 16,
  classifierTimeoutMs: 10 * SECOND,
  classifierMaxChars: 64 * 1024,
  classifierMaxLabels: 8,
} as const;

/**
 * What a field added to `policy_version` 1 after its release means when a document leaves it out.
 * Fixed for version 1: a stored document keeps its digest and its meaning (changing a value here
 * would change what every stored digest enforces, so a new default needs a new version).
 */
export const POLICY_V1_DEFAULTS = Object.freeze({
  /** A pending approval request older than this is `expired`: it can no longer be decided. */
  approval_request_ttl_ms: DAY,
  /** Runs one principal may hold open at once (deadline not passed, call budget not spent). */
  max_open_runs_per_principal: 32,
});

const Ms = (max: number) => z.number().int().min(1).max(max);

/** `type/subtype`, lowercase, no parameters: compared for equality only. */
export const MediaType = z
  .string()
  .max(127)
  .regex(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/, 'must be a lowercase "type/subtype"');

export const TenantPolicy = strict({
  policy_version: z.literal(POLICY_VERSION),
  /** Effects behind an exact approval. Must include the write effects; may add more. */
  approval_required_effects: z.array(ToolEffect).max(4),
  /** Longest lifetime an approver may give an approval. */
  approval_max_lifetime_ms: Ms(POLICY_LIMITS.approvalMaxLifetimeMs),
  /**
   * How long a pending approval request may wait for a decision. Optional (added after v1 was
   * stored): absent means `POLICY_V1_DEFAULTS.approval_request_ttl_ms`.
   */
  approval_request_ttl_ms: Ms(POLICY_LIMITS.approvalRequestTtlMs).optional(),
  /** How long after evaluation an authorization receipt may still be claimed for dispatch. */
  authorization_max_dispatch_ms: Ms(POLICY_LIMITS.authorizationMaxDispatchMs),
  /** Oldest execution observation that is still accepted. */
  observation_max_age_ms: Ms(POLICY_LIMITS.observationMaxAgeMs),
  /** Who owns an indeterminate outcome, and by when it must be resolved before escalation. */
  reconciliation: strict({
    owner: Identifier,
    deadline_ms: Ms(POLICY_LIMITS.reconciliationDeadlineMs),
  }),
  /** Media types an observation's output may declare. */
  allowed_media_types: z.array(MediaType).max(POLICY_LIMITS.maxMediaTypes),
  /** Upper bounds for every run envelope created under this policy. */
  run_budget_limits: strict({
    max_calls: z.number().int().min(1).max(POLICY_LIMITS.runMaxCalls),
    max_external_writes: z.number().int().min(0).max(POLICY_LIMITS.runMaxExternalWrites),
    max_duration_ms: Ms(POLICY_LIMITS.runMaxDurationMs),
    /** Optional, as `approval_request_ttl_ms`: absent means `POLICY_V1_DEFAULTS`. */
    max_open_runs_per_principal: z
      .number()
      .int()
      .min(1)
      .max(POLICY_LIMITS.maxOpenRunsPerPrincipal)
      .optional(),
  }),
  observation_limits: strict({
    max_observation_bytes: Ms(POLICY_LIMITS.observationMaxBytes),
    max_clock_skew_ms: z.number().int().min(0).max(POLICY_LIMITS.observationMaxClockSkewMs),
  }),
  /**
   * Who besides the executor that reported an execution may observe it (`role:executor`,
   * `principal:<id>`; sorted, unique). Optional, as `approval_request_ttl_ms`: absent means the
   * reporting executor only. See `isNamedObserver`.
   */
  observers: z.array(z.string().max(128)).min(1).max(POLICY_LIMITS.maxObservers).optional(),
  /**
   * An optional model-based classifier of observed text (issue 15): its verdict only ever adds
   * the `instruction_like_text` signal (`classifier.injection`); absent means the heuristic alone.
   */
  observation_classifier: strict({
    /** The Workers AI text-classification model the tenant deployed, e.g. `@cf/...`. */
    model: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII'),
    /** Labels (case-insensitive) the model uses for injection; sorted, unique. */
    injection_labels: z
      .array(
        z
          .string()
          .min(1)
          .max(64)
          .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII'),
      )
      .min(1)
      .max(POLICY_LIMITS.classifierMaxLabels),
    /** A verdict scoring at or above this adds the signal. */
    threshold: z.number().gt(0).max(1),
    /** Longest wait for a verdict; past it the classifier is `unavailable` and adds nothing. */
    timeout_ms: Ms(POLICY_LIMITS.classifierTimeoutMs),
    /** Characters of the text that leave the Worker (the rest is not classified). */
    max_chars: Ms(POLICY_LIMITS.classifierMaxChars),
  }).optional(),
});
export type TenantPolicy = z.infer<typeof TenantPolicy>;
export type ObservationClassifierSettings = NonNullable<TenantPolicy['observation_classifier']>;

/** The policy every tenant starts with, so a receipt always binds a policy digest. */
export const DEFAULT_POLICY: TenantPolicy = Object.freeze({
  policy_version: POLICY_VERSION,
  approval_required_effects: ['external_write', 'irreversible'],
  approval_max_lifetime_ms: 15 * MINUTE,
  authorization_max_dispatch_ms: MINUTE,
  observation_max_age_ms: 5 * MINUTE,
  reconciliation: { owner: 'team:operations', deadline_ms: HOUR },
  allowed_media_types: ['application/json'],
  run_budget_limits: { max_calls: 100, max_external_writes: 10, max_duration_ms: HOUR },
  observation_limits: { max_observation_bytes: 64 * 1024, max_clock_skew_ms: 5 * SECOND },
}) as TenantPolicy;

/** The approval request lifetime in force: the document's, or the version 1 default. */
export function approvalRequestTtlMs(policy: TenantPolicy): number {
  return policy.approval_request_ttl_ms ?? POLICY_V1_DEFAULTS.approval_request_ttl_ms;
}

/** The open-run cap in force: the document's, or the version 1 default. */
export function maxOpenRunsPerPrincipal(policy: TenantPolicy): number {
  return (
    policy.run_budget_limits.max_open_runs_per_principal ?? POLICY_V1_DEFAULTS.max_open_runs_per_principal
  );
}

/** Shape (strict zod) then semantics; every problem is reported, sorted by path. */
export function parsePolicy(value: JsonValue): Result<TenantPolicy, CoreError> {
  const shaped = TenantPolicy.safeParse(value);
  if (!shaped.success) return err(fromZodError('invalid_policy', 'policy', shaped.error));
  return validatePolicy(shaped.data);
}

export function validatePolicy(policy: TenantPolicy): Result<TenantPolicy, CoreError> {
  const issues: FieldIssue[] = [];
  const effects = policy.approval_required_effects;
  // A policy cannot waive approval for a write: that would let a grant alone change the world.
  for (const w of WRITE_EFFECTS) {
    if (!effects.includes(w)) {
      issues.push({ path: 'policy.approval_required_effects', message: `must include "${w}"` });
    }
  }
  // Unsorted or repeated lists would give one policy two digests.
  sortedUnique(issues, 'policy.approval_required_effects', effects);
  sortedUnique(issues, 'policy.allowed_media_types', policy.allowed_media_types);
  issues.push(...reconciliationOwnerIssues(policy.reconciliation.owner));
  if (policy.observers !== undefined) {
    sortedUnique(issues, 'policy.observers', policy.observers);
    issues.push(...observerIssues(policy.observers));
  }
  if (policy.observation_classifier !== undefined) {
    sortedUnique(
      issues,
      'policy.observation_classifier.injection_labels',
      policy.observation_classifier.injection_labels,
    );
  }
  if (issues.length > 0) {
    issues.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return err(coreError('invalid_policy', 'policy is not valid', issues));
  }
  return ok(policy);
}

function sortedUnique(issues: FieldIssue[], path: string, items: readonly string[]): void {
  for (let i = 1; i < items.length; i++) {
    const prev = items[i - 1] as string;
    const cur = items[i] as string;
    if (cur === prev) issues.push({ path: `${path}[${i}]`, message: `duplicate "${cur}"` });
    else if (cur < prev) issues.push({ path: `${path}[${i}]`, message: 'must be listed in sorted order' });
  }
}

/** SHA-256 over the policy's RFC 8785 bytes: the `policy_sha256` receipts bind. */
export function policyDigest(policy: TenantPolicy): string {
  return digestOf(policy);
}

// ---------------------------------------------------------------------------------------------
// The reconciliation owner

/** Roles that may be named as reconciliation owners: the ones the reconcile use case admits. */
export const RECONCILING_ROLES = ['executor', 'tenant_admin'] as const satisfies readonly Role[];

/**
 * Who may settle an indeterminate outcome, read from `reconciliation.owner`. The field stays an
 * `Identifier` (stored documents keep parsing); its syntax is one or more terms joined by `+`:
 * `role:executor`, `role:tenant_admin`, `principal:<principal id>`. A value with no `role:` or
 * `principal:` term is a label from before the owner was enforced (e.g. `team:sre`): it names
 * nobody, so it means the tenant admins only (`legacy`), who could always reconcile.
 */
export interface ReconciliationOwner {
  readonly roles: readonly Role[];
  readonly principals: readonly string[];
  readonly legacy: boolean;
}

const OWNER_PREFIXES = ['role:', 'principal:'] as const;
/** An `Identifier` without `+` (the separator): server principal ids are `prn-<base32>`. */
const OWNER_PRINCIPAL = /^[A-Za-z0-9][A-Za-z0-9._:@/=-]{0,117}$/;
const ADMINS_ONLY: ReconciliationOwner = Object.freeze({
  roles: Object.freeze(['tenant_admin'] as Role[]),
  principals: Object.freeze([] as string[]),
  legacy: true,
});

function ownerTerms(owner: string): { terms: string[]; enforced: boolean } {
  const terms = owner.split('+');
  return { terms, enforced: terms.some((t) => OWNER_PREFIXES.some((p) => t.startsWith(p))) };
}

/** Problems with an owner written with the enforced syntax; a plain label has none (see above). */
export function reconciliationOwnerIssues(owner: string): FieldIssue[] {
  const { terms, enforced } = ownerTerms(owner);
  if (!enforced) return [];
  const path = 'policy.reconciliation.owner';
  const issues: FieldIssue[] = [];
  const seen = new Set<string>();
  for (const term of terms) {
    // A mistyped owner must not silently become "admins only" or nobody at all.
    if (seen.has(term)) issues.push({ path, message: `duplicate "${term}"` });
    seen.add(term);
    if (term.startsWith('role:')) {
      const role = term.slice('role:'.length);
      if (!(RECONCILING_ROLES as readonly string[]).includes(role)) {
        issues.push({ path, message: `"${term}": role must be one of ${RECONCILING_ROLES.join(', ')}` });
      }
    } else if (term.startsWith('principal:')) {
      if (!OWNER_PRINCIPAL.test(term.slice('principal:'.length))) {
        issues.push({ path, message: `"${term}": must name a principal id` });
      }
    } else {
      issues.push({ path, message: `"${term}": must be role:<role> or principal:<id>` });
    }
  }
  return issues;
}

/**
 * The owner an operation stored. Anything that is not a valid enforced owner (a legacy label, or
 * a value accepted before validation existed) fails closed to the tenant admins.
 */
export function reconciliationOwner(owner: string): ReconciliationOwner {
  const { terms, enforced } = ownerTerms(owner);
  if (!enforced || reconciliationOwnerIssues(owner).length > 0) return ADMINS_ONLY;
  return {
    roles: terms.filter((t) => t.startsWith('role:')).map((t) => t.slice('role:'.length) as Role),
    principals: terms.filter((t) => t.startsWith('principal:')).map((t) => t.slice('principal:'.length)),
    legacy: false,
  };
}

/** Is this principal one of the owner's? Roles are the principal's own, from trusted storage. */
export function isReconciliationOwner(
  owner: string,
  principal: { readonly principal_id: string; readonly roles: readonly Role[] },
): boolean {
  const o = reconciliationOwner(owner);
  return o.principals.includes(principal.principal_id) || principal.roles.some((r) => o.roles.includes(r));
}

// ---------------------------------------------------------------------------------------------
// Observers

/** Roles that may be named as observers: the observe use case's own (a collector is an executor). */
export const OBSERVING_ROLES = ['executor'] as const satisfies readonly Role[];

function observerIssues(observers: readonly string[]): FieldIssue[] {
  const issues: FieldIssue[] = [];
  observers.forEach((term, i) => {
    const path = `policy.observers[${i}]`;
    // A mistyped observer must be refused, not silently name nobody (or everybody).
    if (term.startsWith('role:')) {
      if (!(OBSERVING_ROLES as readonly string[]).includes(term.slice('role:'.length))) {
        issues.push({ path, message: `"${term}": role must be one of ${OBSERVING_ROLES.join(', ')}` });
      }
    } else if (term.startsWith('principal:')) {
      if (!OWNER_PRINCIPAL.test(term.slice('principal:'.length))) {
        issues.push({ path, message: `"${term}": must name a principal id` });
      }
    } else {
      issues.push({ path, message: `"${term}": must be role:<role> or principal:<id>` });
    }
  });
  return issues;
}

/**
 * Is this principal an observer the policy names (besides the executor that reported the
 * execution, who always may)? Roles are the principal's own, from trusted storage; a policy
 * without `observers`, or with an invalid one (never stored: `validatePolicy` refuses it), names
 * nobody.
 */
export function isNamedObserver(
  policy: TenantPolicy,
  principal: { readonly principal_id: string; readonly roles: readonly Role[] },
): boolean {
  const observers = policy.observers;
  if (observers === undefined || observerIssues(observers).length > 0) return false;
  return observers.some(
    (t) =>
      t === `principal:${principal.principal_id}` ||
      (t.startsWith('role:') && principal.roles.includes(t.slice('role:'.length) as Role)),
  );
}
