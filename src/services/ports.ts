/**
 * The storage and coordination ports the services run over. A service sees one tenant's store
 * (`TenantStore`), never a database handle: every method is scoped to the tenant the store was
 * opened for, so no service can name another tenant's row. The D1 adapter is
 * `src/db/tenant-store.ts`; the idempotency Durable Object sits behind `OperationsPort`. Sharding
 * swaps what `tenantStore(...)` opens (src/platform/bindings.ts), not the services.
 *
 * Stored documents come back validated and deep-frozen (contracts, grants, policies, receipts are
 * re-hashed against their keys by the adapter); corruption is a thrown `StoredDocumentError`.
 */
import type {
  AuthorizationDecision,
  AuthorizationState,
  AuthorizeRequest,
  GrantRecord,
  PolicyRecord,
} from '../core/authorization/decide.js';
import type { JsonValue } from '../core/canonical/json.js';
import type { Role } from '../core/identity/identity.js';
import type { RefusalSummary } from '../core/limits/refusal-tally.js';
import type { ToolContract, ToolGrant } from '../core/model.js';
import type { ClassifierOutcome, ObservationReceiptVersion } from '../core/observation/schema.js';
import type { ObservationClassifierSettings, TenantPolicy } from '../core/policy.js';
import type { PublicKeySet } from '../core/receipts/keys.js';
import type {
  ClaimRequest,
  ClaimResult,
  OperationSnapshot,
  ReconcileRequest,
  ReconcileResult,
  ReportRequest,
  ReportResult,
} from './operations.js';

export type { PolicyRecord } from '../core/authorization/decide.js';

export interface PinnedContract {
  readonly tool_contract_sha256: string;
  readonly contract: ToolContract;
  readonly pinned_by: string;
  readonly pinned_at_unix_ms: number;
  readonly quarantined_at_unix_ms: number | null;
  readonly quarantine_reason: string | null;
}

export interface PrincipalRow {
  readonly principal_id: string;
  readonly tenant_id: string;
  readonly name: string;
  readonly roles: readonly Role[];
  readonly executor_release: string | null;
  readonly created_at_unix_ms: number;
  readonly revoked_at_unix_ms: number | null;
}

export interface NewPrincipal extends Omit<PrincipalRow, 'revoked_at_unix_ms'> {
  readonly key_sha256: string;
  readonly created_by: string | null;
}

export interface GrantRow {
  readonly grant_id: string;
  readonly grant_sha256: string;
  readonly grant: ToolGrant;
  readonly principal_id: string;
  readonly created_by: string;
  readonly created_at_unix_ms: number;
  readonly revoked_at_unix_ms: number | null;
}

export interface RunRow {
  readonly run_id: string;
  readonly principal_id: string;
  readonly run_envelope_sha256: string;
  /** Canonical envelope text. */
  readonly envelope: string;
  readonly max_calls: number;
  readonly max_external_writes: number;
  readonly deadline_unix_ms: number;
  readonly calls_used: number;
  readonly writes_used: number;
  readonly created_at_unix_ms: number;
}

export const APPROVAL_STATUSES = ['pending', 'approved', 'denied', 'consumed'] as const;

/** Operations that may have had an effect nobody has settled: in flight, or awaiting reconciliation. */
export const OPEN_OPERATION_STATES = ['pending', 'reconciliation_required', 'escalated'] as const;
export type ApprovalStatus = (typeof APPROVAL_STATUSES)[number];

export interface ApprovalRow {
  readonly approval_id: string;
  readonly tenant_id: string;
  readonly requester_principal_id: string;
  readonly policy_sha256: string;
  readonly tool_contract_sha256: string;
  readonly input_sha256: string;
  readonly input_bytes: number;
  /** Canonical input text: the exact bytes the executor will consume. */
  readonly input: string;
  /** Canonical target text. */
  readonly target: string;
  readonly effect: string;
  readonly status: ApprovalStatus;
  readonly created_at_unix_ms: number;
  readonly decided_by: string | null;
  readonly decided_at_unix_ms: number | null;
  readonly expires_at_unix_ms: number | null;
  readonly decision_reason: string | null;
  readonly consumed_at_unix_ms: number | null;
  readonly consumed_by_receipt_sha256: string | null;
  // Second approver (issue 14): an `irreversible` request records its first approval here and
  // stays pending until a second, distinct approver approves it (`decided_by`).
  readonly first_approved_by: string | null;
  readonly first_approved_at_unix_ms: number | null;
  /** The lifetime the first approver chose; the approval lives the shorter of the two. */
  readonly first_approval_lifetime_ms: number | null;
  /** The agent's idempotency key for the call it asks approval for (optional). */
  readonly idempotency_key: string | null;
}

export interface ApprovalWithContract {
  readonly approval: ApprovalRow;
  /** Null only if the contract row is gone (never, while contracts are never deleted). */
  readonly contract: ToolContract | null;
}

/** A page of approval requests of one stored status, after a cursor's position (exclusive). */
export interface ApprovalListFilter {
  readonly status: ApprovalStatus;
  /** Only requests created strictly after this instant (live) or at or before it (expired). */
  readonly created?: { readonly after: number } | { readonly at_or_before: number };
  readonly after: { readonly created_at_unix_ms: number; readonly approval_id: string } | null;
  readonly limit: number;
}

/** A page of operations, optionally of one state, after a cursor's position (exclusive). */
export interface OperationListFilter {
  readonly status: string | undefined;
  readonly after: { readonly updated_at_unix_ms: number; readonly operation_id: string } | null;
  readonly limit: number;
}

export type ApprovalDecision = Pick<
  ApprovalRow,
  'status' | 'decided_by' | 'decided_at_unix_ms' | 'expires_at_unix_ms' | 'decision_reason'
>;

export type FirstApproval = Pick<
  ApprovalRow,
  'first_approved_by' | 'first_approved_at_unix_ms' | 'first_approval_lifetime_ms'
>;

export type ReceiptKind = 'authorization' | 'execution' | 'reconciliation' | (string & {});

export interface NewReceipt {
  readonly kind: ReceiptKind;
  readonly receipt: { readonly sha256: string; readonly body: object };
  /** `authorized` / `denied`, or an execution / reconciliation / observation outcome. */
  readonly outcome: string;
  readonly principal_id?: string | null;
  /** Canonical inputs for replay (digests and trusted state, never raw arguments). */
  readonly evidence?: unknown;
  readonly created_at_unix_ms: number;
}

