/**
 * Approval requests (src/services/approvals.ts): an agent requests, an approver who is not the
 * requester approves or denies. Routes parse, call the service and answer.
 */
import { Hono } from 'hono';
import { fromZodError } from '../../core/errors.js';
import {
  ApprovalListQuery,
  ApproveRequest,
  CreateApprovalRequest,
  DenyRequest,
  approve,
  deny,
  getApproval,
  listApprovals,
  requestApproval,
} from '../../services/approvals.js';
import { ROLES_FOR } from '../../services/context.js';
import { fromCoreError } from '../../services/errors.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const approvalRoutes = new Hono<AppEnv>();

approvalRoutes.post('/approval-requests', requireRole(ROLES_FOR.requestApproval), async (c) => {
  const body = await readJson(c, CreateApprovalRequest);
  return c.json(await requestApproval(c.var.tenant, body), 201);
});

approvalRoutes.get('/approval-requests', requireRole(ROLES_FOR.listApprovals), async (c) => {
  const q = ApprovalListQuery.safeParse(c.req.query());
  if (!q.success) throw fromCoreError(fromZodError('invalid_request', 'query', q.error));
  return c.json(await listApprovals(c.var.tenant, q.data));
});

approvalRoutes.get('/approval-requests/:approval_id', requireRole(ROLES_FOR.readApproval), async (c) =>
  c.json(await getApproval(c.var.tenant, c.req.param('approval_id'))),
);

approvalRoutes.post(
  '/approval-requests/:approval_id/approve',
  requireRole(ROLES_FOR.decideApproval),
  async (c) => {
    const body = await readJson(c, ApproveRequest, { allowEmpty: true });
    return c.json(await approve(c.var.tenant, c.req.param('approval_id'), body));
  },
);

approvalRoutes.post(
  '/approval-requests/:approval_id/deny',
  requireRole(ROLES_FOR.decideApproval),
  async (c) => {
    const body = await readJson(c, DenyRequest, { allowEmpty: true });
    return c.json(await deny(c.var.tenant, c.req.param('approval_id'), body));
  },
);
