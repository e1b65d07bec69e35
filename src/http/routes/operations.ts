/**
 * `GET /v1/operations/{id}` and `GET /v1/operations?status=...` (tenant admin, executor): the
 * idempotency operations of the caller's tenant (src/services/executions.ts). Another tenant's
 * operation is a 404, indistinguishable from a missing one. Never shows a fencing token or nonce.
 */
import { Hono } from 'hono';
import { fromZodError } from '../../core/errors.js';
import { ROLES_FOR } from '../../services/context.js';
import { fromCoreError } from '../../services/errors.js';
import { OperationListQuery, getOperation, listOperations } from '../../services/executions.js';
import { requireRole } from '../auth.js';
import type { AppEnv } from '../env.js';

export const operationRoutes = new Hono<AppEnv>();

operationRoutes.get('/operations', requireRole(ROLES_FOR.readOperations), async (c) => {
  const parsed = OperationListQuery.safeParse(c.req.query());
  if (!parsed.success) throw fromCoreError(fromZodError('invalid_request', 'query', parsed.error));
  return c.json(await listOperations(c.var.tenant, parsed.data));
});

operationRoutes.get('/operations/:id', requireRole(ROLES_FOR.readOperations), async (c) =>
  c.json(await getOperation(c.var.tenant, c.req.param('id'))),
);
