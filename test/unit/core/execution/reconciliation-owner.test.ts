/**
 * The reconciliation owner (`policy.reconciliation.owner`): its syntax, what a legacy label
 * means, and who it admits. The service refuses everyone else (`not_reconciliation_owner`).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { JsonObject } from '../../../../src/core/canonical/json.js';
import type { Role } from '../../../../src/core/identity/identity.js';
import {
  DEFAULT_POLICY,
  isReconciliationOwner,
  parsePolicy,
  reconciliationOwner,
  reconciliationOwnerIssues,
} from '../../../../src/core/policy.js';
import { Identifier } from '../../../../src/core/schema.js';

const doc = (owner: string): JsonObject => {
  const d = JSON.parse(JSON.stringify(DEFAULT_POLICY)) as JsonObject;
  return { ...d, reconciliation: { owner, deadline_ms: 3_600_000 } };
};
const P1 = 'prn-aaaaaaaaaaaaaaaaaaaaaaaaaa';
const P2 = 'prn-bbbbbbbbbbbbbbbbbbbbbbbbbb';
const who = (principal_id: string, ...roles: Role[]) => ({ principal_id, roles });

describe('reconciliation owner syntax', () => {
  it('names roles and principals joined by "+"', () => {
    expect(reconciliationOwner(`role:executor+principal:${P1}`)).toEqual({
      roles: ['executor'],
      principals: [P1],
      legacy: false,
    });
    expect(parsePolicy(doc(`role:tenant_admin+principal:${P1}+principal:${P2}`)).ok).toBe(true);
  });

  it('rejects on PUT an owner that uses the syntax wrongly, instead of guessing', () => {
    for (const bad of [
      'role:agent',
      'role:approver',
      'role:sre',
      `principal:${P1}+team:sre`,
      `principal:${P1}+principal:${P1}`,
      'role:executor+',
      'principal:-x',
    ]) {
      const r = parsePolicy(doc(bad));
      expect(r.ok, bad).toBe(false);
      if (!r.ok) expect(r.error.issues.every((i) => i.path === 'policy.reconciliation.owner')).toBe(true);
      // Whatever was stored before validation existed fails closed to the tenant admins.
      expect(reconciliationOwner(bad), bad).toEqual({
        roles: ['tenant_admin'],
        principals: [],
        legacy: true,
      });
    }
  });

  it('reads a legacy label (no role: or principal: term) as the tenant admins only', () => {
    for (const label of ['team:sre', 'team:operations', 'oncall-1', DEFAULT_POLICY.reconciliation.owner]) {
      expect(reconciliationOwnerIssues(label)).toEqual([]);
      expect(reconciliationOwner(label).legacy).toBe(true);
      expect(isReconciliationOwner(label, who(P1, 'tenant_admin'))).toBe(true);
      expect(isReconciliationOwner(label, who(P1, 'executor'))).toBe(false);
    }
  });

  it('admits exactly the named principals and holders of the named roles', () => {
    const owner = `role:tenant_admin+principal:${P1}`;
    expect(isReconciliationOwner(owner, who(P1, 'executor'))).toBe(true);
    expect(isReconciliationOwner(owner, who(P2, 'tenant_admin'))).toBe(true);
    expect(isReconciliationOwner(owner, who(P2, 'executor'))).toBe(false);
    expect(isReconciliationOwner(`principal:${P1}`, who(P2, 'tenant_admin'))).toBe(false);
    expect(isReconciliationOwner('role:executor', who(P2, 'executor'))).toBe(true);
  });

  it('never admits an unnamed principal that holds no reconciling role (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 128 }).filter((s) => Identifier.safeParse(s).success),
        fc.constantFrom<Role>('agent', 'approver'),
        (owner, role) =>
          // An agent or approver can be admitted only by being named; random owners never name it.
          !isReconciliationOwner(owner, who('prn-zzzzzzzzzzzzzzzzzzzzzzzzzz', role)) &&
          !isReconciliationOwner(owner, who('prn-zzzzzzzzzzzzzzzzzzzzzzzzzz')),
      ),
    );
  });
});
