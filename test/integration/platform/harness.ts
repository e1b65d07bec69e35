/**
 * Black-box harness for the platform tests: every call goes through the Worker's own `fetch`
 * (its default export, `exports.default`) against real D1 in workerd, exactly as a curl would.
 */
import { env, exports } from 'cloudflare:workers';
import { expect } from 'vitest';
import { seedDemo, type Seeded } from '../../../scripts/seed.js';
import { type Role, parseApiKey } from '../../../src/core/identity/identity.js';
import { TENANT_TABLES } from '../../../src/db/tenant-rows.js';
import { app } from '../../../src/http/app.js';
import { operationsPort, tenantStore } from '../../../src/platform/bindings.js';
import { type TenantRef, shardBinding } from '../../../src/platform/shards.js';
import type { TenantContext } from '../../../src/services/context.js';
import { DEFAULT_QUOTAS, type Quotas } from '../../../src/services/ports.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef0123456789abcdef';
export const BASE = 'https://writ.test';

// Responses are asserted field by field; a precise type per endpoint would only restate the API.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface Reply {
  readonly status: number;
  readonly body: Json;
  readonly headers: Headers;
}

export interface CallOptions {
  readonly key?: string;
  readonly body?: unknown;
  /** Raw body bytes or text, sent as is (with `content-type: application/json` unless overridden). */
  readonly raw?: string | Uint8Array | ReadableStream<Uint8Array>;
  readonly headers?: Record<string, string>;
}

/** A request to the Worker under test, through its default export's `fetch` handler. */
export function workerFetch(input: string, init?: RequestInit): Promise<Response> {
  return exports.default.fetch(input, init);
}

export async function call(method: string, path: string, o: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
  let body: BodyInit | undefined;
  if (o.raw !== undefined) {
    body = o.raw;
    headers['content-type'] = 'application/json';
  } else if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  }
  Object.assign(headers, o.headers ?? {});
  const init: RequestInit = { method, headers };
  if (body !== undefined) init.body = body;
  const res = await workerFetch(`${BASE}${path}`, init);
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? JSON.parse(text) : null, headers: res.headers };
}

let counter = 0;
/**
 * A name unique within the run, of one length for one prefix: tests compare the stored sizes of two
 * rows that carry such names (signature-quota.test.ts), so the counter and the random part are
 * fixed-width (the random part was 1 to 4 characters, and two rows differed by a byte about one
 * time in ten).
 */
export function uniqueName(prefix: string): string {
  counter += 1;
  const random = Math.floor(Math.random() * 36 ** 4)
    .toString(36)
    .padStart(4, '0');
  return `${prefix}-${Date.now().toString(36)}-${String(counter).padStart(4, '0')}-${random}`;
}

/** A fresh demo tenant (admin, agent, approver, executor, policy, contracts, grant). */
export function seedTenant(prefix = 't'): Promise<Seeded> {
  return seedDemo({
    baseUrl: BASE,
    adminToken: ADMIN_TOKEN,
    fetch: workerFetch,
    now: Date.now(),
    name: uniqueName(prefix),
  });
}

export const ROLLBACK_INPUT = {
  service: 'api',
  environment: 'production',
  from_version: 'v42',
  to_version: 'v41',
} as const;

export const READ_INPUT = { service: 'api', environment: 'production' } as const;

export async function createRun(
  s: Seeded,
  budgets: { max_calls?: number; max_external_writes?: number; max_duration_ms?: number } = {},
): Promise<string> {
  const r = await call('POST', '/v1/runs', {
    key: s.agent.api_key,
    body: {
      max_calls: budgets.max_calls ?? 10,
      max_external_writes: budgets.max_external_writes ?? 5,
      max_duration_ms: budgets.max_duration_ms ?? 600_000,
    },
  });
  if (r.status !== 201) throw new Error(`run creation failed: ${JSON.stringify(r.body)}`);
  return r.body.run_id as string;
}

