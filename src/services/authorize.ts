/**
 * Authorize one tool call: load the state it depends on through the tenant's store, decide with
 * the core's one entry point (`decideAuthorization`), and commit the receipt with the state
 * changes the decision implies. Every door calls this, so the same call through any door yields
 * the same decision, receipt and effects.
 *
 * Guarantees: an authorized decision commits its receipt, approval consumption and run charge
 * atomically under guards; a revocation, quarantine, consumption or spend that committed first
 * aborts the commit, and the call is re-decided against fresh state (normally a stored denial);
 * a denial is a stored receipt, never an exception. After `MAX_ATTEMPTS` lost races: `conflict`.
 * Never: logs the input (only its digest), or lets a request field select a tenant, principal,
 * grant owner, policy or approval of another tenant.
 */
import {
  type AuthorizationDecision,
  type AuthorizeRequest,
  decideAuthorization,
} from '../core/authorization/decide.js';
import { newId } from '../db/ids.js';
import { type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { ServiceError, unwrap } from './errors.js';

/** A lost race is retried against fresh state; the fresh evaluation is normally a denial. */
export const MAX_ATTEMPTS = 3;

export interface AuthorizeOutcome {
  readonly decision: AuthorizationDecision;
  readonly authorized: boolean;
}

export async function authorize(ctx: TenantContext, request: AuthorizeRequest): Promise<AuthorizeOutcome> {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.authorize);
  const invocation_id = newId('invocation');
  for (let attempt = 1; ; attempt++) {
    const state = await store.loadAuthorizationState(caller.principal_id, request);
    const decision = unwrap(decideAuthorization(request, state, { invocation_id }, now));
    const { receipt } = decision;
    ctx.log({
      tool_contract_sha256: receipt.body.tool_contract_sha256,
      input_sha256: receipt.body.input_sha256,
      invocation_id,
      run_id: request.run_id,
      receipt_sha256: receipt.sha256,
      decision: receipt.body.decision,
      attempt,
    });
    const committed = await store.commitAuthorization(decision, caller.principal_id, now);
    if (committed.ok) return { decision, authorized: receipt.body.decision === 'authorized' };
    ctx.log({ lost_race: committed.lost });
    if (attempt >= MAX_ATTEMPTS)
      throw new ServiceError('conflict', 'authorization is contended; retry the call');
  }
}
