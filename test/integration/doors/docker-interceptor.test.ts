/**
 * The Docker MCP Gateway interceptor door, black-box through the Worker, fed recorded payloads
 * in the gateway's own format (test/data/docker-mcp-gateway, see its README): an allow is the
 * only empty answer; a denial, every refusal and every failure (no key, bad key, wrong role,
 * wrong media type, oversized or malformed body, internal error) is a non-empty `isError`
 * `CallToolResult`, so a gateway that ignores status codes still never calls the tool.
 */
import { Hono } from 'hono';
import { afterEach, describe, expect, it, vi } from 'vitest';
import afterResult from '../../data/docker-mcp-gateway/after-result.json?raw';
import afterUnreleased from '../../data/docker-mcp-gateway/after-request-response-unreleased.json?raw';
import beforeBareRead from '../../data/docker-mcp-gateway/before-bare-params-read.json?raw';
import beforeBareRollback from '../../data/docker-mcp-gateway/before-bare-params-rollback.json?raw';
import beforeMethodParamsRead from '../../data/docker-mcp-gateway/before-method-params-read.json?raw';
import beforeRead from '../../data/docker-mcp-gateway/before-stdio-read.json?raw';
import beforeRollback from '../../data/docker-mcp-gateway/before-stdio-rollback.json?raw';
import beforeUnknown from '../../data/docker-mcp-gateway/before-stdio-unknown-tool.json?raw';
import type { Seeded } from '../../../scripts/seed.js';
import type { AppEnv } from '../../../src/http/env.js';
import { interceptorError } from '../../../src/http/mcp/interceptor-routes.js';
import {
  BASE,
  ROLLBACK_INPUT,
  approvedApproval,
  call,
  createRun,
  seedTenant,
  workerFetch,
} from '../platform/harness.js';

const SLOW_MS = 30_000;
const BEFORE = '/docker-mcp/v1/before';

interface Answer {
  readonly status: number;
  /** The body exactly as the gateway reads it: its length decides "continue" or "replace". */
  readonly text: string;
}

/** A POST as the gateway (or a relay in front of it) sends it: the payload bytes as recorded. */
async function intercept(
  payload: string,
  o: { key?: string; runId?: string; query?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.key !== undefined) headers.authorization = `Bearer ${o.key}`;
  const query = o.query ?? (o.runId === undefined ? '' : `?run_id=${encodeURIComponent(o.runId)}`);
  // Bytes, not a string: a string body would make fetch add `text/plain`, and Go sends no type.
  const body = new TextEncoder().encode(payload);
  const res = await workerFetch(`${BASE}${BEFORE}${query}`, { method: 'POST', headers, body });
  return { status: res.status, text: await res.text() };
}

/** What the gateway would hand the MCP client instead of calling the tool. */
function replacement(a: Answer) {
  expect(a.text.length, 'a refusal must never be an empty body').toBeGreaterThan(0);
  const r = JSON.parse(a.text) as {
    content: { type: string; text: string }[];
    isError: boolean;
    structuredContent: { writ: Record<string, unknown> };
  };
  expect(r.isError).toBe(true);
  expect(r.content[0]?.type).toBe('text');
  return r;
}

const withMeta = (payload: string, meta: Record<string, unknown>) => {
  const p = JSON.parse(payload) as { Params: { _meta?: Record<string, unknown> } };
  p.Params._meta = { ...(p.Params._meta ?? {}), ...meta };
  return JSON.stringify(p);
};