/** Request and approve an approval for `input` on the rollback contract; returns its id. */
export async function approvedApproval(s: Seeded, input: unknown = ROLLBACK_INPUT): Promise<string> {
  const req = await call('POST', '/v1/approval-requests', {
    key: s.agent.api_key,
    body: { tool_contract_sha256: s.rollback_contract_sha256, input },
  });
  if (req.status !== 201) throw new Error(`approval request failed: ${JSON.stringify(req.body)}`);
  const id = req.body.approval_id as string;
  const ok = await call('POST', `/v1/approval-requests/${id}/approve`, { key: s.approver.api_key });
  if (ok.status !== 200) throw new Error(`approve failed: ${JSON.stringify(ok.body)}`);
  return id;
}

export function authorizeBody(
  s: Seeded,
  run_id: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    tool_contract_sha256: s.rollback_contract_sha256,
    input: ROLLBACK_INPUT,
    idempotency_key: `rollback-${uniqueName('k')}`,
    run_id,
    ...extra,
  };
}

export function authorize(s: Seeded, body: Record<string, unknown>): Promise<Reply> {
  return call('POST', '/v1/authorize', { key: s.agent.api_key, body });
}

// ---------------------------------------------------------------------------------------------
// Shards: the tests run with two D1 shards (wrangler.toml), so a seeded tenant may live on either.

/** The shard a seeded tenant lives on, as its keys name it. */
export function shardOf(s: Seeded): number {
  const route = parseApiKey(s.admin.api_key);
  if (route === null) throw new Error('seeded admin key does not parse');
  return route.shard;
}

/** The shard an API key names (`writ_<shard>_<secret>`): where every request with it is served. */
export function shardOfKey(api_key: string): number {
  const route = parseApiKey(api_key);
  if (route === null) throw new Error('API key does not parse');
  return route.shard;
}

/** The tenant-scoped handle arguments for `tenantStore(env, ...)`. */
export function tenantRef(s: Seeded): TenantRef {
  return { tenant_id: s.tenant_id, shard: shardOf(s) };
}

/** The raw D1 binding holding a seeded tenant's rows (for tests that inspect or corrupt rows). */
export function tenantD1(s: Seeded): D1Database {
  const d1 = shardBinding(env, shardOf(s));
  if (d1 === null) throw new Error(`shard ${shardOf(s)} is not configured`);
  return d1;
}

/** The raw D1 binding holding `tenant_id`'s rows, found in the shard directory (shard 0). */
export async function d1Of(tenant_id: string): Promise<D1Database> {
  const row = await env.DB.prepare('SELECT shard FROM tenant_shards WHERE tenant_id = ?')
    .bind(tenant_id)
    .first<{ shard: number }>();
  const d1 = shardBinding(env, row?.shard ?? 0);
  if (d1 === null) throw new Error(`tenant ${tenant_id} is on an unconfigured shard`);
  return d1;
}

/**
 * PUT a tenant's quotas (and, optionally, its receipt retention window): the defaults with
 * `quotas` over them, as the platform admin unless `token` says otherwise.
 */
export function setQuotas(
  tenant_id: string,
  quotas: Partial<Quotas> & { readonly receipt_retention_days?: number },
  token = ADMIN_TOKEN,
): Promise<Reply> {
  return call('PUT', `/v1/tenants/${tenant_id}/quotas`, {
    headers: { authorization: `Bearer ${token}` },
    body: { ...DEFAULT_QUOTAS, ...quotas },
  });
}

/** The raw D1 binding of shard `shard` (the test configuration has two). */
export function shardD1(shard: number): D1Database {
  return shard === 0 ? env.DB : env.DB_SHARD_1;
}

/** How many rows of the tenant tables (src/db/tenant-rows.ts) shard `shard` holds for `tenant_id`. */
export async function tenantRowsOn(shard: number, tenant_id: string): Promise<number> {
  let n = 0;
  for (const t of Object.keys(TENANT_TABLES)) {
    const r = await shardD1(shard)
      .prepare(`SELECT count(*) AS n FROM ${t} WHERE tenant_id = ?`)
      .bind(tenant_id)
      .first<{ n: number }>();
    n += r?.n ?? 0;
  }
  return n;
}

/**
 * The tenant's `stored_bytes` as the usage triggers count its rows on `shard` when they are
 * written normally (migrations 0002, 0004, 0010, 0016; docs/storage.md "Quotas"): each stored
 * document's bytes plus 200 a row (a receipt also its in-row or R2 evidence, a signature its
 * envelope as stored), and a fixed 200 for each archive entry whose receipt has left D1.
 */
