/**
 * The drizzle handle over the `DB` binding. Every query goes to the D1 primary (no Sessions API,
 * no read replicas), so a write such as a revocation is seen by the very next request, wherever
 * it is served. Any read-replica change must keep that property for the authorization path.
 */
import { drizzle, type DrizzleD1Database } from 'drizzle-orm/d1';
import * as schema from './schema.js';

export type Db = DrizzleD1Database<typeof schema>;

export function database(env: { DB: D1Database }): Db {
  return drizzle(env.DB, { schema });
}

/** Message fragments of the invariant triggers in migrations/0001_invariants.sql. */
export type InvariantViolation =
  | 'approval_unusable'
  | 'approval_not_pending'
  | 'approval_second_approver'
  | 'approval_first_approval'
  | 'run_budget_spent'
  | 'contract_quarantined'
  | 'grant_revoked'
  | 'principal_revoked';

const INVARIANTS: readonly InvariantViolation[] = [
  'approval_unusable',
  'approval_not_pending',
  // migrations/0007_console.sql
  'approval_second_approver',
  'approval_first_approval',
  'run_budget_spent',
  'contract_quarantined',
  'grant_revoked',
  'principal_revoked',
];

/**
 * Which invariant trigger aborted a statement, if any. D1 reports `RAISE(ABORT, msg)` in the
 * error message (possibly wrapped in a `cause`), so the trigger message is the only signal.
 */
export function invariantViolation(e: unknown): InvariantViolation | null {
  let cur: unknown = e;
  for (let depth = 0; depth < 4 && cur instanceof Error; depth++) {
    const hit = INVARIANTS.find((name) => cur instanceof Error && cur.message.includes(name));
    if (hit !== undefined) return hit;
    cur = cur.cause;
  }
  return null;
}