export interface StoredReceipt {
  readonly tenant_id: string;
  readonly sha256: string;
  readonly kind: string;
  readonly receipt: { readonly sha256: string; readonly body: { readonly [key: string]: JsonValue } };
  readonly evidence: JsonValue | null;
  readonly outcome: string;
  readonly principal_id: string | null;
  readonly created_at_unix_ms: number;
}

/** Issue 11: one receipt's signature envelope, in the order the tenant's log takes them (`seq`). */
export interface SignatureRow {
  readonly seq: number;
  readonly receipt_sha256: string;
  /** RFC 8785 canonical envelope text: the log leaf's bytes (UTF-8). */
  readonly envelope: string;
}

export interface OperationRow {
  readonly operation_id: string;
  readonly tenant_id: string;
  readonly tool_contract_sha256: string;
  readonly idempotency_key: string;
  readonly input_sha256: string;
  readonly state: string;
  readonly authorization_receipt_sha256: string;
  readonly execution_receipt_sha256: string | null;
  readonly reconciliation_owner: string | null;
  readonly reconciliation_deadline_unix_ms: number | null;
  readonly escalated_at_unix_ms: number | null;
  readonly updated_at_unix_ms: number;
}

/** What a claim re-checks about its authorization receipt, read in one round trip. */
export interface DispatchState {
  readonly contract: PinnedContract | null;
  readonly policy: PolicyRecord;
  /** The policy the receipt was issued under (its dispatch window applies). */
  readonly receipt_policy: TenantPolicy | null;
  readonly grant: { readonly grant: ToolGrant; readonly revoked: boolean } | null;
  /** The named approval's expiry; undefined when the approval row is gone. */
  readonly approval_expires_at_unix_ms: number | null | undefined;
  /** The authorized agent's row is revoked or gone. */
  readonly agent_revoked: boolean;
  /** The named approval's approver is revoked or gone (false when the receipt names none). */
  readonly approver_revoked: boolean;
  /**
   * Index rows of the same tenant, idempotency key and tool (any contract of it); empty for a
   * keyless receipt. A v1 object among them must not be bypassed by the v2 name.
   */
  readonly key_operations: readonly OperationRow[];
}

/**
 * Unrevoked grants one principal may hold (enforced by a trigger on insert, migrations/0002): every
 * one of them is evaluated on each authorization, so the bound keeps that evaluation bounded.
 */
export const MAX_LIVE_GRANTS = 64;

/** Per-tenant storage quotas, set by the platform admin (`PUT /v1/tenants/{id}/quotas`). */
export interface Quotas {
  readonly max_stored_bytes: number;
  readonly max_receipts_per_day: number;
  readonly max_open_approvals: number;
  readonly max_open_runs: number;
}

/** Quotas of a tenant the platform admin never configured (docs/storage.md, "Quotas"). */
export const DEFAULT_QUOTAS = {
  max_stored_bytes: 256 * 1024 * 1024,
  max_receipts_per_day: 200_000,
  max_open_approvals: 1_000,
  max_open_runs: 10_000,
} as const satisfies Quotas;

export const QUOTA_NAMES = ['stored_bytes', 'receipts_per_day', 'open_approvals', 'open_runs'] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** A tenant's usage against its quotas. */
export interface Usage {
  readonly quotas: Quotas;
  readonly stored_bytes: number;
  /** Receipts stored in the current UTC day. */
  readonly receipts_today: number;
  readonly open_approvals: number;
  readonly open_runs: number;
}

/** What `securityCounts` reads: a window of the tenant's receipts and approvals, and its open work. */
export interface SecurityCountsQuery {
  /** The window, `[from, to)` in unix ms. */
  readonly from: number;
  readonly to: number;
  /** Now: operations at or past their reconciliation deadline are counted as overdue (`advance`). */
  readonly now: number;
  /** A pending approval request created before this is expired (the policy's request TTL). */
  readonly expired_before: number;
  /** Rows each count walks at most (the newest of the window); beyond it `complete` is false. */
  readonly scan_cap: number;
  /** Denied authorizations read back for their violations, newest first. */
  readonly denial_sample: number;
}

/** Raw counts of one tenant (src/services/metrics.ts shapes them). */
export interface SecurityCounts {
  /** Receipts created in the window (the newest `scan_cap`), by kind and outcome. */
  readonly receipts: readonly { readonly kind: string; readonly outcome: string; readonly n: number }[];
  readonly receipts_complete: boolean;
  /** The newest denied authorization receipts of the window (decoded, re-hashed). */
  readonly denials: readonly StoredReceipt['receipt'][];
  /** Whether `denials` are every denial among the authorizations walked. */
  readonly denials_complete: boolean;
  /** Approval requests created in the window, by stored status; `expired`: pending past the TTL. */
  readonly approvals_requested: readonly { readonly status: string; readonly n: number }[];
  readonly approvals_expired: number;
  /** Approval requests decided in the window, by their status now (`consumed`: approved, then used). */
  readonly approvals_decided: readonly { readonly status: string; readonly n: number }[];
  readonly approvals_complete: boolean;
  /** Open operations by state, with the oldest last update of each. */
  readonly operations_open: readonly {
    readonly state: string;
    readonly n: number;
    readonly oldest_updated_at_unix_ms: number | null;
  }[];
  /** Awaiting reconciliation, not escalated, at or past the deadline (due for escalation). */
  readonly operations_overdue: number;
  readonly operations_complete: boolean;
  readonly contracts_quarantined: number;
  readonly contracts_complete: boolean;
}

/** A stored observation receipt found by its id (the holder of the id, or the same content). */
export interface ObservationRecord {
  readonly sha256: string;
  readonly raw_observation_sha256: string;
  /** True for the receipt that holds the id (not a rejected `observation_id_conflict`). */
  readonly holds_id: boolean;
  /** Canonical evidence text the receipt was computed from. */
  readonly evidence: string;
  /** The receipt version the stored body names: an identical retry is recomputed under it. */
  readonly receipt_version: ObservationReceiptVersion;
}

/** Why a commit lost its race: the invariant trigger that aborted it. */
export type LostRace =
  | 'approval_unusable'
  | 'approval_not_pending'
  | 'run_budget_spent'
  | 'contract_quarantined'
  | 'grant_revoked'
  | 'principal_revoked'
  // A row the decision read (possibly at a replica) differs at the primary (src/db/tenant-store.ts).
  | 'state_changed';

