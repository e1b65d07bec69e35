/**
 * The `agents` example end to end, in workerd (issue 12): an official SDK 1.x MCP client over
 * streamable HTTP → `McpAgent.serve('/mcp')` → the `DeployTools` Durable Object
 * (examples/mcp-agents/worker.ts, tools wrapped by `withWrit`) → Writ through a service binding.
 * The read tool runs; the write tool is refused until approved, then runs once; Writ unreachable,
 * or a session without Writ credentials, runs nothing. Also `withWrit` on an SDK 2.x
 * `McpServer` (`@modelcontextprotocol/server`) served by `agents`' stateless `createMcpHandler`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { createMcpHandler } from 'agents/mcp';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type WritOptions, withWrit } from '../../../examples/mcp-agents/with-writ.js';
import type { WritProps } from '../../../examples/mcp-agents/worker.js';
import {
  BASE,
  READ_INPUT,
  ROLLBACK_INPUT,
  approvedApproval,
  call,
  createRun,
  seedTenant,
  workerFetch,
} from '../../integration/platform/harness.js';
import { MCP_ORIGIN, PROPS_HEADER } from './entry.js';

const SLOW_MS = 45_000;

/** An SDK client connected over streamable HTTP to `path`, its session acting with `props`. */
async function connect(path: string, props: WritProps): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${MCP_ORIGIN}${path}`), {
    fetch: (url, init) => workerFetch(url.toString(), init),
    requestInit: { headers: { [PROPS_HEADER]: JSON.stringify(props) } },
  });
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

interface ToolReply {
  readonly isError?: boolean;
  readonly content: readonly { readonly type: string; readonly text?: string }[];
}
const text = (r: unknown) => (r as ToolReply).content.map((c) => c.text ?? '').join('\n');

describe('McpAgent guarded by withWrit, over streamable HTTP in workerd', { timeout: SLOW_MS }, () => {
  it('the read runs; the write is refused until approved, then runs once', async () => {
    const s = await seedTenant('agentsmcp');
    const runId = await createRun(s);
    const client = await connect('/mcp', { writ_agent_key: s.agent.api_key, writ_run_id: runId });
    try {
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name).sort()).toEqual(['execute_rollback', 'get_deployment']);

      const read = await client.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
      expect(read.isError).toBeFalsy();
      expect(text(read)).toBe('api@production: v42');

      const denied = await client.callTool({ name: 'execute_rollback', arguments: { ...ROLLBACK_INPUT } });
      expect(denied.isError).toBe(true);
      expect(text(denied)).toContain('approval_missing');
      expect(text(denied)).not.toContain('rolled');

      const approval = await approvedApproval(s);
      const approved = {
        name: 'execute_rollback',
        arguments: { ...ROLLBACK_INPUT },
        _meta: { 'dev.writ/approval_id': approval },
      };
      const ran = await client.callTool(approved);
      expect(ran.isError).toBeFalsy();
      expect(text(ran)).toBe('rolled api@production back from v42 to v41');

      // The approval is spent: the same call again is refused and the handler does not run.
      const again = await client.callTool(approved);
      expect(again.isError).toBe(true);
      expect(text(again)).toContain('approval_unusable');
      expect(text(again)).not.toContain('rolled');

      // Writ charged the run for the two authorized calls only, one of them an external write.
      const run = await call('GET', `/v1/runs/${runId}`, { key: s.agent.api_key });
      expect(run.status).toBe(200);
      expect({ calls: run.body.calls_used, writes: run.body.writes_used }).toEqual({ calls: 2, writes: 1 });
    } finally {
      await client.close();
    }
  });

  it('fails closed: Writ unreachable, or a session without Writ credentials, runs no tool', async () => {
    const s = await seedTenant('agentsmcp');
    const runId = await createRun(s);
    const down = await connect('/mcp-down', { writ_agent_key: s.agent.api_key, writ_run_id: runId });
    try {
      const r = await down.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^Not run: Writ could not decide/);
    } finally {
      await down.close();
    }
    const anonymous = await connect('/mcp', {});
    try {
      const r = await anonymous.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
      expect(r.isError).toBe(true);
      expect(text(r)).toBe('Not run: no Writ run or agent key');
    } finally {
      await anonymous.close();
    }
    // A key Writ does not know is a 401: not run either.
    const stranger = await connect('/mcp', { writ_agent_key: 'writ_0_unknown', writ_run_id: runId });
    try {
      const r = await stranger.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/^Not run: Writ could not decide \(http 401\)/);
    } finally {
      await stranger.close();
    }
  });
});

describe('withWrit on an SDK 2.x McpServer served by createMcpHandler', { timeout: SLOW_MS }, () => {
  const shape = z.object({ service: z.string(), environment: z.string() });

  function handler(options: WritOptions, ran: string[]) {
    return createMcpHandler(() => {
      const server = withWrit(new McpServerV2({ name: 'deploy-v2', version: '1.0.0' }), options);
      server.registerTool('get_deployment', { inputSchema: shape }, async ({ service, environment }) => {
        ran.push('get_deployment');
        return { content: [{ type: 'text', text: `${service}@${environment}: v42` }] };
      });
      server.registerTool(
        'execute_rollback',
        { inputSchema: shape.extend({ from_version: z.string(), to_version: z.string() }) },
        async () => {
          ran.push('execute_rollback');
          return { content: [{ type: 'text', text: 'rolled back' }] };
        },
      );
      return server;
    });
  }

  async function connectV2(options: WritOptions, ran: string[]): Promise<Client> {
    const h = handler(options, ran);
    const transport = new StreamableHTTPClientTransport(new URL(`${MCP_ORIGIN}/mcp`), {
      fetch: (url, init) => h.fetch(new Request(url, init)),
    });
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(transport);
    return client;
  }

  it('decides each call with the 2.x request context; denies and Writ failures never run the handler', async () => {
    const s = await seedTenant('agentsmcp');
    const runId = await createRun(s);
    const ran: string[] = [];
    const options: WritOptions = {
      baseUrl: BASE,
      agentKey: s.agent.api_key,
      runId,
      fetch: (url, init) => workerFetch(url, init),
      idempotencyKey: (tool) => (tool === 'execute_rollback' ? 'rollback-v2-000001' : undefined),
    };
    const client = await connectV2(options, ran);
    const read = await client.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
    expect(text(read)).toBe('api@production: v42');
    const denied = await client.callTool({ name: 'execute_rollback', arguments: { ...ROLLBACK_INPUT } });
    expect(denied.isError).toBe(true);
    expect(text(denied)).toContain('approval_missing');
    // The client's `_meta` reaches Writ through 2.x's `ctx.mcpReq._meta`: the approval is used.
    const approved = await client.callTool({
      name: 'execute_rollback',
      arguments: { ...ROLLBACK_INPUT },
      _meta: { 'dev.writ/approval_id': await approvedApproval(s) },
    });
    expect(text(approved)).toBe('rolled back');
    expect(ran).toEqual(['get_deployment', 'execute_rollback']);
    await client.close();

    const down = await connectV2(
      { ...options, fetch: () => Promise.reject(new TypeError('fetch failed')) },
      ran,
    );
    const r = await down.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
    expect(r.isError).toBe(true);
    expect(ran).toEqual(['get_deployment', 'execute_rollback']);
    await down.close();
  });
});
