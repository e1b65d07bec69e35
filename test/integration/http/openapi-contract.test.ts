/**
 * The OpenAPI document against what the service answers: a realistic flow through the Worker
 * (seeded tenant, runs, authorizations allowed and denied, approvals pending, approved, denied and
 * expired, paged lists, claims, reports, reconciliations, observations, signed webhooks, the log),
 * every answer checked against what the route docs (src/http/openapi.ts, which docs/openapi.json is
 * generated from; openapi.test.ts keeps the two equal) declare for that route and status: the
 * status is listed, the media type is the declared one, the body parses with the declared schema
 * (strict: a field the schema lacks fails), and an error's code is one the route lists for that
 * status. Finally, every JSON GET route of /v1 and the flows the document must describe were seen.
 */
import { env } from 'cloudflare:workers';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { z } from 'zod';
import { ROLLBACK_CONTRACT, type Seeded } from '../../../scripts/seed.js';
import { sha256HexOfText } from '../../../src/core/canonical/canonical.js';
import { parseWebhookSecret, signWebhook } from '../../../src/core/identity/webhook.js';
import { app } from '../../../src/http/app.js';
import { ErrorBody, ROUTES, type RouteDoc, documentedResponses } from '../../../src/http/openapi.js';
import { observe } from '../executions/helpers.js';
import {
  ADMIN_TOKEN,
  BASE,
  READ_INPUT,
  ROLLBACK_INPUT,
  approvedApproval,
  authorizeBody,
  createRun,
  exportedTenant,
  seedTenant,
  shardOf,
  uniqueName,
  workerFetch,
} from '../platform/harness.js';
import { rawOutput } from '../storage/observation-helpers.js';

const SLOW_MS = 120_000;

afterEach(() => {
  vi.useRealTimers();
});

// ---------------------------------------------------------------------------------------------
// Sending a request and checking its answer against the document

interface SendOptions {
  readonly key?: string;
  readonly body?: unknown;
  readonly raw?: string | Uint8Array;
  readonly headers?: Record<string, string>;
  /** Bindings over the test Worker's (served by the app directly, as a deployment with them would). */
  readonly bindings?: Record<string, unknown>;
}

