/**
 * Tools by name, for doors that speak in tool names (AuthZEN actions, MCP `tools/call`): the
 * tenant's binding of a tool name to its pinned contract, and the search "which tools may this
 * caller use on this resource".
 *
 * Binding rule: a tool name is bound to its one unquarantined pinned contract. Pinning a reviewed
 * new definition while the old one is still unquarantined makes the name ambiguous (`conflict`)
 * until the old one is quarantined, so a door can never silently pick between two reviewed
 * definitions. A name whose every contract is quarantined resolves to the latest one, so the
 * call is decided (and receipted) as `contract_quarantined`. An unknown name is `not_found`.
 */
import type { ResourceRef, ToolEffect } from '../core/model.js';
import { type PermittedTool, permittedTools } from '../core/authorization/permitted.js';
import { safeText } from '../core/errors.js';
import { sha256HexOfText } from '../core/canonical/canonical.js';
import { utf8ByteLength } from '../core/canonical/json.js';
import { Sha256 } from '../core/schema.js';
import { ROLES_FOR, type TenantContext, requireRole } from './context.js';
import { ServiceError, notFound } from './errors.js';
import { loadAuthorizationReceipt, reportExecution } from './executions.js';
import { observe } from './observations.js';
import type { PinnedContract } from './ports.js';

export async function resolveToolContract(
  ctx: TenantContext,
  tool_name: string,
  named_sha256?: string,
): Promise<PinnedContract> {
  let bound = bindToolContract(await ctx.store.contractsForTool(tool_name), tool_name, named_sha256);
  if (!bound.ok) {
    // The read may have been served by a lagging replica (AuthZEN's batch reads near the caller):
    // a tool pinned, or a rival pin quarantined, a moment ago is looked for at the primary before
    // the name is refused, as the doors' keyed read does (src/services/tool-call.ts).
    const fresh = await ctx.store.contractsForTool(tool_name, { at: 'primary' });
    bound = bindToolContract(fresh, tool_name, named_sha256);
  }
  if (!bound.ok) throw bound.error;
  return bound.pinned;
}

export type ToolBinding =
  | { readonly ok: true; readonly pinned: PinnedContract }
  | { readonly ok: false; readonly error: ServiceError };

/**
 * The binding rule above over the tool's pins as read (`contractsForTool` order: oldest first),
 * without storage: the doors' one-batch read (src/services/tool-call.ts) reads the pins together
 * with the authorization state and binds here. A refusal is returned, not thrown, so a caller
 * that read at a replica can re-read at the primary before refusing.
 */
export function bindToolContract(
  pinned: readonly PinnedContract[],
  tool_name: string,
  named_sha256?: string,
): ToolBinding {
  if (named_sha256 !== undefined) {
    // A digest named beside the tool name must be one of that tool's pinned contracts.
    const named = pinned.find((p) => p.tool_contract_sha256 === named_sha256);
    if (named === undefined) return { ok: false, error: notFound('contract for this tool') };
    return { ok: true, pinned: named };
  }
  const live = pinned.filter((p) => p.quarantined_at_unix_ms === null);
  if (live.length === 1) return { ok: true, pinned: live[0] as PinnedContract };
  if (live.length > 1) {
    return {
      ok: false,
      error: new ServiceError(
        'conflict',
        `tool "${safeText(tool_name)}" has ${live.length} unquarantined pinned contracts; name one by digest or quarantine the others`,
      ),
    };
  }
  const latest = pinned.at(-1);
  if (latest === undefined) return { ok: false, error: notFound('tool') };
  return { ok: true, pinned: latest };
}

/** The tools the caller's grants could authorize on `target` (any target when null). */
export async function searchTools(ctx: TenantContext, target: ResourceRef | null): Promise<PermittedTool[]> {
  const { store, caller, now } = ctx;
  const [policy, contracts, grants, self] = await Promise.all([
    store.currentPolicy(),
    store.listContracts(),
    store.grantsOf(caller.principal_id),
    store.getPrincipal(caller.principal_id),
  ]);
  return permittedTools({
    caller: {
      tenant_id: caller.tenant_id,
      principal_id: caller.principal_id,
      revoked: self === null || self.revoked_at_unix_ms !== null,
    },
    policy,
    contracts: contracts.map((c) => ({
      tool_contract_sha256: c.tool_contract_sha256,
      contract: c.contract,
      quarantined: c.quarantined_at_unix_ms !== null,
    })),
    grants,
    target,
    now,
  });
}

/**
 * Every pinned contract of the tenant, marked with whether the caller's grants could authorize
 * it: what a door that filters a server's advertised tool list (MCP `tools/list`) compares with.
 */
export async function toolCatalog(ctx: TenantContext): Promise<
  {
    readonly tool_contract_sha256: string;
    readonly contract: PinnedContract['contract'];
    readonly quarantined: boolean;
    readonly permitted: boolean;
  }[]
