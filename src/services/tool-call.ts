/**
 * Authorize a tool call named the way the standard doors name it (an AuthZEN action, an MCP
 * `tools/call`, a Docker MCP Gateway interceptor payload): resolve the tool name through the
 * tenant's binding to its pinned contract, build Writ's authorize request, and decide it through
 * `authorize` (src/services/authorize.ts). One module for every such door, so the same call
 * through any of them yields the same decision, receipt and effects, and the same access request
 * when an approval could lift the denial.
 *
 * Guarantees: the contract is always a pinned one of the tenant (a digest named beside the tool
 * name must be one of its pins); a resource type the door names must be the contract's, and a
 * resource id it names must be the id of the target the decision derived (`targetId`, checked
 * before the commit); the
 * request is parsed by the same `AuthorizeRequest` schema as `POST /v1/authorize`; a denial is a
 * stored receipt, never an exception. Over HTTP (`authorizeNamedToolByKey`) a door costs the
 * storage round trips of `POST /v1/authorize`: the key, the tool's pins and the state in one read
 * near the caller, one commit at the primary under the same guards; the caller is refused (401,
 * 403, 429) before anything about the request is said.
 * Never: builds a URL or an HTTP answer (the doors do), or lets the door's request pick a tenant
 * or principal (the caller does).
 */
import { type AuthorizationState, AuthorizeRequest } from '../core/authorization/decide.js';
import { targetId } from '../core/contracts/target.js';
import { fromZodError, safeText } from '../core/errors.js';
import type { JsonValue } from '../core/canonical/json.js';
import {
  type AuthorizeOutcome,
  type KeyedAuthorizeDoor,
  authorize,
  authorizeFromRead,
  type BeforeCommit,
  openKeyedCaller,
  startKnownKeyToken,
} from './authorize.js';
import type { TenantContext } from './context.js';
import { ServiceError } from './errors.js';
import type { PinnedContract } from './ports.js';
import { bindToolContract, resolveToolContract } from './tools.js';

/** How long a requestable denial's access request stays valid (AuthZEN ARAP `expires_at`). */
export const ACCESS_REQUEST_WINDOW_MS = 15 * 60_000;

/** The authorize request's members as a door picked them out of its own shape, not yet parsed. */
export type DoorRequest = Readonly<Record<string, unknown>>;

/** `AuthorizeRequest` less the contract digest, which only ever comes from the tenant's pins. */
const DoorRequestSchema = AuthorizeRequest.omit({ tool_contract_sha256: true });

export interface NamedToolCall {
  readonly tool_name: string;
  /** A digest the caller named beside the tool name; it must be one of the tool's pins. */
  readonly tool_contract_sha256: string | undefined;
  /** The target's type as the door names it (AuthZEN `resource.type`); checked, never selecting. */
  readonly resource_type?: string;
  /**
   * The target's id as the door names it (AuthZEN `resource.id`); checked, never selecting. When
   * present and not empty it must be the id (`targetId`) of the target the contract derives from
   * the input: an answer about another resource than the one asked about is no answer.
   */
  readonly resource_id?: string;
  /**
   * Writ's authorize request, less the contract digest resolved here, as the door picked it out:
   * parsed here, once, by the same schema as `POST /v1/authorize` (a door checks only what it
   * needs to route the call, so no field is validated twice).
   */
  readonly request: DoorRequest;
}

/** What an approver must approve for the denied call, and until when the offer stands. */
export interface AccessRequest {
  /** The denial receipt's digest. */
  readonly evaluation_id: string;
  readonly evaluated_at_unix_ms: number;
  readonly expires_at_unix_ms: number;
  /** The body of `POST /v1/approval-requests`. */
  readonly body: { readonly tool_contract_sha256: string; readonly input: JsonValue };
}

export interface NamedToolOutcome extends AuthorizeOutcome {
  readonly tool_contract_sha256: string;
  /** Set only for a denial an approval could lift (`approval_missing`). */
  readonly access_request: AccessRequest | null;
}

export async function authorizeNamedTool(ctx: TenantContext, call: NamedToolCall): Promise<NamedToolOutcome> {
  // Parsed before anything is read: a malformed request costs no storage round trip.
  const parsed = parseDoorRequest(call);
  if (!parsed.ok) throw parsed.error;
  const pinned = await resolveToolContract(ctx, call.tool_name, call.tool_contract_sha256);
  const request = boundRequest(call, parsed.request, pinned);
  return outcomeOf(await authorize(ctx, request, resourceIdCheck(call)), request);
}

// ---------------------------------------------------------------------------------------------
// The doors over HTTP: one batch near the caller, as `POST /v1/authorize`

/** What a door that has not authenticated yet gives `authorizeNamedToolByKey`. */
export interface KeyedNamedToolDoor extends KeyedAuthorizeDoor {
  /**
   * Authenticate the ordinary way (key, role, write token), for a refusal found before the keyed
   * read: who asks is answered before what was asked, as on every route.
   */
  authenticate(): Promise<void>;
}

