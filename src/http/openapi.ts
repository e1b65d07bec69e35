/**
 * The OpenAPI 3.1 document of every `/v1` route, generated from the same zod schemas the routes
 * parse bodies and queries with (src/services/*, src/core/*) and the response schemas below,
 * with every error a route can answer, from the one error mapping (`wireError`).
 *
 * Guarantees: request bodies and queries are documented from the exact schemas the routes hand
 * to `readJson` / `safeParse` (strict decoding stays Writ's own: no library parses a body); the
 * document is deterministic (a committed snapshot, docs/openapi.json, is compared in the tests);
 * a route the app registers but this table lacks fails a test (wildcard routes included, their `*`
 * documented as a rest-of-path parameter); a status that is both an answer and an error (a 403
 * denial with its receipt beside a 403 `forbidden_role`) is documented as either, with its codes.
 * The response schemas are strict, and test/integration/http/openapi-contract.test.ts checks real
 * answers of a full flow against them (`documentedResponses`).
 */
import { z } from 'zod';
import { AuthorizeRequest } from '../core/authorization/decide.js';
import { DiscoverySnapshot } from '../core/contracts/discovery.js';
import { OperationStatus } from '../core/execution/idempotency.js';
import { ReconciliationReceipt } from '../core/execution/reconciliation.js';
import { Role } from '../core/identity/identity.js';
import {
  AuthorizationReceipt,
  ExecutionReceipt,
  ResourceRef,
  ToolApproval,
  ToolContract,
  ToolEffect,
  ToolGrant,
} from '../core/model.js';
import {
  CLASSIFIER_UNAVAILABLE_REASONS,
  ObservationReceipt,
  ToolEvidenceCandidate,
} from '../core/observation/schema.js';
import { TenantPolicy } from '../core/policy.js';
import { Identifier, Label, Sha256, UnixMs } from '../core/schema.js';
import {
  APPROVAL_VIEW_STATUSES,
  ApprovalListQuery,
  ApproveRequest,
  CreateApprovalRequest,
  DenyRequest,
} from '../services/approvals.js';
import {
  CreateGrantRequest,
  CreatePrincipalRequest,
  CreateTenantRequest,
  EmptyRequest,
  SetQuotasRequest,
} from '../services/admin.js';
import { QuarantineRequest } from '../services/contracts.js';
import { TenantExportRequest } from '../services/tenant-moves.js';
import { CompleteUploadRequest } from '../services/import-uploads.js';
import { ROLES_FOR } from '../services/context.js';
import type { ErrorReason } from '../services/errors.js';
import { ClaimBody, OperationListQuery, ReconcileBody, ReportBody } from '../services/executions.js';
import { ObservationBody } from '../services/observations.js';
import { CreateRunRequest } from '../services/runs.js';
import { RotateWebhookSecretRequest } from '../services/webhooks.js';
import { SetPublicationRequest, SetWitnessesRequest } from '../services/log.js';
import { MetricsQuery } from '../services/metrics.js';
import { ReceiptBundle } from '../verify/bundle.js';
import { wireError } from './errors.js';

// ---------------------------------------------------------------------------------------------
// Response schemas (documentation of what the services return)

// Issue 11: log answers (src/services/log.ts).
const InclusionProofView = z.strictObject({
  receipt_sha256: Sha256,
  index: z.number().int().describe('the receipt’s leaf index: its sequence in the tenant’s log'),
  tree_size: z.number().int(),
  proof: z.string().describe('C2SP tlog-proof text, the signed checkpoint at its end'),
});
const ConsistencyQuery = z.strictObject({
  from: z.string().describe('older tree size (decimal)'),
  to: z.string().describe('newer tree size (decimal), at most the current size'),
});
const ConsistencyView = z.strictObject({
  from: z.number().int(),
  to: z.number().int(),
  tree_size: z.number().int(),
  proof: z.array(z.string()).describe('RFC 9162 §2.1.4 consistency proof, base64 hashes'),
});

const PublicationView = z.strictObject({
  published: z.boolean().describe('whether /log/<tenant_id>/ serves the log without a key'),
  origin: z.string().describe('the checkpoint origin and note key name: <issuer>/log/<tenant_id>'),
  prefix_path: z.string().describe('the C2SP tlog-tiles URL prefix’s path on this host'),
  verifier_keys: z
    .array(
      z.strictObject({
        key_id: z.string(),
        vkey: z.string().describe('C2SP signed-note verifier key: <origin>+<key ID>+<base64(0x01 || key)>'),
        signing_until_unix_ms: UnixMs.nullable().describe(
          'when the key stopped signing; null while it signs. A witness checking new checkpoints trusts only keys that still sign',
        ),
      }),
    )
    .describe('one per key of /.well-known/writ-keys'),
  events: z
    .array(z.strictObject({ published: z.boolean(), principal_id: Identifier, at_unix_ms: UnixMs }))
    .describe('the latest publication changes, newest first'),
});

const WitnessesView = z.strictObject({
  witnesses: z.array(
    z.strictObject({
      name: z.string(),
      key_id: z.string(),
      vkey: z.string().describe('C2SP cosignature/v1 verifier key: <name>+<key ID>+<base64(0x04 || key)>'),
      url: z.string().describe('the submission prefix; checkpoints are posted to <url>/add-checkpoint'),
      cosigned_size: z
        .number()
        .int()
        .nullable()
        .describe('the largest tree size it is known to have cosigned'),
      failures: z.number().int().describe('failed submissions in a row'),
      last_attempt_unix_ms: UnixMs.nullable(),
      last_outcome: z
        .string()
        .nullable()
        .describe('cosigned, an HTTP status, network, invalid_answer, witness_ahead, or null before any'),
      last_error: z.string().nullable(),
      retry_after_unix_ms: UnixMs.nullable().describe('after failures: when the next submission may be made'),
    }),
  ),
  changed_by: Identifier.nullable(),
  changed_at_unix_ms: UnixMs.nullable(),
});

