/**
 * The MCP gateway door (docs/mcp.md): `POST /mcp/v1/authorize` (a raw `tools/call` request in,
 * a decision with the receipt and what to forward, or the JSON-RPC error to return, out),
 * `POST /mcp/v1/tools/list` (a server's tool list filtered to what the caller may use, with
 * drift, drafts and hint conflicts reported) and `POST /mcp/v1/after-call` (a `tools/call`
 * result turned into the execution report and, for a success, an observation).
 *
 * Guarantees: every authorization is a full one through the same service as `POST /v1/authorize`
 * (same decision, stored receipt, run charge, approval consumption); `decision: "allow"` is only
 * ever answered for a stored authorized receipt; an unmapped tool, an unmapped method, a
 * malformed Writ `_meta` and every typed refusal are a `deny` with a JSON-RPC error; a 2026-07-28
 * header that disagrees with the body is HTTP 400 with `-32020`; an internal failure is a 500,
 * which never allows.
 * Never: trusts a tool annotation, header or `_meta` value to select a tenant, principal or tool
 * contract outside the tenant's pinned ones.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { fromZodError } from '../../core/errors.js';
import { Identifier, Label, Sha256, UnixMs } from '../../core/schema.js';
import { FencingToken } from '../../core/execution/idempotency.js';
import { ROLES_FOR } from '../../services/context.js';
import { ServiceError } from '../../services/errors.js';
import { authorizeNamedToolByKey } from '../../services/tool-call.js';
import { reportToolCall, toolCatalog } from '../../services/tools.js';
import { accessRequestWire } from '../access-request.js';
import { authenticate, bearerKeyRoute, keyedDoor, refusesCaller, requireRole } from '../auth.js';
import { rateLimitWrites, takeWriteToken } from '../rate-limit.js';
import { readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';
import { wireError } from '../errors.js';
import {
  type JsonRpcError,
  RPC,
  callResultOf,
  denyResult,
  filterToolList,
  isErrorResult,
  listResultOf,
  outputText,
  rpcError,
  translateToolsCall,
  WRIT_META,
} from './translate.js';

export const mcpRoutes = new Hono<AppEnv>();

// ---------------------------------------------------------------------------------------------
// tools/call

// Registered before `authenticate` and `rateLimitWrites`: the service reads the key's principal
// in one batch with the tool's pins and the authorization state (`POST /v1/authorize`'s round
// trips), and checks the role and takes the write token itself, before deciding.
mcpRoutes.post('/mcp/v1/authorize', async (c) => {
  const key = bearerKeyRoute(c);
  const door = keyedDoor(c, key);
  let body: unknown;
  try {
    body = await readJsonValue(c);
  } catch (e) {
    await door.authenticate();
    throw e;
  }
  const t = translateToolsCall(body, {
    method: c.req.header('mcp-method'),
    name: c.req.header('mcp-name'),
    protocolVersion: c.req.header('mcp-protocol-version'),
  });
  if (!t.ok) {
    await door.authenticate();
    return c.json(deny(t.error, undefined, t.revision), t.status);
  }
  try {
    const { decision, authorized, access_request } = await authorizeNamedToolByKey(door, key, t);
    const { receipt } = decision;
    if (authorized) return c.json({ decision: 'allow', receipt, forward: t.forward });
    const violations = receipt.body.violations;
    const data: Record<string, unknown> = { violations, receipt_sha256: receipt.sha256 };
    if (access_request !== null) {
      // The same tools/call again, with the approved request's id in `_meta`.
      data.access_request = accessRequestWire(c.req.url, access_request, {
        params: { _meta: { [WRIT_META.approval_id]: '<approval_id of the approved request>' } },
      });
    }
    // The model reads the result's text: the violations, the receipt, and where an approval
    // could lift the denial (the request itself is in `structuredContent.writ.access_request`).
    const text =
      `Denied by Writ: ${violations.join(', ')} (receipt ${receipt.sha256})` +
      (access_request === null ? '' : '; an approver can lift it: see structuredContent.writ.access_request');
    return c.json({
      ...deny(rpcError(t.id, RPC.denied, `denied by Writ: ${violations.join(', ')}`, data), text, t.revision),
      receipt,
    });
  } catch (err) {
    // A typed refusal denies the call; anything else fails the whole request closed (500), and
    // a refusal of the caller (key, role, write limit) is the HTTP error it is everywhere.
    if (!(err instanceof ServiceError) || err.reason === 'internal' || refusesCaller(err)) throw err;
    const { status, code } = wireError(err.reason);
    // An unknown tool is MCP's invalid params (tools "Error Handling"); so is a Writ `_meta`
    // value the authorize request's schema refuses (parsed once, in the service).
    const rpc =
      err.reason === 'not_found' || err.reason === 'invalid_request' ? RPC.invalidParams : RPC.denied;
    return c.json(
      deny(
        rpcError(t.id, rpc, err.message, { writ_error: { status, code, message: err.message } }),
        undefined,
        t.revision,
      ),
    );
  }
});

mcpRoutes.use('/mcp/*', authenticate);
// Authorizations and after-call reports store receipts: the per-principal write limit applies.
mcpRoutes.use('/mcp/*', rateLimitWrites);

/**
 * The denial in both forms: the JSON-RPC error (issue 12) and an `isError` tool result (MCP's
 * preference). `text` is the result's text; by default the error's message after "Denied by Writ:".
 * `revision`: the request's, when known (a 2026-07-28 result carries `resultType`).
 */
