/**
 * Tenant administration: principals, grants and the policy (tenant admin), and tenant creation
 * (platform admin). Keys are returned exactly once, at creation; only their SHA-256 is stored.
 * Grants are immutable; revocation is a separate, final fact read on every authorization, so it
 * takes effect on the next call wherever that call is served. A policy change stores a new
 * document (by digest; history is kept so every receipt's policy can be read back) and makes it
 * the one in force, atomically.
 */
import { z } from 'zod';
import { validateGrant } from '../core/authorization/authorize.js';
import { digestOf } from '../core/canonical/canonical.js';
import type { JsonValue } from '../core/canonical/json.js';
import { fromZodError, quoted } from '../core/errors.js';
import { apiKeyDigest, Role, ROLES } from '../core/identity/identity.js';
import { CapabilityGrant, ToolEffect, ToolGrant } from '../core/model.js';
import { DEFAULT_POLICY, parsePolicy, policyDigest } from '../core/policy.js';
import { Identifier, Label, Sha256, UnixMs } from '../core/schema.js';
import { newApiKey, newId } from '../db/ids.js';
import { type TenantContext, ROLES_FOR, assertNamedIdentity, requireRole } from './context.js';
import { ServiceError, fromCoreError, notFound, unwrap } from './errors.js';
import {
  type GrantRow,
  MAX_LIVE_GRANTS,
  MAX_RECEIPT_RETENTION_DAYS,
  type PlatformStore,
  type PrincipalRow,
} from './ports.js';

// ---------------------------------------------------------------------------------------------
// Principals

export const CreatePrincipalRequest = z
  .strictObject({
    name: Label,
    roles: z.array(Role).min(1).max(ROLES.length),
    /** Required for, and only for, executors: the executor release the principal runs. */
    executor_release: Label.nullable().optional(),
    tenant_id: Identifier.optional(),
  })
  .superRefine((b, ctx) => {
    if (new Set(b.roles).size !== b.roles.length) {
      ctx.addIssue({ code: 'custom', path: ['roles'], message: 'must not contain duplicates' });
    }
    const executor = b.roles.includes('executor');
    const release = b.executor_release ?? null;
    if (executor && release === null) {
      ctx.addIssue({ code: 'custom', path: ['executor_release'], message: 'is required for an executor' });
    }
    if (!executor && release !== null) {
      ctx.addIssue({ code: 'custom', path: ['executor_release'], message: 'is only for executors' });
    }
  });
export type CreatePrincipalRequest = z.infer<typeof CreatePrincipalRequest>;

/** Action endpoints that take no fields. */
export const EmptyRequest = z.strictObject({});

export async function createPrincipal(ctx: TenantContext, body: CreatePrincipalRequest) {
  const { caller } = ctx;
  requireRole(caller, ROLES_FOR.admin);
  assertNamedIdentity(caller, { tenant_id: body.tenant_id });
  const principal_id = newId('principal');
  const api_key = newApiKey(ctx.shard);
  const roles = ROLES.filter((r) => body.roles.includes(r));
  const executor_release = body.executor_release ?? null;
  await ctx.store.insertPrincipal({
    principal_id,
    tenant_id: caller.tenant_id,
    name: body.name,
    roles,
    executor_release,
    key_sha256: apiKeyDigest(api_key),
    created_by: caller.principal_id,
    created_at_unix_ms: ctx.now,
  });
  ctx.log({ created_principal_id: principal_id });
  return {
    principal_id,
    tenant_id: caller.tenant_id,
    name: body.name,
    roles,
    executor_release,
    created_at_unix_ms: ctx.now,
    revoked_at_unix_ms: null,
    api_key,
  };
}

export async function getPrincipal(ctx: TenantContext, principal_id: string) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const row = await ctx.store.getPrincipal(principal_id);
  if (row === null) throw notFound('principal');
  return principalView(row);
}

export async function revokePrincipal(ctx: TenantContext, principal_id: string) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const row = await ctx.store.getPrincipal(principal_id);
  if (row === null) throw notFound('principal');
  if (row.revoked_at_unix_ms === null) await ctx.store.revokePrincipal(principal_id, ctx.now);
  const after = await ctx.store.getPrincipal(principal_id);
  if (after === null) throw new ServiceError('internal', 'principal disappeared');
  ctx.log({ revoked_principal_id: principal_id });
  return principalView(after);
}

function principalView(row: PrincipalRow) {
  return {
    principal_id: row.principal_id,
    tenant_id: row.tenant_id,
    name: row.name,
    roles: row.roles,
    executor_release: row.executor_release,
    created_at_unix_ms: row.created_at_unix_ms,
    revoked_at_unix_ms: row.revoked_at_unix_ms,
  };
}