/** The state a decision was made from, and the request it was read for. */
export interface AuthorizationRead {
  readonly request: AuthorizeRequest;
  readonly state: AuthorizationState;
}

/** A principal found by its key digest, and the state its authorization is decided from. */
export interface KeyedAuthorizationRead {
  readonly principal: PrincipalRow;
  readonly state: AuthorizationState;
}

/**
 * A door's keyed read (issue 12): the key's principal, every pinned contract of the tool name the
 * door named (oldest first, quarantined ones included) and the rest of the authorization state,
 * whose `contract` is null until the service binds the name to one of `pins`.
 */
export interface NamedToolKeyedRead {
  readonly principal: PrincipalRow;
  readonly pins: readonly PinnedContract[];
  readonly state: AuthorizationState;
}

export type CommitResult = { readonly ok: true } | { readonly ok: false; readonly lost: LostRace };

/** One tenant's storage. Every method is scoped to that tenant. */
export interface TenantStore {
  readonly tenant_id: string;

  // Policy
  currentPolicy(): Promise<PolicyRecord>;
  policyByDigest(sha256: string): Promise<TenantPolicy | null>;
  /** Store the document (if new) and make it the policy in force, atomically. */
  putPolicy(policy: TenantPolicy, policy_sha256: string, now: number): Promise<void>;

  // Contracts
  getContract(sha256: string): Promise<PinnedContract | null>;
  /** True when this pin inserted the contract, false when it was already pinned. */
  pinContract(contract: ToolContract, sha256: string, pinned_by: string, now: number): Promise<boolean>;
  listContracts(): Promise<readonly PinnedContract[]>;
  /** Quarantine each contract not yet quarantined (a quarantine is final, never re-dated). */
  quarantineContracts(sha256s: readonly string[], now: number, reason: string | null): Promise<void>;

  // Principals and grants
  getPrincipal(principal_id: string): Promise<PrincipalRow | null>;
  insertPrincipal(p: NewPrincipal): Promise<void>;
  revokePrincipal(principal_id: string, now: number): Promise<void>;
  getGrant(grant_id: string): Promise<GrantRow | null>;
  /** `limit` when the principal already holds `MAX_LIVE_GRANTS` unrevoked grants (nothing written). */
  insertGrant(g: Omit<GrantRow, 'revoked_at_unix_ms'>): Promise<'inserted' | 'limit'>;
  revokeGrant(grant_id: string, now: number): Promise<void>;

  // Runs
  /**
   * Insert a run unless its principal already holds `max_open_runs` open runs (`limit`, nothing
   * written), counted in the same statement so concurrent creations cannot overshoot the cap.
   */
  insertRun(
    r: Omit<RunRow, 'calls_used' | 'writes_used'>,
    max_open_runs: number,
  ): Promise<'inserted' | 'limit'>;
  getRun(run_id: string): Promise<RunRow | null>;
  /** Runs of `principal_id` still open at `now`: deadline not passed and call budget not spent. */
  countOpenRuns(principal_id: string, now: number): Promise<number>;

  // Approvals
  insertApproval(a: ApprovalRow): Promise<void>;
  getApproval(approval_id: string): Promise<ApprovalWithContract | null>;
  /** One page of approval requests, oldest first (`created_at_unix_ms`, then `approval_id`). */
  listApprovals(q: ApprovalListFilter): Promise<readonly ApprovalWithContract[]>;
  /** Decide a pending approval; `conflict` when it was not pending (two approvers racing). */
  decideApproval(approval_id: string, decision: ApprovalDecision): Promise<'decided' | 'conflict'>;
  /** Record the first of two approvals of a pending request; `conflict` if one already was. */
  recordFirstApproval(approval_id: string, first: FirstApproval): Promise<'recorded' | 'conflict'>;

  // Authorization
  /**
   * Everything `decideAuthorization` needs, read in one round trip; with `at: 'primary'` the read
   * sees every committed write (else it may be served by a replica of the request's session).
   */
  loadAuthorizationState(
    principal_id: string,
    request: AuthorizeRequest,
    options?: { readonly at: 'primary' },
  ): Promise<AuthorizationState>;
  /**
   * Store the receipt and, for an authorization, apply its effects under its guards, atomically;
   * a guard or invariant that fails aborts everything and reports the lost race. Given the state
   * the decision was made from, the batch also aborts (`state_changed`) when the primary's rows
   * differ from it in a way that could change the decision (a read served by a stale replica).
   */
  commitAuthorization(
    decision: AuthorizationDecision,
    principal_id: string,
    now: number,
    read?: AuthorizationRead,
  ): Promise<CommitResult>;

  // Receipts
  getReceipt(sha256: string): Promise<StoredReceipt | null>;
  /** Append a receipt; the same content again is a no-op. */
  insertReceipt(r: NewReceipt): Promise<void>;

  // Executions and operations
  loadDispatchState(receipt: {
    readonly tool_contract_sha256: string;
    readonly policy_sha256: string;
    readonly grant_sha256: string;
    readonly approval_id: string | null;
    readonly principal_id: string;
    readonly idempotency_key: string | null;
  }): Promise<DispatchState>;
  getOperation(operation_id: string): Promise<OperationRow | null>;
  /** Index rows of this tenant's operations under `idempotency_key` for any contract of the tool. */
  operationsForKey(tool_name: string, idempotency_key: string): Promise<readonly OperationRow[]>;
  /**
   * Open operations (`pending`, `reconciliation_required`, `escalated`) of any contract of the
   * tool whose input digest is `input_sha256`, under any idempotency key, most recently updated
   * first, at most `limit`.
   */
  openOperationsOfInput(
    tool_name: string,
    input_sha256: string,
    limit: number,
  ): Promise<readonly OperationRow[]>;
  /** One page of operations, most recently updated first (`updated_at_unix_ms`, then id). */
  listOperations(q: OperationListFilter): Promise<readonly OperationRow[]>;

