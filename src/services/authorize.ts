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

/**
 * A door's own check of the decided receipt, before anything is committed (AuthZEN's `resource.id`
 * against the receipt's target): a throw leaves nothing written, no receipt and no run charge.
 */
export type BeforeCommit = (decision: AuthorizationDecision) => void;

export async function authorize(
  ctx: TenantContext,
  request: AuthorizeRequest,
  beforeCommit?: BeforeCommit,
): Promise<AuthorizeOutcome> {
  requireRole(ctx.caller, ROLES_FOR.authorize);
  return decideAndCommit(ctx, request, null, beforeCommit);
}

/** What a door that has not authenticated yet gives `authorizeByKey`. */
export interface KeyedAuthorizeDoor {
  readonly platform: PlatformStore;
  /** The service context of the caller the key names (the door records the caller). */
  open(caller: Caller): TenantContext;
  /** Take a write token of `who` (its tenant's limiter object); throws `rate_limited`. */
  takeWriteToken(who: KeyOwner): Promise<void>;
}

/** The tenant and principal an API key belongs to. */
export interface KeyOwner {
  readonly tenant_id: string;
  readonly principal_id: string;
}

// ---------------------------------------------------------------------------------------------
// Who a key belongs to, remembered per isolate (issue 10, bench:edge)

/**
 * The limiter is a Durable Object per tenant: a round trip of its own, which used to wait for the
 * keyed read (the tenant is only known from it). A key digest names one principal of one tenant
 * for good (a move issues new keys), so the owner storage returned for a digest may start the
 * limiter call while the read is still in flight. It routes the limiter call and nothing else:
 * the read still decides whether the key is valid, revoked or holds the role (a revocation binds
 * the very next call), and its answer is awaited first. Entries are added only after a key passed
 * the read and the role check, so an unknown or wrong-role key never takes a token early.
 */
export const KNOWN_KEYS_MAX = 1_000;
const knownKeys = new Map<string, KeyOwner>();

function remember(id: string, owner: KeyOwner): void {
  if (knownKeys.has(id)) return;
  // Oldest first: a bounded table, whatever keys are presented.
  if (knownKeys.size >= KNOWN_KEYS_MAX) knownKeys.delete(knownKeys.keys().next().value as string);
  knownKeys.set(id, { tenant_id: owner.tenant_id, principal_id: owner.principal_id });
}

/** A promise's outcome as a value, so a failure is seen when awaited, never as unhandled. */
function settle(p: Promise<void>): Promise<{ readonly failed: unknown } | null> {
  return p.then(
    () => null,
    (e: unknown) => ({ failed: e }),
  );
}

/** A limiter call started before the keyed read, for a key this isolate has seen pass. */
export type EarlyWriteToken = {
  readonly owner: KeyOwner;
  readonly outcome: Promise<{ readonly failed: unknown } | null>;
} | null;

function keyId(key: { readonly shard: number; readonly key_sha256: string }): string {
  return `${key.shard}:${key.key_sha256}`;
}

/**
 * A key seen before: its limiter call starts now, alongside the read. Both are awaited before
 * anything is decided or written, the read's verdict first (`openKeyedCaller`), so the answers
 * keep their order (401, 403, then 429) and a limiter that fails or refuses is a refusal, never a
 * pass.
 */
export function startKnownKeyToken(
  door: KeyedAuthorizeDoor,
  key: { readonly shard: number; readonly key_sha256: string },
): EarlyWriteToken {
  const owner = knownKeys.get(keyId(key));
  return owner === undefined ? null : { owner, outcome: settle(door.takeWriteToken(owner)) };
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
  const early = startKnownKeyToken(door, key);
  // The key's shard is the only one asked (its routing part; the digest covers it).
  const read = await door.platform.authorizationByKey(key.shard, key.key_sha256, request);
  const opened = await openKeyedCaller(door, key, read, early);
  return decideAndCommit(opened.ctx, request, opened.read.state, undefined);
}

/**
 * The caller a keyed read found, as `authenticate` would establish it: its context opened, its
 * role checked and its write token taken (or the early one, started by `startKnownKeyToken`,
 * awaited), in that order. For `authorizeByKey` and the doors' keyed read
 * (src/services/tool-call.ts).
 */
export async function openKeyedCaller<R extends { readonly principal: PrincipalRow }>(
  door: KeyedAuthorizeDoor,
  key: { readonly shard: number; readonly key_sha256: string },
  read: R | null,
  early: EarlyWriteToken,
): Promise<{ readonly ctx: TenantContext; readonly read: R }> {
  const id = keyId(key);
  // A revoked key is indistinguishable from an unknown one. Revocation is final, so a replica
  // that shows it is right; one that does not yet is overruled by the commit's guard.
  if (read === null || read.principal.revoked_at_unix_ms !== null) {
    knownKeys.delete(id);
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
  remember(id, caller);
  if (
    early !== null &&
    early.owner.tenant_id === caller.tenant_id &&
    early.owner.principal_id === caller.principal_id
  ) {
    const outcome = await early.outcome;
    if (outcome !== null) throw outcome.failed;
  } else {
    // First sight of the key in this isolate (or, never expected, an owner that differs from the
    // remembered one: that early token is ignored and the read's owner takes one).
    await door.takeWriteToken(caller);
  }
  return { ctx, read };
}

/** `authorize` from a first read already made near the caller (the doors' keyed read). */
export async function authorizeFromRead(
  ctx: TenantContext,
  request: AuthorizeRequest,
  first: AuthorizationState,
  beforeCommit?: BeforeCommit,
): Promise<AuthorizeOutcome> {
  requireRole(ctx.caller, ROLES_FOR.authorize);
  return decideAndCommit(ctx, request, first, beforeCommit);
}

async function decideAndCommit(
  ctx: TenantContext,
  request: AuthorizeRequest,
  first: AuthorizationState | null,
  beforeCommit: BeforeCommit | undefined,
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
    beforeCommit?.(decision);
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
