/**
 * A small executor that honours Writ's executor endpoint contract (docs/executors.md): it acts
 * only on a request whose authorization receipt `verifyAuthorizationReceipt` accepts for this
 * executor and these input bytes, and only once per logical operation. It passes
 * `writ conformance executor` (test/unit/cli/conformance.test.ts runs the kit against it).
 *
 * `createExecutor(options)` returns a `fetch`-style handler: export it as a Worker's `fetch`, or
 * serve it from Node with `serve.ts`. Replay protection here is an in-memory set, enough for the
 * example: a real executor claims the key in its own durable store or through Writ's
 * `POST /v1/executions/claim` before it acts.
 */
import { decodeJsonBytes, type JsonValue } from '../../src/core/canonical/json.js';
import {
  type ExecutorAudience,
  type TrustedKeys,
  verifyAuthorizationReceipt,
} from '../../src/verify/index.js';

export interface ExecutorOptions {
  /** The issuer keys this executor trusts, obtained out of band (never from a request). */
  readonly keys: TrustedKeys;
  readonly audience: ExecutorAudience;
  readonly now?: () => number;
  /** True the first time a key is claimed, false ever after. Default: an in-memory set. */
  readonly claimOnce?: (key: string) => boolean | Promise<boolean>;
  /** The tool's effect. Default: echo the input. */
  readonly act?: (input: JsonValue) => Promise<JsonValue>;
  /** The receipt check (tests substitute a broken one to show the kit notices). */
  readonly verify?: typeof verifyAuthorizationReceipt;
}

const MAX_REQUEST_BYTES = 1024 * 1024;
const MEMBERS = ['authorization_receipt', 'input', 'signature', 'writ_executor_request'];

export function createExecutor(o: ExecutorOptions): (request: Request) => Promise<Response> {
  const seen = new Set<string>();
  const claimOnce =
    o.claimOnce ??
    ((key: string) => {
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  const verify = o.verify ?? verifyAuthorizationReceipt;
  const now = o.now ?? Date.now;
  const act = o.act ?? (async (input: JsonValue) => ({ echoed: input }));

  return async (request) => {
    if (request.method !== 'POST') return refuse(405, 'method_not_allowed');
    if (!/^application\/json\s*(;|$)/i.test(request.headers.get('content-type') ?? '')) {
      return refuse(415, 'unsupported_media_type');
    }
    const bytes = new Uint8Array(await request.arrayBuffer());
    if (bytes.byteLength > MAX_REQUEST_BYTES) return refuse(413, 'too_large');
    // Strict: a duplicate key could show the verifier one input and the tool another.
    const decoded = decodeJsonBytes(bytes, { maxBytes: MAX_REQUEST_BYTES, maxDepth: 64 });
    if (!decoded.ok) return refuse(400, 'malformed_json');
    const req = decoded.value;
    if (
      typeof req !== 'object' ||
      req === null ||
      Array.isArray(req) ||
      Object.keys(req).sort().join() !== MEMBERS.join() ||
      req.writ_executor_request !== 1
    ) {
      return refuse(400, 'malformed_request');
    }
    const input = req.input as JsonValue;
    const verdict = verify(req.authorization_receipt, {
      keys: o.keys,
      audience: o.audience,
      now: now(),
      signature: req.signature,
      input,
    });
    if (!verdict.ok) return refuse(403, verdict.reason);
    const body = verdict.receipt.body;
    // One effect per logical operation: the idempotency key, or the invocation for calls without one.
    const key = body.idempotency_key !== null ? `key:${body.idempotency_key}` : `inv:${body.invocation_id}`;
    if (!(await claimOnce(`${body.tenant_id}/${key}`))) return refuse(409, 'replayed');
    const result = await act(input);
    return Response.json({ accepted: true, receipt_sha256: verdict.receipt.sha256, result });
  };
}

function refuse(status: number, reason: string): Response {
  return Response.json({ accepted: false, reason }, { status });
}
