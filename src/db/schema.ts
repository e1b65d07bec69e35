/**
 * D1 schema (drizzle-orm). Every tenant-owned row carries `tenant_id`, and every lookup a request
 * makes filters on the caller's tenant, so another tenant's rows are simply not found (404).
 *
 * JSON documents (policies, contracts, grants, envelopes, receipts) are stored as their RFC 8785
 * canonical text: the stored bytes hash to the stored digest. Times are Unix milliseconds.
 * Invariants SQLite must hold under concurrency (single use of an approval, run budgets) are
 * triggers in migrations/0001_invariants.sql, so a lost race aborts the whole D1 batch.
 * docs/storage.md describes every table.
 */
import { sql } from 'drizzle-orm';
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';
import { APPROVAL_STATUSES, DEFAULT_QUOTAS, DEFAULT_RECEIPT_RETENTION_DAYS } from '../services/ports.js';

export const tenants = sqliteTable('tenants', {
  tenant_id: text().primaryKey(),
  name: text().notNull().unique(),
  /** The policy in force; every receipt binds it. */
  policy_sha256: text().notNull(),
  created_at_unix_ms: integer().notNull(),
});

/** Every policy a tenant ever had, by digest, so a receipt's policy can always be read back. */
export const policies = sqliteTable(
  'policies',
  {
    tenant_id: text().notNull(),
    policy_sha256: text().notNull(),
    document: text().notNull(),
    created_at_unix_ms: integer().notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.policy_sha256] })],
);

export const principals = sqliteTable(
  'principals',
  {
    principal_id: text().primaryKey(),
    tenant_id: text().notNull(),
    name: text().notNull(),
    /** JSON array of roles, sorted. */
    roles: text().notNull(),
    executor_release: text(),
    /** SHA-256 (hex) of the API key; the key itself is never stored. */
    key_sha256: text().notNull().unique(),
    created_by: text(),
    created_at_unix_ms: integer().notNull(),
    revoked_at_unix_ms: integer(),
  },
  (t) => [index('principals_tenant').on(t.tenant_id, t.principal_id)],
);

export const contracts = sqliteTable(
  'contracts',
  {
    tenant_id: text().notNull(),
    tool_contract_sha256: text().notNull(),
    document: text().notNull(),
    tool_name: text().notNull(),
    effect: text().notNull(),
    pinned_by: text().notNull(),
    pinned_at_unix_ms: integer().notNull(),
    quarantined_at_unix_ms: integer(),
    quarantine_reason: text(),
  },
  (t) => [
    primaryKey({ columns: [t.tenant_id, t.tool_contract_sha256] }),
    // A door binds a tool name to its pins, oldest first (migration 0012).
    index('contracts_tool_name').on(t.tenant_id, t.tool_name, t.pinned_at_unix_ms, t.tool_contract_sha256),
    // GET /v1/metrics counts a tenant's quarantined contracts without walking its pins (0015).
    index('contracts_quarantined')
      .on(t.tenant_id, t.quarantined_at_unix_ms)
      .where(sql`${t.quarantined_at_unix_ms} IS NOT NULL`),
  ],
);

export const grants = sqliteTable(
  'grants',
  {
    grant_id: text().primaryKey(),
    tenant_id: text().notNull(),
    principal_id: text().notNull(),
    grant_sha256: text().notNull(),
    /** The canonical `ToolGrant`; immutable. Revocation is the separate column below. */
    document: text().notNull(),
    created_by: text().notNull(),
    created_at_unix_ms: integer().notNull(),
    revoked_at_unix_ms: integer(),
  },
  (t) => [
    index('grants_principal').on(t.tenant_id, t.principal_id, t.grant_id),
    // Every live grant of a principal, however many were revoked before it (decision input).
    index('grants_live')
      .on(t.tenant_id, t.principal_id, t.grant_id)
      .where(sql`${t.revoked_at_unix_ms} IS NULL`),
    // Receipt replay and dispatch load a grant by the digest the receipt binds.
    index('grants_digest').on(t.tenant_id, t.grant_sha256),
  ],
);