export async function countedStoredBytes(shard: number, tenant_id: string): Promise<number> {
  const n = (sqlText: string) => countOn(shard, `SELECT coalesce((${sqlText}), 0) AS n`, tenant_id);
  const parts = await Promise.all([
    n(`SELECT sum(length(CAST(receipt AS BLOB)) + coalesce(length(CAST(evidence AS BLOB)), 0)
         + coalesce(evidence_bytes, 0) + 200) FROM receipts WHERE tenant_id = ?1`),
    n('SELECT sum(length(CAST(envelope AS BLOB)) + 200) FROM receipt_signatures WHERE tenant_id = ?1'),
    n(`SELECT 200 * count(*) FROM receipt_archive_entries e WHERE e.tenant_id = ?1
         AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.tenant_id = e.tenant_id AND r.sha256 = e.sha256)`),
    n(`SELECT sum(length(CAST(input AS BLOB)) + length(CAST(target AS BLOB)) + 200)
         FROM approvals WHERE tenant_id = ?1`),
    n('SELECT sum(length(CAST(envelope AS BLOB)) + 200) FROM runs WHERE tenant_id = ?1'),
    ...['grants', 'contracts', 'policies'].map((t) =>
      n(`SELECT sum(length(CAST(document AS BLOB)) + 200) FROM ${t} WHERE tenant_id = ?1`),
    ),
  ]);
  return parts.reduce((a, b) => a + b, 0);
}

/** The tenant's `stored_bytes` counter on `shard` (-1: no quota row there). */
export async function storedBytesOn(shard: number, tenant_id: string): Promise<number> {
  const r = await shardD1(shard)
    .prepare('SELECT stored_bytes FROM tenant_quotas WHERE tenant_id = ?')
    .bind(tenant_id)
    .first<{ stored_bytes: number }>();
  return r?.stored_bytes ?? -1;
}

/** A seeded tenant with three authorized calls, exported frozen: the file, its receipts, its line count. */
export async function exportedTenant(prefix: string) {
  const s = await seedTenant(prefix);
  const receipts: string[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await authorize(s, {
      tool_contract_sha256: s.read_contract_sha256,
      input: READ_INPUT,
      run_id: await createRun(s),
    });
    expect(r.status).toBe(200);
    receipts.push(r.body.receipt.sha256 as string);
  }
  const { status, text } = await exportTenant(s.tenant_id, true);
  expect(status).toBe(200);
  return { s, receipts, text, lines: text.split('\n').length - 1 };
}

/**
 * A move from `from` to `to` recorded: the old copy has no live principal (its admin's old key is a
 * 401) and no re-keying window is left open on the target.
 */
export async function expectMoveRecorded(s: Seeded, from: number, to: number): Promise<void> {
  expect(
    await countOn(
      from,
      'SELECT count(*) AS n FROM principals WHERE tenant_id = ? AND revoked_at_unix_ms IS NULL',
      s.tenant_id,
    ),
  ).toBe(0);
  expect((await call('GET', '/v1/policy', { key: s.admin.api_key })).status).toBe(401);
  expect(
    await countOn(to, 'SELECT count(*) AS n FROM tenant_imports_unrecorded WHERE tenant_id = ?', s.tenant_id),
  ).toBe(0);
}

/** `POST /v1/tenants/{id}/export` as the platform admin: the status and the JSON lines as text. */
/** The number a `SELECT ... AS n` query answers on `shard` (0 when it returns no row). */
export async function countOn(shard: number, sqlText: string, ...args: unknown[]): Promise<number> {
  const r = await shardD1(shard)
    .prepare(sqlText)
    .bind(...args)
    .first<{ n: number }>();
  return r?.n ?? 0;
}

/** The shard the directory names for the tenant (undefined: not in the directory). */
export const directoryShard = async (tenant_id: string): Promise<number | undefined> =>
  (
    await env.DB.prepare('SELECT shard FROM tenant_shards WHERE tenant_id = ?')
      .bind(tenant_id)
      .first<{ shard: number }>()
  )?.shard;

/** Everything of the tenant on `shard`: its rows, its staging, its quota row and its marks. */
export async function leftOn(shard: number, tenant_id: string): Promise<number> {
  let n = await tenantRowsOn(shard, tenant_id);
  for (const t of ['tenant_imports', 'tenant_import_principals', 'tenant_imports_unrecorded'])
    n += await countOn(shard, `SELECT count(*) AS n FROM ${t} WHERE tenant_id = ?`, tenant_id);
  return n;
}

