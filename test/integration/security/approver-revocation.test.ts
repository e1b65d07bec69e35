/**
 * An approval is only as good as its approver: once the approver's key is revoked, approvals it
 * gave and that are not yet consumed stop authorizing (a compromised approver key is contained
 * by revoking it, without hunting down each approval).
 */
import { describe, expect, it } from 'vitest';
import {
  approvedApproval,
  authorize,
  authorizeBody,
  call,
  createRun,
  seedTenant,
} from '../platform/harness.js';

describe('approver revocation', () => {
  it('an approval whose approver was revoked is unusable', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const rev = await call('POST', `/v1/principals/${s.approver.principal_id}/revoke`, {
      key: s.admin.api_key,
    });
    expect(rev.status).toBe(200);
    const r = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(r.status).toBe(403);
    expect(r.body.decision).toBe('denied');
    expect(r.body.violations).toEqual(['approval_unusable']);
  });

  it('the same approval authorizes while its approver is active', async () => {
    const s = await seedTenant();
    const run = await createRun(s);
    const approval_id = await approvedApproval(s);
    const r = await authorize(s, authorizeBody(s, run, { approval_id }));
    expect(r.status).toBe(200);
    expect(r.body.decision).toBe('authorized');
  });
});