describe('Docker MCP Gateway before interceptor → /docker-mcp/v1/before', { timeout: SLOW_MS }, () => {
  afterEach(() => vi.restoreAllMocks());

  it('an allowed call (stdio payload, no Content-Type) is an empty body, and charges the run', async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s, { max_calls: 1 });
    const allowed = await intercept(beforeRead, { key: s.agent.api_key, runId });
    expect(allowed).toEqual({ status: 200, text: '' });
    // The run had one call: the same call again is a stored denial, so the first one was charged.
    const again = replacement(await intercept(beforeRead, { key: s.agent.api_key, runId }));
    expect(again.structuredContent.writ.violations).toEqual(
      expect.arrayContaining(['run_call_budget_spent']),
    );
  });

  it('the mcp-go {"method","params"} payload (v0.9.0-v0.13.0) is read the same way', async () => {
    const s = await seedTenant('docker');
    const a = await intercept(beforeMethodParamsRead, {
      key: s.agent.api_key,
      runId: await createRun(s),
      headers: { 'content-type': 'application/json' },
    });
    expect(a).toEqual({ status: 200, text: '' });
  });

  it('the bare params of v0.14.0/v0.15.0 are read the same way; a write among them is decided the same', async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s);
    const key = s.agent.api_key;
    expect(await intercept(beforeBareRead, { key, runId })).toEqual({ status: 200, text: '' });
    const denied = replacement(await intercept(beforeBareRollback, { key, runId }));
    expect(denied.structuredContent.writ.violations).toContain('approval_missing');
    const approval = await approvedApproval(s);
    const p = JSON.parse(beforeBareRollback) as { _meta: Record<string, unknown> };
    p._meta['dev.writ/approval_id'] = approval;
    expect(await intercept(JSON.stringify(p), { key, runId })).toEqual({ status: 200, text: '' });
    // Bare params beside a wrapper: which call is it? Neither.
    const bare = JSON.parse(beforeBareRead) as Record<string, unknown>;
    const read = JSON.parse(beforeRead) as Record<string, unknown>;
    for (const mixed of [
      { ...read, ...bare },
      { method: 'tools/call', params: bare, name: 'get_deployment' },
    ]) {
      const r = replacement(await intercept(JSON.stringify(mixed), { key, runId }));
      expect(r.structuredContent.writ.code).toBe(-32600);
    }
  });

  it('a write without approval is a receipted denial naming the access request; approved, it passes once', async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s);
    const denied = await intercept(beforeRollback, { key: s.agent.api_key, runId });
    expect(denied.status).toBe(200);
    const r = replacement(denied);
    const writ = r.structuredContent.writ as {
      violations: string[];
      receipt_sha256: string;
      access_request: { endpoint: string; body: unknown; retry: unknown };
    };
    expect(writ.violations).toContain('approval_missing');
    expect(r.content[0]?.text).toContain(writ.receipt_sha256);
    expect(writ.access_request.endpoint).toBe(`${BASE}/v1/approval-requests`);
    expect(writ.access_request.body).toEqual({
      tool_contract_sha256: s.rollback_contract_sha256,
      input: ROLLBACK_INPUT,
    });
    expect(writ.access_request.retry).toEqual({
      params: { _meta: { 'dev.writ/approval_id': '<approval_id of the approved request>' } },
    });
    const stored = await call('GET', `/v1/receipts/${writ.receipt_sha256}`, { key: s.agent.api_key });
    expect(stored.body.outcome).toBe('denied');

    const approval = await approvedApproval(s);
    const retry = withMeta(beforeRollback, { 'dev.writ/approval_id': approval });
    expect(await intercept(retry, { key: s.agent.api_key, runId })).toEqual({ status: 200, text: '' });
    // The approval is consumed: the same retry is refused.
    replacement(await intercept(retry, { key: s.agent.api_key, runId }));
  });

  it('decides as the MCP gateway door does: same violations for the same call', async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s);
    const viaDocker = replacement(await intercept(beforeRollback, { key: s.agent.api_key, runId }));
    const params = (JSON.parse(beforeRollback) as { Params: Record<string, unknown> }).Params;
    const viaMcp = await call('POST', '/mcp/v1/authorize', {
      key: s.agent.api_key,
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { ...params, _meta: { ...(params._meta as object), 'dev.writ/run_id': runId } },
      },
    });
    expect(viaMcp.body.decision).toBe('deny');
    expect(viaDocker.structuredContent.writ.violations).toEqual(viaMcp.body.receipt.body.violations);
  });

  it('an unknown tool, an after payload, a non-tools/call method or two params spellings are refused', async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s);
    const key = s.agent.api_key;
    const unknown = replacement(await intercept(beforeUnknown, { key, runId }));
    expect(unknown.structuredContent.writ.writ_error).toMatchObject({ status: 404, code: 'not_found' });
    // An `after` interceptor pointed at this URL: the result is replaced by a refusal, never kept,
    // also in the unreleased {request, response} form (it carries the request, but under
    // `request`: it is not a `before` payload and authorizes nothing).
    replacement(await intercept(afterResult, { key, runId }));
    const unreleased = replacement(await intercept(afterUnreleased, { key, runId }));
    expect(unreleased.structuredContent.writ.code).toBe(-32602);
    replacement(await intercept('{"method":"tools/list","params":{}}', { key, runId }));
    const both = JSON.stringify({
      Params: { name: 'get_deployment', arguments: {} },
      params: { name: 'get_deployment', arguments: {} },
    });
    expect(replacement(await intercept(both, { key, runId })).structuredContent.writ.code).toBe(-32600);
    replacement(await intercept('[]', { key, runId }));
  });

  it('the run comes from the query or _meta; two different ones, or none, are refused', async () => {
    const s = await seedTenant('docker');
    const key = s.agent.api_key;
    const runId = await createRun(s);
    const named = withMeta(beforeRead, { 'dev.writ/run_id': runId });
    expect(await intercept(named, { key })).toEqual({ status: 200, text: '' });
    expect(await intercept(named, { key, runId })).toEqual({ status: 200, text: '' });
    const other = await createRun(s);
    replacement(await intercept(named, { key, runId: other }));
    replacement(await intercept(beforeRead, { key }));
    replacement(await intercept(beforeRead, { key, query: '?run_id=bad%20id' }));
    const twice = await intercept(beforeRead, { key, query: `?run_id=${runId}&run_id=${runId}` });
    expect(twice.status).toBe(400);
    replacement(twice);
  });

  it('no key, a bad key, a key in the URL or the wrong role: a non-empty refusal, never a pass', async () => {
    const s: Seeded = await seedTenant('docker');
    const runId = await createRun(s);
    for (const o of [
      { runId },
      { runId, key: 'writ_not_a_real_key_0000000000000000000000000000' },
      // A key in the query string is not read: the URL is not a credential.
      { query: `?run_id=${runId}&api_key=${s.agent.api_key}` },
    ]) {
      const a = await intercept(beforeRead, o);
      expect(a.status).toBe(401);
      expect(replacement(a).structuredContent.writ.error).toMatchObject({ code: 'unauthenticated' });
    }
    const wrongRole = await intercept(beforeRead, { key: s.approver.api_key, runId });
    expect(wrongRole.status).toBe(403);
    replacement(wrongRole);
  });

  it('a non-JSON media type, an oversized or malformed body: a non-empty refusal', async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s);
    const key = s.agent.api_key;
    const form = await intercept(beforeRead, { key, runId, headers: { 'content-type': 'text/plain' } });
    expect(form.status).toBe(415);
    replacement(form);
    const big = await intercept(`{"x":"${'a'.repeat(300 * 1024)}"}`, { key, runId });
    expect(big.status).toBe(413);
    replacement(big);
    const dup = await intercept('{"Params":{"name":"a"},"Params":{"name":"b"}}', { key, runId });
    expect(dup.status).toBe(400);
    replacement(dup);
  });

  it("never logs the payload's Extra (the MCP client's own headers)", async () => {
    const s = await seedTenant('docker');
    const runId = await createRun(s);
    const lines: string[] = [];
    const capture = (...args: unknown[]) => void lines.push(args.map(String).join(' '));
    vi.spyOn(console, 'log').mockImplementation(capture);
    vi.spyOn(console, 'error').mockImplementation(capture);
    const p = JSON.parse(beforeRead) as Record<string, unknown>;
    p.Extra = { TokenInfo: null, Header: { Authorization: ['Bearer client-secret-token'] } };
    expect(await intercept(JSON.stringify(p), { key: s.agent.api_key, runId })).toEqual({
      status: 200,
      text: '',
    });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain('client-secret-token');
  });
});

describe('the interceptor routes fail closed on an internal error', () => {
  it('a throw inside the route is a non-empty isError 500', async () => {
    vi.spyOn(console, 'error').mockImplementation(() => undefined);
    // The door's own error handler, in front of a handler that fails as a broken store would.
    const app = new Hono<AppEnv>();
    app.use('*', async (c, next) => {
      c.set('requestId', 'request_test');
      c.set('log', {});
      await next();
    });
    const broken = new Hono<AppEnv>();
    broken.onError(interceptorError);
    broken.post('/docker-mcp/v1/before', () => {
      throw new Error('d1 is down');
    });
    app.route('/', broken);
    const res = await app.request('/docker-mcp/v1/before', { method: 'POST', body: '{}' });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(replacement({ status: res.status, text }).structuredContent.writ.error).toMatchObject({
      code: 'internal',
    });
    expect(text).not.toContain('d1 is down');
    vi.restoreAllMocks();
  });
});