export const approvals = sqliteTable(
  'approvals',
  {
    approval_id: text().primaryKey(),
    tenant_id: text().notNull(),
    requester_principal_id: text().notNull(),
    policy_sha256: text().notNull(),
    tool_contract_sha256: text().notNull(),
    input_sha256: text().notNull(),
    input_bytes: integer().notNull(),
    /** Canonical input, shown to the approver: the exact bytes the executor will consume. */
    input: text().notNull(),
    /** Canonical target derived from the input by the contract. */
    target: text().notNull(),
    effect: text().notNull(),
    status: text({ enum: APPROVAL_STATUSES }).notNull(),
    created_at_unix_ms: integer().notNull(),
    decided_by: text(),
    decided_at_unix_ms: integer(),
    expires_at_unix_ms: integer(),
    decision_reason: text(),
    consumed_at_unix_ms: integer(),
    consumed_by_receipt_sha256: text(),
    // 0007 (issue 14): the first of two approvals of an `irreversible` request, and the agent's
    // idempotency key for the call it asks approval for.
    first_approved_by: text(),
    first_approved_at_unix_ms: integer(),
    first_approval_lifetime_ms: integer(),
    idempotency_key: text(),
  },
  (t) => [
    index('approvals_status').on(t.tenant_id, t.status, t.created_at_unix_ms),
    // The console's history, newest decision first, across outcomes or of one (migrations/0009).
    index('approvals_decided')
      .on(t.tenant_id, t.decided_at_unix_ms, t.approval_id)
      .where(sql`${t.decided_at_unix_ms} IS NOT NULL`),
    index('approvals_status_decided')
      .on(t.tenant_id, t.status, t.decided_at_unix_ms, t.approval_id)
      .where(sql`${t.decided_at_unix_ms} IS NOT NULL`),
  ],
);

export const runs = sqliteTable(
  'runs',
  {
    run_id: text().primaryKey(),
    tenant_id: text().notNull(),
    principal_id: text().notNull(),
    run_envelope_sha256: text().notNull(),
    envelope: text().notNull(),
    max_calls: integer().notNull(),
    max_external_writes: integer().notNull(),
    deadline_unix_ms: integer().notNull(),
    calls_used: integer().notNull().default(0),
    writes_used: integer().notNull().default(0),
    created_at_unix_ms: integer().notNull(),
  },
  (t) => [
    index('runs_tenant').on(t.tenant_id, t.run_id),
    // Open runs (deadline not passed) are counted against the tenant's quota.
    index('runs_open').on(t.tenant_id, t.deadline_unix_ms),
    // A principal's open runs are counted in the insert that opens one (migrations/0008).
    index('runs_principal_open').on(t.tenant_id, t.principal_id, t.deadline_unix_ms),
  ],
);

/** Every receipt kind (authorization, execution, reconciliation, ...), by content digest. */
export const receipts = sqliteTable(
  'receipts',
  {
    tenant_id: text().notNull(),
    sha256: text().notNull(),
    kind: text().notNull(),
    /** Canonical `{ sha256, body }`; `sha256` is digestOf(body). */
    receipt: text().notNull(),
    /** Canonical inputs the receipt was computed from, for independent replay (no raw input). */
    evidence: text(),
    /** `authorized` / `denied` for authorizations, the status for execution receipts. */
    outcome: text().notNull(),
    principal_id: text(),
    created_at_unix_ms: integer().notNull(),
    /** Observation receipts: the observation id and the raw observation's digest (indexed lookup). */
    observation_id: text(),
    observation_raw_sha256: text(),
    /**
     * The observation id this receipt holds: set on the first receipt recorded for an id (accepted
     * or rejected), null on a receipt rejected for `observation_id_conflict`. Unique per tenant and
     * kind, so of two different observations racing for one id exactly one is stored as its holder.
     */
    observation_claim: text(),
    // -- Bounded D1 (migrations/0004) --
    /**
     * 1: `receipt` is canonical `{sha256, body}`; 2: the body less `tenant_id`/`principal_id`; 3: an
     * authorization body as a positional array, less those and `receipt_kind` (src/db/receipts.ts).
     */
    receipt_encoding: integer().notNull().default(1),
    /** Evidence held in R2 (`sha256/<hex>`) instead of `evidence`: its digest and size. */
    evidence_sha256: text(),
    evidence_bytes: integer(),
  },
  (t) => [
    primaryKey({ columns: [t.tenant_id, t.sha256] }),
    index('receipts_kind').on(t.tenant_id, t.kind, t.created_at_unix_ms),
    // Retention: a tenant's oldest receipts of any kind (migrations/0004).
    index('receipts_created').on(t.tenant_id, t.created_at_unix_ms),
    uniqueIndex('receipts_observation_claim')
      .on(t.tenant_id, t.kind, t.observation_claim)
      .where(sql`${t.observation_claim} IS NOT NULL`),
    uniqueIndex('receipts_observation_raw')
      .on(t.tenant_id, t.kind, t.observation_id, t.observation_raw_sha256)
      .where(sql`${t.observation_id} IS NOT NULL`),
  ],
);