export async function exportTenant(
  tenant_id: string,
  freeze = false,
): Promise<{ status: number; text: string }> {
  const res = await workerFetch(`${BASE}/v1/tenants/${tenant_id}/export`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ freeze }),
  });
  return { status: res.status, text: await res.text() };
}

/** `POST /v1/tenants/import?shard=N` of an export file, as the platform admin. */
export function importTo(shard: number, text: string): Promise<Reply> {
  return call('POST', `/v1/tenants/import?shard=${shard}`, {
    key: ADMIN_TOKEN,
    raw: text,
    headers: { 'content-type': 'application/x-ndjson' },
  });
}

/**
 * The console as a signed-in browser of the principal holding `key`: its session cookie kept across
 * requests, no redirects followed. Returns a GET of a console path (status and HTML). With
 * `bindings`, the requests go to the app directly with those bindings over the test Worker's (as
 * a deployment with those vars would serve them); without, through the Worker's own `fetch`.
 */
export async function consoleAs(
  key: string,
  bindings?: Env,
): Promise<(path: string) => Promise<{ status: number; text: string }>> {
  const send = async (path: string, init: RequestInit): Promise<Response> =>
    bindings === undefined
      ? workerFetch(`${BASE}${path}`, init)
      : app.request(`${BASE}${path}`, init, bindings);
  const form = await send('/console/sign-in', { redirect: 'manual' });
  // The sign-in form's token lives in a cookie of its own (src/http/console/session.ts).
  const signIn = /__Host-writ_console_signin=([^;]*)/.exec(form.headers.get('set-cookie') ?? '')?.[1] ?? '';
  const csrf = /name="csrf" value="([^"]*)"/.exec(await form.text())?.[1] ?? '';
  const body = new URLSearchParams({ csrf, api_key: key }).toString();
  const signed = await send('/console/sign-in', {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      // The form reader requires it (src/http/console/session.ts); the app called directly has no
      // runtime to add it. The body is URL-encoded ASCII: characters are bytes.
      'content-length': String(body.length),
      origin: BASE,
      cookie: `__Host-writ_console_signin=${signIn}`,
    },
    body,
    redirect: 'manual',
  });
  expect(signed.status).toBe(303);
  let cookie = /__Host-writ_console=([^;]*)/.exec(signed.headers.get('set-cookie') ?? '')?.[1] ?? '';
  return async (path: string) => {
    const res = await send(path, {
      headers: { cookie: `__Host-writ_console=${cookie}` },
      redirect: 'manual',
    });
    const m = /__Host-writ_console=([^;]*)/.exec(res.headers.get('set-cookie') ?? '');
    if (m !== null) cookie = m[1] as string;
    return { status: res.status, text: await res.text() };
  };
}

/** The seeded read call as each standard door spells it (issue 12): its path and JSON body. */
export const doorReads = (s: Seeded, run_id: string) => ({
  mcp: {
    path: '/mcp/v1/authorize',
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'get_deployment', arguments: READ_INPUT, _meta: { 'dev.writ/run_id': run_id } },
    },
  },
  authzen: {
    path: '/access/v1/evaluation',
    body: {
      subject: { type: 'agent', id: s.agent.principal_id },
      action: { name: 'get_deployment' },
      resource: { type: 'deployment', id: 'production/api' },
      context: { input: READ_INPUT, run_id },
    },
  },
  docker: {
    path: `/docker-mcp/v1/before?run_id=${run_id}`,
    body: { Session: {}, Params: { name: 'get_deployment', arguments: READ_INPUT }, Extra: null },
  },
});

/** A service context for `principal_id` of `s` at a chosen instant: expiry and deadlines without waiting. */
export function contextAt(s: Seeded, principal_id: string, roles: Role[], now: number): TenantContext {
  return {
    caller: { principal_id, tenant_id: s.tenant_id, roles, executor_release: null },
    store: tenantStore(env, tenantRef(s)),
    operations: operationsPort(env, shardOf(s)),
    shard: shardOf(s),
    now,
    log: () => {},
  };
}