const Json = z.unknown().describe('any JSON value');

/** Every error answer's body (src/http/errors.ts `errorBody`). */
export const ErrorBody = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    issues: z.array(z.strictObject({ path: z.string(), message: z.string() })),
    request_id: z.string(),
  }),
});

const PrincipalView = z.strictObject({
  principal_id: Identifier,
  tenant_id: Identifier,
  name: Label,
  roles: z.array(Role),
  executor_release: Label.nullable(),
  created_at_unix_ms: UnixMs,
  revoked_at_unix_ms: UnixMs.nullable(),
});
const NewPrincipal = PrincipalView.extend({ api_key: z.string().describe('shown once') });

const ContractView = z.strictObject({
  tool_contract_sha256: Sha256,
  contract: ToolContract,
  pinned_by: Identifier,
  pinned_at_unix_ms: UnixMs,
  quarantined: z.boolean(),
  quarantined_at_unix_ms: UnixMs.nullable(),
  quarantine_reason: z.string().nullable(),
});

const GrantView = z.strictObject({
  grant_id: Identifier,
  grant_sha256: Sha256,
  grant: ToolGrant,
  created_at_unix_ms: UnixMs.optional(),
  revoked_at_unix_ms: UnixMs.nullable(),
});

const PolicyInForce = z.strictObject({ policy_sha256: Sha256, policy: TenantPolicy });

/** A bidi control or invisible character in what an approver reads (src/core/text.ts). */
const TextWarning = z.strictObject({
  path: z.string().describe('JSON Pointer of the string, or of the key, that holds the characters'),
  kind: z.enum(['bidi_control', 'invisible']),
  codepoints: z.array(z.string()).describe('U+XXXX, unique, in order of code point'),
});

const ApprovalView = z.strictObject({
  approval_id: Identifier,
  status: z
    .enum(APPROVAL_VIEW_STATUSES)
    .describe('`expired`: pending past the policy’s approval_request_ttl_ms (derived at read, never stored)'),
  request_expires_at_unix_ms: UnixMs.nullable().describe(
    'when a pending request expires undecided; null once decided',
  ),
  tenant_id: Identifier,
  requester_principal_id: Identifier,
  policy_sha256: Sha256,
  tool_contract_sha256: Sha256,
  input_sha256: Sha256,
  input_bytes: z.number().int(),
  effect: ToolEffect,
  target: ResourceRef,
  input: Json.describe('the exact canonical input the approver approves and the executor will consume'),
  preview: z
    .strictObject({
      warnings: z
        .array(TextWarning)
        .describe(
          'bidi controls and invisible characters in what is shown (input, target, releases, reason)',
        ),
      warnings_omitted: z.number().int().describe('warnings beyond the 32 listed'),
      tool_name: Identifier,
      contract_release: Label,
      executor_release: Label,
      effect: ToolEffect,
      reversible: z.boolean(),
      required_capabilities: z.array(z.string()),
      target: ResourceRef,
    })
    .nullable(),
  created_at_unix_ms: UnixMs,
  decided_by: Identifier.nullable(),
  decided_at_unix_ms: UnixMs.nullable(),
  expires_at_unix_ms: UnixMs.nullable(),
  decision_reason: z.string().nullable(),
  consumed_at_unix_ms: UnixMs.nullable(),
  consumed_by_receipt_sha256: Sha256.nullable(),
  // Issue 14: a second, distinct approver for `irreversible` effects; the agent's idempotency key.
  approvals_required: z.union([z.literal(1), z.literal(2)]),
  first_approved_by: Identifier.nullable(),
  first_approved_at_unix_ms: UnixMs.nullable(),
  idempotency_key: z.string().nullable(),
  earlier_attempt: z
    .strictObject({
      operation_id: Identifier,
      status: z.string(),
      tool_contract_sha256: Sha256,
      input_sha256: Sha256,
      reconciliation_deadline_unix_ms: UnixMs.nullable(),
      escalated_at_unix_ms: UnixMs.nullable(),
    })
    .nullable()
    .optional()
    .describe('single-request reads only: an unresolved attempt of the same tool and idempotency key'),
  same_input_attempts: z
    .array(
      z.strictObject({
        operation_id: Identifier,
        status: z.string(),
        tool_contract_sha256: Sha256,
        idempotency_key: z.string(),
        reconciliation_deadline_unix_ms: UnixMs.nullable(),
        escalated_at_unix_ms: UnixMs.nullable(),
        updated_at_unix_ms: UnixMs,
      }),
    )
    .max(5)
    .optional()
    .describe(
      'single-request reads by an approver or tenant admin only (absent for the requesting agent): open operations (pending, reconciliation_required, escalated) of the same tool and input digest under any idempotency key, newest first, at most 5, earlier_attempt left out',
    ),
  approval: ToolApproval.nullable(),
});

/** Every list's paging (src/services/pagination.ts). */
const NextCursor = z
  .string()
  .nullable()
  .describe('pass as `cursor` for the next page; null on the last page');

const Counts = z.record(z.string(), z.number().int());
const MetricsView = z.strictObject({
  tenant_id: Identifier,
  at_unix_ms: UnixMs,
  window: z.strictObject({ from_unix_ms: UnixMs, to_unix_ms: UnixMs, window_ms: z.number().int() }),
  receipts: z.strictObject({
    by_kind: z.record(z.string(), Counts).describe('receipts created in the window: kind → outcome → count'),
    complete: z.boolean().describe('false: the count stopped at the newest 100,001 receipts of the window'),
  }),
  denials: z.strictObject({
    by_violation: z.array(z.strictObject({ code: z.string(), n: z.number().int() })),
    receipts_read: z.number().int(),
    complete: z.boolean().describe('false: only the newest 1,000 denials were read'),
  }),
  approvals: z.strictObject({
    requested: Counts.describe(
      'requests created in the window by status now; expired ones also count as pending',
    ),
    decided: Counts.describe('requests decided in the window by status now (consumed: approved, then used)'),
    complete: z.boolean(),
  }),
  operations: z.strictObject({
    open: Counts.describe('now: pending, reconciliation_required, escalated'),
    oldest_open_updated_at_unix_ms: UnixMs.nullable(),
    oldest_open_age_ms: z.number().int().nullable(),
    overdue_reconciliations: z.number().int(),
    complete: z.boolean(),
  }),
  contracts: z.strictObject({ quarantined: z.number().int(), complete: z.boolean() }),
  rate_limited: z
    .strictObject({
      total: z.number().int(),
      limited_by: z.strictObject({ principal: z.number().int(), tenant: z.number().int() }),
      by_principal: z
        .array(z.strictObject({ principal_id: z.string(), n: z.number().int() }))
        .describe('most refused first, at most 20; `*` counts principals beyond 100 named in one minute'),
      principals_left_out: z.number().int(),
      from_minute_unix_ms: UnixMs.describe('the counts cover whole minutes, from this one to now'),
    })
    .describe('writes refused 429 rate_limited (they store no receipt), counted by the tenant’s limiter'),
});