  // Tools (search doors: AuthZEN action search, MCP tool resolution and listing)
  /** Every grant of the principal, revoked ones included, by grant_id. */
  grantsOf(principal_id: string): Promise<readonly GrantRecord[]>;
  /**
   * The pinned contracts whose tool is `tool_name`, quarantined ones included; with
   * `at: 'primary'` the read sees every committed pin and quarantine.
   */
  contractsForTool(
    tool_name: string,
    options?: { readonly at: 'primary' },
  ): Promise<readonly PinnedContract[]>;
  /**
   * The receipt holding `observation_id` for `kind`, and the receipt of this exact raw
   * observation, each through a unique index (at most two rows, whatever the history).
   */
  observationRecords(
    kind: string,
    observation_id: string,
    raw_observation_sha256: string,
  ): Promise<readonly ObservationRecord[]>;
  /**
   * Store an observation receipt; `taken` when another observation with the same id (or the same
   * content) was stored first, and nothing was written.
   */
  insertObservationReceipt(
    r: NewReceipt & {
      readonly observation_id: string;
      readonly raw_observation_sha256: string;
      readonly holds_id: boolean;
    },
  ): Promise<'stored' | 'taken'>;
  /** A grant of this tenant by its digest (receipt replay). */
  grantByDigest(grant_sha256: string): Promise<ToolGrant | null>;
  /** Usage against quotas at `now` (open runs are those whose deadline has not passed). */
  usage(now: number): Promise<Usage>;
  /** Security counts of a window, in one round trip, every count bounded by `scan_cap`. */
  securityCounts(q: SecurityCountsQuery): Promise<SecurityCounts>;

  // Signed webhooks for executors (src/services/webhooks.ts)
  /** The executor's signing secrets that still verify at `now`, newest first. */
  liveWebhookSecrets(principal_id: string, now: number): Promise<readonly WebhookSecretRow[]>;
  /** Every signing secret of the executor, newest first, without the secret text. */
  listWebhookSecrets(principal_id: string): Promise<readonly Omit<WebhookSecretRow, 'secret'>[]>;
  /**
   * Add `secret` and, in the same batch, date every secret still live at `now` to expire at
   * `previous_expires_at_unix_ms` at the latest; then expire at once all but the newest
   * `max_live` live ones.
   */
  rotateWebhookSecret(r: {
    readonly principal_id: string;
    readonly secret: WebhookSecretRow;
    readonly created_by: string;
    readonly previous_expires_at_unix_ms: number;
    readonly max_live: number;
  }): Promise<void>;
  /**
   * Record the first delivery of a `webhook-id` (`claimed`), or return what is recorded for it
   * (`recorded`: its answer, or none yet while the first delivery is being processed). A row
   * claimed before `stale_before_unix_ms` that never got an answer is taken over (`claimed`) by
   * the same message only (same `route` and `body_sha256`); for another one it stays `recorded`.
   * Rows received before `purge_before_unix_ms` are deleted on the way.
   */
  claimWebhookDelivery(
    d: NewWebhookDelivery & { readonly stale_before_unix_ms: number; readonly purge_before_unix_ms: number },
  ): Promise<WebhookDeliveryClaim>;
  /** Store the answer of a claimed delivery. */
  completeWebhookDelivery(
    principal_id: string,
    webhook_id: string,
    status: number,
    response: string,
  ): Promise<void>;
  /** Forget a claimed delivery that got no answer worth repeating (an internal error): a retry runs again. */
  releaseWebhookDelivery(principal_id: string, webhook_id: string): Promise<void>;
  // Receipt signatures and the transparency log (issue 11)
  /** The signature envelope stored with the receipt, or null. */
  receiptSignature(sha256: string): Promise<SignatureRow | null>;
  /** Signature rows after `after_seq`, in `seq` order (the log sequencer's drain). */
  signaturesAfter(after_seq: number, limit: number): Promise<readonly SignatureRow[]>;
  // The console's history (issue 14, migrations/0009)
  /**
   * One page of decided approvals, newest decision first (`decided_at_unix_ms`, then
   * `approval_id`, both descending), each with the operation its authorization receipt was claimed
   * as, and the count of decided approvals up to `count_cap + 1`: one query each, in one batch.
   */
  approvalHistory(q: ApprovalHistoryFilter): Promise<ApprovalHistoryPage>;
}

// -- The console's history (issue 14) ---------------------------------------------------------

/** The stored statuses of a decided approval request. */
export const DECIDED_APPROVAL_STATUSES = ['consumed', 'approved', 'denied'] as const;
export type DecidedApprovalStatus = (typeof DECIDED_APPROVAL_STATUSES)[number];

/** A history page: of one decided status or all, from a keyset position (exclusive) either way. */
export interface ApprovalHistoryFilter {
  readonly status: DecidedApprovalStatus | undefined;
  /**
   * Null: the newest page. `older`: the rows after this position in page order (the next page);
   * `newer`: the rows before it, nearest first (the previous page, returned oldest first).
   */
  readonly from: {
    readonly direction: 'older' | 'newer';
    readonly decided_at_unix_ms: number;
    readonly approval_id: string;
  } | null;
  readonly limit: number;
  /** The count stops here: `total` is at most `count_cap + 1` (a count must stay bounded). */
  readonly count_cap: number;
}

/** An operation as a history row shows it: the D1 index row, and its execution receipt's outcome. */
export interface HistoryOperation {
  readonly operation_id: string;
  readonly state: string;
  readonly execution_receipt_sha256: string | null;
  /** The execution receipt's stored outcome; null when the receipt is not in D1 (archived). */
  readonly execution_outcome: string | null;
  readonly reconciliation_receipt_sha256: string | null;
  readonly reconciliation_deadline_unix_ms: number | null;
  readonly escalated_at_unix_ms: number | null;
}

export interface ApprovalHistoryRow extends ApprovalWithContract {
  /** The operation this tenant's index holds for the approval's authorization receipt, or null. */
  readonly operation: HistoryOperation | null;
}

export interface ApprovalHistoryPage {
  /** In page order for `from` null or `older`; nearest first (oldest first) for `newer`. */
  readonly rows: readonly ApprovalHistoryRow[];
  /** Decided approvals of the filter, counted up to `count_cap + 1`. */
  readonly total: number;
}

export interface WebhookSecretRow {
  readonly principal_id: string;
  readonly secret_id: string;
  /** `whsec_...` */
  readonly secret: string;
  readonly created_at_unix_ms: number;
  readonly expires_at_unix_ms: number | null;
}

export interface NewWebhookDelivery {
  readonly principal_id: string;
  readonly webhook_id: string;
  readonly route: string;
  readonly body_sha256: string;
  readonly received_at_unix_ms: number;
}

export type WebhookDeliveryClaim =
  | { readonly state: 'claimed' }
  | {
      readonly state: 'recorded';
      readonly route: string;
      readonly body_sha256: string;
      /** Null while the first delivery is still being processed. */
      readonly status: number | null;
      readonly response: string | null;
    };