/** A tenant's storage quotas (set by the platform admin) and its usage against them. */
export const tenantQuotas = sqliteTable('tenant_quotas', {
  tenant_id: text().primaryKey(),
  max_stored_bytes: integer().notNull().default(DEFAULT_QUOTAS.max_stored_bytes),
  max_receipts_per_day: integer().notNull().default(DEFAULT_QUOTAS.max_receipts_per_day),
  max_open_approvals: integer().notNull().default(DEFAULT_QUOTAS.max_open_approvals),
  max_open_runs: integer().notNull().default(DEFAULT_QUOTAS.max_open_runs),
  /** Document bytes stored for the tenant, kept by triggers on every counted insert. */
  stored_bytes: integer().notNull().default(0),
  /** UTC day (`created_at_unix_ms / 86400000`) that `receipts_today` counts. */
  receipts_day: integer().notNull().default(0),
  receipts_today: integer().notNull().default(0),
  updated_at_unix_ms: integer().notNull(),
  /** Days a receipt stays in D1 before it moves to an R2 archive (migrations/0004). */
  receipt_retention_days: integer().notNull().default(DEFAULT_RECEIPT_RETENTION_DAYS),
});

// -- Retention (migrations/0004): receipts that left D1 for R2 archives -----------------------

/** One archive object in R2 (`sha256/<archive_sha256>`): canonical JSON lines of one tenant's day. */
export const receiptArchives = sqliteTable(
  'receipt_archives',
  {
    tenant_id: text().notNull(),
    archive_sha256: text().notNull(),
    /** UTC day number (`created_at_unix_ms / 86400000`) of every receipt in it. */
    day: integer().notNull(),
    receipts: integer().notNull(),
    bytes: integer().notNull(),
    created_at_unix_ms: integer().notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenant_id, t.archive_sha256] }),
    index('receipt_archives_day').on(t.tenant_id, t.day),
  ],
);

/** Which archive holds an archived receipt; its presence is what lets the receipt row be deleted. */
export const receiptArchiveEntries = sqliteTable(
  'receipt_archive_entries',
  {
    tenant_id: text().notNull(),
    sha256: text().notNull(),
    archive_sha256: text().notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.sha256] })],
);

