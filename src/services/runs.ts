/**
 * Run envelopes. A run fixes its budgets (calls, external writes, deadline) within the policy's
 * `run_budget_limits`; every authorization names a run, and an authorized call charges it in the
 * same commit that stores the receipt (a trigger refuses spending past the budget). A principal
 * holds at most `max_open_runs_per_principal` open runs (deadline not passed, calls not spent).
 * The count is part of the insert (one statement), so concurrent creations cannot overshoot it.
 */
import { z } from 'zod';
import { digestOf } from '../core/canonical/canonical.js';
import type { FieldIssue } from '../core/errors.js';
import { maxOpenRunsPerPrincipal } from '../core/policy.js';
import { Identifier, Label, UnixMs } from '../core/schema.js';
import { parseStoredJson, toCanonicalText } from '../db/documents.js';
import { newId } from '../db/ids.js';
import { type TenantContext, ROLES_FOR, assertNamedIdentity, requireRole } from './context.js';
import { ServiceError, notFound } from './errors.js';

export const RUN_ENVELOPE_VERSION = 1;

export const CreateRunRequest = z
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
export type CreateRunRequest = z.infer<typeof CreateRunRequest>;

export async function createRun(ctx: TenantContext, body: CreateRunRequest) {
  const { caller, store, now } = ctx;
  requireRole(caller, ROLES_FOR.createRun);
  assertNamedIdentity(caller, body);
  const inForce = await store.currentPolicy();
  const limits = inForce.policy.run_budget_limits;
  const deadline = body.deadline_unix_ms ?? now + (body.max_duration_ms as number);
  const issues: FieldIssue[] = [];
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
  if (issues.length > 0) throw new ServiceError('invalid_request', 'run envelope exceeds the policy', issues);
  const run_id = newId('run');
  const envelope = {
    run_envelope_version: RUN_ENVELOPE_VERSION,
    run_id,
    tenant_id: caller.tenant_id,
    principal_id: caller.principal_id,
    policy_sha256: inForce.policy_sha256,
    created_at_unix_ms: now,
    deadline_unix_ms: deadline,
    max_calls: body.max_calls,
    max_external_writes: body.max_external_writes,
    label: body.label ?? null,
  };
  const run_envelope_sha256 = digestOf(envelope);
  // Budgets are self-issued: without a cap on open runs, one agent could hold any number of
  // full budgets at once and the per-run limits would bound nothing. The store counts them in
  // the insert itself, so concurrent creations cannot all pass one stale count.
  const maxOpen = maxOpenRunsPerPrincipal(inForce.policy);
  const inserted = await store.insertRun(
    {
      run_id,
      principal_id: caller.principal_id,
      run_envelope_sha256,
      envelope: toCanonicalText(envelope),
      max_calls: body.max_calls,
      max_external_writes: body.max_external_writes,
      deadline_unix_ms: deadline,
      created_at_unix_ms: now,
    },
    maxOpen,
  );
  if (inserted === 'limit') {
    throw new ServiceError(
      'run_limit_reached',
      `the principal already has ${maxOpen} open runs (the policy limit); wait for one to end or spend its calls`,
    );
  }
  ctx.log({ run_id, run_envelope_sha256 });
  return { run_id, run_envelope_sha256, envelope, calls_used: 0, writes_used: 0 };
}

export async function getRun(ctx: TenantContext, run_id: string) {
  const { caller } = ctx;
  requireRole(caller, ROLES_FOR.readRun);
  const row = await ctx.store.getRun(run_id);
  // An agent sees only its own runs.
  if (row === null || (!caller.roles.includes('tenant_admin') && row.principal_id !== caller.principal_id)) {
    throw notFound('run');
  }
  return {
    run_id: row.run_id,
    run_envelope_sha256: row.run_envelope_sha256,
    envelope: parseStoredJson('run envelope', row.envelope),
    calls_used: row.calls_used,
    writes_used: row.writes_used,
  };
}