// ---------------------------------------------------------------------------------------------
// Grants

export const CreateGrantRequest = z.strictObject({
  principal_id: Identifier,
  allowed_tools: z.array(Identifier).max(256),
  allowed_effects: z.array(ToolEffect).max(4),
  capabilities: z.array(CapabilityGrant).max(64),
  /** Defaults to now. */
  not_before_unix_ms: UnixMs.optional(),
  expires_at_unix_ms: UnixMs,
  /** Checked against the caller's tenant and the policy in force; never selects them. */
  tenant_id: Identifier.optional(),
  policy_sha256: Sha256.optional(),
});
export type CreateGrantRequest = z.infer<typeof CreateGrantRequest>;

export async function createGrant(ctx: TenantContext, body: CreateGrantRequest) {
  const { caller, store } = ctx;
  requireRole(caller, ROLES_FOR.admin);
  assertNamedIdentity(caller, { tenant_id: body.tenant_id });
  const [grantee, inForce] = await Promise.all([
    store.getPrincipal(body.principal_id),
    store.currentPolicy(),
  ]);
  if (grantee === null) throw notFound('principal');
  if (grantee.revoked_at_unix_ms !== null) throw new ServiceError('conflict', 'principal is revoked');
  // A grant bound to a policy other than the one in force would be denied on every call.
  if (body.policy_sha256 !== undefined && body.policy_sha256 !== inForce.policy_sha256) {
    throw new ServiceError('conflict', 'policy_sha256 is not the policy in force');
  }
  const candidate = {
    grant_id: newId('grant'),
    principal_id: grantee.principal_id,
    tenant_id: caller.tenant_id,
    policy_sha256: inForce.policy_sha256,
    allowed_tools: body.allowed_tools,
    allowed_effects: body.allowed_effects,
    capabilities: body.capabilities,
    not_before_unix_ms: body.not_before_unix_ms ?? ctx.now,
    expires_at_unix_ms: body.expires_at_unix_ms,
  };
  const shaped = ToolGrant.safeParse(candidate);
  if (!shaped.success) throw fromCoreError(fromZodError('invalid_grant', 'grant', shaped.error));
  const grant = unwrap(validateGrant(shaped.data));
  const grant_sha256 = digestOf(grant);
  const inserted = await store.insertGrant({
    grant_id: grant.grant_id,
    grant_sha256,
    grant,
    principal_id: grant.principal_id,
    created_by: caller.principal_id,
    created_at_unix_ms: ctx.now,
  });
  // Every live grant is evaluated on each call, so their number is bounded here, never by
  // dropping grants from view when deciding.
  if (inserted === 'limit') {
    throw new ServiceError(
      'conflict',
      `principal already holds ${MAX_LIVE_GRANTS} unrevoked grants; revoke one before creating another`,
    );
  }
  ctx.log({ grant_id: grant.grant_id, grant_sha256 });
  return { grant_id: grant.grant_id, grant_sha256, grant, revoked_at_unix_ms: null };
}

export async function getGrant(ctx: TenantContext, grant_id: string) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  return grantView(await findGrant(ctx, grant_id));
}

export async function revokeGrant(ctx: TenantContext, grant_id: string) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const row = await findGrant(ctx, grant_id);
  if (row.revoked_at_unix_ms === null) await ctx.store.revokeGrant(row.grant_id, ctx.now);
  const after = await findGrant(ctx, row.grant_id);
  ctx.log({ grant_id: row.grant_id, revoked: true });
  return grantView(after);
}

async function findGrant(ctx: TenantContext, grant_id: string): Promise<GrantRow> {
  const row = await ctx.store.getGrant(grant_id);
  if (row === null) throw notFound('grant');
  return row;
}

function grantView(row: GrantRow) {
  return {
    grant_id: row.grant_id,
    grant_sha256: row.grant_sha256,
    grant: row.grant,
    created_at_unix_ms: row.created_at_unix_ms,
    revoked_at_unix_ms: row.revoked_at_unix_ms,
  };
}

// ---------------------------------------------------------------------------------------------
// Policy

export async function getPolicy(ctx: TenantContext) {
  return ctx.store.currentPolicy();
}

export async function putPolicy(ctx: TenantContext, document: JsonValue) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const policy = unwrap(parsePolicy(document));
  const policy_sha256 = policyDigest(policy);
  const previous = await ctx.store.currentPolicy();
  await ctx.store.putPolicy(policy, policy_sha256, ctx.now);
  ctx.log({ policy_sha256 });
  return { policy_sha256, policy, previous_policy_sha256: previous.policy_sha256 };
}

// ---------------------------------------------------------------------------------------------
// Tenants (platform admin)

