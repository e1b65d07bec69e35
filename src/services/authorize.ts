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
 * State read at a replica is never trusted further than the commit: the commit re-checks at the
 * primary the rows the decision used, and a lost race or a failed evaluation re-reads there.
 * Never: logs the input (only its digest), or lets a request field select a tenant, principal,
 * grant owner, policy or approval of another tenant.
 */
import {
  type AuthorizationDecision,
  type AuthorizationState,
  type AuthorizeRequest,
  decideAuthorization,
} from '../core/authorization/decide.js';
import { newId } from '../db/ids.js';
import { type Caller, type TenantContext, ROLES_FOR, requireRole } from './context.js';
import type { PlatformStore, PrincipalRow } from './ports.js';
import { ServiceError, unwrap } from './errors.js';

/** A lost race is retried against fresh state; the fresh evaluation is normally a denial. */
export const MAX_ATTEMPTS = 3;

export interface AuthorizeOutcome {
  readonly decision: AuthorizationDecision;
  readonly authorized: boolean;
}

export async function authorize(ctx: TenantContext, request: AuthorizeRequest): Promise<AuthorizeOutcome> {
  requireRole(ctx.caller, ROLES_FOR.authorize);
  return decideAndCommit(ctx, request, null);
}

/** What a door that has not authenticated yet gives `authorizeByKey`. */
export interface KeyedAuthorizeDoor {
  readonly platform: PlatformStore;
  /** The service context of the caller the key names (the door records the caller). */
  open(caller: Caller): TenantContext;
  /** Take the caller's write token; throws `rate_limited`. */
  takeWriteToken(): Promise<void>;
}

/**
 * `POST /v1/authorize` with one read near the caller: the key's principal and the state the
 * decision needs come in one batch (a replica may serve it), so the only round trip to the
 * primary is the commit. Staleness is caught where it matters: a key unknown to the replica is
 * looked up at the primary, a decision that cannot be evaluated is re-read there, and the commit
 * re-checks at the primary every row the decision relied on (`commitAuthorization`).
 */
export async function authorizeByKey(
  door: KeyedAuthorizeDoor,
  key: { readonly shard: number; readonly key_sha256: string },
  request: AuthorizeRequest,
): Promise<AuthorizeOutcome> {
  // The key's shard is the only one asked (its routing part; the digest covers it).
  const read = await door.platform.authorizationByKey(key.shard, key.key_sha256, request);
  const opened = await openKeyedCaller(door, read);
  return decideAndCommit(opened.ctx, request, opened.read.state);
}

/**
 * The caller a keyed read found, as `authenticate` would establish it: its context opened, its
 * role checked and its write token taken, in that order. For `authorizeByKey` and the doors'
 * keyed read (src/services/tool-call.ts).
 */
export async function openKeyedCaller<R extends { readonly principal: PrincipalRow }>(
  door: KeyedAuthorizeDoor,
  read: R | null,
): Promise<{ readonly ctx: TenantContext; readonly read: R }> {
  // A revoked key is indistinguishable from an unknown one. Revocation is final, so a replica
  // that shows it is right; one that does not yet is overruled by the commit's guard.
  if (read === null || read.principal.revoked_at_unix_ms !== null) {
    throw new ServiceError('unauthenticated', 'a valid api key is required');
  }
  const { principal } = read;
  const caller: Caller = {
    principal_id: principal.principal_id,
    tenant_id: principal.tenant_id,
    roles: principal.roles,
    executor_release: principal.executor_release,
  };
  const ctx = door.open(caller);
  requireRole(caller, ROLES_FOR.authorize);
  await door.takeWriteToken();
  return { ctx, read };
}

/** `authorize` from a first read already made near the caller (the doors' keyed read). */
export async function authorizeFromRead(
  ctx: TenantContext,
  request: AuthorizeRequest,
  first: AuthorizationState,
): Promise<AuthorizeOutcome> {
  requireRole(ctx.caller, ROLES_FOR.authorize);
  return decideAndCommit(ctx, request, first);
}

async function decideAndCommit(
  ctx: TenantContext,
  request: AuthorizeRequest,
  first: AuthorizationState | null,
): Promise<AuthorizeOutcome> {
  const { caller, store, now } = ctx;
  const invocation_id = newId('invocation');
  const principal = caller.principal_id;
  // The first read may have been served by a replica; every later one is at the primary.
  let state = first ?? (await store.loadAuthorizationState(principal, request));
  for (let attempt = 1; ; attempt++) {
    let decided = decideAuthorization(request, state, { invocation_id }, now);
    if (!decided.ok && attempt === 1) {
      // A contract, run or grant created a moment ago may be missing at a replica: the primary
      // answers before the caller is told it does not exist.
      state = await store.loadAuthorizationState(principal, request, { at: 'primary' });
      decided = decideAuthorization(request, state, { invocation_id }, now);
    }
    const decision = unwrap(decided);
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
    const committed = await store.commitAuthorization(decision, principal, now, { request, state });
    if (committed.ok) return { decision, authorized: receipt.body.decision === 'authorized' };
    ctx.log({ lost_race: committed.lost });
    if (attempt >= MAX_ATTEMPTS)
      throw new ServiceError('conflict', 'authorization is contended; retry the call');
    state = await store.loadAuthorizationState(principal, request, { at: 'primary' });
  }
}