/** Index of idempotency operations (the Durable Object is the source of truth; it mirrors here). */
export const operations = sqliteTable(
  'operations',
  {
    operation_id: text().primaryKey(),
    tenant_id: text().notNull(),
    tool_contract_sha256: text().notNull(),
    idempotency_key: text().notNull(),
    input_sha256: text().notNull(),
    state: text().notNull(),
    authorization_receipt_sha256: text().notNull(),
    execution_receipt_sha256: text(),
    reconciliation_owner: text(),
    reconciliation_deadline_unix_ms: integer(),
    escalated_at_unix_ms: integer(),
    updated_at_unix_ms: integer().notNull(),
    /** The receipt that settled the operation, if reconciled (migrations/0009). */
    reconciliation_receipt_sha256: text(),
  },
  (t) => [
    uniqueIndex('operations_key').on(t.tenant_id, t.tool_contract_sha256, t.idempotency_key),
    index('operations_deadline')
      .on(t.tenant_id, t.state, t.reconciliation_deadline_unix_ms)
      .where(sql`${t.escalated_at_unix_ms} IS NULL`),
    // Pages of `GET /v1/operations`, newest first, with or without a state (migrations/0008).
    index('operations_recent').on(t.tenant_id, t.updated_at_unix_ms, t.operation_id),
    index('operations_state_recent').on(t.tenant_id, t.state, t.updated_at_unix_ms, t.operation_id),
    // The console's history finds the operation an approval's authorization was claimed as (0009).
    index('operations_authorization').on(t.tenant_id, t.authorization_receipt_sha256, t.operation_id),
    // An approval's `same_input_attempts`: the open operations of one input digest, newest first
    // (migrations/0017). Only open rows are in it, so it stays as small as the tenant's open work;
    // the literal states must match `OPEN_OPERATION_STATES` and the query's text (SQLite uses a
    // partial index only when the query's WHERE contains the index's WHERE term as written).
    index('operations_open_input')
      .on(t.tenant_id, t.input_sha256, t.updated_at_unix_ms, t.operation_id)
      .where(sql`${t.state} IN ('pending', 'reconciliation_required', 'escalated')`),
  ],
);

// ---------------------------------------------------------------------------------------------
// Signed webhooks for executors (migrations/0006_webhooks.sql)

/** Per-executor Standard Webhooks signing secrets; several verify during a rotation. */
export const webhookSecrets = sqliteTable(
  'webhook_secrets',
  {
    tenant_id: text().notNull(),
    principal_id: text().notNull(),
    secret_id: text().notNull(),
    /** The `whsec_...` secret itself: an HMAC key cannot be verified from a digest (SECURITY.md). */
    secret: text().notNull(),
    created_by: text().notNull(),
    created_at_unix_ms: integer().notNull(),
    /** Null: verifies until the next rotation dates it. */
    expires_at_unix_ms: integer(),
  },
  (t) => [primaryKey({ columns: [t.tenant_id, t.principal_id, t.secret_id] })],
);

/** Delivered `webhook-id`s and the answer each got (de-duplication; retries get the same answer). */
export const webhookDeliveries = sqliteTable(
  'webhook_deliveries',
  {
    tenant_id: text().notNull(),
    principal_id: text().notNull(),
    webhook_id: text().notNull(),
    route: text().notNull(),
    body_sha256: text().notNull(),
    received_at_unix_ms: integer().notNull(),
    /** Null while the first delivery is being processed. */
    status: integer(),
    response: text(),
  },
  (t) => [
    primaryKey({ columns: [t.tenant_id, t.principal_id, t.webhook_id] }),
    index('webhook_deliveries_received').on(t.tenant_id, t.received_at_unix_ms),
  ],
);

// ---------------------------------------------------------------------------------------------
// Shards (migrations/0003_tenant_shards.sql)

/**
 * The shard directory, kept on shard 0: which D1 shard holds each tenant. Platform-admin
 * operations read it (placement, quotas, moves); authentication does not (a key names its shard).
 */
export const tenantShards = sqliteTable(
  'tenant_shards',
  {
    tenant_id: text().primaryKey(),
    name: text().notNull(),
    shard: integer().notNull(),
    created_at_unix_ms: integer().notNull(),
    updated_at_unix_ms: integer().notNull(),
  },
  (t) => [uniqueIndex('tenant_shards_name_unique').on(t.name), index('tenant_shards_shard').on(t.shard)],
);

/**
 * Issue 11 (migrations/0005): each receipt's signature envelope, written in the receipt's own batch;
 * `seq` is the order the tenant's transparency log takes them in (AUTOINCREMENT: never reused).
 * Its bytes count toward the tenant's `stored_bytes` (migrations/0010 and 0016 triggers).
 */
