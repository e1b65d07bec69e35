/**
 * Run envelopes (agent). A run fixes its budgets (calls, external writes, deadline) within the
 * policy's `run_budget_limits`; every authorization names a run, and an authorized call charges
 * it in the same D1 batch that stores the receipt (a trigger refuses spending past the budget).
 */
import { and, eq } from 'drizzle-orm';
import { Hono } from 'hono';
import { z } from 'zod';
import { digestOf } from '../../core/canonical/canonical.js';
import { Identifier, Label, UnixMs } from '../../core/schema.js';
import { database } from '../../db/client.js';
import { parseStoredJson, toCanonicalText } from '../../db/documents.js';
import { newId } from '../../db/ids.js';
import { currentPolicy } from '../../db/queries.js';
import { runs } from '../../db/schema.js';
import { assertNamedIdentity, requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';
import { ApiError, notFound } from '../errors.js';

export const RUN_ENVELOPE_VERSION = 1;

const CreateRun = z
  .strictObject({
    max_calls: z.number().int().min(1),
    max_external_writes: z.number().int().min(0),
    /** Exactly one of an absolute deadline or a duration from now. */
    deadline_unix_ms: UnixMs.optional(),
    max_duration_ms: z.number().int().min(1).optional(),
    label: Label.optional(),
    tenant_id: Identifier.optional(),
    principal_id: Identifier.optional(),
  })
  .refine((b) => (b.deadline_unix_ms === undefined) !== (b.max_duration_ms === undefined), {
    message: 'exactly one of deadline_unix_ms and max_duration_ms is required',
    path: ['deadline_unix_ms'],
  });

export const runRoutes = new Hono<AppEnv>();

runRoutes.post('/runs', requireRole('agent'), async (c) => {
  const body = await readJson(c, CreateRun);
  const p = c.var.principal;
  assertNamedIdentity(p, body);
  const now = c.var.now;
  const db = database(c.env);
  const inForce = await currentPolicy(db, p.tenant_id);
  const limits = inForce.policy.run_budget_limits;
  const deadline = body.deadline_unix_ms ?? now + (body.max_duration_ms as number);
  const issues = [];
  if (body.max_calls > limits.max_calls) {
    issues.push({ path: 'max_calls', message: `exceeds the policy limit ${limits.max_calls}` });
  }
  if (body.max_external_writes > limits.max_external_writes) {
    issues.push({
      path: 'max_external_writes',
      message: `exceeds the policy limit ${limits.max_external_writes}`,
    });
  }
  if (deadline <= now) issues.push({ path: 'deadline_unix_ms', message: 'must be in the future' });
  else if (deadline - now > limits.max_duration_ms) {
    issues.push({
      path: 'deadline_unix_ms',
      message: `exceeds the policy limit of ${limits.max_duration_ms} ms from now`,
    });
  }
  if (issues.length > 0) throw new ApiError('invalid_request', 'run envelope exceeds the policy', issues);

  const run_id = newId('run');
  const envelope = {
    run_envelope_version: RUN_ENVELOPE_VERSION,
    run_id,
    tenant_id: p.tenant_id,
    principal_id: p.principal_id,
    policy_sha256: inForce.policy_sha256,
    created_at_unix_ms: now,
    deadline_unix_ms: deadline,
    max_calls: body.max_calls,
    max_external_writes: body.max_external_writes,
    label: body.label ?? null,
  };
  const run_envelope_sha256 = digestOf(envelope);
  await db.insert(runs).values({
    run_id,
    tenant_id: p.tenant_id,
    principal_id: p.principal_id,
    run_envelope_sha256,
    envelope: toCanonicalText(envelope),
    max_calls: body.max_calls,
    max_external_writes: body.max_external_writes,
    deadline_unix_ms: deadline,
    created_at_unix_ms: now,
  });
  c.set('log', { ...c.var.log, run_id, run_envelope_sha256 });
  return c.json({ run_id, run_envelope_sha256, envelope, calls_used: 0, writes_used: 0 }, 201);
});

runRoutes.get('/runs/:run_id', requireRole('agent', 'tenant_admin'), async (c) => {
  const p = c.var.principal;
  const row = await database(c.env)
    .select()
    .from(runs)
    .where(and(eq(runs.tenant_id, p.tenant_id), eq(runs.run_id, c.req.param('run_id'))))
    .get();
  // An agent sees only its own runs.
  if (row === undefined || (!p.roles.includes('tenant_admin') && row.principal_id !== p.principal_id)) {
    throw notFound('run');
  }
  return c.json({
    run_id: row.run_id,
    run_envelope_sha256: row.run_envelope_sha256,
    envelope: parseStoredJson('run envelope', row.envelope),
    calls_used: row.calls_used,
    writes_used: row.writes_used,
  });
});