/**
 * `authorizeNamedTool` with the storage round trips of `POST /v1/authorize` (`authorizeByKey`):
 * the key's principal, the tool name's pins and the authorization state in one batch near the
 * caller, then the one commit at the primary. The name is bound by the same rule
 * (`bindToolContract`); a binding the replica's pins refuse (a tool pinned or quarantined a
 * moment ago) is re-read at the primary before the caller is told, and a decision made from the
 * replica's rows is re-checked by the commit's freshness guard as on `/v1`.
 */
export async function authorizeNamedToolByKey(
  door: KeyedNamedToolDoor,
  key: { readonly shard: number; readonly key_sha256: string },
  call: NamedToolCall,
): Promise<NamedToolOutcome> {
  const parsed = parseDoorRequest(call);
  if (!parsed.ok) {
    await door.authenticate();
    throw parsed.error;
  }
  const read = (options?: { readonly at: 'primary' }) =>
    door.platform.namedToolAuthorizationByKey(
      key.shard,
      key.key_sha256,
      call.tool_name,
      parsed.request,
      options,
    );
  const early = startKnownKeyToken(door, key);
  const opened = await openKeyedCaller(door, key, await read(), early);
  let found = opened.read;
  let bound = bindToolContract(found.pins, call.tool_name, call.tool_contract_sha256);
  if (!bound.ok) {
    const fresh = await read({ at: 'primary' });
    // The key was found a moment ago; gone at the primary means revoked or deleted: refuse.
    if (fresh === null || fresh.principal.revoked_at_unix_ms !== null) {
      throw new ServiceError('unauthenticated', 'a valid api key is required');
    }
    found = fresh;
    bound = bindToolContract(found.pins, call.tool_name, call.tool_contract_sha256);
    if (!bound.ok) throw bound.error;
  }
  const { pinned } = bound;
  const request = boundRequest(call, parsed.request, pinned);
  // The state as the by-digest read would have returned it for the bound contract.
  const state: AuthorizationState = {
    ...found.state,
    contract: {
      tool_contract_sha256: pinned.tool_contract_sha256,
      contract: pinned.contract,
      quarantined: pinned.quarantined_at_unix_ms !== null,
    },
  };
  return outcomeOf(await authorizeFromRead(opened.ctx, request, state, resourceIdCheck(call)), request);
}

// ---------------------------------------------------------------------------------------------

type ParsedDoorRequest =
  | { readonly ok: true; readonly request: Omit<AuthorizeRequest, 'tool_contract_sha256'> }
  | { readonly ok: false; readonly error: ServiceError };

function parseDoorRequest(call: NamedToolCall): ParsedDoorRequest {
  const parsed = DoorRequestSchema.safeParse(call.request);
  if (parsed.success) return { ok: true, request: parsed.data };
  const err = fromZodError('invalid_request', '', parsed.error);
  const first = err.issues[0];
  return {
    ok: false,
    error: new ServiceError(
      'invalid_request',
      first === undefined ? err.message : `${first.path}: ${first.message}`,
      err.issues,
    ),
  };
}

/** The request with the bound pin's digest, once the door's resource type is checked against it. */
function boundRequest(
  call: NamedToolCall,
  parsed: Omit<AuthorizeRequest, 'tool_contract_sha256'>,
  pinned: PinnedContract,
): AuthorizeRequest {
  if (call.resource_type !== undefined && pinned.contract.resource.type !== call.resource_type) {
    throw new ServiceError('target_mismatch', "resource type is not the type of the tool's target");
  }
  // The digest is a stored pin's own: it needs no parse.
  return { ...parsed, tool_contract_sha256: pinned.tool_contract_sha256 };
}

/**
 * A PEP asking about resource X must not be told "permit" for the input's resource Y: a resource
 * id the door names (unless empty) must be the id of the target the decision derived, checked on
 * the decided receipt before anything is committed (so the target is derived once, by the core).
 * An input that names no valid target never reaches it: the decision refuses it first.
 */
function resourceIdCheck(call: NamedToolCall): BeforeCommit | undefined {
  const named = call.resource_id;
  if (named === undefined || named === '') return undefined;
  return (decision) => {
    const id = targetId(decision.receipt.body.target);
    if (id !== named) {
      throw new ServiceError('target_mismatch', 'resource id does not name the target the input names', [
        // The derived id is input text: quoted through `safeText`; the named one is not echoed.
        { path: 'resource.id', message: `input names ${safeText(JSON.stringify(id))}` },
      ]);
    }
  };
}

function outcomeOf(outcome: AuthorizeOutcome, request: AuthorizeRequest): NamedToolOutcome {
  const { receipt } = outcome.decision;
  const requestable = !outcome.authorized && receipt.body.violations.includes('approval_missing');
  return {
    decision: outcome.decision,
    authorized: outcome.authorized,
    tool_contract_sha256: request.tool_contract_sha256,
    access_request: requestable
      ? {
          evaluation_id: receipt.sha256,
          evaluated_at_unix_ms: receipt.body.evaluated_at_unix_ms,
          expires_at_unix_ms: receipt.body.evaluated_at_unix_ms + ACCESS_REQUEST_WINDOW_MS,
          body: { tool_contract_sha256: request.tool_contract_sha256, input: request.input },
        }
      : null,
  };
}
