/**
 * A tenant's storage usage against its quotas (tenant admin): stored bytes, receipts today, open
 * approval requests and open runs, each with its limit. The quotas themselves are set by the
 * platform admin (src/services/admin.ts `setQuotas`); how they are enforced is docs/storage.md.
 */
import { type TenantContext, ROLES_FOR, requireRole } from './context.js';

export async function getUsage(ctx: TenantContext) {
  requireRole(ctx.caller, ROLES_FOR.admin);
  const u = await ctx.store.usage(ctx.now);
  return {
    tenant_id: ctx.caller.tenant_id,
    at_unix_ms: ctx.now,
    stored_bytes: { used: u.stored_bytes, limit: u.quotas.max_stored_bytes },
    receipts_per_day: { used: u.receipts_today, limit: u.quotas.max_receipts_per_day },
    open_approvals: { used: u.open_approvals, limit: u.quotas.max_open_approvals },
    open_runs: { used: u.open_runs, limit: u.quotas.max_open_runs },
  };
}