/**
 * What is not one tenant's: key lookup, tenant creation and quotas. The adapter spans the D1
 * shards (src/platform/bindings.ts); each method touches one shard, except where it says so.
 */
export interface PlatformStore {
  /** The key with this digest on `shard` (the shard its key names); null for an unknown shard. */
  principalByKeyDigest(
    shard: number,
    key_sha256: string,
  ): Promise<(PrincipalRow & { readonly key_sha256: string }) | null>;
  /**
   * `POST /v1/authorize`: the key's principal and its authorization state in one batch on the
   * key's shard, near the caller (a replica may serve it); a key the replica does not know yet is
   * re-read at the primary. Null: no principal has this key there (or the shard is unknown).
   */
  authorizationByKey(
    shard: number,
    key_sha256: string,
    request: AuthorizeRequest,
  ): Promise<KeyedAuthorizationRead | null>;
  /**
   * `authorizationByKey` for the doors that name a tool (MCP, AuthZEN, Docker): the same one
   * batch, with the tool name's pins in place of one contract by digest. With `at: 'primary'`
   * the whole read is at the primary (a binding a replica's pins refused is re-read there).
   */
  namedToolAuthorizationByKey(
    shard: number,
    key_sha256: string,
    tool_name: string,
    request: Omit<AuthorizeRequest, 'tool_contract_sha256'>,
    options?: { readonly at: 'primary' },
  ): Promise<NamedToolKeyedRead | null>;
  tenantNameTaken(name: string): Promise<boolean>;
  /**
   * Shards: choose the new tenant's shard (src/platform/shards.ts `placementShard`) and record it
   * in the directory, which also reserves the name across shards.
   */
  placeTenant(t: {
    readonly tenant_id: string;
    readonly name: string;
    readonly now: number;
  }): Promise<{ readonly shard: number } | 'name_taken'>;
  /** Undo `placeTenant` when the tenant could not be written. */
  releaseTenant(tenant_id: string): Promise<void>;
  /**
   * The shard the directory names for `tenant_id`, read at shard 0's primary, or null when it
   * names none: after `placeTenant` threw, whether its reservation committed anyway (an answer
   * lost on the way back).
   */
  placedShard(tenant_id: string): Promise<number | null>;
  /**
   * Whether the tenant's creation batch committed on `shard`, read at that shard's primary: after
   * `createTenant` threw, the error may have come after the commit (an answer lost on the way).
   */
  tenantWritten(t: { readonly tenant_id: string; readonly shard: number }): Promise<boolean>;
  /** `name_taken` when a concurrent creation of the same name won. Writes on `shard` only. */
  createTenant(t: {
    readonly tenant_id: string;
    readonly shard: number;
    readonly name: string;
    readonly policy: TenantPolicy;
    readonly policy_sha256: string;
    readonly admin: NewPrincipal;
    readonly now: number;
  }): Promise<'created' | 'name_taken'>;
  /** Set a tenant's quotas (and retention window, when given); false when the tenant does not exist. */
  setQuotas(
    tenant_id: string,
    quotas: Quotas & { readonly receipt_retention_days?: number | undefined },
    now: number,
  ): Promise<boolean>;
}

/** The idempotency Durable Objects, one per logical operation. */
export interface OperationsPort {
  claim(req: ClaimRequest): Promise<ClaimResult>;
  report(operation_id: string, req: ReportRequest): Promise<ReportResult>;
  reconcile(operation_id: string, req: ReconcileRequest): Promise<ReconcileResult>;
  read(operation_id: string, tenant_id: string): Promise<OperationSnapshot | null>;
}

// ---------------------------------------------------------------------------------------------
// Issue 11: the tenant's transparency log (the sequencer Durable Object and the R2 tiles) and the
// published receipt keys. Adapter: src/platform/bindings.ts `receiptLogPort`.

export type InclusionAnswer =
  | { readonly status: 'included'; readonly index: number; readonly size: number; readonly proof: string }
  | { readonly status: 'not_logged' };

export type ConsistencyAnswer =
  | { readonly ok: true; readonly size: number; readonly proof: readonly string[] }
  | { readonly ok: false; readonly reason: 'out_of_range' | 'missing_node'; readonly message: string };

/** One change of a log's publication: the audit record the sequencer keeps. */
export interface PublicationEvent {
  readonly published: boolean;
  readonly principal_id: string;
  readonly at_unix_ms: number;
}

export interface PublicationState {
  readonly published: boolean;
  /** The latest changes, newest first (bounded; every change is kept in the sequencer). */
  readonly events: readonly PublicationEvent[];
}

export interface PublicationChange {
  /** False when the log already was in the requested state (nothing recorded). */
  readonly changed: boolean;
  readonly state: PublicationState;
}

/** One configured witness of a tenant's log and what the sequencer knows of it. */
export interface LogWitnessView {
  readonly name: string;
  readonly key_id: string;
  readonly vkey: string;
  /** The submission prefix (`<url>/add-checkpoint` is posted to). */
  readonly url: string;
  /** The largest tree size this witness is known to have cosigned (null: none yet). */
  readonly cosigned_size: number | null;
  /** Failed submissions in a row (0 after a cosignature). */
  readonly failures: number;
  readonly last_attempt_unix_ms: number | null;
  /** `cosigned`, an HTTP status, `network`, `invalid_answer` or `witness_ahead`; null before any. */
  readonly last_outcome: string | null;
  readonly last_error: string | null;
  /** When the next submission may be made after failures (null: as soon as a checkpoint is new). */
  readonly retry_after_unix_ms: number | null;
}

export interface LogWitnessesState {
  readonly witnesses: readonly LogWitnessView[];
  /** Who last replaced the list and when (null: never configured). */
  readonly changed_by: string | null;
  readonly changed_at_unix_ms: number | null;
}

export interface ReceiptLogPort {
  /** The latest signed checkpoint of the tenant's log and its size. */
  checkpoint(): Promise<{ readonly size: number; readonly checkpoint: string }>;
  /** The receipt's C2SP tlog-proof against the latest checkpoint, or `not_logged`. */
  inclusion(receipt_sha256: string): Promise<InclusionAnswer>;
  /** Drain committed receipts into the log now (bounded), instead of waiting for the alarm. */
  drain(): Promise<void>;
  consistency(from: number, to: number): Promise<ConsistencyAnswer>;
  /** A published tile, entry bundle (path already validated), or null. */
  object(path: string): Promise<Uint8Array | null>;
  /** Whether the log is public (docs/transparency-log.md, "Public logs"), with its history. */
  publication(): Promise<PublicationState>;
  /** Publish or unpublish the log; idempotent, and only a change is recorded. */
  setPublication(published: boolean, principal_id: string, now: number): Promise<PublicationChange>;
  /** The log's witnesses (C2SP tlog-witness) and their submission state. */
  witnesses(): Promise<LogWitnessesState>;
  /** Replace the log's witness list (validated by the caller and again by the sequencer). */
  setWitnesses(
    witnesses: readonly { readonly vkey: string; readonly url: string }[],
    allowLoopbackHttp: boolean,
    principal_id: string,
    now: number,
  ): Promise<LogWitnessesState>;
}

