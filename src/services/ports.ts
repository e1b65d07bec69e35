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
import type { ToolContract, ToolGrant } from '../core/model.js';
import type { TenantPolicy } from '../core/policy.js';
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

/** A stored observation receipt found by its id (the holder of the id, or the same content). */
export interface ObservationRecord {
  readonly sha256: string;
  readonly raw_observation_sha256: string;
  /** True for the receipt that holds the id (not a rejected `observation_id_conflict`). */
  readonly holds_id: boolean;
  /** Canonical evidence text the receipt was computed from. */
  readonly evidence: string;
}

/** Why a commit lost its race: the invariant trigger that aborted it. */
export type LostRace =
  | 'approval_unusable'
  | 'approval_not_pending'
  | 'run_budget_spent'
  | 'contract_quarantined'
  | 'grant_revoked'
  | 'principal_revoked';

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
  insertRun(r: Omit<RunRow, 'calls_used' | 'writes_used'>): Promise<void>;
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

  // Authorization
  /** Everything `decideAuthorization` needs, read in one round trip. */
  loadAuthorizationState(principal_id: string, request: AuthorizeRequest): Promise<AuthorizationState>;
  /**
   * Store the receipt and, for an authorization, apply its effects under its guards, atomically;
   * a guard or invariant that fails aborts everything and reports the lost race.
   */
  commitAuthorization(
    decision: AuthorizationDecision,
    principal_id: string,
    now: number,
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
  /** One page of operations, most recently updated first (`updated_at_unix_ms`, then id). */
  listOperations(q: OperationListFilter): Promise<readonly OperationRow[]>;

  // Tools (search doors: AuthZEN action search, MCP tool resolution and listing)
  /** Every grant of the principal, revoked ones included, by grant_id. */
  grantsOf(principal_id: string): Promise<readonly GrantRecord[]>;
  /** The pinned contracts whose tool is `tool_name`, quarantined ones included. */
  contractsForTool(tool_name: string): Promise<readonly PinnedContract[]>;
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

  // Receipt signatures and the transparency log (issue 11)
  /** The signature envelope stored with the receipt, or null. */
  receiptSignature(sha256: string): Promise<SignatureRow | null>;
  /** Signature rows after `after_seq`, in `seq` order (the log sequencer's drain). */
  signaturesAfter(after_seq: number, limit: number): Promise<readonly SignatureRow[]>;
}

/** Storage that is not one tenant's: key lookup and tenant creation. */
export interface PlatformStore {
  principalByKeyDigest(key_sha256: string): Promise<(PrincipalRow & { readonly key_sha256: string }) | null>;
  tenantNameTaken(name: string): Promise<boolean>;
  /** `name_taken` when a concurrent creation of the same name won. */
  createTenant(t: {
    readonly tenant_id: string;
    readonly name: string;
    readonly policy: TenantPolicy;
    readonly policy_sha256: string;
    readonly admin: NewPrincipal;
    readonly now: number;
  }): Promise<'created' | 'name_taken'>;
  /** Set a tenant's quotas; false when the tenant does not exist. */
  setQuotas(tenant_id: string, quotas: Quotas, now: number): Promise<boolean>;
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
}

/**
 * Per-principal write limits. `now` is the request's one clock read; the limit itself is the
 * deployment's configuration, which the adapter holds. Throws when the limiter cannot answer.
 */
export interface RateLimitPort {
  take(tenant_id: string, principal_id: string, now: number): Promise<RateLimitDecision>;
}