const RunView = z.strictObject({
  run_id: Identifier,
  run_envelope_sha256: Sha256,
  envelope: Json,
  calls_used: z.number().int(),
  writes_used: z.number().int(),
});

const Decision = z.strictObject({
  decision: z.enum(['authorized', 'denied']),
  violations: z.array(z.string()),
  receipt: AuthorizationReceipt,
});

const OperationSnapshot = z.strictObject({
  operation: z.record(z.string(), Json).describe('the operation state (never its fencing nonce)'),
  execution_receipt: ExecutionReceipt.nullable(),
  reconciliation_receipt: ReconciliationReceipt.nullable(),
});

const ClaimAnswer = z.union([
  z.strictObject({
    status: z.literal('proceed'),
    operation_id: Sha256,
    fencing_token: z.string(),
    lease_expires_at_unix_ms: UnixMs,
    operation: z.record(z.string(), Json),
  }),
  OperationSnapshot.extend({ status: z.literal('replayed'), operation_id: Sha256 }),
]);

const ReportAnswer = OperationSnapshot.extend({ status: z.string(), violations: z.array(z.string()) });
const ReconcileAnswer = OperationSnapshot.extend({ status: z.string() });

const ObservationAnswer = z.strictObject({
  decision: z.string(),
  violations: z.array(z.string()),
  receipt: ObservationReceipt,
  candidate: ToolEvidenceCandidate.nullable()
    .optional()
    .describe('an output observation’s evidence candidate; null when rejected or withheld'),
  evidence: Json.optional().describe('an error observation’s diagnostic evidence; null when rejected'),
  // Hardening (issue 15): a configured classifier that gave no verdict (it changed nothing).
  notes: z
    .array(
      z.strictObject({
        code: z.literal('classifier_unavailable'),
        model: z.string(),
        reason: z.enum(CLASSIFIER_UNAVAILABLE_REASONS),
      }),
    )
    .optional(),
});

const ReceiptView = z.strictObject({
  kind: z.string(),
  outcome: z.string(),
  receipt: z.strictObject({ sha256: Sha256, body: z.record(z.string(), Json) }),
  evidence: Json,
  created_at_unix_ms: UnixMs,
  replay: z.strictObject({ ok: z.boolean(), differences: z.array(z.string()) }).nullable(),
});

const OperationRowView = z.strictObject({
  operation_id: Sha256,
  status: OperationStatus,
  tool_contract_sha256: Sha256,
  idempotency_key: z.string().nullable(),
  input_sha256: Sha256,
  authorization_receipt_sha256: Sha256,
  execution_receipt_sha256: Sha256.nullable(),
  reconciliation_owner: z.string().nullable(),
  reconciliation_deadline_unix_ms: UnixMs.nullable(),
  escalated_at_unix_ms: UnixMs.nullable(),
  updated_at_unix_ms: UnixMs,
});

const DiscoveryReport = z
  .record(z.string(), Json)
  .describe(
    'per-tool status (matches_reviewed, matches_quarantined, drifted, unreviewed, not_advertised), changed fields, what widened, and the digests quarantined',
  );

const Quotas = SetQuotasRequest;
const UsedOf = z.strictObject({ used: z.number().int(), limit: z.number().int() });
const Usage = z.strictObject({
  tenant_id: Identifier,
  at_unix_ms: UnixMs,
  stored_bytes: UsedOf.describe('bytes stored against max_stored_bytes'),
  receipts_per_day: UsedOf.describe('receipts issued today (UTC) against max_receipts_per_day'),
  open_approvals: UsedOf.describe('pending approval requests against max_open_approvals'),
  open_runs: UsedOf.describe('open runs against max_open_runs'),
});

const WebhookSecretCreated = z.strictObject({
  principal_id: Identifier,
  secret_id: Identifier,
  secret: z.string().describe('whsec_ + base64 of 32 random bytes; shown once'),
  created_at_unix_ms: UnixMs,
  previous_secrets_expire_at_unix_ms: UnixMs,
});
const WebhookSecretList = z.strictObject({
  principal_id: Identifier,
  secrets: z.array(
    z.strictObject({
      secret_id: Identifier,
      created_at_unix_ms: UnixMs,
      expires_at_unix_ms: UnixMs.nullable(),
      live: z.boolean(),
    }),
  ),
});

const TenantCreated = z.strictObject({
  tenant: z.strictObject({
    tenant_id: Identifier,
    name: z.string(),
    policy_sha256: Sha256,
    created_at_unix_ms: UnixMs,
  }),
  admin: z.strictObject({
    principal_id: Identifier,
    tenant_id: Identifier,
    name: Label,
    roles: z.array(Role),
    api_key: z.string().describe('shown once'),
  }),
});

// ---------------------------------------------------------------------------------------------
// The route table

type Method = 'get' | 'post' | 'put';

