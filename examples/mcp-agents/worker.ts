/**
 * Example Worker: an MCP server built with Cloudflare's `agents` package (0.32.0), every tool
 * guarded by Writ through `withWrit` (./with-writ.ts, docs/mcp.md "Cloudflare agents").
 *
 * `DeployTools` is an `McpAgent`: a Durable Object per MCP session, serving an SDK 1.x `McpServer`
 * over streamable HTTP at `/mcp` (`McpAgent.serve`). It has one read tool (`get_deployment`) and
 * one write tool (`execute_rollback`); Writ decides each call before its handler runs.
 *
 * Whose authority a session acts under comes from its props: in a deployment, the OAuth grant of
 * the MCP client (workers-oauth-provider stores props encrypted and hands them to the agent as
 * `ctx.props`) carries the Writ agent key and the run the session is charged to. A session without
 * them is refused every call. Writ is reached through the `WRIT` service binding (Writ deployed as
 * a Worker of the same account); a `fetch` to Writ's public URL works the same way.
 *
 * Configuration (wrangler.jsonc of this Worker):
 *   "durable_objects": { "bindings": [{ "name": "MCP_OBJECT", "class_name": "DeployTools" }] },
 *   "migrations": [{ "tag": "v1", "new_sqlite_classes": ["DeployTools"] }],
 *   "services": [{ "binding": "WRIT", "service": "writ" }],
 *   "compatibility_flags": ["nodejs_compat"]
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpAgent } from 'agents/mcp';
import { z } from 'zod';
import { withWrit } from './with-writ.js';

/** The bindings this Worker needs. `McpAgent` asks for an `Env` that extends `Cloudflare.Env`. */
export type DeployToolsEnv = Cloudflare.Env & {
  readonly MCP_OBJECT: DurableObjectNamespace;
  readonly WRIT: Fetcher;
};

/** What the MCP client's grant says about Writ (a `Record` because `McpAgent` requires one). */
export type WritProps = Record<string, unknown> & {
  readonly writ_agent_key?: string;
  readonly writ_run_id?: string;
};

/** Writ's URL as the service binding sees it: only the path matters to a service binding. */
export const WRIT_BASE_URL = 'https://writ.internal';

// Bounded names: the idempotency key below is built from them and must stay a valid key.
const ident = z.string().regex(/^[A-Za-z0-9._-]{1,24}$/);
const target = { service: ident, environment: ident };

export class DeployTools extends McpAgent<DeployToolsEnv, unknown, WritProps> {
  // Wrapped where it is created, before `init()` registers any tool. Key and run are read per
  // call: `this.props` is set after construction (and restored from storage on a restart).
  server = withWrit(new McpServer({ name: 'deploy-tools', version: '1.0.0' }), {
    baseUrl: WRIT_BASE_URL,
    agentKey: () => this.props?.writ_agent_key ?? '',
    runId: () => this.props?.writ_run_id ?? '',
    fetch: (url, init) => this.writFetch(url, init),
    // One rollback per (service, environment, versions): a retried call is the same effect.
    idempotencyKey: (tool, args) =>
      tool === 'execute_rollback'
        ? `rollback:${String(args.service)}:${String(args.environment)}:${String(args.from_version)}:${String(args.to_version)}`
        : undefined,
  });

  /** How Writ is reached. A subclass may point elsewhere (the tests make Writ unreachable). */
  protected writFetch(url: string, init: RequestInit): Promise<Response> {
    return this.env.WRIT.fetch(url, init);
  }

  async init(): Promise<void> {
    this.server.registerTool(
      'get_deployment',
      {
        description: 'Read which version of a service runs in an environment',
        inputSchema: target,
        annotations: { readOnlyHint: true },
      },
      async ({ service, environment }) => ({
        content: [{ type: 'text', text: `${service}@${environment}: v42` }],
      }),
    );
    this.server.registerTool(
      'execute_rollback',
      {
        description: 'Roll a service back from one version to another',
        inputSchema: { ...target, from_version: ident, to_version: ident },
        annotations: { destructiveHint: true },
      },
      async ({ service, environment, from_version, to_version }) => ({
        content: [
          {
            type: 'text',
            text: `rolled ${service}@${environment} back from ${from_version} to ${to_version}`,
          },
        ],
      }),
    );
  }
}

export default DeployTools.serve('/mcp');
