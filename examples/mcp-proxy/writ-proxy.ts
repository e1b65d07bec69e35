/**
 * Example: a Writ-guarded MCP proxy on the official TypeScript SDK (`@modelcontextprotocol/sdk`
 * 1.32.2). A low-level `Server` faces the MCP client; a `Client` talks to the upstream server.
 * `tools/list` is filtered through `POST /mcp/v1/tools/list`; every `tools/call` is decided by
 * `POST /mcp/v1/authorize` before it is forwarded (docs/mcp.md, "Proxy recipe").
 *
 * Guarantees: a call is forwarded only on a 200 `allow`, and then exactly as Writ's `forward`
 * says; a deny is returned as Writ's `deny_result` (an `isError` tool result: the SDK 1.x reads
 * JSON-RPC -32001 as a timeout); anything else from Writ (network error, non-200, unparsable
 * body) fails closed with an `isError` result; the upstream tool list is never returned
 * unfiltered. Never: forwards the client's credentials upstream, or trusts a tool annotation.
 *
 * Not shown: the executor side (claim with the allow's receipt, then `POST /mcp/v1/after-call`).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  CompatibilityCallToolResultSchema,
  ListToolsRequestSchema,
  type ListToolsResult,
} from '@modelcontextprotocol/sdk/types.js';

export interface WritConnection {
  /** How to reach Writ: `fetch` itself, or a Worker's `fetch` in tests. */
  readonly fetch: (url: string, init: RequestInit) => Promise<Response>;
  readonly baseUrl: string;
  /** The agent's API key: whose authority the calls are decided under. */
  readonly agentKey: string;
  /** The Writ run every call of this session is charged to. */
  readonly runId: string;
  /** The idempotency key of a call (writes need one); the client may also send `dev.writ/idempotency_key`. */
  readonly idempotencyKey?: (name: string, args: Record<string, unknown>) => string | undefined;
}

function failClosed(why: string): CallToolResult {
  return {
    content: [{ type: 'text', text: `Not forwarded: Writ could not decide (${why})` }],
    isError: true,
  };
}

async function postWrit(writ: WritConnection, path: string, body: unknown): Promise<unknown> {
  const res = await writ.fetch(`${writ.baseUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${writ.agentKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? (JSON.parse(text) as unknown) : null };
}

export function createWritGuardedProxy(upstream: Client, writ: WritConnection): Server {
  const front = new Server({ name: 'writ-guarded-proxy', version: '1.0.0' }, { capabilities: { tools: {} } });

  front.setRequestHandler(ListToolsRequestSchema, async (req) => {
    const listed = await upstream.listTools(req.params);
    const r = (await postWrit(writ, '/mcp/v1/tools/list', listed)) as {
      status: number;
      body: { result?: unknown };
    };
    // Never the unfiltered list: without Writ's answer, no tools.
    if (r.status !== 200 || typeof r.body?.result !== 'object' || r.body.result === null)
      return { tools: [] };
    return r.body.result as ListToolsResult;
  });

  front.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const args = req.params.arguments ?? {};
    const key = writ.idempotencyKey?.(req.params.name, args);
    const params = {
      ...req.params,
      _meta: {
        ...req.params._meta,
        'dev.writ/run_id': writ.runId,
        ...(key === undefined ? {} : { 'dev.writ/idempotency_key': key }),
      },
    };
    let decided: { status: number; body: Record<string, unknown> | null };
    try {
      decided = (await postWrit(writ, '/mcp/v1/authorize', {
        jsonrpc: '2.0',
        id: extra.requestId,
        method: 'tools/call',
        params,
      })) as typeof decided;
    } catch (e) {
      return failClosed(e instanceof Error ? e.message : 'unreachable');
    }
    const body = decided.body;
    if (decided.status === 200 && body?.decision === 'allow') {
      const forward = body.forward as { params: { name: string; arguments?: Record<string, unknown> } };
      return (await upstream.callTool(forward.params, CompatibilityCallToolResultSchema)) as CallToolResult;
    }
    if (body?.decision === 'deny' && typeof body.deny_result === 'object' && body.deny_result !== null) {
      return body.deny_result as CallToolResult;
    }
    return failClosed(`http ${decided.status}`);
  });

  return front;
}
