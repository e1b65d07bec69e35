/**
 * Pinned tool contracts and contract discovery. A contract is identified by the SHA-256 of its
 * canonical bytes: pinning identical content again returns the same digest, and a changed field
 * is a different contract. A contract is never updated in place, and a quarantine is never lifted.
 *
 * Discovery compares what a tool server advertises now with the tenant's pinned contracts. Drift
 * is never merged: a drifted tool's unquarantined contracts are quarantined (one batch) unless
 * the request says `quarantine: false`, so no later authorization can use a definition the
 * executor no longer runs. Re-review and pin the new definition to use the tool again.
 */
import { z } from 'zod';
import { contractDigest, validateContract } from '../core/contracts/contract.js';
import { compareDiscovery } from '../core/contracts/discovery.js';
import { fromZodError } from '../core/errors.js';
import type { JsonValue } from '../core/canonical/json.js';
import { ToolContract } from '../core/model.js';
import { Label, Sha256 } from '../core/schema.js';
import { type TenantContext, ROLES_FOR, requireRole } from './context.js';
import { ServiceError, fromCoreError, notFound, unwrap } from './errors.js';
import type { PinnedContract } from './ports.js';

export const QuarantineRequest = z.strictObject({ reason: Label.optional() });
export type QuarantineRequest = z.infer<typeof QuarantineRequest>;

export const DiscoveryRequest = z.strictObject({
  /** A `DiscoverySnapshot` (src/core/contracts/discovery.ts); validated by the core. */
  snapshot: z.unknown(),
  /** Quarantine the pinned contracts of drifted tools (default). `false` only reports. */
  quarantine: z.boolean().optional(),
});
export type DiscoveryRequest = z.infer<typeof DiscoveryRequest>;

export async function pinContract(ctx: TenantContext, document: JsonValue) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const shaped = ToolContract.safeParse(document);
  if (!shaped.success) throw fromCoreError(fromZodError('invalid_contract', 'contract', shaped.error));
  const contract = unwrap(validateContract(shaped.data));
  const sha = contractDigest(contract);
  const inserted = await ctx.store.pinContract(contract, sha, ctx.caller.principal_id, ctx.now);
  const pinned = await ctx.store.getContract(sha);
  if (pinned === null) throw new ServiceError('internal', 'pinned contract not found');
  ctx.log({ tool_contract_sha256: sha });
  return { inserted, contract: contractView(pinned) };
}

export async function getContract(ctx: TenantContext, sha: string) {
  return contractView(await lookup(ctx, sha));
}

export async function quarantineContract(ctx: TenantContext, sha: string, body: QuarantineRequest) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const pinned = await lookup(ctx, sha);
  if (pinned.quarantined_at_unix_ms === null) {
    await ctx.store.quarantineContracts([pinned.tool_contract_sha256], ctx.now, body.reason ?? null);
  }
  const after = await ctx.store.getContract(pinned.tool_contract_sha256);
  if (after === null) throw new ServiceError('internal', 'quarantined contract not found');
  ctx.log({ tool_contract_sha256: after.tool_contract_sha256, quarantined: true });
  return contractView(after);
}

export async function discover(ctx: TenantContext, body: DiscoveryRequest) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const pinned = (await ctx.store.listContracts()).map((p) => ({
    tool_contract_sha256: p.tool_contract_sha256,
    contract: p.contract,
    quarantined: p.quarantined_at_unix_ms !== null,
    pinned_at_unix_ms: p.pinned_at_unix_ms,
  }));
  const report = unwrap(compareDiscovery(body.snapshot, pinned));
  const apply = body.quarantine ?? true;
  if (apply && report.quarantine.length > 0) {
    await ctx.store.quarantineContracts(
      report.quarantine,
      ctx.now,
      `discovery drift (snapshot ${report.snapshot_sha256})`,
    );
  }
  ctx.log({
    snapshot_sha256: report.snapshot_sha256,
    drifted: report.tools.filter((t) => t.status === 'drifted').length,
    quarantined: apply ? report.quarantine.length : 0,
  });
  return { ...report, quarantined: apply ? report.quarantine : [] };
}

async function lookup(ctx: TenantContext, sha: string): Promise<PinnedContract> {
  // A malformed digest cannot name a pinned contract: the same 404 as an unknown one.
  if (!Sha256.safeParse(sha).success) throw notFound('contract');
  const pinned = await ctx.store.getContract(sha);
  if (pinned === null) throw notFound('contract');
  return pinned;
}

export function contractView(p: PinnedContract) {
  return {
    tool_contract_sha256: p.tool_contract_sha256,
    contract: p.contract,
    pinned_by: p.pinned_by,
    pinned_at_unix_ms: p.pinned_at_unix_ms,
    quarantined: p.quarantined_at_unix_ms !== null,
    quarantined_at_unix_ms: p.quarantined_at_unix_ms,
    quarantine_reason: p.quarantine_reason,
  };
}
