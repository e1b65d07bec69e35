/**
 * `withWrit` (examples/mcp-agents/with-writ.ts) inside workerd: an SDK 1.32.2 `McpServer` (the
 * class `agents`' `McpAgent` serves as `this.server`) with guarded tools, an SDK client over
 * in-memory transports, Writ reached through the Worker's own `fetch`. The handler runs only
 * after Writ's allow; a deny, an unreachable Writ or a non-200 never runs it; with `report`, the
 * call is claimed before and reported after. The wrapper inside a real `McpAgent` Durable Object,
 * over streamable HTTP, and on an SDK 2.x server: test/examples/mcp-agents/mcp-agent.test.ts.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type WritOptions, withWrit } from '../../../examples/mcp-agents/with-writ.js';
import { digestOf } from '../../../src/core/canonical/canonical.js';
import type { Seeded } from '../../../scripts/seed.js';
import {
  BASE,
  READ_INPUT,
  ROLLBACK_INPUT,
  approvedApproval,
  call,
  createRun,
  seedTenant,
  uniqueName,
  workerFetch,
} from '../platform/harness.js';

const SLOW_MS = 30_000;
const shape = { service: z.string(), environment: z.string() };

async function guardedServer(options: WritOptions) {
  const ran: string[] = [];
  const server = withWrit(new McpServer({ name: 'deploy', version: '1.0.0' }), options);
  server.registerTool('get_deployment', { inputSchema: shape }, async ({ service, environment }) => {
    ran.push('get_deployment');
    return { content: [{ type: 'text', text: `${service}@${environment}: v42` }] };
  });
  server.registerTool(
    'execute_rollback',
    { inputSchema: { ...shape, from_version: z.string(), to_version: z.string() } },
    async () => {
      ran.push('execute_rollback');
      return { content: [{ type: 'text', text: 'rolled back' }], structuredContent: { ok: true } };
    },
  );
  const [clientT, serverT] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await Promise.all([server.connect(serverT), client.connect(clientT)]);
  return { client, ran };
}

const base = (s: Seeded, runId: string): WritOptions => ({
  baseUrl: BASE,
  agentKey: () => s.agent.api_key,
  runId: () => runId,
  fetch: (url, init) => workerFetch(url, init),
  idempotencyKey: (tool) => (tool === 'execute_rollback' ? `rollback-${uniqueName('k')}` : undefined),
});

const text = (r: unknown) => (r as { content: { text: string }[] }).content[0]?.text ?? '';

describe('withWrit: an agents-style MCP server guarded by Writ', { timeout: SLOW_MS }, () => {
  it('an allowed call runs the handler and returns its result unchanged; a denied one never runs it', async () => {
    const s = await seedTenant('agents');
    const { client, ran } = await guardedServer(base(s, await createRun(s)));
    const read = await client.callTool({ name: 'get_deployment', arguments: READ_INPUT });
    expect(read).toEqual({ content: [{ type: 'text', text: 'api@production: v42' }] });
    const write = await client.callTool({ name: 'execute_rollback', arguments: ROLLBACK_INPUT });
    expect(write.isError).toBe(true);
    expect(text(write)).toContain('approval_missing');
    expect(ran).toEqual(['get_deployment']);
  });

  it('a call that states its revision in _meta (2026-07-28) is asked with the matching MCP headers', async () => {
    // Writ holds such a call to MCP-Protocol-Version, Mcp-Method and Mcp-Name (400 HeaderMismatch
    // otherwise): the wrapper once forwarded the _meta without them, so every call was refused.
    const s = await seedTenant('agents');
    const { client, ran } = await guardedServer(base(s, await createRun(s)));
    const read = await client.callTool({
      name: 'get_deployment',
      arguments: READ_INPUT,
      _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' },
    });
    expect(read).toEqual({ content: [{ type: 'text', text: 'api@production: v42' }] });
    expect(ran).toEqual(['get_deployment']);
  });

  it('fails closed: Writ unreachable, a 5xx, or a body that does not parse never runs the handler', async () => {
    const s = await seedTenant('agents');
    const runId = await createRun(s);
    const failing: NonNullable<WritOptions['fetch']>[] = [
      () => Promise.reject(new TypeError('connect ECONNREFUSED')),
      () => Promise.resolve(new Response('', { status: 503 })),
      () => Promise.resolve(new Response('<html>bad gateway</html>', { status: 200 })),
      () => Promise.resolve(Response.json({ decision: 'allow' }, { status: 500 })),
    ];
    for (const f of failing) {
      const { client, ran } = await guardedServer({ ...base(s, runId), fetch: f });
      const r = await client.callTool({ name: 'get_deployment', arguments: READ_INPUT });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^Not run/);
      expect(ran).toEqual([]);
    }
    // A key that does not authenticate is a 401 from Writ: not run either.
    const { client, ran } = await guardedServer({ ...base(s, runId), agentKey: 'writ_wrong' });
    expect((await client.callTool({ name: 'get_deployment', arguments: READ_INPUT })).isError).toBe(true);
    expect(ran).toEqual([]);
  });

  it('with report: an approved write is claimed, run once, and reported as a verified execution', async () => {
    const s = await seedTenant('agents');
    const runId = await createRun(s);
    const approval = await approvedApproval(s);
    const reportErrors: string[] = [];
    const { client, ran } = await guardedServer({
      ...base(s, runId),
      report: (tool) =>
        tool === 'execute_rollback'
          ? {
              executorKey: s.executor.api_key,
              effect: () => ({
                effect_id: 'rollout-7',
                before_state_sha256: digestOf({ v: 'v42' }),
                after_state_sha256: digestOf({ v: 'v41' }),
              }),
            }
          : undefined,
      onReportError: (tool, why) => void reportErrors.push(`${tool}: ${why}`),
    });
    const r = await client.callTool({
      name: 'execute_rollback',
      arguments: ROLLBACK_INPUT,
      _meta: { 'dev.writ/approval_id': approval },
    });
    expect(r).toEqual({ content: [{ type: 'text', text: 'rolled back' }], structuredContent: { ok: true } });
    expect(ran).toEqual(['execute_rollback']);
    expect(reportErrors).toEqual([]);
    // Reported: the one operation of the tenant is settled as succeeded, none left pending.
    const done = await call('GET', '/v1/operations?status=succeeded', { key: s.executor.api_key });
    expect(done.status).toBe(200);
    expect(done.body.operations).toHaveLength(1);
    const pending = await call('GET', '/v1/operations?status=pending', { key: s.executor.api_key });
    expect(pending.body.operations).toEqual([]);
  });

  it('refuses what it could not guard: tools registered before wrapping, or through server.tool()', () => {
    const early = new McpServer({ name: 'x', version: '1' });
    early.registerTool('t', {}, async () => ({ content: [] }));
    expect(() => withWrit(early, { baseUrl: BASE, agentKey: 'k', runId: 'r' })).toThrow(/before registering/);
    const late = withWrit(new McpServer({ name: 'y', version: '1' }), {
      baseUrl: BASE,
      agentKey: 'k',
      runId: 'r',
    });
    expect(() => late.tool('t', async () => ({ content: [] }))).toThrow(/not guarded/);
  });

  it("refuses a registered tool's update that would bypass or misname the guard; remove still works", () => {
    const server = withWrit(new McpServer({ name: 'z', version: '1' }), {
      baseUrl: BASE,
      agentKey: 'k',
      runId: 'r',
    });
    const tool = server.registerTool('get_deployment', { inputSchema: shape }, async () => ({ content: [] }));
    expect(() => tool.update({ callback: async () => ({ content: [] }) })).toThrow(
      /callback cannot be replaced/,
    );
    expect(() => tool.update({ name: 'execute_rollback' })).toThrow(/cannot be renamed/);
    expect(() => tool.update({ paramsSchema: { other: z.string() } })).toThrow(/input schema/);
    // What does not change who decides what stays possible.
    tool.update({ description: 'Read one deployment' });
    tool.disable();
    tool.enable();
    tool.remove();
    const internal = server as unknown as { _registeredTools: Record<string, unknown> };
    expect(Object.keys(internal._registeredTools)).toEqual([]);
  });
});