interface Answer {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
  /** The JSON body, or undefined when the answer is not JSON. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- asserted field by field, as the harness does
  readonly body: any;
}

/** `method path` → the statuses seen (and checked) for the documented route. */
const seen = new Map<string, Set<number>>();
/** `method path` → the error codes seen (and checked). */
const seenCodes = new Map<string, Set<string>>();

const templateRe = (r: RouteDoc) =>
  new RegExp(
    `^${r.path.replace(/\{([a-z_0-9]+)\}/g, (_m, name: string) => (name === r.restParam?.name ? '(.+)' : '([^/]+)'))}$`,
  );

function routeOf(method: string, path: string): RouteDoc {
  const bare = path.split('?')[0] as string;
  // A literal segment wins over a parameter (`/v1/contracts/discovery` over `/v1/contracts/{sha256}`).
  const params = (d: RouteDoc) => d.path.split('{').length;
  const r = [...ROUTES]
    .sort((a, b) => params(a) - params(b))
    .find((d) => d.method === method.toLowerCase() && templateRe(d).test(bare));
  if (r === undefined) throw new Error(`${method} ${bare} is not a documented route`);
  return r;
}

async function send(method: string, path: string, o: SendOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
  let body: BodyInit | undefined;
  if (o.raw !== undefined) body = o.raw;
  else if (o.body !== undefined) body = JSON.stringify(o.body);
  if (body !== undefined) headers['content-type'] = 'application/json';
  Object.assign(headers, o.headers ?? {});
  const init: RequestInit = { method, headers };
  if (body !== undefined) init.body = body;
  const res =
    o.bindings === undefined
      ? await workerFetch(`${BASE}${path}`, init)
      : await app.fetch(new Request(`${BASE}${path}`, init), { ...env, ...o.bindings });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  let json: unknown;
  if (contentType.startsWith('application/json')) json = JSON.parse(text);
  return { method, path, status: res.status, contentType, text, body: json };
}

/** Each issue as `path: message`; a union's as every branch's, `[n]` naming the branch. */
function issuesOf(issues: readonly z.core.$ZodIssue[], prefix = ''): string[] {
  return issues.flatMap((i) =>
    i.code === 'invalid_union' && i.errors.length > 0
      ? i.errors.flatMap((branch, n) => issuesOf(branch, `${prefix}[${n}] `))
      : [`${prefix}${i.path.join('.') || '(root)'}: ${i.message}`],
  );
}

/**
 * The answer is one the document declares for its route and status (see the file header). Soft
 * checks: one run lists every mismatch of the flow, and the test still fails on any.
 */
function expectDocumented(a: Answer): Answer {
  const r = routeOf(a.method, a.path);
  const where = `${a.method} ${r.path} → ${a.status}`;
  const declared = documentedResponses(r).get(a.status);
  expect.soft(declared, `${where}: status not in the document (${a.text.slice(0, 300)})`).toBeDefined();
  if (declared === undefined) return a;
  expect.soft(a.contentType.split(';')[0], `${where}: media type`).toBe(declared.mediaType);
  const value = declared.mediaType === 'application/json' ? a.body : a.text;
  const parsed = declared.schema.safeParse(value);
  expect
    .soft(parsed.success ? [] : issuesOf(parsed.error.issues), `${where}: body against its schema`)
    .toEqual([]);
  const error = ErrorBody.safeParse(value);
  if (error.success) {
    expect
      .soft(declared.errorCodes, `${where}: error code listed for the route`)
      .toContain(error.data.error.code);
    const key = `${r.method} ${r.path}`;
    seenCodes.set(key, (seenCodes.get(key) ?? new Set()).add(error.data.error.code));
  }
  const key = `${r.method} ${r.path}`;
  seen.set(key, (seen.get(key) ?? new Set()).add(a.status));
  return a;
}

/** Send, check against the document, and expect `status` (and, for an error, `code`). */
async function expectAnswer(
  status: number,
  method: string,
  path: string,
  o: SendOptions = {},
  code?: string,
): Promise<Answer> {
  const a = expectDocumented(await send(method, path, o));
  expect(a.status, `${method} ${path}: ${a.text.slice(0, 300)}`).toBe(status);
  if (code !== undefined) expect(a.body?.error?.code).toBe(code);
  return a;
}

// ---------------------------------------------------------------------------------------------
// Flows

/** Bindings of a deployment without a usable receipt key ring: receipt-issuing writes answer 503. */
const NO_KEYS = { WRIT_RECEIPT_KEYS: '' };

const scope = [
  { type: 'deployment', attributes: { environment: ['production', 'staging'], service: ['api'] } },
];
const grantBody = (s: Seeded) => ({
  principal_id: s.agent.principal_id,
  allowed_tools: ['execute_rollback', 'get_deployment'],
  allowed_effects: ['external_write', 'read_only'],
  capabilities: [
    { capability: 'deployment:read', resources: scope },
    { capability: 'deployment:rollback', resources: scope },
  ],
  expires_at_unix_ms: Date.now() + 24 * 60 * 60_000,
});

async function authorizedRollback(s: Seeded, input: Record<string, unknown> = { ...ROLLBACK_INPUT }) {
  const run = await createRun(s);
  const approval_id = await approvedApproval(s, input);
  const a = await expectAnswer(200, 'POST', '/v1/authorize', {
    key: s.agent.api_key,
    body: authorizeBody(s, run, { input, approval_id }),
  });
  return { receipt: a.body.receipt, sha256: a.body.receipt.sha256 as string };
}

async function claimed(s: Seeded) {
  const a = await authorizedRollback(s);
  const c = await expectAnswer(200, 'POST', '/v1/executions/claim', {
    key: s.executor.api_key,
    body: { authorization_receipt_sha256: a.sha256 },
  });
  return { a, operation_id: c.body.operation_id as string, fencing_token: c.body.fencing_token as string };
}

async function signed(
  s: Seeded,
  route: string,
  body: unknown,
  secret: string,
  bindings?: Record<string, unknown>,
) {
  const id = uniqueName('msg').replace(/[^A-Za-z0-9_-]/g, '_');
  const ts = Math.floor(Date.now() / 1000);
  const bytes = new TextEncoder().encode(JSON.stringify(body));
  return expectDocumented(
    await send('POST', `/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/${route}`, {
      raw: bytes,
      headers: {
        'webhook-id': id,
        'webhook-timestamp': String(ts),
        'webhook-signature': signWebhook(parseWebhookSecret(secret) as Uint8Array, id, ts, bytes),
      },
      ...(bindings === undefined ? {} : { bindings }),
    }),
  );
}

const UNKNOWN_SHA = 'a'.repeat(64);

/**
 * A flow run at most once per file: its own test awaits it, and so does the last test, which needs
 * every flow's answers. So any one test runs alone (`-t`), and a full run still runs each flow once.
 */
function once<T>(flow: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  return () => (running ??= flow());
}

describe('OpenAPI contract: every answer is one the document declares', { timeout: SLOW_MS }, () => {
  const adminFlow = once(async () => {
    const s = await seedTenant('contract-admin');
    await expectAnswer(200, 'GET', '/v1/healthz');

    // Tenants (platform admin token).
    const name = uniqueName('contract-t');
    await expectAnswer(201, 'POST', '/v1/tenants', { key: ADMIN_TOKEN, body: { name, admin_name: 'a' } });
    await expectAnswer(
      409,
      'POST',
      '/v1/tenants',
      { key: ADMIN_TOKEN, body: { name, admin_name: 'a' } },
      'conflict',
    );
    await expectAnswer(401, 'POST', '/v1/tenants', { body: { name, admin_name: 'a' } }, 'unauthenticated');
    await expectAnswer(
      400,
      'POST',
      '/v1/tenants',
      { key: ADMIN_TOKEN, body: { name: 5 } },
      'invalid_request',
    );
    const quotas = {
      max_stored_bytes: 1_000_000_000,
      max_receipts_per_day: 100_000,
      max_open_approvals: 1_000,
      max_open_runs: 1_000,
    };
    await expectAnswer(200, 'PUT', `/v1/tenants/${s.tenant_id}/quotas`, { key: ADMIN_TOKEN, body: quotas });
    await expectAnswer(404, 'PUT', `/v1/tenants/tnt-${'0'.repeat(26)}/quotas`, {
      key: ADMIN_TOKEN,
      body: quotas,
    });
    await expectAnswer(200, 'POST', `/v1/tenants/${s.tenant_id}/export`, {
      key: ADMIN_TOKEN,
      body: { freeze: false },
    });
    const upload = await expectAnswer(201, 'POST', '/v1/tenants/import-uploads', { key: ADMIN_TOKEN });
    await expectAnswer(200, 'POST', `/v1/tenants/import-uploads/${upload.body.upload_id}/abort`, {
      key: ADMIN_TOKEN,
    });

    // Usage and metrics (tenant admin).
    await expectAnswer(200, 'GET', '/v1/usage', { key: s.admin.api_key });
    await expectAnswer(403, 'GET', '/v1/usage', { key: s.agent.api_key }, 'forbidden_role');
    await expectAnswer(401, 'GET', '/v1/usage', {}, 'unauthenticated');
    await expectAnswer(200, 'GET', '/v1/metrics', { key: s.admin.api_key });
    await expectAnswer(200, 'GET', '/v1/metrics?window_ms=3600000', { key: s.admin.api_key });
    await expectAnswer(400, 'GET', '/v1/metrics?bogus=1', { key: s.admin.api_key }, 'invalid_request');

    // Principals.
    const p = await expectAnswer(201, 'POST', '/v1/principals', {
      key: s.admin.api_key,
      body: { name: 'reader', roles: ['agent'] },
    });
    await expectAnswer(200, 'GET', `/v1/principals/${p.body.principal_id}`, { key: s.admin.api_key });
    await expectAnswer(200, 'POST', `/v1/principals/${p.body.principal_id}/revoke`, { key: s.admin.api_key });
    await expectAnswer(
      404,
      'GET',
      `/v1/principals/prn-${'0'.repeat(26)}`,
      { key: s.admin.api_key },
      'not_found',
    );
    await expectAnswer(
      403,
      'POST',
      '/v1/principals',
      {
        key: s.agent.api_key,
        body: { name: 'x', roles: ['agent'] },
      },
      'forbidden_role',
    );

    // Policy.
    const policy = await expectAnswer(200, 'GET', '/v1/policy', { key: s.agent.api_key });
    await expectAnswer(200, 'PUT', '/v1/policy', { key: s.admin.api_key, body: policy.body.policy });
    await expectAnswer(400, 'PUT', '/v1/policy', {
      key: s.admin.api_key,
      body: { ...policy.body.policy, policy_version: 99 },
    });

    // Contracts.
    await expectAnswer(200, 'POST', '/v1/contracts', { key: s.admin.api_key, body: ROLLBACK_CONTRACT });
    const extra = await expectAnswer(201, 'POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: { ...ROLLBACK_CONTRACT, contract_release: 'execute_rollback 2026.09.0' },
    });
    await expectAnswer(200, 'GET', `/v1/contracts/${s.rollback_contract_sha256}`, { key: s.agent.api_key });
    await expectAnswer(404, 'GET', `/v1/contracts/${UNKNOWN_SHA}`, { key: s.agent.api_key }, 'not_found');
    await expectAnswer(200, 'POST', `/v1/contracts/${extra.body.tool_contract_sha256}/quarantine`, {
      key: s.admin.api_key,
      body: { reason: 'superseded' },
    });
    await expectAnswer(200, 'POST', '/v1/contracts/discovery', {
      key: s.admin.api_key,
      body: {
        snapshot: {
          source: 'mcp://deploy-tools tools/list',
          observed_at_unix_ms: Date.now(),
          tools: [ROLLBACK_CONTRACT],
        },
      },
    });
    await expectAnswer(
      400,
      'POST',
      '/v1/contracts',
      { key: s.admin.api_key, raw: '{"a":1,"a":2}' },
      'malformed_json',
    );

    // Grants.
    await expectAnswer(200, 'GET', `/v1/grants/${s.grant_id}`, { key: s.admin.api_key });
    const g = await expectAnswer(201, 'POST', '/v1/grants', { key: s.admin.api_key, body: grantBody(s) });
    await expectAnswer(200, 'POST', `/v1/grants/${g.body.grant_id}/revoke`, { key: s.admin.api_key });
    await expectAnswer(404, 'GET', `/v1/grants/grt-${'0'.repeat(26)}`, { key: s.admin.api_key }, 'not_found');

    // Runs.
    const run = await expectAnswer(201, 'POST', '/v1/runs', {
      key: s.agent.api_key,
      body: { max_calls: 10, max_external_writes: 5, max_duration_ms: 600_000 },
    });
    await expectAnswer(200, 'GET', `/v1/runs/${run.body.run_id}`, { key: s.agent.api_key });
    await expectAnswer(404, 'GET', `/v1/runs/run-${'0'.repeat(26)}`, { key: s.agent.api_key }, 'not_found');

    // Webhook secrets.
    await expectAnswer(201, 'POST', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
      key: s.admin.api_key,
    });
    await expectAnswer(200, 'GET', `/v1/principals/${s.executor.principal_id}/webhook-secrets`, {
      key: s.admin.api_key,
    });
  });

