/**
 * The Worker the `mcp-agents` test project runs (vitest.config.ts): Writ itself (src/worker.ts,
 * its Durable Objects and routes) and, beside it, the example `agents` MCP server
 * (examples/mcp-agents/worker.ts) whose `McpAgent` Durable Object reaches Writ through the `WRIT`
 * service binding, as two Workers of one account would. Test-only; nothing in src/ knows about it.
 *
 * Requests to `https://mcp.test` go to the MCP server; everything else to Writ.
 */
import { DeployTools, type WritProps } from '../../../examples/mcp-agents/worker.js';
import writ from '../../../src/worker.js';

export { IdempotencyObject, LogSequencerObject, RateLimiterObject } from '../../../src/worker.js';
export { DeployTools };

export const MCP_ORIGIN = 'https://mcp.test';
/** Test-only header standing in for the OAuth grant: the props workers-oauth-provider would set. */
export const PROPS_HEADER = 'x-test-writ-props';

/** The same MCP server with Writ unreachable: its calls go to a port nothing listens on. */
export class DeployToolsWritDown extends DeployTools {
  protected override writFetch(url: string, init: RequestInit): Promise<Response> {
    return fetch(`http://127.0.0.1:1${new URL(url).pathname}`, init);
  }
}

const mcp = DeployTools.serve('/mcp');
const mcpDown = DeployToolsWritDown.serve('/mcp-down', { binding: 'MCP_DOWN' });

export default {
  fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.origin !== MCP_ORIGIN) return writ.fetch(request, env, ctx);
    const header = request.headers.get(PROPS_HEADER);
    const props = (header === null ? {} : JSON.parse(header)) as WritProps;
    // What workers-oauth-provider hands the MCP handler after checking the client's token.
    const withProps = {
      waitUntil: (p: Promise<unknown>) => ctx.waitUntil(p),
      passThroughOnException: () => ctx.passThroughOnException(),
      props,
    } as unknown as ExecutionContext;
    return (url.pathname.startsWith('/mcp-down') ? mcpDown : mcp).fetch(request, env, withProps);
  },
  scheduled: writ.scheduled,
} satisfies ExportedHandler<Env>;