/** One object of a public log: its bytes (null when only its size was asked, for HEAD). */
export interface PublicLogObject {
  readonly size: number;
  readonly bytes: Uint8Array | null;
}

/**
 * The public, unauthenticated read path of tenants' logs. Reads only the bucket the sequencers
 * write (never D1 or a Durable Object), so an anonymous request costs storage reads and nothing
 * a tenant's own traffic waits on. Adapter: src/platform/bindings.ts `publicLogPort`.
 */
export interface PublicLogPort {
  /** True only while the tenant's sequencer has published its log (its marker exists). */
  published(tenant_id: string): Promise<boolean>;
  /** A resource below `log/<tenant_id>/` (path already validated), or null. */
  read(tenant_id: string, path: string, withBody: boolean): Promise<PublicLogObject | null>;
}

/** The issuer's published receipt keys; throws `signing_unavailable` without a usable key ring. */
export interface KeysPort {
  publicKeys(now: number): PublicKeySet;
}

/** The outcome of one rate-limit check: admitted, or when to retry. */
export interface RateLimitDecision {
  readonly allowed: boolean;
  /** Seconds until the principal's next write is admitted; 0 when allowed. */
  readonly retry_after_seconds: number;
  /** Issue 10: on a refusal, whether the tenant's aggregate write budget (not the principal's) refused. */
  readonly limited_by?: 'principal' | 'tenant';
}

/**
 * Per-principal write limits. `now` is the request's one clock read; the limit itself is the
 * deployment's configuration, which the adapter holds. Throws when the limiter cannot answer.
 */
export interface RateLimitPort {
  /** Takes `count` tokens (default one) from the principal's and the tenant's buckets, or none. */
  take(tenant_id: string, principal_id: string, now: number, count?: number): Promise<RateLimitDecision>;
  /** The most tokens one request may take: the smaller of the principal's and the tenant's burst. */
  readonly max_count: number;
  /** The tenant's refused requests in the minutes from `from`'s to `to`'s (security metrics). */
  refusals(tenant_id: string, from: number, to: number): Promise<RefusalSummary>;
}

// ---------------------------------------------------------------------------------------------
// The optional observation classifier (issue 15)

/**
 * A model-based classifier of observed text, configured per tenant by the policy's
 * `observation_classifier`. Never throws and never waits past the settings' timeout: a missing
 * binding, a failure, a timeout or an unexpected answer is an `unavailable` outcome.
 */
export interface ClassifierPort {
  classify(text: string, settings: ObservationClassifierSettings): Promise<ClassifierOutcome>;
}

// -- Blobs and retention (issue 10, "Bounded D1"; docs/storage.md) ------------------------------

/** Bytes stored in R2 under their SHA-256 (`sha256/<hex>`). */
export interface BlobRef {
  readonly sha256: string;
  readonly bytes: number;
}

/**
 * Immutable, content-addressed bytes (R2 binding `BLOBS`). A put is create-only and idempotent (the
 * same bytes again are already there); a get re-hashes what it read and throws `BlobIntegrityError`
 * (src/db/blobs.ts) when the bytes do not hash to the key. Never used on the authorization path.
 */
export interface BlobStore {
  put(bytes: Uint8Array, content_type: string): Promise<BlobRef>;
  /** The verified bytes, or null when nothing is stored under the digest. */
  get(sha256: string): Promise<Uint8Array | null>;
}

/** Days a receipt stays in D1 when the platform admin set no window (`tenant_quotas`). */
export const DEFAULT_RECEIPT_RETENTION_DAYS = 90;
export const MAX_RECEIPT_RETENTION_DAYS = 3650;

/** A tenant and how long its receipts stay in D1. */
export interface RetentionWindow {
  readonly tenant_id: string;
  readonly receipt_retention_days: number;
}

/** Receipts of one tenant and one UTC day, due to leave D1, as canonical archive lines. */
export interface ExpiredReceipts {
  readonly day: number;
  /** Receipt digests, in the order of `lines`. */
  readonly sha256s: readonly string[];
  /** One object per receipt row (src/db/receipts.ts `archiveLine`), oldest first. */
  readonly lines: readonly JsonValue[];
}

/** The archive manifest written before any row it holds leaves D1. */
export interface ArchiveManifest {
  readonly archive_sha256: string;
  readonly day: number;
  readonly bytes: number;
  readonly sha256s: readonly string[];
}

/** Tenant-scoped retention operations (the D1 tenant store implements them). */
export interface RetentionStore {
  readonly tenant_id: string;
  /**
   * The oldest UTC day holding receipts created before `before_unix_ms`, at most `limit` of them
   * (oldest first); null when there are none.
   */
  expiredReceipts(before_unix_ms: number, limit: number): Promise<ExpiredReceipts | null>;
  /**
   * In one batch: the manifest, an entry per receipt, then the receipts' deletion (which the
   * `receipts_no_delete` trigger allows only for rows with an entry). Nothing changes on failure.
   */
  commitArchive(manifest: ArchiveManifest, now: number): Promise<void>;
}

/** Platform-wide retention settings (`tenant_quotas.receipt_retention_days`). */
export interface RetentionDirectory {
  /**
   * Tenants after `after` (by id), at most `limit`; none whose copy here is not the tenant yet
   * (an import staged, aborting, or live but not in the directory: src/db/platform-store.ts).
   */
  retentionWindows(after: string | null, limit: number): Promise<readonly RetentionWindow[]>;
}

// Shards: moving a tenant between D1 shards (src/services/tenant-moves.ts, platform admin)

/** One column value of an exported row: D1 stores only text, integers and null for Writ. */
export type TenantRowValue = string | number | null;

/** An import in progress on one shard: the tenant and the export file it writes. */
export interface StagedImport {
  readonly tenant_id: string;
  /** SHA-256 (hex) of the export file's bytes. */
  readonly file_sha256: string;
  /** The file's rows (lines), all of which are written before the tenant goes live. */
  readonly rows_total: number;
}