  const logFlow = once(async () => {
    const s = await seedTenant('contract-log');
    const run = await createRun(s);
    const allowed = await expectAnswer(200, 'POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: { tool_contract_sha256: s.read_contract_sha256, input: READ_INPUT, run_id: run },
    });
    // A rollback without its approval: a denial with its receipt.
    const denied = await expectAnswer(403, 'POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run),
    });
    expect(denied.body.decision).toBe('denied');
    // A role that may not authorize: a 403 error, not a denial.
    await expectAnswer(
      403,
      'POST',
      '/v1/authorize',
      { key: s.approver.api_key, body: authorizeBody(s, run) },
      'forbidden_role',
    );
    await expectAnswer(401, 'POST', '/v1/authorize', { body: authorizeBody(s, run) }, 'unauthenticated');
    await expectAnswer(
      400,
      'POST',
      '/v1/authorize',
      { key: s.agent.api_key, body: { run_id: run } },
      'invalid_request',
    );
    await expectAnswer(
      404,
      'POST',
      '/v1/authorize',
      {
        key: s.agent.api_key,
        body: authorizeBody(s, run, { tool_contract_sha256: UNKNOWN_SHA }),
      },
      'not_found',
    );
    await expectAnswer(
      503,
      'POST',
      '/v1/authorize',
      {
        key: s.agent.api_key,
        body: authorizeBody(s, run),
        bindings: NO_KEYS,
      },
      'signing_unavailable',
    );

