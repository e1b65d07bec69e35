/**
 * The rollback scenario as stored state: what `decideAuthorization` receives from a store. Built
 * from the same fixtures as the per-call cases (test/unit/core/fixtures.ts), so the baseline here
 * authorizes exactly as the baseline there does.
 */
import type {
  ApprovalRecord,
  AuthorizationState,
  AuthorizeRequest,
  GrantRecord,
  RunRecord,
} from '../../../../src/core/authorization/decide.js';
import { digestOf } from '../../../../src/core/canonical/canonical.js';
import { contractDigest } from '../../../../src/core/contracts/contract.js';
import { DEFAULT_POLICY } from '../../../../src/core/policy.js';
import {
  APPROVER,
  IDEMPOTENCY_KEY,
  POLICY_SHA256,
  PRINCIPAL,
  T,
  TENANT,
  buildApproval,
  buildContract,
  buildGrant,
  buildReadOnlyContract,
  rollbackInput,
} from '../fixtures.js';

export const RUN_ID = 'run-0001';
export const INVOCATION_ID = 'invocation-0001';

/** Writable at the top level of the state, so a test can swap one stored fact. */
export interface StateScenario {
  request: AuthorizeRequest;
  state: { -readonly [K in keyof AuthorizationState]: AuthorizationState[K] };
  now: number;
}

export function buildRun(): RunRecord {
  return {
    run_id: RUN_ID,
    principal_id: PRINCIPAL,
    run_envelope_sha256: digestOf({ run_id: RUN_ID, tenant_id: TENANT }),
    max_calls: 10,
    max_external_writes: 2,
    deadline_unix_ms: T.grantExpiresAt,
    calls_used: 0,
    writes_used: 0,
  };
}

export function buildApprovalRecord(): ApprovalRecord {
  return {
    approval_id: buildApproval().approval_id,
    tenant_id: TENANT,
    requester_principal_id: PRINCIPAL,
    status: 'approved',
    approval: buildApproval(),
    approver_revoked: false,
  };
}

export function grantRecord(
  overrides: Partial<ReturnType<typeof buildGrant>> = {},
  revoked = false,
): GrantRecord {
  return { grant: { ...buildGrant(), ...overrides }, revoked };
}

/** The rollback, approved by Bob, under Alice's grant, in a fresh run: authorizes. */
export function buildStateScenario(): StateScenario {
  const contract = buildContract();
  return {
    request: {
      tool_contract_sha256: contractDigest(contract),
      input: rollbackInput(),
      idempotency_key: IDEMPOTENCY_KEY,
      approval_id: buildApproval().approval_id,
      run_id: RUN_ID,
    },
    state: {
      caller: { tenant_id: TENANT, principal_id: PRINCIPAL, revoked: false },
      policy: { policy_sha256: POLICY_SHA256, policy: structuredClone(DEFAULT_POLICY) },
      contract: { tool_contract_sha256: contractDigest(contract), contract, quarantined: false },
      run: buildRun(),
      approval: buildApprovalRecord(),
      grants: [grantRecord()],
    },
    now: T.now,
  };
}

/** The read-only companion call: no approval, no key. */
export function buildReadStateScenario(): StateScenario {
  const s = buildStateScenario();
  const contract = buildReadOnlyContract();
  s.request = {
    tool_contract_sha256: contractDigest(contract),
    input: { service: 'api', environment: 'production' },
    run_id: RUN_ID,
  };
  s.state.contract = { tool_contract_sha256: contractDigest(contract), contract, quarantined: false };
  s.state.approval = null;
  return s;
}

export { APPROVER };