> {
  const [permitted, contracts] = await Promise.all([searchTools(ctx, null), ctx.store.listContracts()]);
  const ok = new Set(permitted.map((p) => p.tool_contract_sha256));
  return contracts.map((c) => ({
    tool_contract_sha256: c.tool_contract_sha256,
    contract: c.contract,
    quarantined: c.quarantined_at_unix_ms !== null,
    permitted: ok.has(c.tool_contract_sha256),
  }));
}

/** What a door knows about one finished tool call (MCP `tools/call` result, executor side). */
export interface ToolCallOutcome {
  readonly operation_id: string;
  readonly fencing_token: string;
  readonly observation_id: string;
  /**
   * What the executor says happened, or `null`: then `succeeded`, unless the tool's result was an
   * error (`result_is_error`). An MCP tool error does not prove that nothing happened, so it reads
   * as `failed_no_effect` only for a read-only contract, and as `indeterminate` (reconciliation)
   * for every contract with an effect.
   */
  readonly outcome: 'succeeded' | 'failed_no_effect' | 'indeterminate' | null;
  /** The tool's result was an error (`isError: true`). */
  readonly result_is_error: boolean;
  readonly started_at_unix_ms: number;
  readonly completed_at_unix_ms: number;
  /** The canonical output text: its digest and size are the execution's output. */
  readonly output_text: string;
  readonly effect_id: string | null;
  readonly before_state_sha256: string | null;
  readonly after_state_sha256: string | null;
  /** When present and the execution verified as succeeded, the output is also observed. */
  readonly evidence: {
    readonly observation_id: string;
    readonly source_release: string;
    readonly source_as_of_unix_ms: number;
    readonly observed_at_unix_ms: number;
  } | null;
}

/**
 * Report a finished tool call (`reportExecution`) and, for a verified success with evidence,
 * observe its output as untrusted evidence (`observe`). The authorization receipt, invocation
 * and idempotency key come from the operation's own receipt, never from the door.
 */
/** The outcome of a report that names none (see `ToolCallOutcome.outcome`): fail closed on errors. */
export function defaultOutcome(
  result_is_error: boolean,
  effect: ToolEffect,
): 'succeeded' | 'failed_no_effect' | 'indeterminate' {
  if (!result_is_error) return 'succeeded';
  return effect === 'read_only' ? 'failed_no_effect' : 'indeterminate';
}

export async function reportToolCall(ctx: TenantContext, o: ToolCallOutcome) {
  requireRole(ctx.caller, ROLES_FOR.report);
  const found = Sha256.safeParse(o.operation_id).success
    ? await ctx.operations.read(o.operation_id, ctx.caller.tenant_id)
    : null;
  if (found === null) throw notFound('operation');
  const authorization = await loadAuthorizationReceipt(
    ctx.store,
    found.operation.authorization_receipt_sha256,
  );
  if (authorization === null) throw notFound('authorization receipt');
  const auth = authorization.body;
  const bytes = utf8ByteLength(o.output_text);
  const output_sha256 = sha256HexOfText(o.output_text);
  // The executor's own release; a key without one is refused by `reportExecution` (not an
  // executor of this contract), so the receipt's audience only fills in for the report's shape.
  const executor_release =
    ctx.caller.executor_release ?? (auth.receipt_version === 2 ? auth.executor_release : 'unknown');
  const execution = await reportExecution(ctx, {
    operation_id: o.operation_id,
    fencing_token: o.fencing_token,
    observation: {
      observation_id: o.observation_id,
      authorization_receipt_sha256: authorization.sha256,
      invocation_sha256: auth.invocation_sha256,
      executor_release,
      outcome: o.outcome ?? defaultOutcome(o.result_is_error, auth.effect),
      started_at_unix_ms: o.started_at_unix_ms,
      completed_at_unix_ms: o.completed_at_unix_ms,
      output_sha256,
      output_bytes: bytes,
      effect_id: o.effect_id,
      before_state_sha256: o.before_state_sha256,
      after_state_sha256: o.after_state_sha256,
      idempotency_key: auth.idempotency_key,
    },
  });
  const execution_receipt = execution.execution_receipt;
  if (o.evidence === null || execution.status !== 'verified_succeeded' || execution_receipt === null) {
    return { execution, observation: null };
  }
  const observation = await observe(ctx, {
    kind: 'output',
    observation: {
      observation_id: o.evidence.observation_id,
      tenant_id: ctx.caller.tenant_id,
      policy_sha256: auth.policy_sha256,
      tool_contract_sha256: auth.tool_contract_sha256,
      invocation_sha256: auth.invocation_sha256,
      execution_receipt_sha256: execution_receipt.sha256,
      source_release: o.evidence.source_release,
      source_generation: null,
      source_as_of_unix_ms: o.evidence.source_as_of_unix_ms,
      media_type: 'application/json',
      payload: o.output_text,
      artifact: null,
      payload_sha256: output_sha256,
      payload_bytes: bytes,
      locators: [],
      observed_at_unix_ms: o.evidence.observed_at_unix_ms,
    },
  });
  return { execution, observation };
}
