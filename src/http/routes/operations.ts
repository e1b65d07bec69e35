/**
 * `GET /v1/operations/{id}` and `GET /v1/operations?status=...` (tenant admin, executor): the
 * idempotency operations of the caller's tenant.
 *
 * Guarantees: another tenant's operation is a 404, indistinguishable from a missing one; a single
 * operation is read from its Durable Object (the source of truth) once the tenant-filtered D1
 * index has shown it exists, so a guessed id never instantiates an object; listings come from the
 * D1 index, which every object keeps current (and re-syncs from its alarm after a failed write).
 * Never: shows a fencing token or nonce.
 */
import { and, desc, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { SINGLE_USE_INDEX_PREFIX, operationStub } from '../../../durable-objects/idempotency.js';
import { fromZodError } from '../../core/errors.js';
import { OperationStatus } from '../../core/execution/idempotency.js';
import { database } from '../../db/client.js';
import { operations } from '../../db/schema.js';
import { requireRole } from '../auth.js';
import type { AppEnv } from '../env.js';
import { fromCoreError, notFound } from '../errors.js';
import { findOperationRow, snapshotBody } from './executions.js';

const ListQuery = z.strictObject({
  status: OperationStatus.optional(),
  limit: z
    .string()
    .regex(/^[1-9][0-9]{0,2}$/, 'must be an integer from 1 to 100')
    .transform(Number)
    .pipe(z.number().int().min(1).max(100))
    .optional(),
});

export const operationRoutes = new Hono<AppEnv>();

operationRoutes.get('/operations', requireRole('tenant_admin', 'executor'), async (c) => {
  const parsed = ListQuery.safeParse(c.req.query());
  if (!parsed.success) throw fromCoreError(fromZodError('invalid_request', 'query', parsed.error));
  const { status, limit = 50 } = parsed.data;
  const t = c.var.principal.tenant_id;
  const rows = await database(c.env)
    .select()
    .from(operations)
    .where(
      status === undefined
        ? eq(operations.tenant_id, t)
        : and(eq(operations.tenant_id, t), eq(operations.state, status)),
    )
    .orderBy(desc(operations.updated_at_unix_ms), desc(operations.operation_id))
    .limit(limit);
  return c.json({
    operations: rows.map((r) => ({
      operation_id: r.operation_id,
      status: r.state,
      tool_contract_sha256: r.tool_contract_sha256,
      // A single-use operation's index key is not a client key.
      idempotency_key: r.idempotency_key.startsWith(SINGLE_USE_INDEX_PREFIX) ? null : r.idempotency_key,
      input_sha256: r.input_sha256,
      authorization_receipt_sha256: r.authorization_receipt_sha256,
      execution_receipt_sha256: r.execution_receipt_sha256,
      reconciliation_owner: r.reconciliation_owner,
      reconciliation_deadline_unix_ms: r.reconciliation_deadline_unix_ms,
      escalated_at_unix_ms: r.escalated_at_unix_ms,
      updated_at_unix_ms: r.updated_at_unix_ms,
    })),
  });
});

operationRoutes.get('/operations/:id', requireRole('tenant_admin', 'executor'), async (c) => {
  const t = c.var.principal.tenant_id;
  const id = c.req.param('id');
  const row = await findOperationRow(database(c.env), t, id);
  if (row === null) throw notFound('operation');
  const snapshot = await operationStub(c.env, id).read(t);
  if (snapshot === null) throw notFound('operation');
  return c.json(snapshotBody(snapshot));
});
