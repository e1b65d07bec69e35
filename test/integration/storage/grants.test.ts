/**
 * Issue 9, "a live grant ignored after 64 others": every unrevoked grant is evaluated, however
 * many revoked grants sort before it; the number of live grants is bounded at creation instead.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import type { ToolGrant } from '../../../src/core/model.js';
import { tenantStore } from '../../../src/platform/bindings.js';
import { MAX_LIVE_GRANTS } from '../../../src/services/ports.js';
import {
  authorize,
  authorizeBody,
  call,
  createRun,
  READ_INPUT,
  seedTenant,
  tenantD1,
  tenantRef,
} from '../platform/harness.js';

const SLOW_MS = 60_000;

describe('grant evaluation', { timeout: SLOW_MS }, () => {
  it('authorizes with the one live grant behind 70 revoked ones', async () => {
    const s = await seedTenant('grants-revoked');
    const store = tenantStore(env, tenantRef(s));
    const live = await store.getGrant(s.grant_id);
    if (live === null) throw new Error('seeded grant missing');
    // Ids below the live grant's (`grt-` + base32 letters/digits 2-7 sort after `0`), so an
    // `order by grant_id limit 64` window holds only revoked grants.
    for (let k = 0; k < 70; k++) {
      const grant: ToolGrant = { ...live.grant, grant_id: `grt-0000${String(k).padStart(4, '0')}` };
      const inserted = await store.insertGrant({
        grant_id: grant.grant_id,
        grant_sha256: digestOf(grant),
        grant,
        principal_id: grant.principal_id,
        created_by: s.admin.principal_id,
        created_at_unix_ms: Date.now(),
      });
      expect(inserted).toBe('inserted');
      await store.revokeGrant(grant.grant_id, Date.now());
    }
    const run = await createRun(s);
    const r = await authorize(
      s,
      authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    );
    expect(r.body.receipt?.body.violations).toEqual([]);
    expect(r.status).toBe(200);
    expect(r.body.receipt.body.grant_sha256).toBe(live.grant_sha256);

    // With every grant revoked the denial still says so.
    await call('POST', `/v1/grants/${s.grant_id}/revoke`, { key: s.admin.api_key });
    const denied = await authorize(
      s,
      authorizeBody(s, run, { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT }),
    );
    expect(denied.status).toBe(403);
    expect(denied.body.receipt.body.violations).toContain('grant_revoked');
  });

  it(`refuses a grant beyond ${MAX_LIVE_GRANTS} live ones per principal with 409, and counts only live ones`, async () => {
    const s = await seedTenant('grants-bound');
    const store = tenantStore(env, tenantRef(s));
    const live = await store.getGrant(s.grant_id);
    if (live === null) throw new Error('seeded grant missing');
    for (let k = 1; k < MAX_LIVE_GRANTS; k++) {
      const grant: ToolGrant = { ...live.grant, grant_id: `grt-bound${String(k).padStart(4, '0')}` };
      await store.insertGrant({
        grant_id: grant.grant_id,
        grant_sha256: digestOf(grant),
        grant,
        principal_id: grant.principal_id,
        created_by: s.admin.principal_id,
        created_at_unix_ms: Date.now(),
      });
    }
    const body = {
      principal_id: s.agent.principal_id,
      allowed_tools: [],
      allowed_effects: [],
      capabilities: [],
      expires_at_unix_ms: Date.now() + 3_600_000,
    };
    const refused = await call('POST', '/v1/grants', { key: s.admin.api_key, body });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain(`${MAX_LIVE_GRANTS} unrevoked grants`);
    const count = await tenantD1(s)
      .prepare('SELECT count(*) AS n FROM grants WHERE tenant_id = ? AND principal_id = ?')
      .bind(s.tenant_id, s.agent.principal_id)
      .first<{ n: number }>();
    expect(count?.n).toBe(MAX_LIVE_GRANTS);

    // Revoking one frees a place.
    await call('POST', '/v1/grants/grt-bound0001/revoke', { key: s.admin.api_key });
    const created = await call('POST', '/v1/grants', { key: s.admin.api_key, body });
    expect(created.status).toBe(201);
  });
});