function deny(error: JsonRpcError, text = `Denied by Writ: ${error.error.message}`, revision?: string) {
  const data = (error.error.data ?? {}) as Record<string, unknown>;
  return {
    decision: 'deny' as const,
    jsonrpc_error: error,
    deny_result: denyResult(text, { writ: { code: error.error.code, ...data } }, revision),
  };
}

// ---------------------------------------------------------------------------------------------
// tools/list

mcpRoutes.post('/mcp/v1/tools/list', requireRole(ROLES_FOR.authorize), async (c) => {
  const listed = listResultOf(await readJsonValue(c));
  if (!listed.ok) throw new ServiceError('invalid_request', listed.message);
  const f = filterToolList(listed.tools, await toolCatalog(c.var.tenant));
  const result: Record<string, unknown> = { ...listed.result, tools: f.tools };
  // Filtered per caller: a 2026-07-28 cache must not share it (tools "Capabilities").
  if ('cacheScope' in result) result.cacheScope = 'private';
  return c.json({
    result,
    drift: f.drift,
    unpinned: f.unpinned,
    not_permitted: f.not_permitted,
    malformed: f.malformed,
    drafts: f.drafts,
    hint_conflicts: f.hint_conflicts,
  });
});

// ---------------------------------------------------------------------------------------------
// After the call (executor)

const AfterCall = z.strictObject({
  operation_id: Sha256,
  fencing_token: FencingToken,
  observation_id: Identifier,
  started_at_unix_ms: UnixMs,
  completed_at_unix_ms: UnixMs,
  /**
   * Only what the result cannot say: `indeterminate` (the effect is unknown), or, for an error
   * result, `failed_no_effect` (the executor checked that nothing happened). Absent: `succeeded`,
   * or for an error result `indeterminate` unless the contract is read-only (`defaultOutcome`).
   */
  outcome: z.enum(['indeterminate', 'failed_no_effect']).optional(),
  effect_id: Identifier.nullable().default(null),
  before_state_sha256: Sha256.nullable().default(null),
  after_state_sha256: Sha256.nullable().default(null),
  result: z.unknown(),
  evidence: z
    .strictObject({
      observation_id: Identifier,
      source_release: Label,
      source_as_of_unix_ms: UnixMs.optional(),
      observed_at_unix_ms: UnixMs.optional(),
    })
    .optional(),
});

mcpRoutes.post('/mcp/v1/after-call', requireRole(ROLES_FOR.report), async (c) => {
  const parsed = AfterCall.safeParse(await readJsonValue(c));
  if (!parsed.success) {
    const err = fromZodError('invalid_request', '', parsed.error);
    throw new ServiceError('invalid_request', err.message, err.issues);
  }
  const b = parsed.data;
  const result = callResultOf(b.result);
  if (result === null) {
    throw new ServiceError('invalid_request', 'result must be a CallToolResult or a tools/call response');
  }
  const is_error = isErrorResult(result);
  // A result that reports success cannot also be a failure without effect.
  if (b.outcome === 'failed_no_effect' && !is_error) {
    throw new ServiceError('invalid_request', 'outcome failed_no_effect needs an isError result', [
      { path: 'outcome', message: 'the result is not an error' },
    ]);
  }
  const e = b.evidence;
  // With evidence, an observation receipt beside the execution receipt: two writes, two tokens
  // (one taken by `rateLimitWrites` before the body was read), before anything is written.
  if (e !== undefined) await takeWriteToken(c, c.var.principal, 1, 1);
  const reported = await reportToolCall(c.var.tenant, {
    operation_id: b.operation_id,
    fencing_token: b.fencing_token,
    observation_id: b.observation_id,
    outcome: b.outcome ?? null,
    result_is_error: is_error,
    started_at_unix_ms: b.started_at_unix_ms,
    completed_at_unix_ms: b.completed_at_unix_ms,
    output_text: outputText(result),
    effect_id: b.effect_id,
    before_state_sha256: b.before_state_sha256,
    after_state_sha256: b.after_state_sha256,
    evidence:
      e === undefined
        ? null
        : {
            observation_id: e.observation_id,
            source_release: e.source_release,
            source_as_of_unix_ms: e.source_as_of_unix_ms ?? b.completed_at_unix_ms,
            observed_at_unix_ms: e.observed_at_unix_ms ?? b.completed_at_unix_ms,
          },
  });
  return c.json(reported);
});
