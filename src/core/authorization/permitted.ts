/**
 * `permittedTools`: which pinned tools a principal's grants could authorize on one target, for
 * search doors (AuthZEN action search, MCP `tools/list` filtering).
 *
 * Guarantees: a tool is listed only if one live grant, valid at `now`, of the caller's tenant,
 * principal and policy allows its name and effect and holds every required capability in scope
 * of the target, and its contract is not quarantined; a listed tool still needs a full
 * authorization per call (approval, run budget, idempotency key, exact input), and the result
 * says whether an approval will be needed. It is a search, not a decision: it grants nothing,
 * stores nothing and consumes nothing.
 * Never: lists a tool that `authorizeToolCall` would deny for a grant dimension (tool, effect,
 * capability, resource scope, tenant, principal, policy, validity, revocation, quarantine).
 */
import type { ResourceRef, ToolContract, ToolEffect } from '../model.js';
import { WRITE_EFFECTS } from '../model.js';
import type { CallerRecord, ContractRecord, GrantRecord, PolicyRecord } from './decide.js';
import { selectorMatches } from './authorize.js';

export interface PermittedTool {
  readonly tool_name: string;
  readonly tool_contract_sha256: string;
  readonly effect: ToolEffect;
  /** The type of resource the tool's contract targets. */
  readonly resource_type: string;
  readonly approval_required: boolean;
}

export interface PermittedQuery {
  readonly caller: CallerRecord;
  readonly policy: PolicyRecord;
  readonly contracts: readonly ContractRecord[];
  readonly grants: readonly GrantRecord[];
  /** Only tools whose contract targets this resource; null lists every tool for any target. */
  readonly target: ResourceRef | null;
  readonly now: number;
}

export function permittedTools(q: PermittedQuery): PermittedTool[] {
  if (q.caller.revoked) return [];
  const live = q.grants.filter(
    (g) =>
      !g.revoked &&
      g.grant.tenant_id === q.caller.tenant_id &&
      g.grant.principal_id === q.caller.principal_id &&
      g.grant.policy_sha256 === q.policy.policy_sha256 &&
      q.now >= g.grant.not_before_unix_ms &&
      q.now < g.grant.expires_at_unix_ms,
  );
  const out: PermittedTool[] = [];
  for (const c of q.contracts) {
    if (c.quarantined) continue;
    const contract = c.contract;
    if (q.target !== null && !sameShape(contract, q.target)) continue;
    const allowed = live.some(
      (g) =>
        g.grant.allowed_tools.includes(contract.tool_name) &&
        g.grant.allowed_effects.includes(contract.effect) &&
        contract.required_capabilities.every((cap) =>
          g.grant.capabilities.some(
            (held) =>
              held.capability === cap &&
              // Without a target, a capability held for any resource counts; with one, in scope.
              (q.target === null || held.resources.some((s) => selectorMatches(s, q.target as ResourceRef))),
          ),
        ),
    );
    if (!allowed) continue;
    out.push({
      tool_name: contract.tool_name,
      tool_contract_sha256: c.tool_contract_sha256,
      effect: contract.effect,
      resource_type: contract.resource.type,
      approval_required:
        WRITE_EFFECTS.has(contract.effect) ||
        q.policy.policy.approval_required_effects.includes(contract.effect),
    });
  }
  return out.sort((a, b) =>
    a.tool_name < b.tool_name
      ? -1
      : a.tool_name > b.tool_name
        ? 1
        : a.tool_contract_sha256 < b.tool_contract_sha256
          ? -1
          : 1,
  );
}

function sameShape(contract: ToolContract, target: ResourceRef): boolean {
  if (contract.resource.type !== target.type) return false;
  const want = Object.keys(contract.resource.attributes);
  const have = Object.keys(target.attributes);
  return want.length === have.length && want.every((k) => Object.hasOwn(target.attributes, k));
}
