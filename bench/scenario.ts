/**
 * The bench scenarios both benchmarks time (bench/authorize.bench.ts, bench/doors.bench.ts): the
 * lab's invocation as the request body an agent sends, and the `AuthorizationState` the tenant
 * store returns for it (documents parsed from their stored canonical text through
 * `DocumentCache`, as the store does). Storage itself is never part of a bench.
 */
import { canonicalize, digestOf } from '../src/core/canonical/canonical.js';
import type { AuthorizationState } from '../src/core/authorization/decide.js';
import { type JsonObject, utf8Encode } from '../src/core/canonical/json.js';
import { contractDigest } from '../src/core/contracts/contract.js';
import { type ToolApproval, ToolContract, ToolGrant } from '../src/core/model.js';
import { DEFAULT_POLICY, policyDigest, TenantPolicy } from '../src/core/policy.js';
import { DocumentCache } from '../src/db/documents.js';
import { DEFAULT_MAX_BODY_BYTES, MAX_JSON_DEPTH } from '../src/http/body.js';
import { buildToolLoopFixture, LAB_IDS, type ToolLoopFixture } from '../src/lab/tool-loop.js';

/** The limits `readJson` decodes every request body with (WRIT_MAX_BODY_BYTES unset). */
export const BODY_LIMITS = { maxBytes: DEFAULT_MAX_BODY_BYTES, maxDepth: MAX_JSON_DEPTH } as const;

/** The `POST /v1/authorize` body an agent sends for a lab invocation. */
export interface Body {
  tool_contract_sha256: string;
  input: JsonObject;
  run_id: string;
  idempotency_key?: string;
  approval_id?: string;
  tenant_id?: string;
}

/** What one scenario hands the entry point: stored rows (as documents) and the request body. */
export interface Scenario {
  readonly contract: ToolContract;
  readonly grant: ToolGrant;
  readonly approval: ToolApproval;
  readonly body: Body;
}

export const RUN_ID = 'run-acme-2026-11-17-0007';
export const HOUR = 3_600_000;
// The tenant's policy in force is the default policy; the lab's grant and approval are issued
// under its digest (a store never holds a grant bound to a policy document it does not have).
export const tenantPolicy = DEFAULT_POLICY;
export const tenantPolicySha = policyDigest(tenantPolicy);

export function baselineScenario(f: ToolLoopFixture): Scenario {
  return {
    contract: f.contract,
    grant: { ...f.grant, policy_sha256: tenantPolicySha },
    approval: { ...f.approval, policy_sha256: tenantPolicySha },
    body: {
      tool_contract_sha256: contractDigest(f.contract),
      input: f.input,
      run_id: RUN_ID,
      idempotency_key: LAB_IDS.idempotencyKey,
      approval_id: LAB_IDS.approval,
    },
  };
}

/** The state the tenant store's `loadAuthorizationState` returns for a scenario's request. */
export function storedState(s: Scenario, now: number): AuthorizationState {
  // Fresh caches per scenario, as separate isolates would hold; documents go in as stored text.
  const stored = <T>(cache: DocumentCache<T>, value: T): T => cache.get(digestOf(value), canonicalize(value));
  const contract = stored(new DocumentCache<ToolContract>('contract', ToolContract), s.contract);
  return {
    caller: { tenant_id: LAB_IDS.tenant, principal_id: LAB_IDS.principal, revoked: false },
    policy: {
      policy_sha256: tenantPolicySha,
      policy: stored(new DocumentCache<TenantPolicy>('policy', TenantPolicy), tenantPolicy),
    },
    contract: { tool_contract_sha256: contractDigest(contract), contract, quarantined: false },
    run: {
      run_id: RUN_ID,
      principal_id: LAB_IDS.principal,
      run_envelope_sha256: buildToolLoopFixture().invocation.run_envelope_sha256,
      max_calls: 100,
      max_external_writes: 10,
      deadline_unix_ms: now + HOUR,
      calls_used: 3,
      writes_used: 0,
    },
    // The store returns the approval only when the request names it.
    approval:
      s.body.approval_id === undefined
        ? null
        : {
            approval_id: s.approval.approval_id,
            tenant_id: s.approval.tenant_id,
            requester_principal_id: LAB_IDS.principal,
            status: 'approved',
            approval: s.approval,
            approver_revoked: false,
          },
    grants: [{ grant: stored(new DocumentCache<ToolGrant>('grant', ToolGrant), s.grant), revoked: false }],
  };
}

export const bodyBytes = (b: Body): Uint8Array => utf8Encode(JSON.stringify(b));
