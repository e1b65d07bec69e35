/**
 * Docker MCP Gateway `before` interceptor payloads (docker/mcp-gateway `pkg/interceptors`) as a
 * tool call to authorize, and Writ's answers in the shape the gateway reads back. Pure: no I/O,
 * no clock. See docs/mcp.md "Docker MCP Gateway interceptors".
 *
 * The gateway posts one of two bodies, depending on its release:
 * - `json.Marshal` of go-sdk's `*mcp.CallToolRequest`, a struct without JSON tags:
 *   `{"Session":{},"Params":{"_meta":{…},"name":"…","arguments":{…}},"Extra":…}` (main at
 *   2bd20fe, 2026-07-23). `Extra` may carry the MCP client's HTTP headers, `Authorization`
 *   included: it is never read, logged or stored here.
 * - `{"method":"tools/call","params":{…}}` (later releases).
 * The gateway reads the answer as: an empty body continues to the tool, any other body is
 * unmarshalled as the call's `CallToolResult` (the tool is not called); the status is ignored.
 *
 * Guarantees: the params are read as the gateway door reads them (`callOf`), so the same call
 * through either door is the same authorization; a body with both `Params` and `params`, a
 * method other than `tools/call`, or a run id named twice with two values is refused, never
 * guessed; only an explicit allow is ever an empty answer.
 * Never: reads a credential, tenant or principal from the payload or the URL.
 */
import { Identifier } from '../../core/schema.js';
import { callOf, isRecord, type JsonRpcError, RPC, rpcError, type ToolCall, WRIT_META } from './translate.js';

/** A `CallToolResult` the gateway returns to the MCP client instead of calling the tool. */
export interface InterceptorResult {
  readonly content: readonly { readonly type: 'text'; readonly text: string }[];
  readonly structuredContent: { readonly writ: Record<string, unknown> };
  readonly isError: true;
}

/** The refusal every non-allow path answers: non-empty, so the gateway never calls the tool. */
export function interceptorDeny(text: string, writ: Record<string, unknown>): InterceptorResult {
  return { content: [{ type: 'text', text }], structuredContent: { writ }, isError: true };
}

export type InterceptorTranslation =
  { readonly ok: true; readonly call: ToolCall } | { readonly ok: false; readonly error: JsonRpcError };

/**
 * A `before` payload as the call to authorize. `runIdParam` is the `run_id` query parameter of
 * the interceptor URL (a run id is an identifier, not a credential): the gateway cannot add
 * Writ's `_meta` keys, so the run comes from the interceptor's configuration unless the MCP
 * client named one in `_meta["dev.writ/run_id"]`.
 */
export function translateBefore(body: unknown, runIdParam: string | undefined): InterceptorTranslation {
  const refuse = (code: number, message: string) => ({
    ok: false as const,
    error: rpcError(null, code, message),
  });
  if (!isRecord(body)) return refuse(RPC.invalidRequest, 'the interceptor body must be a JSON object');
  // Go reads member names case-insensitively; we do not, and two spellings would be two readings.
  if ('Params' in body && 'params' in body) {
    return refuse(RPC.invalidRequest, 'the interceptor body has both "Params" and "params"');
  }
  if ('method' in body && body.method !== 'tools/call') {
    return refuse(RPC.methodNotFound, 'only tools/call is authorized by this interceptor');
  }
  const params = body.Params ?? body.params;
  if (!isRecord(params)) return refuse(RPC.invalidParams, 'the interceptor body has no tools/call params');
  const meta = params._meta;
  if (meta !== undefined && !isRecord(meta)) {
    return refuse(RPC.invalidParams, 'params._meta must be an object');
  }
  let withRun = params;
  if (runIdParam !== undefined) {
    if (!Identifier.safeParse(runIdParam).success) {
      return refuse(RPC.invalidParams, 'the run_id query parameter is not a valid identifier');
    }
    const named = meta?.[WRIT_META.run_id];
    if (named !== undefined && named !== runIdParam) {
      return refuse(RPC.invalidParams, 'the run_id query parameter and _meta["dev.writ/run_id"] differ');
    }
    withRun = { ...params, _meta: { ...(meta ?? {}), [WRIT_META.run_id]: runIdParam } };
  }
  const call = callOf(null, withRun);
  return call.ok ? { ok: true, call: call.call } : { ok: false, error: call.error };
}
