/**
 * End to end with the official MCP TypeScript SDK (1.32.2): an SDK client talks, over in-memory
 * transports, to the example Writ-guarded proxy (examples/mcp-proxy), which asks the Worker under
 * test through its `fetch` and forwards to an SDK `McpServer` with two tools.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createWritGuardedProxy } from '../../../examples/mcp-proxy/writ-proxy.js';
import { BASE, READ_INPUT, ROLLBACK_INPUT, createRun, seedTenant, workerFetch } from '../platform/harness.js';

const SLOW_MS = 30_000;

async function connected(server: { connect(t: InMemoryTransport): Promise<void> }, name: string) {
  const [clientT, serverT] = InMemoryTransport.createLinkedPair();
  const client = new Client({ name, version: '1.0.0' });
  await Promise.all([server.connect(serverT), client.connect(clientT)]);
  return client;
}

describe('SDK client → Writ-guarded proxy → SDK server', { timeout: SLOW_MS }, () => {
  it('an allowed call is forwarded; a denied one never reaches the tool; a Writ failure fails closed', async () => {
    const s = await seedTenant('mcpsdk');
    const runId = await createRun(s);
    const calls: string[] = [];
    const upstream = new McpServer({ name: 'demo', version: '1.0.0' });
    const shape = { service: z.string(), environment: z.string() };
    upstream.registerTool(
      'get_deployment',
      { description: 'Read one deployment', inputSchema: shape, annotations: { readOnlyHint: true } },
      async ({ service, environment }) => {
        calls.push('get_deployment');
        return { content: [{ type: 'text', text: `${service}@${environment}` }] };
      },
    );
    upstream.registerTool(
      'execute_rollback',
      {
        description: 'Roll back',
        inputSchema: { ...shape, from_version: z.string(), to_version: z.string() },
      },
      async () => {
        calls.push('execute_rollback');
        return { content: [{ type: 'text', text: 'rolled back' }] };
      },
    );
    const upstreamClient = await connected(upstream, 'writ-gw');
    const proxy = createWritGuardedProxy(upstreamClient, {
      fetch: (url, init) => workerFetch(url, init),
      baseUrl: BASE,
      agentKey: s.agent.api_key,
      runId,
      idempotencyKey: (name) => (name === 'execute_rollback' ? 'rollback-sdk-0001' : undefined),
    });
    const client = await connected(proxy, 'agent');

    const read = await client.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
    expect(read.isError).toBeFalsy();
    expect(read.content).toEqual([{ type: 'text', text: 'api@production' }]);

    const denied = await client.callTool({ name: 'execute_rollback', arguments: { ...ROLLBACK_INPUT } });
    expect(denied.isError).toBe(true);
    expect(JSON.stringify(denied.content)).toContain('approval_missing');
    expect(calls).toEqual(['get_deployment']);

    // The seeded contracts pin placeholder digests, not these definitions: nothing is listed.
    const listed = await client.listTools();
    expect(listed.tools).toEqual([]);

    // Writ unreachable: fail closed, the tool is not called.
    const down = createWritGuardedProxy(upstreamClient, {
      fetch: () => Promise.reject(new Error('connection refused')),
      baseUrl: BASE,
      agentKey: s.agent.api_key,
      runId,
    });
    const downClient = await connected(down, 'agent2');
    const r = await downClient.callTool({ name: 'get_deployment', arguments: { ...READ_INPUT } });
    expect(r.isError).toBe(true);
    expect(calls).toEqual(['get_deployment']);
  });
});
