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
import { READ_CONTRACT } from '../../../scripts/seed.js';
import { definitionDigest, outputSchemaDigest } from '../../../src/http/mcp/translate.js';
import {
  BASE,
  READ_INPUT,
  ROLLBACK_INPUT,
  call,
  createRun,
  seedTenant,
  workerFetch,
} from '../platform/harness.js';

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
      'list_services',
      {
        title: 'List services',
        description: 'List services',
        inputSchema: shape,
        annotations: { readOnlyHint: true },
      },
      async () => {
        calls.push('list_services');
        return { content: [{ type: 'text', text: '["api"]' }] };
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
    // An admin pins list_services' whole advertised definition (docs/mcp.md binding rule).
    const advertised = (await upstreamClient.listTools()).tools.find((t) => t.name === 'list_services');
    if (advertised === undefined) throw new Error('list_services not advertised');
    const pin = await call('POST', '/v1/contracts', {
      key: s.admin.api_key,
      body: {
        ...READ_CONTRACT,
        contract_release: 'list_services 1',
        tool_name: 'list_services',
        input_schema_sha256: definitionDigest(advertised),
        output_schema_sha256: outputSchemaDigest(advertised),
      },
    });
    expect(pin.status).toBe(201);
    const scope = [{ type: 'deployment', attributes: { environment: ['production'], service: ['api'] } }];
    const grant = await call('POST', '/v1/grants', {
      key: s.admin.api_key,
      body: {
        principal_id: s.agent.principal_id,
        allowed_tools: ['list_services'],
        allowed_effects: ['read_only'],
        capabilities: [{ capability: 'deployment:read', resources: scope }],
        expires_at_unix_ms: Date.now() + 3_600_000,
      },
    });
    expect(grant.status).toBe(201);
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

    // Only the tool whose advertised definition is pinned is listed (the seeded contracts pin
    // placeholder digests, so get_deployment and execute_rollback count as drift).
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name)).toEqual(['list_services']);
    const listedCall = await client.callTool({ name: 'list_services', arguments: { ...READ_INPUT } });
    expect(listedCall.content).toEqual([{ type: 'text', text: '["api"]' }]);
    expect(calls).toEqual(['get_deployment', 'list_services']);

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
    expect(calls).toEqual(['get_deployment', 'list_services']);
  });
});
