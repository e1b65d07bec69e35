/**
 * `withWrit(server, options)`: guard every tool of an MCP server built with Cloudflare's `agents`
 * package through Writ's MCP gateway door (docs/mcp.md "Cloudflare agents").
 *
 * Both servers `agents` 0.32.0 serves are supported, with one wrapper:
 * - `McpAgent` (`agents/mcp`, a Durable Object per MCP session) serves `this.server`, an `McpServer`
 *   of `@modelcontextprotocol/sdk` 1.x (it refuses a 2.x server). Wrap it where it is created,
 *   before `init()` registers tools (examples/mcp-agents/worker.ts is a complete Worker):
 *
 *     export class DeployTools extends McpAgent<Env, unknown, Props> {
 *       server = withWrit(new McpServer({ name: 'deploy', version: '1.0.0' }), {
 *         baseUrl: 'https://writ.example', agentKey: () => this.props?.writ_agent_key ?? '',
 *         runId: () => this.props?.writ_run_id ?? '', fetch: (url, init) => this.env.WRIT.fetch(url, init),
 *       });
 *       async init() { this.server.registerTool('execute_rollback', {...}, handler); }
 *     }
 *
 * - `createMcpHandler(factory)` (`agents/mcp`, stateless) serves an `McpServer` of
 *   `@modelcontextprotocol/server` 2.x, created per request: wrap it inside the factory.
 * The two differ, for the guard, only in the request context a tool callback gets: 1.x passes
 * `extra` (`requestId`, `_meta`), 2.x passes `ctx` (`mcpReq.id`, `mcpReq._meta`).
 *
 * Each call: `POST /mcp/v1/authorize` (the call as a `tools/call`, with the run, idempotency and
 * approval keys in `_meta`) before the handler runs; with `report` set for the tool, the executor
 * claims the allowed receipt (`POST /v1/executions/claim`) first and posts the result to
 * `POST /mcp/v1/after-call` afterwards.
 *
 * Guarantees: the handler runs only after a 200 `allow` from Writ (and, with `report`, a
 * `proceed` claim); a deny is Writ's `deny_result` (an `isError` tool result the model can read);
 * anything else (Writ unreachable, a non-200, a body that does not parse, a claim that does not
 * proceed, an exception in the guard, a missing agent key or run) is an `isError` result and the
 * handler does not run (fail closed). What would leave a tool unguarded or decided under another
 * name is refused with an exception: a tool registered before wrapping or through the deprecated
 * `server.tool(...)` (1.x), and a registered tool's `update` that replaces its callback, renames
 * it or changes its input schema (remove it and register it again instead).
 * Never: sends the MCP client's credentials to Writ, or changes the handler's result.
 */

/** What the guard needs of an MCP server: `registerTool(name, config, callback)` (SDK 1.x and 2.x). */
export interface ToolRegistrar {
  registerTool(name: string, config: never, callback: never): unknown;
}

type Fetch = (url: string, init: RequestInit) => Promise<Response>;
type Lazy<T> = T | (() => T | Promise<T>);

export interface WritOptions {
  readonly baseUrl: string;
  /** The agent's API key: whose authority the calls are decided under. Lazy: `this.env` in a DO. */
  readonly agentKey: Lazy<string>;
  /** The Writ run each call is charged to. Lazy: `this.props` are set after construction. */
  readonly runId: Lazy<string>;
  /** The call's idempotency key (writes need one), unless the client sent `dev.writ/idempotency_key`. */
  readonly idempotencyKey?: (tool: string, args: Record<string, unknown>) => string | undefined;
  /** `fetch` itself by default; a Worker's `fetch` or a service binding in tests. */
  readonly fetch?: Fetch;
  /** Close the loop for these tools: claim as the executor before, report the result after. */
  readonly report?: (tool: string) => ReportOptions | undefined;
  /** Told when a report after a completed handler fails (the result is still returned). */
  readonly onReportError?: (tool: string, why: string) => void;
}

export interface ReportOptions {
  readonly executorKey: string;
  /** The effect at the upstream system and the target's state digests (writes need them). */
  readonly effect?: (
    args: Record<string, unknown>,
    result: ToolResult,
  ) => { effect_id?: string; before_state_sha256?: string; after_state_sha256?: string };
}