export interface RouteDoc {
  readonly method: Method;
  /** OpenAPI path template, e.g. `/v1/receipts/{sha256}`. */
  readonly path: string;
  readonly summary: string;
  /**
   * Who may call it: roles, the platform admin token, any authenticated principal, an executor's
   * Standard Webhooks signature, or nobody.
   */
  readonly auth: readonly Role[] | 'platform_admin' | 'any_principal' | 'executor_webhook' | 'none';
  readonly body?: z.ZodType;
  /** An empty body is read as `{}`. */
  readonly bodyOptional?: boolean;
  readonly query?: z.ZodType;
  readonly responses: Readonly<Record<number, { readonly description: string; readonly schema: z.ZodType }>>;
  /** Errors beyond the ones every route of its kind can answer. */
  readonly errors?: readonly ErrorReason[];
  /** Shards: the media type of the request body and the success answer, if not JSON. */
  readonly bodyMediaType?: string;
  readonly responseMediaType?: string;
  /**
   * The path parameter (the last) that takes the rest of the path, slashes included: Hono's `*`
   * (`GET /v1/log/tile/*`). The document marks it `x-writ-rest-of-path`.
   */
  readonly restParam?: { readonly name: string; readonly description: string };
}

// Shards: what an import answers once the tenant is live (both import doors).
const TenantImported = z.strictObject({
  tenant_id: Identifier,
  name: z.string(),
  shard: z.number().int(),
  previous_shard: z.number().int().nullable(),
  rows: z.number().int(),
  keys: z.array(
    z.strictObject({
      principal_id: Identifier,
      name: z.string(),
      roles: z.array(Role),
      api_key: z.string().describe('shown once'),
    }),
  ),
});
const UploadId = z.string().regex(/^[0-9a-f]{32}$/);
const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/);

/** `?shard=N` of the import routes: the shard to write the tenant on. */
const TargetShardQuery = z.strictObject({
  shard: z
    .string()
    .regex(/^[0-9]+$/)
    .describe('the target shard'),
});