export const TenantName = z
  .string()
  .min(2)
  .max(63)
  .regex(/^[a-z][a-z0-9-]*$/, 'must be a lowercase slug ([a-z][a-z0-9-]*)');

export const CreateTenantRequest = z.strictObject({
  name: TenantName,
  admin_name: Label.optional(),
});
export type CreateTenantRequest = z.infer<typeof CreateTenantRequest>;

/** A tenant, its default policy and its first admin, written at once. */
export async function createTenant(
  platform: PlatformStore,
  body: CreateTenantRequest,
  now: number,
  log: TenantContext['log'],
) {
  const taken = () => new ServiceError('conflict', `tenant ${quoted(body.name)} already exists`);
  if (await platform.tenantNameTaken(body.name)) throw taken();
  const tenant_id = newId('tenant');
  // Shards: the tenant is placed (and its name reserved across shards) before anything is
  // written, so its first key can name the shard that will hold it.
  let placed: { readonly shard: number } | 'name_taken';
  try {
    placed = await platform.placeTenant({ tenant_id, name: body.name, now });
  } catch (e) {
    // The reservation may have committed before its error (an answer lost on the way back):
    // left alone, the name would stay taken by no tenant. The entry is keyed by the tenant id
    // generated above, so one naming it is this creation's: the creation goes on with it. None:
    // nothing was reserved. Unknown (the read fails too): an entry, if any, stays (its name is
    // only unavailable until an operator deletes it), and the error is answered.
    const reserved = await platform.placedShard(tenant_id).catch(() => null);
    if (reserved === null) throw e;
    placed = { shard: reserved };
  }
  if (placed === 'name_taken') throw taken();
  const { shard } = placed;
  const principal_id = newId('principal');
  const api_key = newApiKey(shard);
  const policy_sha256 = policyDigest(DEFAULT_POLICY);
  const admin_name = body.admin_name ?? `${body.name} admin`;
  const tenant = {
    tenant_id,
    shard,
    name: body.name,
    policy: DEFAULT_POLICY,
    policy_sha256,
    admin: {
      principal_id,
      tenant_id,
      name: admin_name,
      roles: ['tenant_admin'] as const,
      executor_release: null,
      key_sha256: apiKeyDigest(api_key),
      created_by: null,
      created_at_unix_ms: now,
    },
    now,
  };
  let created: 'created' | 'name_taken';
  let answered_error: string | undefined;
  try {
    created = await platform.createTenant(tenant);
  } catch (e) {
    // The batch is all or nothing, but its error may have come after it committed (an answer
    // lost on the way back). Released over written rows, the entry would leave a tenant that
    // resolves to no shard, whose name another creation could take on another shard; so the
    // primary is asked. Written: the creation stands. Not written: the name is freed for a
    // retry. Unknown (that read failed too): the entry stays, and the error is answered.
    const written = await platform.tenantWritten({ tenant_id, shard }).catch(() => null);
    if (written === false) await platform.releaseTenant(tenant_id);
    if (written !== true) throw e;
    created = 'created';
    answered_error = e instanceof Error ? e.name : 'unknown';
  }
  if (created === 'name_taken') {
    await platform.releaseTenant(tenant_id);
    throw taken();
  }
  log({ tenant_id, policy_sha256, ...(answered_error === undefined ? {} : { answered_error }) });
  return {
    tenant: { tenant_id, name: body.name, policy_sha256, created_at_unix_ms: now },
    admin: { principal_id, tenant_id, name: admin_name, roles: ['tenant_admin'], api_key },
  };
}

// ---------------------------------------------------------------------------------------------
// Quotas (platform admin)

const QuotaValue = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const SetQuotasRequest = z.strictObject({
  max_stored_bytes: QuotaValue,
  max_receipts_per_day: QuotaValue,
  max_open_approvals: QuotaValue,
  max_open_runs: QuotaValue,
  /** Days receipts stay in D1 before they move to R2 archives; absent leaves the window as it is. */
  receipt_retention_days: z.number().int().min(1).max(MAX_RECEIPT_RETENTION_DAYS).optional(),
});
export type SetQuotasRequest = z.infer<typeof SetQuotasRequest>;

/** Replace a tenant's quotas (all four, so a request never leaves one unintentionally as it was). */
export async function setQuotas(
  platform: PlatformStore,
  tenant_id: string,
  body: SetQuotasRequest,
  now: number,
  log: TenantContext['log'],
) {
  if (!Identifier.safeParse(tenant_id).success) throw notFound('tenant');
  // One update: the quotas and, when given, the retention window.
  if (!(await platform.setQuotas(tenant_id, body, now))) throw notFound('tenant');
  log({ tenant_id, quotas: true });
  return { tenant_id, quotas: body, updated_at_unix_ms: now };
}