/** Where an export stands: a table's index in export order and a `rowid` in it. */
export interface ExportPosition {
  readonly table: number;
  readonly rowid: number;
}

/** One table row of a tenant, as exported and imported (one canonical JSON line each). */
export interface TenantRow {
  readonly table: string;
  readonly row: Readonly<Record<string, TenantRowValue>>;
}

/**
 * A column of a tenant table, as an import checks a row's value against it: its SQLite type (every
 * tenant column is TEXT or INTEGER) and whether it is NOT NULL.
 */
export interface TenantColumn {
  readonly name: string;
  readonly type: 'text' | 'integer';
  readonly notNull: boolean;
}

/**
 * The shards as a platform admin moving a tenant sees them. Each method touches the one shard
 * it names, except `record`, which writes the directory on shard 0.
 */
export interface TenantMovePort {
  /** The shard the directory names for the tenant, or null for an unknown tenant. */
  shardOf(tenant_id: string): Promise<number | null>;
  /**
   * `shardOf` read at the primary: after `record` threw, whether its write committed anyway (an
   * answer lost on the way back).
   */
  recordedShard(tenant_id: string): Promise<number | null>;
  /** Whether `shard` is a configured shard. */
  shardExists(shard: number): boolean;
  /** The columns of a tenant table as the schema declares them, or null for any other table. */
  columnsOf(table: string): readonly TenantColumn[] | null;
  /** The tenant's rows in export order, after `after` when given (a segmented export). */
  exportRows(
    shard: number,
    tenant_id: string,
    after?: ExportPosition | null,
  ): AsyncIterable<TenantRow & { readonly position: ExportPosition }>;
  /** Revoke every live principal of the tenant on `shard`; returns their ids. */
  freeze(shard: number, tenant_id: string, now: number): Promise<string[]>;
  /** Whether a tenant of this name is in the directory. */
  nameTaken(name: string): Promise<boolean>;
  // A staged import (migrations/0011): chunks of rows, each one batch, while the tenant stays
  // invisible (no principal row, so no key authenticates; the directory does not point at it),
  // then one batch that makes it live. Progress is kept per export file, so a failed import is
  // resumed by sending the same file again. Each call after `beginImport` writes nothing and
  // answers `moved` when the import's progress is not where the caller left it (another importer
  // of the file, or the import finished).
  /**
   * Start the import of `file_sha256`, or find it started: the number of its rows already
   * written; `exists` when the tenant is on `shard` and not staged; `other_import` when an
   * import of another file of this tenant is staged there; `aborting` when an abort of the
   * tenant's staged import there has begun and not finished (migrations/0013).
   */
  beginImport(
    shard: number,
    s: StagedImport,
    now: number,
  ): Promise<{ readonly rows_done: number } | 'exists' | 'other_import' | 'aborting'>;
  /** Write rows `from`..`from + rows.length` of the file (export order) in one batch. */
  importChunk(
    shard: number,
    s: StagedImport,
    chunk: { readonly from: number; readonly rows: readonly TenantRow[]; readonly exported_max_seq: number },
    now: number,
  ): Promise<'written' | 'moved'>;
  /** Set the key digests of staged live principals (one batch; the import is fully written). */
  keyPrincipals(
    shard: number,
    s: StagedImport,
    keys: readonly { readonly principal_id: string; readonly key_sha256: string }[],
  ): Promise<'written' | 'moved'>;
  /**
   * One batch: principals into place, the exported quota row (its `stored_bytes` the count of the
   * rows stored on `shard`, not the file's), the staging removed, the import
   * noted as unrecorded until `settleImport`, with `previous_shard`: the shard the directory names
   * now (null for a tenant new to the deployment), whose copy the recording freezes.
   */
  goLive(
    shard: number,
    s: StagedImport,
    quota: TenantRow,
    previous_shard: number | null,
    now: number,
  ): Promise<'live' | 'moved'>;
  /**
   * Point the directory at `shard`, only if it still names `expected` (the shard the import read;
   * null: the tenant was not in the directory, and is added). One statement decides: `moved` when
   * the directory names another shard (or, for null, holds the tenant already: another import of it
   * was recorded since), `name_taken` when another tenant has the name; nothing written then.
   */
  record(t: {
    readonly tenant_id: string;
    readonly name: string;
    readonly shard: number;
    readonly expected: number | null;
    readonly created_at_unix_ms: number;
    readonly now: number;
  }): Promise<'recorded' | 'name_taken' | 'moved'>;
  // Aborting a staged import (migrations/0013). The mark comes first and is final: from then on
  // every batch of that import (`importChunk`, `keyPrincipals`, `goLive`) answers `moved`.
  /**
   * Mark the tenant's staged import on `shard` `aborting` (also when already marked: resumed);
   * `live` when the tenant has rows there that are not a staged import; `none` when it has none.
   */
  markAbort(shard: number, tenant_id: string, now: number): Promise<'aborting' | 'live' | 'none'>;
  /**
   * Delete at most `max_rows` rows of the aborting import in one batch; `done` once the quota
   * row and the mark went too; `moved` when the import is not aborting (another abort finished).
   */
  abortChunk(
    shard: number,
    tenant_id: string,
    max_rows: number,
  ): Promise<{ readonly deleted: number } | 'done' | 'moved'>;
  // An import live on `shard` whose directory write (`record`) failed (migrations/0013): a retry
  // of the same file re-keys the live principals and records it. Each call after `beginRekey`
  // answers `moved` once a later retry began (only the last retry's keys are kept).
  /**
   * The next attempt at the unrecorded import of `file_sha256`, with the shard the directory
   * named when it went live (`unknown` for an import live before migration 0014), or why there
   * is none.
   */
  beginRekey(
    shard: number,
    tenant_id: string,
    file_sha256: string,
    now: number,
  ): Promise<
    { readonly attempt: number; readonly previous_shard: number | null | 'unknown' } | 'other_file' | 'none'
  >;
  /** The tenant's unrevoked principals on `shard` (roles as stored: canonical JSON text). */
  livePrincipals(
    shard: number,
    tenant_id: string,
  ): Promise<readonly { readonly principal_id: string; readonly name: string; readonly roles: string }[]>;
  /** New key digests for unrevoked principals (one batch, bounded by the caller). */
  rekeyPrincipals(
    shard: number,
    tenant_id: string,
    attempt: number,
    keys: readonly { readonly principal_id: string; readonly key_sha256: string }[],
  ): Promise<'written' | 'moved'>;
  /** The directory points at `shard`: the import is recorded, no more re-keying. */
  settleImport(shard: number, tenant_id: string, attempt: number): Promise<'settled' | 'moved'>;
}

