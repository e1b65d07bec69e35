/**
 * Lookups shared by several routes. Every function takes the caller's tenant and filters on it:
 * there is no query here that can return another tenant's row.
 */
import { and, eq } from 'drizzle-orm';
import { ToolContract, ToolGrant } from '../core/model.js';
import { TenantPolicy } from '../core/policy.js';
import type { Db } from './client.js';
import { DocumentCache, StoredDocumentError } from './documents.js';
import { contracts, policies, principals, tenants } from './schema.js';

export const contractCache = new DocumentCache<ToolContract>('contract', ToolContract);
export const policyCache = new DocumentCache<TenantPolicy>('policy', TenantPolicy);

export interface PolicyInForce {
  readonly policy_sha256: string;
  readonly policy: TenantPolicy;
}

export function currentPolicyQuery(db: Db, tenant_id: string) {
  return db
    .select({ policy_sha256: tenants.policy_sha256, document: policies.document })
    .from(tenants)
    .innerJoin(
      policies,
      and(eq(policies.tenant_id, tenants.tenant_id), eq(policies.policy_sha256, tenants.policy_sha256)),
    )
    .where(eq(tenants.tenant_id, tenant_id));
}

export function toPolicyInForce(row: { policy_sha256: string; document: string } | undefined): PolicyInForce {
  // Every tenant is created with a policy, so a missing one is corruption: fail closed.
  if (row === undefined) throw new StoredDocumentError('tenant has no policy in force');
  return { policy_sha256: row.policy_sha256, policy: policyCache.get(row.policy_sha256, row.document) };
}

export async function currentPolicy(db: Db, tenant_id: string): Promise<PolicyInForce> {
  return toPolicyInForce(await currentPolicyQuery(db, tenant_id).get());
}

/** A policy the tenant had at some time, by digest (receipts bind it). */
export async function policyByDigest(
  db: Db,
  tenant_id: string,
  sha256: string,
): Promise<TenantPolicy | null> {
  const row = await db
    .select({ document: policies.document })
    .from(policies)
    .where(and(eq(policies.tenant_id, tenant_id), eq(policies.policy_sha256, sha256)))
    .get();
  return row === undefined ? null : policyCache.get(sha256, row.document);
}

export interface PinnedContract {
  readonly tool_contract_sha256: string;
  readonly contract: ToolContract;
  readonly pinned_by: string;
  readonly pinned_at_unix_ms: number;
  readonly quarantined_at_unix_ms: number | null;
  readonly quarantine_reason: string | null;
}

export function contractQuery(db: Db, tenant_id: string, sha256: string) {
  return db
    .select()
    .from(contracts)
    .where(and(eq(contracts.tenant_id, tenant_id), eq(contracts.tool_contract_sha256, sha256)));
}

export function toPinnedContract(row: typeof contracts.$inferSelect): PinnedContract {
  return {
    tool_contract_sha256: row.tool_contract_sha256,
    contract: contractCache.get(row.tool_contract_sha256, row.document),
    pinned_by: row.pinned_by,
    pinned_at_unix_ms: row.pinned_at_unix_ms,
    quarantined_at_unix_ms: row.quarantined_at_unix_ms,
    quarantine_reason: row.quarantine_reason,
  };
}

export async function findContract(
  db: Db,
  tenant_id: string,
  sha256: string,
): Promise<PinnedContract | null> {
  const row = await contractQuery(db, tenant_id, sha256).get();
  return row === undefined ? null : toPinnedContract(row);
}

export async function findPrincipal(db: Db, tenant_id: string, principal_id: string) {
  return db
    .select()
    .from(principals)
    .where(and(eq(principals.tenant_id, tenant_id), eq(principals.principal_id, principal_id)))
    .get();
}

export const grantCache = new DocumentCache<ToolGrant>('grant', ToolGrant);