export const ROUTES: readonly RouteDoc[] = [
  {
    method: 'get',
    path: '/v1/healthz',
    summary: 'liveness',
    auth: 'none',
    responses: { 200: { description: 'ok', schema: z.strictObject({ status: z.literal('ok') }) } },
  },
  {
    method: 'post',
    path: '/v1/tenants',
    summary: 'create a tenant, its default policy and its first admin',
    auth: 'platform_admin',
    body: CreateTenantRequest,
    responses: { 201: { description: 'created', schema: TenantCreated } },
    errors: ['conflict'],
  },
  {
    method: 'put',
    path: '/v1/tenants/{tenant_id}/quotas',
    summary: 'set a tenant’s storage quotas',
    auth: 'platform_admin',
    body: Quotas,
    responses: {
      200: {
        description: 'the quotas in force',
        schema: z.strictObject({ tenant_id: Identifier, quotas: Quotas, updated_at_unix_ms: UnixMs }),
      },
    },
    errors: ['not_found'],
  },
  // Shards: moving a tenant between D1 shards (docs/scaling.md, "Shards").
  {
    method: 'post',
    path: '/v1/tenants/{tenant_id}/export',
    summary: 'export a tenant’s rows as canonical JSON lines (optionally freezing it first)',
    auth: 'platform_admin',
    body: TenantExportRequest,
    bodyOptional: true,
    responses: {
      200: {
        description: 'one RFC 8785 line per table row: {"row":{...},"table":"..."}',
        schema: z.string(),
      },
    },
    responseMediaType: 'application/x-ndjson',
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/tenants/import',
    summary: 'import an exported tenant onto a shard, re-keyed (every receipt digest re-verified)',
    auth: 'platform_admin',
    query: TargetShardQuery,
    body: z.string().describe('the export: canonical JSON lines'),
    bodyMediaType: 'application/x-ndjson',
    responses: {
      201: {
        description: 'imported; each live principal’s new key, shown once',
        schema: TenantImported,
      },
    },
    errors: ['conflict', 'unsupported_media_type', 'malformed_json'],
  },
  // An export larger than one request: uploaded in parts to R2, imported from there
  // (docs/scaling.md, "Moving a tenant larger than one request").
  {
    method: 'post',
    path: '/v1/tenants/import-uploads',
    summary: 'start uploading an export in parts (an R2 multipart upload)',
    auth: 'platform_admin',
    body: z.strictObject({}),
    bodyOptional: true,
    responses: {
      201: {
        description: 'the upload and its part bounds',
        schema: z.strictObject({
          upload_id: UploadId,
          part_max_bytes: z.number().int(),
          part_min_bytes: z.number().int().describe('every part but the last (R2), all of one size'),
          max_parts: z.number().int(),
        }),
      },
    },
  },
  {
    method: 'put',
    path: '/v1/tenants/import-uploads/{upload_id}/parts/{part_number}',
    summary: 'put one numbered part of the export (sending a part again replaces it)',
    auth: 'platform_admin',
    body: z.string().describe('the part’s bytes'),
    bodyMediaType: 'application/octet-stream',
    responses: {
      200: {
        description: 'stored; keep the ETag for the completion',
        schema: z.strictObject({
          upload_id: UploadId,
          part_number: z.number().int(),
          etag: z.string(),
          bytes: z.number().int(),
        }),
      },
    },
    errors: ['not_found', 'conflict', 'unsupported_media_type'],
  },
  {
    method: 'post',
    path: '/v1/tenants/import-uploads/{upload_id}/complete',
    summary: 'complete the upload from its parts (1..n in order) and check the whole file’s SHA-256',
    auth: 'platform_admin',
    body: CompleteUploadRequest,
    responses: {
      200: {
        description: 'the file is complete and hashes to the expected digest',
        schema: z.strictObject({
          upload_id: UploadId,
          sha256: Sha256Hex,
          bytes: z.number().int(),
          parts: z.number().int(),
        }),
      },
    },
    errors: ['not_found', 'conflict'],
  },
  {
    method: 'post',
    path: '/v1/tenants/import-uploads/{upload_id}/abort',
    summary: 'abort an unfinished upload (R2 drops its parts) or delete a completed file',
    auth: 'platform_admin',
    body: z.strictObject({}),
    bodyOptional: true,
    responses: {
      200: {
        description: 'removed',
        schema: z.strictObject({ upload_id: UploadId, removed: z.literal(true) }),
      },
    },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/tenants/import-uploads/{upload_id}/import',
    summary:
      'import an uploaded export onto a shard, verified whole first (over as many calls as it takes); call again until 201',
    auth: 'platform_admin',
    query: TargetShardQuery,
    body: z.strictObject({}),
    bodyOptional: true,
    responses: {
      201: { description: 'imported; each live principal’s new key, shown once', schema: TenantImported },
      202: {
        description:
          'part-way within this call’s budget, nothing of the tenant visible: still verifying (nothing written yet), or verified and writing; call again to go on',
        schema: z.discriminatedUnion('phase', [
          z.strictObject({
            status: z.literal('in_progress'),
            phase: z.literal('verifying'),
            upload_id: z.string(),
            shard: z.number().int(),
            read: z
              .number()
              .int()
              .describe('1: every line checked; 2 and later: references checked again, one partition a read'),
            rows_verified: z.number().int().describe('lines checked by the first read'),
            bytes_read: z.number().int().describe('bytes of the file the read under way got through'),
            bytes_total: z.number().int(),
          }),
          z.strictObject({
            status: z.literal('in_progress'),
            phase: z.literal('writing'),
            tenant_id: Identifier,
            shard: z.number().int(),
            rows_done: z.number().int(),
            rows_total: z.number().int(),
            chunks: z.number().int().describe('D1 batches this call wrote'),
          }),
        ]),
      },
    },
    errors: ['not_found', 'conflict'],
  },
  {
    method: 'post',
    path: '/v1/tenants/import/{tenant_id}/abort',
    summary: 'abort a staged (never finished) import: delete its rows on the shard, in bounded batches',
    auth: 'platform_admin',
    query: z.strictObject({
      shard: z
        .string()
        .regex(/^[0-9]+$/)
        .describe('the shard the import is staged on'),
    }),
    bodyOptional: true,
    responses: {
      200: {
        description: 'aborted: nothing of the import is left on the shard',
        schema: z.strictObject({
          tenant_id: Identifier,
          shard: z.number().int(),
          aborted: z.literal(true),
          rows_deleted: z.number().int(),
        }),
      },
    },
    errors: ['not_found', 'conflict'],
  },
  {
    method: 'get',
    path: '/v1/usage',
    summary: 'storage and counts against the tenant’s quotas',
    auth: ROLES_FOR.admin,
    responses: { 200: { description: 'usage', schema: Usage } },
  },
  {
    method: 'get',
    path: '/v1/metrics',
    summary: 'the tenant’s security decisions as counts over a window ending now',
    auth: ROLES_FOR.admin,
    query: MetricsQuery,
    responses: { 200: { description: 'counts', schema: MetricsView } },
    // Each read pays METRICS_READ_TOKENS write tokens (src/http/rate-limit.ts).
    errors: ['rate_limited'],
  },
  {
    method: 'post',
    path: '/v1/principals',
    summary: 'create a principal of the caller’s tenant (key shown once)',
    auth: ROLES_FOR.admin,
    body: CreatePrincipalRequest,
    responses: { 201: { description: 'created', schema: NewPrincipal } },
    errors: ['tenant_mismatch'],
  },
  {
    method: 'get',
    path: '/v1/principals/{principal_id}',
    summary: 'read a principal',
    auth: ROLES_FOR.admin,
    responses: { 200: { description: 'the principal', schema: PrincipalView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/principals/{principal_id}/revoke',
    summary: 'revoke a principal (final)',
    auth: ROLES_FOR.admin,
    body: EmptyRequest,
    bodyOptional: true,
    responses: { 200: { description: 'revoked', schema: PrincipalView } },
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/v1/policy',
    summary: 'the policy in force',
    auth: 'any_principal',
    responses: { 200: { description: 'the policy', schema: PolicyInForce } },
  },
  {
    method: 'put',
    path: '/v1/policy',
    summary: 'store a policy and put it in force',
    auth: ROLES_FOR.admin,
    body: TenantPolicy,
    responses: {
      200: { description: 'in force', schema: PolicyInForce.extend({ previous_policy_sha256: Sha256 }) },
    },
    errors: ['invalid_policy'],
  },
  {
    method: 'post',
    path: '/v1/contracts',
    summary: 'pin a reviewed tool contract (content-addressed)',
    auth: ROLES_FOR.admin,
    body: ToolContract,
    responses: {
      200: { description: 'already pinned', schema: ContractView },
      201: { description: 'pinned', schema: ContractView },
    },
    errors: ['invalid_contract'],
  },
  {
    method: 'get',
    path: '/v1/contracts/{sha256}',
    summary: 'read a pinned contract',
    auth: 'any_principal',
    responses: { 200: { description: 'the contract', schema: ContractView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/contracts/{sha256}/quarantine',
    summary: 'quarantine a contract (final)',
    auth: ROLES_FOR.admin,
    body: QuarantineRequest,
    bodyOptional: true,
    responses: { 200: { description: 'quarantined', schema: ContractView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/contracts/discovery',
    summary: 'compare advertised tool definitions with pinned contracts; quarantine drift',
    auth: ROLES_FOR.admin,
    body: z.strictObject({ snapshot: DiscoverySnapshot, quarantine: z.boolean().optional() }),
    responses: { 200: { description: 'the report', schema: DiscoveryReport } },
  },
  {
    method: 'post',
    path: '/v1/grants',
    summary: 'issue a grant to a principal',
    auth: ROLES_FOR.admin,
    body: CreateGrantRequest,
    responses: { 201: { description: 'issued', schema: GrantView } },
    errors: ['not_found', 'conflict', 'invalid_grant', 'tenant_mismatch'],
  },
  {
    method: 'get',
    path: '/v1/grants/{grant_id}',
    summary: 'read a grant',
    auth: ROLES_FOR.admin,
    responses: { 200: { description: 'the grant', schema: GrantView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/grants/{grant_id}/revoke',
    summary: 'revoke a grant (final)',
    auth: ROLES_FOR.admin,
    body: EmptyRequest,
    bodyOptional: true,
    responses: { 200: { description: 'revoked', schema: GrantView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/approval-requests',
    summary: 'request approval of an exact input',
    auth: ROLES_FOR.requestApproval,
    body: CreateApprovalRequest,
    responses: { 201: { description: 'pending', schema: ApprovalView } },
    errors: ['not_found', 'contract_quarantined', 'target_mismatch', 'tenant_mismatch', 'principal_mismatch'],
  },
  {
    method: 'get',
    path: '/v1/approval-requests',
    summary: 'the approval queue',
    auth: ROLES_FOR.listApprovals,
    query: ApprovalListQuery,
    responses: {
      200: {
        description: 'approval requests',
        schema: z.strictObject({
          status: z.enum(APPROVAL_VIEW_STATUSES),
          items: z.array(ApprovalView),
          next_cursor: NextCursor,
        }),
      },
    },
  },
  {
    method: 'get',
    path: '/v1/approval-requests/{approval_id}',
    summary: 'read an approval request',
    auth: ROLES_FOR.readApproval,
    responses: { 200: { description: 'the request', schema: ApprovalView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/approval-requests/{approval_id}/approve',
    summary: 'approve (not the requester)',
    auth: ROLES_FOR.decideApproval,
    body: ApproveRequest,
    bodyOptional: true,
    responses: { 200: { description: 'approved', schema: ApprovalView } },
    errors: ['not_found', 'self_approval', 'conflict', 'contract_quarantined'],
  },
  {
    method: 'post',
    path: '/v1/approval-requests/{approval_id}/deny',
    summary: 'deny (not the requester)',
    auth: ROLES_FOR.decideApproval,
    body: DenyRequest,
    bodyOptional: true,
    responses: { 200: { description: 'denied', schema: ApprovalView } },
    errors: ['not_found', 'self_approval', 'conflict'],
  },
  {
    method: 'post',
    path: '/v1/runs',
    summary: 'open a run with budgets',
    auth: ROLES_FOR.createRun,
    body: CreateRunRequest,
    responses: { 201: { description: 'opened', schema: RunView } },
    errors: ['tenant_mismatch', 'principal_mismatch'],
  },
  {
    method: 'get',
    path: '/v1/runs/{run_id}',
    summary: 'read a run and what it spent',
    auth: ROLES_FOR.readRun,
    responses: { 200: { description: 'the run', schema: RunView } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/authorize',
    summary: 'authorize one tool call',
    auth: ROLES_FOR.authorize,
    body: AuthorizeRequest,
    responses: {
      200: { description: 'authorized, with its receipt', schema: Decision },
      403: { description: 'denied, with its receipt and sorted violations', schema: Decision },
    },
    errors: ['not_found', 'target_mismatch', 'conflict', 'signing_unavailable'],
  },
  {
    method: 'get',
    path: '/v1/receipts/{sha256}',
    summary: 'read a receipt with its evidence, replayed',
    auth: 'any_principal',
    responses: { 200: { description: 'the receipt', schema: ReceiptView } },
    errors: ['not_found'],
  },
  // -- Issue 11: the tenant's transparency log and offline bundles (src/services/log.ts) --------
  {
    method: 'get',
    path: '/v1/receipts/{sha256}/proof',
    summary: 'the receipt’s inclusion proof in the tenant’s log (C2SP tlog-proof with its checkpoint)',
    auth: 'any_principal',
    responses: { 200: { description: 'the proof', schema: InclusionProofView } },
    errors: ['not_found', 'log_pending', 'signing_unavailable'],
  },
  {
    method: 'get',
    path: '/v1/receipts/{sha256}/bundle',
    summary: 'the receipt as an offline bundle: inputs, signature, keys, proof (`writ verify`)',
    auth: 'any_principal',
    responses: { 200: { description: 'the bundle', schema: ReceiptBundle } },
    errors: ['not_found', 'log_pending', 'bundle_unavailable', 'signing_unavailable'],
  },
  {
    method: 'get',
    path: '/v1/log/checkpoint',
    summary:
      'the latest checkpoint of the tenant’s log (text/plain: a C2SP signed note); tiles at /v1/log/tile/…',
    auth: 'any_principal',
    responses: { 200: { description: 'the signed checkpoint note, as text', schema: z.string() } },
    responseMediaType: 'text/plain',
    errors: ['signing_unavailable'],
  },
  {
    method: 'get',
    path: '/v1/log/tile/{tile_path}',
    summary:
      'a Merkle tile or entry bundle of the tenant’s log (C2SP tlog-tiles), binary and immutable; the path below tile/ may hold slashes',
    auth: 'any_principal',
    restParam: {
      name: 'tile_path',
      description:
        'the path below tile/, slashes included: <L>/<N>[.p/<W>] or entries/<N>[.p/<W>], <N> in 3-digit groups (x001/234)',
    },
    responses: {
      200: { description: 'the tile or entry bundle bytes', schema: z.string().describe('binary') },
    },
    responseMediaType: 'application/octet-stream',
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/v1/log/publication',
    summary: 'whether the tenant’s log is public at /log/{tenant_id}/, its origin and verifier keys',
    auth: 'any_principal',
    responses: { 200: { description: 'the publication', schema: PublicationView } },
    errors: ['signing_unavailable'],
  },
  {
    method: 'put',
    path: '/v1/log/publication',
    summary: 'publish or unpublish the tenant’s log for witnesses and monitors (idempotent)',
    auth: ROLES_FOR.admin,
    body: SetPublicationRequest,
    responses: {
      200: {
        description: 'the publication after the request',
        schema: PublicationView.extend({ changed: z.boolean() }),
      },
    },
    errors: ['signing_unavailable'],
  },
  {
    method: 'get',
    path: '/v1/log/witnesses',
    summary: 'the C2SP tlog-witness witnesses the tenant’s log submits checkpoints to, and their state',
    auth: 'any_principal',
    responses: { 200: { description: 'the witnesses', schema: WitnessesView } },
  },
  {
    method: 'put',
    path: '/v1/log/witnesses',
    summary: 'replace the tenant log’s witnesses (cosignature/v1 vkey and https submission prefix each)',
    auth: ROLES_FOR.admin,
    body: SetWitnessesRequest,
    responses: { 200: { description: 'the witnesses after the change', schema: WitnessesView } },
  },
  {
    method: 'get',
    path: '/v1/log/consistency',
    summary: 'the RFC 9162 consistency proof between two sizes of the tenant’s log',
    auth: 'any_principal',
    query: ConsistencyQuery,
    responses: { 200: { description: 'the proof', schema: ConsistencyView } },
  },
  {
    method: 'post',
    path: '/v1/executions/claim',
    summary: 'claim an authorized call for dispatch (at most once)',
    auth: ROLES_FOR.claim,
    body: ClaimBody,
    responses: {
      200: { description: 'proceed with a fencing token, or the replayed outcome', schema: ClaimAnswer },
    },
    errors: [
      'not_found',
      'authorization_denied',
      'authorization_expired',
      'authorization_revoked',
      'executor_mismatch',
      'in_progress',
      'reconciliation_required',
      'idempotency_key_reused',
    ],
  },
  {
    method: 'post',
    path: '/v1/executions/report',
    summary: 'report what the execution observed',
    auth: ROLES_FOR.report,
    body: ReportBody,
    responses: {
      200: { description: 'verified (or indeterminate)', schema: ReportAnswer },
      403: { description: 'rejected, with the receipt', schema: ReportAnswer },
    },
    errors: [
      'not_found',
      'executor_mismatch',
      'invalid_observation',
      'stale_fencing_token',
      'signing_unavailable',
    ],
  },
  {
    method: 'post',
    path: '/v1/reconciliations',
    summary: 'settle an operation whose outcome is unknown',
    auth: ROLES_FOR.reconcile,
    body: ReconcileBody,
    responses: {
      200: { description: 'the resolution it made before (replay)', schema: ReconcileAnswer },
      201: { description: 'resolved', schema: ReconcileAnswer },
    },
    errors: [
      'not_found',
      'executor_mismatch',
      'not_reconcilable',
      'reconciliation_rejected',
      'signing_unavailable',
    ],
  },
  {
    method: 'get',
    path: '/v1/operations',
    summary: 'the tenant’s operations',
    auth: ROLES_FOR.readOperations,
    query: OperationListQuery,
    responses: {
      200: {
        description: 'operations',
        schema: z.strictObject({ next_cursor: NextCursor, operations: z.array(OperationRowView) }),
      },
    },
  },
  {
    method: 'get',
    path: '/v1/operations/{id}',
    summary: 'one operation, from its Durable Object',
    auth: ROLES_FOR.readOperations,
    responses: { 200: { description: 'the operation', schema: OperationSnapshot } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/v1/observations',
    summary: 'admit tool output as untrusted evidence',
    auth: ROLES_FOR.observe,
    body: ObservationBody,
    responses: {
      200: { description: 'replayed', schema: ObservationAnswer },
      201: { description: 'accepted', schema: ObservationAnswer },
      403: { description: 'rejected, with the receipt', schema: ObservationAnswer },
    },
    errors: ['not_found', 'executor_mismatch', 'invalid_observation', 'signing_unavailable'],
  },
  // Signed webhooks for executors (src/http/routes/webhooks.ts).
  {
    method: 'post',
    path: '/v1/principals/{principal_id}/webhook-secrets',
    summary: 'create or rotate an executor’s webhook signing secret (shown once)',
    auth: ROLES_FOR.admin,
    body: RotateWebhookSecretRequest,
    bodyOptional: true,
    responses: { 201: { description: 'the new secret', schema: WebhookSecretCreated } },
    errors: ['not_found', 'conflict'],
  },
  {
    method: 'get',
    path: '/v1/principals/{principal_id}/webhook-secrets',
    summary: 'an executor’s webhook signing secrets, without their values',
    auth: ROLES_FOR.admin,
    responses: { 200: { description: 'the secrets', schema: WebhookSecretList } },
    errors: ['not_found', 'conflict'],
  },
  {
    method: 'post',
    path: '/v1/webhooks/{tenant_id}/{principal_id}/executions/report',
    summary: 'report an execution as a signed webhook (Standard Webhooks)',
    auth: 'executor_webhook',
    body: ReportBody,
    responses: {
      200: {
        description: 'verified (or indeterminate), or the stored answer of this webhook-id',
        schema: ReportAnswer,
      },
      403: { description: 'rejected, with the receipt', schema: ReportAnswer },
    },
    errors: [
      'not_found',
      'executor_mismatch',
      'invalid_observation',
      'stale_fencing_token',
      'in_progress',
      'signing_unavailable',
    ],
  },
  {
    method: 'post',
    path: '/v1/webhooks/{tenant_id}/{principal_id}/observations',
    summary: 'admit tool output as untrusted evidence, as a signed webhook (Standard Webhooks)',
    auth: 'executor_webhook',
    body: ObservationBody,
    responses: {
      200: { description: 'replayed', schema: ObservationAnswer },
      201: { description: 'accepted', schema: ObservationAnswer },
      403: { description: 'rejected, with the receipt', schema: ObservationAnswer },
    },
    errors: ['not_found', 'executor_mismatch', 'invalid_observation', 'in_progress', 'signing_unavailable'],
  },
];

// ---------------------------------------------------------------------------------------------
// Generation

const schemaOf = (s: z.ZodType) =>
  z.toJSONSchema(s, { target: 'draft-2020-12', unrepresentable: 'any', io: 'input' }) as Record<
    string,
    unknown
  >;

function withoutDialect(s: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _omit, ...rest } = s;
  return rest;
}

const BODY_ERRORS: readonly ErrorReason[] = [
  'malformed_json',
  'invalid_request',
  'payload_too_large',
  'unsupported_media_type',
];

function errorsOf(r: RouteDoc): ErrorReason[] {
  const out = new Set<ErrorReason>(['internal']);
  if (r.auth !== 'none') out.add('unauthenticated');
  if (Array.isArray(r.auth)) out.add('forbidden_role');
  if (r.body !== undefined) for (const e of BODY_ERRORS) out.add(e);
  if (r.query !== undefined) out.add('invalid_request');
  // Every authenticated write passes the per-principal rate limit (src/http/rate-limit.ts).
  if (r.method !== 'get' && r.auth !== 'none' && r.auth !== 'platform_admin') {
    out.add('rate_limited');
    // A write that stores something may meet a tenant storage quota (docs/storage.md).
    out.add('quota_exceeded');
  }
  for (const e of r.errors ?? []) out.add(e);
  return [...out];
}

/**
 * What the document declares a route answers with each status: the success schema (and its media
 * type) from `responses`, the wire codes of the errors it can answer with that status, or both.
 * The generator writes the document from this; the contract test
 * (test/integration/http/openapi-contract.test.ts) checks real answers against it.
 */
export interface DocumentedResponse {
  readonly description: string;
  readonly mediaType: string;
  /** The success body of this status (`responses`), if it has one. */
  readonly success: z.ZodType | null;
  /** The error codes the route answers with this status (empty: none). */
  readonly errorCodes: readonly string[];
  /**
   * What a body of this status parses with: the success schema, the error body, or either (a
   * status both answer, e.g. a 403 denial with its receipt beside a 403 `forbidden_role`).
   */
  readonly schema: z.ZodType;
}

export function documentedResponses(r: RouteDoc): ReadonlyMap<number, DocumentedResponse> {
  // Every error the route can answer, grouped by status, each with its wire codes.
  const byStatus = new Map<number, Set<string>>();
  for (const reason of errorsOf(r)) {
    const w = wireError(reason);
    byStatus.set(w.status, (byStatus.get(w.status) ?? new Set()).add(w.code));
  }
  const statuses = new Set([...Object.keys(r.responses).map(Number), ...byStatus.keys()]);
  const out = new Map<number, DocumentedResponse>();
  for (const status of [...statuses].sort((a, b) => a - b)) {
    const res = r.responses[status];
    const errorCodes = [...(byStatus.get(status) ?? [])].sort();
    const errors = errorCodes.length === 0 ? '' : `error: ${errorCodes.join(', ')}`;
    out.set(status, {
      description:
        res === undefined ? errors : errors === '' ? res.description : `${res.description}; or ${errors}`,
      mediaType: status < 300 ? (r.responseMediaType ?? 'application/json') : 'application/json',
      success: res?.schema ?? null,
      errorCodes,
      schema: res === undefined ? ErrorBody : errors === '' ? res.schema : z.union([res.schema, ErrorBody]),
    });
  }
  return out;
}

const ERROR_REF = { $ref: '#/components/schemas/Error' };

function securityScheme(auth: RouteDoc['auth']): string {
  if (auth === 'platform_admin') return 'platformAdmin';
  if (auth === 'executor_webhook') return 'webhookSignature';
  return 'apiKey';
}

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of ROUTES) {
    const rest = r.restParam;
    const params: Record<string, unknown>[] = [...r.path.matchAll(/\{([a-z_0-9]+)\}/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
      ...(rest !== undefined && m[1] === rest.name
        ? { description: rest.description, 'x-writ-rest-of-path': true }
        : {}),
    }));
    if (r.query !== undefined) {
      const q = schemaOf(r.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) {
        params.push({
          name,
          in: 'query',
          required: (q.required ?? []).includes(name),
          schema: schema as { type: string },
        });
      }
    }
    const responses: Record<string, unknown> = {};
    for (const [status, res] of documentedResponses(r)) {
      responses[status] = {
        description: res.description,
        content: {
          [res.mediaType]: {
            schema:
              res.success === null
                ? ERROR_REF
                : res.errorCodes.length === 0
                  ? withoutDialect(schemaOf(res.success))
                  : { anyOf: [withoutDialect(schemaOf(res.success)), ERROR_REF] },
          },
        },
      };
    }
    const op: Record<string, unknown> = {
      summary: r.summary,
      operationId: `${r.method}${r.path.replace(/[{}]/g, '').replace(/[/-]([a-z0-9])/g, (_m, ch: string) => ch.toUpperCase())}`,
      'x-writ-auth': Array.isArray(r.auth) ? { roles: r.auth } : r.auth,
      security: r.auth === 'none' ? [] : [{ [securityScheme(r.auth)]: [] }],
      ...(params.length > 0 ? { parameters: params } : {}),
      ...(r.body !== undefined
        ? {
            requestBody: {
              required: r.bodyOptional !== true,
              content: {
                [r.bodyMediaType ?? 'application/json']: { schema: withoutDialect(schemaOf(r.body)) },
              },
            },
          }
        : {}),
      responses,
    };
    paths[r.path] = { ...(paths[r.path] ?? {}), [r.method]: op };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Writ',
      version: '1',
      description:
        'Authorization for AI-agent tool calls. Bodies are decoded strictly: bounded before parsing, duplicate keys, lone surrogates and unknown fields refused. Identity comes from the API key, never from a body.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'a principal’s API key (writ_...)' },
        platformAdmin: { type: 'http', scheme: 'bearer', description: 'the platform admin token' },
        webhookSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'webhook-signature',
          description:
            'Standard Webhooks: webhook-id, webhook-timestamp and webhook-signature (v1, HMAC-SHA256 with the executor’s whsec_ secret); docs/api.md',
        },
      },
      schemas: { Error: withoutDialect(schemaOf(ErrorBody)) },
    },
    paths,
  };
}