// Export files uploaded in parts (src/services/import-uploads.ts; src/db/import-uploads.ts, R2)

/** An upload's record: open (R2 holds its parts), or completed with the file's digest and size. */
export type UploadRecord =
  | { readonly status: 'open'; readonly r2_upload_id: string; readonly created_at_unix_ms: number }
  | {
      readonly status: 'complete';
      readonly r2_upload_id: string;
      readonly created_at_unix_ms: number;
      /** SHA-256 (hex) of the whole file, as the operator expected it and as it was hashed. */
      readonly sha256: string;
      readonly bytes: number;
      /**
       * The R2 version of the completed object: any write under its key (even of the same bytes
       * again) makes another, and reads refuse it, so every read is of the bytes hashed here.
       */
      readonly version: string;
      /**
       * HMAC of the id, digest, size and version (src/services/import-verification-state.ts
       * `sealRecord`): a record rewritten in the bucket to name other bytes is refused.
       */
      readonly seal: string;
    };

/** What verifying a whole export file found (src/services/tenant-moves.ts `verifySource`). */
export interface VerifiedFile {
  readonly tenant_id: string;
  readonly name: string;
  readonly created_at_unix_ms: number;
  readonly rows_total: number;
  /** The highest `receipt_signatures.seq` of the file (0 without signatures). */
  readonly exported_max_seq: number;
  /** The `principals` rows not revoked (each gets a new key). */
  readonly principals: readonly TenantRow[];
  readonly quota: TenantRow;
}

/** Export files in the bucket, uploaded in numbered parts. */
export interface ImportUploadStore {
  /** Start an R2 multipart upload for `upload_id` and record it open. */
  create(upload_id: string, now: number): Promise<void>;
  record(upload_id: string): Promise<UploadRecord | null>;
  putPart(
    upload_id: string,
    record: UploadRecord,
    part_number: number,
    bytes: Uint8Array,
  ): Promise<{ readonly etag: string }>;
  /**
   * Complete the upload from `parts` (numbered 1..n, in order) and hash the whole file; `refused`
   * when R2 refuses the list (a part missing or too small, an ETag that is not the part's).
   */
  complete(
    upload_id: string,
    record: UploadRecord,
    parts: readonly { readonly part_number: number; readonly etag: string }[],
  ): Promise<
    | { readonly sha256: string; readonly bytes: number; readonly version: string }
    | { readonly refused: string }
  >;
  /** Record the upload completed (its digest checked by the caller). */
  completed(upload_id: string, record: UploadRecord & { readonly status: 'complete' }): Promise<void>;
  /**
   * The completed file's bytes from byte `offset` (0 by default): throws before the first chunk
   * if the object is not `version` (replaced since it was completed); read from the start, after
   * the last chunk if they do not hash to `sha256` (a read from an offset cannot be re-hashed:
   * the version is what pins its bytes).
   */
  read(upload_id: string, sha256: string, version: string, offset?: number): AsyncIterable<Uint8Array>;
  /** The import's verification kept for the upload, sealed (src/services/import-verification-state.ts). */
  verification(upload_id: string): Promise<string | null>;
  keepVerification(upload_id: string, sealed: string): Promise<void>;
  forgetVerification(upload_id: string): Promise<void>;
  /** The key that seals the kept verification (derived from a Worker secret). */
  sealKey(): Promise<CryptoKey>;
  /** The key that seals a completed upload's record (the same secret, another label). */
  recordKey(): Promise<CryptoKey>;
  /** Abort an open upload (R2 drops its parts) or delete a completed file; and its records. */
  remove(upload_id: string, record: UploadRecord): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Orphan blob collection (issue 10; src/services/blob-collection.ts)

/** An object of the `BLOBS` bucket as the collector lists it. */
export interface ListedBlob {
  readonly sha256: string;
  /** When R2 last wrote the object (a create, or a refresh by `BlobStore.put`). */
  readonly uploaded_unix_ms: number;
}

/** A page of a bucket listing: objects in key order; `next` null at the end. */
export interface BlobPage {
  readonly objects: readonly ListedBlob[];
  readonly next: string | null;
}

/**
 * The bucket as the collector sees it. An orphan is first retired (moved aside, still readable:
 * a read of it puts it back), and only deleted (purged) after a further grace period.
 */
export interface BlobSweepPort {
  /** Live objects (`sha256/`) after `start_after` (a digest). */
  list(start_after: string | null, limit: number): Promise<BlobPage>;
  /** Retired objects after `start_after`; `uploaded_unix_ms` is when each was retired. */
  listRetired(start_after: string | null, limit: number): Promise<BlobPage>;
  /** When the live object was last written, or null when it is not there. */
  uploadedAt(sha256: string): Promise<number | null>;
  /** The verified bytes of a live object (throws on a digest mismatch), or null. */
  read(sha256: string): Promise<Uint8Array | null>;
  /** Move a live object aside (copy, then remove). */
  retire(sha256: string): Promise<void>;
  /** Put a retired object back (a row names it after all). */
  restore(sha256: string): Promise<void>;
  /** Delete a retired object for good. */
  purge(sha256: string): Promise<void>;
}

/** One shard's references to blobs. */
export interface BlobRefIndex {
  /** Archives whose lines have not been read into the index yet, at most `limit`. */
  unindexedArchives(limit: number): Promise<readonly string[]>;
  /** Record the evidence objects an archive's lines name, and mark the archive indexed (one batch). */
  indexArchive(archive_sha256: string, evidence: readonly string[]): Promise<void>;
  /**
   * Which of `sha256s` a row of this shard refers to (receipt evidence, archive object, archived
   * evidence), and whether any archive is still unindexed (then nothing may be deleted).
   */
  referenced(
    sha256s: readonly string[],
  ): Promise<{ readonly referenced: ReadonlySet<string>; readonly unindexed: boolean }>;
}

/** Where the collector's two walks (live objects, retired ones) stand (shard 0). */
export interface BlobCursorStore {
  get(): Promise<{ readonly live: string | null; readonly retired: string | null }>;
  set(walk: 'live' | 'retired', start_after: string | null, now: number): Promise<void>;
}