export const receiptSignatures = sqliteTable(
  'receipt_signatures',
  {
    seq: integer().primaryKey({ autoIncrement: true }),
    tenant_id: text().notNull(),
    receipt_sha256: text().notNull(),
    /**
     * The signature envelope: its RFC 8785 canonical JSON (the log leaf's bytes), or since
     * migration 0016 its positional form; read only through src/db/signature-rows.ts.
     */
    envelope: text().notNull(),
    created_at_unix_ms: integer().notNull(),
  },
  (t) => [
    uniqueIndex('receipt_signatures_receipt').on(t.tenant_id, t.receipt_sha256),
    index('receipt_signatures_drain').on(t.tenant_id, t.seq),
  ],
);

// ---------------------------------------------------------------------------------------------
// Issue 10 (migrations/0011): imports larger than one D1 batch, staged until a last batch

/** One import in progress on this shard; while it exists the tenant is staged, not live. */
export const tenantImports = sqliteTable('tenant_imports', {
  tenant_id: text().primaryKey(),
  /** SHA-256 (hex) of the export file: only a retry of the same file resumes the import. */
  file_sha256: text().notNull(),
  rows_total: integer().notNull(),
  /** The export's lines written so far (chunks commit with it, all or nothing). */
  rows_done: integer().notNull().default(0),
  started_at_unix_ms: integer().notNull(),
  updated_at_unix_ms: integer().notNull(),
  /** `staged`, or `aborting` once an abort began: final, no batch of the import commits (0013). */
  state: text().notNull().default('staged'),
});

/**
 * A staged tenant's principals (the columns of `principals`): copied into `principals` by the
 * import's last batch, so no key authenticates before it. `key_sha256` is null until keyed.
 */
export const tenantImportPrincipals = sqliteTable(
  'tenant_import_principals',
  {
    principal_id: text().primaryKey(),
    tenant_id: text().notNull(),
    name: text().notNull(),
    roles: text().notNull(),
    executor_release: text(),
    key_sha256: text(),
    created_by: text(),
    created_at_unix_ms: integer().notNull(),
    revoked_at_unix_ms: integer(),
  },
  (t) => [index('tenant_import_principals_tenant').on(t.tenant_id)],
);

/** Never holds a row: a trigger aborts any insert (the chunk guard, migrations/0011). */
export const tenantImportGuard = sqliteTable('tenant_import_guard', {
  tenant_id: text().notNull(),
});

/**
 * An import that went live on this shard whose directory write is not confirmed yet (0013): a
 * retry of the same file may re-key the tenant's live principals while it exists; `attempt`
 * orders concurrent retries (only the last one's keys are kept). `previous_shard` (0014) is the
 * shard the directory named when the import went live, whose copy the recording freezes: NULL for
 * a tenant new to the deployment, `-1` (`PREVIOUS_SHARD_UNKNOWN`) for a row from before 0014.
 */
export const tenantImportsUnrecorded = sqliteTable('tenant_imports_unrecorded', {
  tenant_id: text().primaryKey(),
  file_sha256: text().notNull(),
  attempt: integer().notNull().default(0),
  live_at_unix_ms: integer().notNull(),
  updated_at_unix_ms: integer().notNull(),
  previous_shard: integer().default(-1),
});

/** `tenant_imports_unrecorded.previous_shard` of a row written before migration 0014. */
export const PREVIOUS_SHARD_UNKNOWN = -1;

// ---------------------------------------------------------------------------------------------
// Issue 10 (migrations/0011): what the orphan blob collector knows about references

/** An archived receipt's evidence object, named by a line of the archive object (read once). */
export const blobArchiveRefs = sqliteTable(
  'blob_archive_refs',
  {
    evidence_sha256: text().notNull(),
    archive_sha256: text().notNull(),
  },
  (t) => [primaryKey({ columns: [t.evidence_sha256, t.archive_sha256] })],
);

/** Archives whose lines the collector has not read yet (a trigger adds every new archive). */
export const blobArchivesUnindexed = sqliteTable('blob_archives_unindexed', {
  archive_sha256: text().primaryKey(),
});

/** The collector's place in the bucket (one row, id 0, on shard 0). */
export const blobCollection = sqliteTable('blob_collection', {
  id: integer().primaryKey(),
  start_after: text(),
  retired_after: text(),
  updated_at_unix_ms: integer().notNull(),
});