interface ToolResult {
  content: unknown[];
  isError?: boolean;
  [k: string]: unknown;
}

type Callback = (...a: unknown[]) => unknown;

function refused(text: string): ToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

async function lazy<T>(v: Lazy<T>): Promise<T> {
  return typeof v === 'function' ? await (v as () => T | Promise<T>)() : v;
}

async function post(
  o: WritOptions,
  key: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const f = o.fetch ?? ((url, init) => fetch(url, init));
  const res = await f(`${o.baseUrl}${path}`, {
    method: 'POST',
    headers: { ...headers, authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text.length > 0 ? (JSON.parse(text) as unknown) : null;
  const record = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : null;
  return { status: res.status, body: record as Record<string, unknown> | null };
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';

/**
 * The MCP request headers a call that states its revision in `_meta` (2026-07-28) must carry
 * to `/mcp/v1/authorize`: the version, the method and the tool name, as the client's own request
 * carried them (streamable HTTP "Request Metadata"). Without them Writ answers 400 HeaderMismatch
 * and every such call would be refused. A call without the `_meta` version needs none.
 */
function mcpHeaders(meta: Record<string, unknown>, name: string): Record<string, string> {
  const version = meta[PROTOCOL_VERSION_META];
  if (typeof version !== 'string') return {};
  return { 'mcp-protocol-version': version, 'mcp-method': 'tools/call', 'mcp-name': headerValue(name) };
}

/** A header value as MCP encodes it: plain when it is safe visible ASCII, else the base64 sentinel. */
function headerValue(v: string): string {
  const plain = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(v) && !/^=\?base64\?.*\?=$/.test(v);
  if (plain) return v;
  const bytes = new TextEncoder().encode(v);
  return `=?base64?${btoa(String.fromCharCode(...bytes))}?=`;
}

/** Wrap `server` so that every tool registered on it afterwards is decided by Writ first. */
export function withWrit<S extends ToolRegistrar>(server: S, options: WritOptions): S {
  // Tools registered before wrapping could never be guarded (1.x and 2.x keep them privately).
  const existing = (server as unknown as { _registeredTools?: Record<string, unknown> })._registeredTools;
  if (existing !== undefined && Object.keys(existing).length > 0) {
    throw new Error('withWrit: wrap the server before registering any tool');
  }
  const register = server.registerTool.bind(server) as (
    name: string,
    config: unknown,
    cb: Callback,
  ) => unknown;
  const patched = server as unknown as Record<string, unknown>;
  patched.registerTool = (name: string, config: unknown, cb: Callback) => {
    // The SDK calls `cb(args, extra)` when the tool has an input schema, `cb(extra)` when not.
    const hasInput = isRecord(config) && config.inputSchema !== undefined;
    const guarded: Callback = async (...a: unknown[]) => {
      const args = hasInput && isRecord(a[0]) ? a[0] : {};
      const extra = hasInput ? a[1] : a[0];
      return guard(options, name, args, extra, () => cb(...a));
    };
    const registered = register(name, config, guarded);
    if (isRecord(registered) && typeof registered.update === 'function') {
      const update = (registered.update as (u: unknown) => unknown).bind(registered);
      // `remove()`, `enable()` and `disable()` go through `update` too, and stay allowed.
      registered.update = (u: unknown) => {
        if (isRecord(u)) {
          // A new callback would run unguarded; a new name would be decided under the old one;
          // a new input schema changes how the SDK calls the callback (args or not).
          if (u.callback !== undefined) throw new Error("withWrit: a tool's callback cannot be replaced");
          if (typeof u.name === 'string' && u.name !== name) {
            throw new Error('withWrit: a guarded tool cannot be renamed');
          }
          if (u.paramsSchema !== undefined || u.inputSchema !== undefined) {
            throw new Error("withWrit: a guarded tool's input schema cannot be replaced");
          }
        }
        return update(u);
      };
    }
    return registered;
  };
  // 1.x's deprecated overloads register around `registerTool`: a tool added that way would be
  // unguarded. (2.x has no `tool` method.)
  if ('tool' in server) {
    patched.tool = () => {
      throw new Error('withWrit: register tools with registerTool; server.tool(...) is not guarded');
    };
  }
  return server;
}

/**
 * The JSON-RPC id and `_meta` of the call from the request context the SDK hands a tool callback:
 * 1.x `extra` (`requestId`, `_meta`) or 2.x `ctx` (`mcpReq.id`, `mcpReq._meta`).
 */
function requestOf(extra: unknown): { id: string | number; meta: Record<string, unknown> } {
  const ex = isRecord(extra) ? extra : {};
  const req = isRecord(ex.mcpReq) ? ex.mcpReq : null;
  const id = req === null ? ex.requestId : req.id;
  const meta = req === null ? ex._meta : req._meta;
  return {
    id: typeof id === 'string' || typeof id === 'number' ? id : 0,
    meta: isRecord(meta) ? meta : {},
  };
}

async function guard(
  o: WritOptions,
  name: string,
  args: Record<string, unknown>,
  extra: unknown,
  run: () => unknown,
): Promise<unknown> {
  let claim: { operation_id: string; fencing_token: string; started: number; report: ReportOptions } | null =
    null;
  try {
    const request = requestOf(extra);
    const key = o.idempotencyKey?.(name, args);
    const runId = await lazy(o.runId);
    const agentKey = await lazy(o.agentKey);
    // A session without its credentials (an McpAgent's props not set) is not asked about at all.
    if (runId.length === 0 || agentKey.length === 0) return refused('Not run: no Writ run or agent key');
    const meta: Record<string, unknown> = {
      ...request.meta,
      'dev.writ/run_id': runId,
      ...(key === undefined ? {} : { 'dev.writ/idempotency_key': key }),
    };
    const decided = await post(
      o,
      agentKey,
      '/mcp/v1/authorize',
      {
        jsonrpc: '2.0',
        id: request.id,
        method: 'tools/call',
        params: { name, arguments: args, _meta: meta },
      },
      mcpHeaders(request.meta, name),
    );
    const body = decided.body;
    if (decided.status !== 200 || body?.decision !== 'allow') {
      if (body?.decision === 'deny' && isRecord(body.deny_result)) return body.deny_result;
      return refused(`Not run: Writ could not decide (http ${decided.status})`);
    }
    const report = o.report?.(name);
    if (report !== undefined) {
      const receipt = isRecord(body.receipt) ? body.receipt : {};
      const claimed = await post(o, report.executorKey, '/v1/executions/claim', {
        authorization_receipt_sha256: receipt.sha256,
      });
      const c = claimed.body;
      if (claimed.status !== 200 || c?.status !== 'proceed') {
        return refused(`Not run: the execution was not claimed (http ${claimed.status})`);
      }
      claim = {
        operation_id: String(c.operation_id),
        fencing_token: String(c.fencing_token),
        started: Date.now(),
        report,
      };
    }
  } catch (e) {
    return refused(`Not run: Writ could not decide (${e instanceof Error ? e.name : 'error'})`);
  }
  let result: ToolResult;
  try {
    result = (await run()) as ToolResult;
  } catch (e) {
    // A handler that threw may have acted: its effect is unknown, and Writ is told so.
    if (claim !== null) {
      await reportAfter(o, name, args, claim, refused('the tool handler threw'), 'indeterminate');
    }
    throw e;
  }
  if (claim !== null) await reportAfter(o, name, args, claim, result);
  return result;
}

async function reportAfter(
  o: WritOptions,
  name: string,
  args: Record<string, unknown>,
  claim: { operation_id: string; fencing_token: string; started: number; report: ReportOptions },
  result: ToolResult,
  outcome?: 'indeterminate',
): Promise<void> {
  try {
    const r = await post(o, claim.report.executorKey, '/mcp/v1/after-call', {
      operation_id: claim.operation_id,
      fencing_token: claim.fencing_token,
      observation_id: `obs-${crypto.randomUUID()}`,
      started_at_unix_ms: claim.started,
      completed_at_unix_ms: Math.max(claim.started, Date.now()),
      result,
      ...(outcome === undefined ? {} : { outcome }),
      ...(claim.report.effect?.(args, result) ?? {}),
    });
    if (r.status !== 200) o.onReportError?.(name, `http ${r.status}`);
  } catch (e) {
    o.onReportError?.(name, e instanceof Error ? e.name : 'error');
  }
}
