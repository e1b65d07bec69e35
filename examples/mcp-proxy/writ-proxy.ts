/**
 * Example: a Writ-guarded MCP proxy on the official TypeScript SDK (`@modelcontextprotocol/sdk`
 * 1.32.2). A low-level `Server` faces the MCP client; a `Client` talks to the upstream server.
 * `tools/list` is filtered through `POST /mcp/v1/tools/list`; every `tools/call` is decided by
 * `POST /mcp/v1/authorize` before it is forwarded (docs/mcp.md, "Proxy recipe").
 *
 * Guarantees: a call is forwarded only for a tool Writ's filter let through in the upstream's
 * current listing (so a tool whose advertised definition drifted from its pinned contract, or
 * was never pinned, is refused by name too, not only hidden from the list), and only on a 200
 * `allow`, then exactly as Writ's `forward` says; a deny is returned as Writ's `deny_result` (an
 * `isError` tool result: the SDK 1.x reads JSON-RPC -32001 as a timeout); anything else from
 * Writ (network error, non-200, unparsable body) fails closed with an `isError` result; the
 * upstream tool list is never returned unfiltered. "Current": by default the upstream is listed
 * and filtered again before every call (`listTtlMs` 0); a longer `listTtlMs` trusts a filtered
 * listing that long, or until the upstream says its list changed.
 * Never: forwards the client's credentials upstream, or trusts a tool annotation.
 *
 * Not shown: the executor side (claim with the allow's receipt, then `POST /mcp/v1/after-call`).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  CompatibilityCallToolResultSchema,
  type ListToolsRequest,
  ListToolsRequestSchema,
  type ListToolsResult,
  ToolListChangedNotificationSchema,
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
  /**
   * How long a filtered listing of the upstream's tools is trusted for calls, in ms (default 0:
   * listed and filtered again before every call). A tool may drift between two listings; the
   * upstream's `notifications/tools/list_changed` ends the trust early.
   */
  readonly listTtlMs?: number;
  /** The clock for `listTtlMs` (default `Date.now`). */
  readonly now?: () => number;
}

/** Pages of one upstream listing a call may walk through before it gives up (fails closed). */
const MAX_LIST_PAGES = 64;

function notListed(name: string): CallToolResult {
  return {
    content: [
      {
        type: 'text',
        text: `Not forwarded: "${name}" is not among the upstream's tools that match a reviewed, pinned contract (unpinned, quarantined, or its definition drifted)`,
      },
    ],
    isError: true,
  };
}

function failClosed(why: string): CallToolResult {
  return {
    content: [{ type: 'text', text: `Not forwarded: Writ could not decide (${why})` }],
    isError: true,
  };
}

async function postWrit(
  writ: WritConnection,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<unknown> {
  const res = await writ.fetch(`${writ.baseUrl}${path}`, {
    method: 'POST',
    headers: { ...headers, authorization: `Bearer ${writ.agentKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text.length > 0 ? (JSON.parse(text) as unknown) : null };
}

/**
 * The MCP request headers a call that states its revision in `_meta` (2026-07-28) must carry to
 * `/mcp/v1/authorize` (the version, method and tool name, as streamable HTTP mirrors them);
 * without them Writ answers 400 HeaderMismatch. A call without the `_meta` version needs none.
 */
function mcpHeaders(meta: Record<string, unknown> | undefined, name: string): Record<string, string> {
  const version = meta?.['io.modelcontextprotocol/protocolVersion'];
  if (typeof version !== 'string') return {};
  const plain = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(name) && !/^=\?base64\?.*\?=$/.test(name);
  const encoded = plain ? name : `=?base64?${btoa(String.fromCharCode(...new TextEncoder().encode(name)))}?=`;
  return { 'mcp-protocol-version': version, 'mcp-method': 'tools/call', 'mcp-name': encoded };
}

export function createWritGuardedProxy(upstream: Client, writ: WritConnection): Server {
  const front = new Server({ name: 'writ-guarded-proxy', version: '1.0.0' }, { capabilities: { tools: {} } });

  const ttl = Math.max(0, writ.listTtlMs ?? 0);
  const now = writ.now ?? Date.now;
  // The names Writ let through in the upstream's latest full listing, and when it was taken.
  let reviewed: { readonly names: ReadonlySet<string>; readonly at: number } | null = null;
  upstream.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    reviewed = null;
  });

  /** One page of the upstream's listing, filtered by Writ (no tools when Writ did not answer). */
  const filteredPage = async (params: ListToolsRequest['params']): Promise<ListToolsResult> => {
    const listed = await upstream.listTools(params);
    const r = (await postWrit(writ, '/mcp/v1/tools/list', listed)) as {
      status: number;
      body: { result?: unknown };
    };
    // Never the unfiltered list: without Writ's answer, no tools.
    if (r.status !== 200 || typeof r.body?.result !== 'object' || r.body.result === null)
      return { tools: [] };
    return r.body.result as ListToolsResult;
  };

  /** The reviewed names of a fresh full listing (every page), or null when it could not be had. */
  const listReviewed = async (): Promise<ReadonlySet<string> | null> => {
    const names = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const result = await filteredPage(cursor === undefined ? undefined : { cursor });
      for (const t of result.tools) names.add(t.name);
      cursor = result.nextCursor;
      if (cursor === undefined) return names;
    }
    return null;
  };

  front.setRequestHandler(ListToolsRequestSchema, (req) => filteredPage(req.params));

  front.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    // The tool must be one Writ let through in the upstream's current listing: a drifted
    // definition is refused, not only hidden from the model's list.
    if (reviewed === null || now() - reviewed.at >= ttl) {
      let names: ReadonlySet<string> | null;
      try {
        names = await listReviewed();
      } catch (e) {
        return failClosed(e instanceof Error ? e.message : 'listing failed');
      }
      if (names === null) return failClosed('the upstream listing did not end');
      reviewed = { names, at: now() };
    }
    if (!reviewed.names.has(req.params.name)) return notListed(req.params.name);
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
      decided = (await postWrit(
        writ,
        '/mcp/v1/authorize',
        { jsonrpc: '2.0', id: extra.requestId, method: 'tools/call', params },
        mcpHeaders(req.params._meta, req.params.name),
      )) as typeof decided;
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
