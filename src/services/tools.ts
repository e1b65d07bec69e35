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
import type { ResourceRef } from '../core/model.js';
import { type PermittedTool, permittedTools } from '../core/authorization/permitted.js';
import { safeText } from '../core/errors.js';
import type { TenantContext } from './context.js';
import { ServiceError, notFound } from './errors.js';
import type { PinnedContract } from './ports.js';

export async function resolveToolContract(
  ctx: TenantContext,
  tool_name: string,
  named_sha256?: string,
): Promise<PinnedContract> {
  const pinned = await ctx.store.contractsForTool(tool_name);
  if (named_sha256 !== undefined) {
    // A digest named beside the tool name must be one of that tool's pinned contracts.
    const named = pinned.find((p) => p.tool_contract_sha256 === named_sha256);
    if (named === undefined) throw notFound('contract for this tool');
    return named;
  }
  const live = pinned.filter((p) => p.quarantined_at_unix_ms === null);
  if (live.length === 1) return live[0] as PinnedContract;
  if (live.length > 1) {
    throw new ServiceError(
      'conflict',
      `tool "${safeText(tool_name)}" has ${live.length} unquarantined pinned contracts; name one by digest or quarantine the others`,
    );
  }
  const latest = pinned.at(-1);
  if (latest === undefined) throw notFound('tool');
  return latest;
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
