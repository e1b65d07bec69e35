/**
 * `irreversible` calls need two distinct approvers (issue 14). `decideAuthorization` refuses an
 * approval of one (as `approval_unusable`, in the trusted state, so receipts issued before the
 * rule replay as they were), and `authorizeToolCall` refuses a first approver who is the caller.
 */
import { describe, expect, it } from 'vitest';
import { decideAuthorization } from '../../../../src/core/authorization/decide.js';
import { contractDigest } from '../../../../src/core/contracts/contract.js';
import type { ToolApproval } from '../../../../src/core/model.js';
import { APPROVER, PRINCIPAL, buildApproval, buildContract } from '../fixtures.js';
import { INVOCATION_ID, buildStateScenario, grantRecord, type StateScenario } from './state-fixtures.js';

const FIRST = 'user:carol@acme';

/** The rollback scenario with the contract made irreversible and the approval given by `who`. */
function irreversible(approval: Partial<ToolApproval> = {}): StateScenario {
  const s = buildStateScenario();
  const contract = { ...buildContract(), effect: 'irreversible' as const, reversible: false };
  const sha = contractDigest(contract);
  s.request = { ...s.request, tool_contract_sha256: sha };
  s.state.contract = { tool_contract_sha256: sha, contract, quarantined: false };
  s.state.grants = [grantRecord({ allowed_effects: ['irreversible', 'read_only'] })];
  const base = s.state.approval;
  if (base === null) throw new Error('the scenario names an approval');
  s.state.approval = { ...base, approval: { ...buildApproval(contract), ...approval } };
  return s;
}

function violations(s: StateScenario): readonly string[] {
  const d = decideAuthorization(s.request, s.state, { invocation_id: INVOCATION_ID }, s.now);
  if (!d.ok) throw new Error(d.error.message);
  return d.value.receipt.body.violations;
}

describe('second approver for irreversible calls', () => {
  it('two distinct approvers authorize; the approval binds both', () => {
    const s = irreversible({ first_approver_principal_id: FIRST });
    const d = decideAuthorization(s.request, s.state, { invocation_id: INVOCATION_ID }, s.now);
    expect(d.ok && d.value.receipt.body.decision).toBe('authorized');
    expect(d.ok && d.value.invocation.approval).toMatchObject({
      approver_principal_id: APPROVER,
      first_approver_principal_id: FIRST,
    });
  });

  it('one approver is unusable', () => {
    expect(violations(irreversible())).toEqual(['approval_unusable']);
  });

  it('the same approver twice is unusable', () => {
    expect(violations(irreversible({ first_approver_principal_id: APPROVER }))).toEqual([
      'approval_unusable',
    ]);
  });

  it('the caller as first approver is self-approval', () => {
    expect(violations(irreversible({ first_approver_principal_id: PRINCIPAL }))).toEqual([
      'approval_self_approved',
    ]);
  });

  it('an external write still needs one approver', () => {
    const s = buildStateScenario();
    const d = decideAuthorization(s.request, s.state, { invocation_id: INVOCATION_ID }, s.now);
    expect(d.ok && d.value.receipt.body.decision).toBe('authorized');
    expect(d.ok && d.value.invocation.approval).not.toHaveProperty('first_approver_principal_id');
  });
});