    const sha = allowed.body.receipt.sha256 as string;
    await expectAnswer(200, 'GET', `/v1/receipts/${sha}`, { key: s.agent.api_key });
    await expectAnswer(200, 'GET', `/v1/receipts/${denied.body.receipt.sha256}`, { key: s.admin.api_key });
    await expectAnswer(404, 'GET', `/v1/receipts/${UNKNOWN_SHA}`, { key: s.agent.api_key }, 'not_found');
    const proof = expectDocumented(await send('GET', `/v1/receipts/${sha}/proof`, { key: s.agent.api_key }));
    expect([200, 503]).toContain(proof.status);
    const bundle = expectDocumented(
      await send('GET', `/v1/receipts/${sha}/bundle`, { key: s.agent.api_key }),
    );
    expect([200, 503]).toContain(bundle.status);

    const cp = await expectAnswer(200, 'GET', '/v1/log/checkpoint', { key: s.agent.api_key });
    const size = Number(cp.text.split('\n')[1]);
    expect(size).toBeGreaterThan(0);
    await expectAnswer(200, 'GET', `/v1/log/tile/0/000.p/${size}`, { key: s.agent.api_key });
    await expectAnswer(200, 'GET', `/v1/log/tile/entries/000.p/${size}`, { key: s.agent.api_key });
    await expectAnswer(404, 'GET', '/v1/log/tile/0/999', { key: s.agent.api_key }, 'not_found');
    await expectAnswer(200, 'GET', `/v1/log/consistency?from=1&to=${size}`, { key: s.agent.api_key });
    await expectAnswer(
      400,
      'GET',
      '/v1/log/consistency?from=x&to=1',
      { key: s.agent.api_key },
      'invalid_request',
    );
    await expectAnswer(200, 'GET', '/v1/log/publication', { key: s.agent.api_key });
    await expectAnswer(200, 'PUT', '/v1/log/publication', {
      key: s.admin.api_key,
      body: { published: true },
    });
    await expectAnswer(
      403,
      'PUT',
      '/v1/log/publication',
      { key: s.agent.api_key, body: { published: false } },
      'forbidden_role',
    );
    await expectAnswer(200, 'PUT', '/v1/log/witnesses', { key: s.admin.api_key, body: { witnesses: [] } });
    await expectAnswer(200, 'GET', '/v1/log/witnesses', { key: s.agent.api_key });
    await expectAnswer(
      400,
      'PUT',
      '/v1/log/witnesses',
      { key: s.admin.api_key, body: { witnesses: [{ vkey: 'x', url: 'http://w.example' }] } },
      'invalid_request',
    );
  });

  const approvalsFlow = once(async () => {
    const s = await seedTenant('contract-approvals');
    const request = (input: Record<string, unknown>) =>
      expectAnswer(201, 'POST', '/v1/approval-requests', {
        key: s.agent.api_key,
        body: { tool_contract_sha256: s.rollback_contract_sha256, input },
      });
    // A bidi override in what the approver reads: shown with a warning.
    const warned = await request({ ...ROLLBACK_INPUT, from_version: 'v42\u202e' });
    expect(warned.body.preview.warnings.length).toBeGreaterThan(0);
    const second = await request({ ...ROLLBACK_INPUT, to_version: 'v40' });
    const third = await request({ ...ROLLBACK_INPUT, to_version: 'v39' });
    await expectAnswer(200, 'GET', `/v1/approval-requests/${warned.body.approval_id}`, {
      key: s.approver.api_key,
    });
    await expectAnswer(200, 'GET', `/v1/approval-requests/${warned.body.approval_id}`, {
      key: s.agent.api_key,
    });
    const page1 = await expectAnswer(200, 'GET', '/v1/approval-requests?limit=1', {
      key: s.approver.api_key,
    });
    expect(page1.body.next_cursor).toEqual(expect.any(String));
    await expectAnswer(200, 'GET', `/v1/approval-requests?limit=1&cursor=${page1.body.next_cursor}`, {
      key: s.approver.api_key,
    });
    await expectAnswer(
      400,
      'GET',
      '/v1/approval-requests?status=nope',
      { key: s.approver.api_key },
      'invalid_request',
    );
    await expectAnswer(
      404,
      'GET',
      `/v1/approval-requests/apr-${'0'.repeat(26)}`,
      { key: s.approver.api_key },
      'not_found',
    );

    await expectAnswer(200, 'POST', `/v1/approval-requests/${second.body.approval_id}/approve`, {
      key: s.approver.api_key,
    });
    await expectAnswer(
      409,
      'POST',
      `/v1/approval-requests/${second.body.approval_id}/approve`,
      {
        key: s.approver.api_key,
      },
      'conflict',
    );
    await expectAnswer(
      403,
      'POST',
      `/v1/approval-requests/${third.body.approval_id}/approve`,
      {
        key: s.agent.api_key,
      },
      'forbidden_role',
    );
    await expectAnswer(200, 'POST', `/v1/approval-requests/${third.body.approval_id}/deny`, {
      key: s.approver.api_key,
      body: { reason: 'not now' },
    });
    // Consumed by an authorization.
    const run = await createRun(s);
    await expectAnswer(200, 'POST', '/v1/authorize', {
      key: s.agent.api_key,
      body: authorizeBody(s, run, {
        input: { ...ROLLBACK_INPUT, to_version: 'v40' },
        approval_id: second.body.approval_id,
      }),
    });
    for (const status of ['approved', 'denied', 'consumed']) {
      await expectAnswer(200, 'GET', `/v1/approval-requests?status=${status}`, { key: s.approver.api_key });
    }
    await expectAnswer(200, 'GET', `/v1/approval-requests/${second.body.approval_id}`, {
      key: s.approver.api_key,
    });

    // A day later nobody decided the first: it is shown expired, and cannot be decided.
    try {
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(Date.now() + 24 * 60 * 60_000 + 1_000);
      const expired = await expectAnswer(200, 'GET', `/v1/approval-requests/${warned.body.approval_id}`, {
        key: s.approver.api_key,
      });
      expect(expired.body.status).toBe('expired');
      const list = await expectAnswer(200, 'GET', '/v1/approval-requests?status=expired', {
        key: s.approver.api_key,
      });
      expect(list.body.items.map((i: { status: string }) => i.status)).toContain('expired');
      await expectAnswer(
        409,
        'POST',
        `/v1/approval-requests/${warned.body.approval_id}/approve`,
        {
          key: s.approver.api_key,
        },
        'conflict',
      );
    } finally {
      // Run from the last test (alone, `-t`), later flows must see the real clock.
      vi.useRealTimers();
    }
  });

  const executionsFlow = once(async () => {
    const s = await seedTenant('contract-exec');
    // A verified success, then its replay.
    const one = await claimed(s);
    await expectAnswer(
      409,
      'POST',
      '/v1/executions/claim',
      {
        key: s.executor.api_key,
        body: { authorization_receipt_sha256: one.a.sha256 },
      },
      'in_progress',
    );
    const reported = await expectAnswer(200, 'POST', '/v1/executions/report', {
      key: s.executor.api_key,
      body: {
        operation_id: one.operation_id,
        fencing_token: one.fencing_token,
        observation: observe(one.a.receipt, 'succeeded'),
      },
    });
    await expectAnswer(200, 'POST', '/v1/executions/claim', {
      key: s.executor.api_key,
      body: { authorization_receipt_sha256: one.a.sha256 },
    });
    await expectAnswer(
      404,
      'POST',
      '/v1/executions/claim',
      {
        key: s.executor.api_key,
        body: { authorization_receipt_sha256: UNKNOWN_SHA },
      },
      'not_found',
    );
    await expectAnswer(
      403,
      'POST',
      '/v1/executions/claim',
      {
        key: s.agent.api_key,
        body: { authorization_receipt_sha256: one.a.sha256 },
      },
      'forbidden_role',
    );

    // An outcome nobody knows, reconciled by the tenant admin; then the reconciliation's replay.
    const two = await claimed(s);
    await expectAnswer(200, 'POST', '/v1/executions/report', {
      key: s.executor.api_key,
      body: {
        operation_id: two.operation_id,
        fencing_token: two.fencing_token,
        observation: observe(two.a.receipt, 'indeterminate'),
      },
    });
    const settle = {
      operation_id: two.operation_id,
      observation: observe(two.a.receipt, 'failed_no_effect'),
    };
    await expectAnswer(
      503,
      'POST',
      '/v1/reconciliations',
      { key: s.admin.api_key, body: settle, bindings: NO_KEYS },
      'signing_unavailable',
    );
    await expectAnswer(201, 'POST', '/v1/reconciliations', { key: s.admin.api_key, body: settle });
    await expectAnswer(200, 'POST', '/v1/reconciliations', { key: s.admin.api_key, body: settle });
    await expectAnswer(
      409,
      'POST',
      '/v1/reconciliations',
      {
        key: s.admin.api_key,
        body: {
          operation_id: one.operation_id,
          observation: observe(one.a.receipt, 'succeeded', { tookMs: 7 }),
        },
      },
      'not_reconcilable',
    );

    // A report refused for lack of receipt keys, then one under a stale token.
    const three = await claimed(s);
    const threeBody = {
      operation_id: three.operation_id,
      fencing_token: three.fencing_token,
      observation: observe(three.a.receipt, 'succeeded'),
    };
    await expectAnswer(
      503,
      'POST',
      '/v1/executions/report',
      { key: s.executor.api_key, body: threeBody, bindings: NO_KEYS },
      'signing_unavailable',
    );
    await expectAnswer(
      409,
      'POST',
      '/v1/executions/report',
      {
        key: s.executor.api_key,
        body: { ...threeBody, fencing_token: `1.${'0'.repeat(32)}` },
      },
      'stale_fencing_token',
    );

    // A rejected report: a 403 with its receipt (beside the 403 errors the route also answers).
    const four = await claimed(s);
    const rejected = await expectAnswer(403, 'POST', '/v1/executions/report', {
      key: s.executor.api_key,
      body: {
        operation_id: four.operation_id,
        fencing_token: four.fencing_token,
        observation: observe(four.a.receipt, 'succeeded', { effect_id: null }),
      },
    });
    expect(rejected.body.status).toBe('rejected');

    // Operations, paged.
    const ops = await expectAnswer(200, 'GET', '/v1/operations?limit=1', { key: s.admin.api_key });
    expect(ops.body.next_cursor).toEqual(expect.any(String));
    await expectAnswer(200, 'GET', `/v1/operations?limit=1&cursor=${ops.body.next_cursor}`, {
      key: s.admin.api_key,
    });
    await expectAnswer(200, 'GET', '/v1/operations?status=succeeded', { key: s.executor.api_key });
    await expectAnswer(
      400,
      'GET',
      '/v1/operations?status=bogus',
      { key: s.admin.api_key },
      'invalid_request',
    );
    await expectAnswer(200, 'GET', `/v1/operations/${one.operation_id}`, { key: s.admin.api_key });
    await expectAnswer(404, 'GET', `/v1/operations/${UNKNOWN_SHA}`, { key: s.admin.api_key }, 'not_found');

    // Observations of the verified success: refused without keys, accepted, replayed.
    const executed = { authorization: one.a.receipt, execution: reported.body.execution_receipt };
    const obs = { kind: 'output', observation: rawOutput(s, executed) };
    await expectAnswer(
      503,
      'POST',
      '/v1/observations',
      { key: s.executor.api_key, body: obs, bindings: NO_KEYS },
      'signing_unavailable',
    );
    await expectAnswer(201, 'POST', '/v1/observations', { key: s.executor.api_key, body: obs });
    await expectAnswer(200, 'POST', '/v1/observations', { key: s.executor.api_key, body: obs });
    // The same observation id with another payload: rejected, a 403 with its receipt.
    const swapped = rawOutput(s, executed, '{"generation":9,"status":"rolled_back"}');
    const refused = await expectAnswer(403, 'POST', '/v1/observations', {
      key: s.executor.api_key,
      body: { kind: 'output', observation: { ...swapped, observation_id: obs.observation.observation_id } },
    });
    expect(refused.body.decision).toBe('rejected');

    // Signed webhooks: a report and an observation, each refused without keys first.
    const secret = await expectAnswer(
      201,
      'POST',
      `/v1/principals/${s.executor.principal_id}/webhook-secrets`,
      {
        key: s.admin.api_key,
      },
    );
    const whsec = secret.body.secret as string;
    const noKeys = await signed(s, 'executions/report', threeBody, whsec, NO_KEYS);
    expect([noKeys.status, noKeys.body?.error?.code]).toEqual([503, 'signing_unavailable']);
    const whReport = await signed(s, 'executions/report', threeBody, whsec);
    expect(whReport.status).toBe(200);
    const whExecuted = { authorization: three.a.receipt, execution: whReport.body.execution_receipt };
    const whObs = { kind: 'output', observation: rawOutput(s, whExecuted) };
    const whNoKeys = await signed(s, 'observations', whObs, whsec, NO_KEYS);
    expect([whNoKeys.status, whNoKeys.body?.error?.code]).toEqual([503, 'signing_unavailable']);
    expect((await signed(s, 'observations', whObs, whsec)).status).toBe(201);
    const unsigned = expectDocumented(
      await send('POST', `/v1/webhooks/${s.tenant_id}/${s.executor.principal_id}/observations`, {
        body: whObs,
      }),
    );
    expect(unsigned.status).toBe(401);
  });

  const movesFlow = once(async () => {
    // Direct: an export frozen on its shard, imported onto the other one.
    const direct = await exportedTenant('contract-move');
    const to = 1 - shardOf(direct.s);
    await expectAnswer(201, 'POST', `/v1/tenants/import?shard=${to}`, {
      key: ADMIN_TOKEN,
      raw: direct.text,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    // Live there now: only a staged import can be aborted.
    await expectAnswer(
      409,
      'POST',
      `/v1/tenants/import/${direct.s.tenant_id}/abort?shard=${to}`,
      { key: ADMIN_TOKEN },
      'conflict',
    );

    // Uploaded: one part (the last part may be of any size), completed, imported call by call.
    const up = await exportedTenant('contract-upload');
    const upload = await expectAnswer(201, 'POST', '/v1/tenants/import-uploads', { key: ADMIN_TOKEN });
    const id = upload.body.upload_id as string;
    const part = await expectAnswer(200, 'PUT', `/v1/tenants/import-uploads/${id}/parts/1`, {
      key: ADMIN_TOKEN,
      raw: new TextEncoder().encode(up.text),
      headers: { 'content-type': 'application/octet-stream' },
    });
    await expectAnswer(200, 'POST', `/v1/tenants/import-uploads/${id}/complete`, {
      key: ADMIN_TOKEN,
      body: { parts: [{ part_number: 1, etag: part.body.etag }], sha256: sha256HexOfText(up.text) },
    });
    const target = 1 - shardOf(up.s);
    let last = 0;
    for (let i = 0; i < 50 && last !== 201; i++) {
      const r = expectDocumented(
        await send('POST', `/v1/tenants/import-uploads/${id}/import?shard=${target}`, { key: ADMIN_TOKEN }),
      );
      expect([201, 202], r.text.slice(0, 300)).toContain(r.status);
      last = r.status;
    }
    expect(last).toBe(201);
    await expectAnswer(
      404,
      'POST',
      `/v1/tenants/import-uploads/${'0'.repeat(32)}/abort`,
      { key: ADMIN_TOKEN },
      'not_found',
    );
  });

  it('platform admin, directory, policy, contracts, grants, runs, usage and metrics', () => adminFlow());
  it('authorize allowed and denied, receipts, bundles and the log', () => logFlow());
  it('approvals: pending (with text warnings), approved, denied, consumed, expired, and paged lists', () =>
    approvalsFlow());
  it('claims, reports, reconciliations, operations, observations and signed webhooks', () =>
    executionsFlow());
  it('tenant moves: a direct import, and one uploaded in parts', () => movesFlow());

  it('saw every JSON GET route of /v1 answer, and each of the flows above', async () => {
    // Every flow, each run once per file: already done in a full run, run here when this test runs
    // alone (`-t`).
    for (const flow of [adminFlow, logFlow, approvalsFlow, executionsFlow, movesFlow]) await flow();
    const missing: string[] = [];
    for (const r of ROUTES) {
      const ok = documentedResponses(r).get(200);
      if (r.method === 'get' && ok?.mediaType === 'application/json' && !seen.get(`get ${r.path}`)?.has(200))
        missing.push(`get ${r.path} 200`);
    }
    const flows: [string, number | string][] = [
      ['post /v1/authorize', 200],
      ['post /v1/authorize', 403],
      ['post /v1/authorize', 'signing_unavailable'],
      ['post /v1/authorize', 'forbidden_role'],
      ['get /v1/log/checkpoint', 200],
      ['get /v1/log/tile/{tile_path}', 200],
      ['post /v1/approval-requests', 201],
      ['post /v1/approval-requests/{approval_id}/approve', 200],
      ['post /v1/approval-requests/{approval_id}/deny', 200],
      ['post /v1/executions/claim', 200],
      ['post /v1/executions/report', 200],
      ['post /v1/executions/report', 403],
      ['post /v1/executions/report', 'signing_unavailable'],
      ['post /v1/reconciliations', 200],
      ['post /v1/reconciliations', 201],
      ['post /v1/reconciliations', 'signing_unavailable'],
      ['post /v1/observations', 200],
      ['post /v1/observations', 201],
      ['post /v1/observations', 403],
      ['post /v1/observations', 'signing_unavailable'],
      ['post /v1/webhooks/{tenant_id}/{principal_id}/executions/report', 200],
      ['post /v1/webhooks/{tenant_id}/{principal_id}/executions/report', 'signing_unavailable'],
      ['post /v1/webhooks/{tenant_id}/{principal_id}/observations', 201],
      ['post /v1/webhooks/{tenant_id}/{principal_id}/observations', 'signing_unavailable'],
      ['post /v1/tenants/import', 201],
      ['put /v1/tenants/import-uploads/{upload_id}/parts/{part_number}', 200],
      ['post /v1/tenants/import-uploads/{upload_id}/complete', 200],
      ['post /v1/tenants/import-uploads/{upload_id}/import', 201],
    ];
    for (const [route, what] of flows) {
      const hit = typeof what === 'number' ? seen.get(route)?.has(what) : seenCodes.get(route)?.has(what);
      if (hit !== true) missing.push(`${route} ${what}`);
    }
    expect(missing).toEqual([]);
  });
});
