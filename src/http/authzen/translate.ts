/**
 * AuthZEN Authorization API 1.0 (openid/authzen, api/authorization-api-1_0.md) to Writ's
 * authorize request, and Writ's decision back. Pure: no I/O, no clock.
 *
 * Mapping (docs/authzen.md): subject = the authenticated principal (a different subject is a
 * denial, never a 403); action.name = the tool name, resolved through the tenant's binding of
 * tool names to pinned contracts; resource = the target the contract derives from the input
 * (`type` must be the contract's resource type; `id`, unless empty, must be that target's id;
 * `properties`, when present, must equal the derived attributes); context = `input` (required), `run_id` (required),
 * `tool_contract_sha256`, `idempotency_key`, `approval_id`.
 *
 * Guarantees: unknown members are ignored at every level (§10.1.1), while the strict JSON rules
 * (size bound, duplicate keys, lone surrogates, depth) still hold at the body decoder; a missing
 * required attribute is a whole-request 400 (§10.1.1); batch defaults replace whole keys
 * (§7.1.1).
 */
import { z } from 'zod';
import type { DoorRequest } from '../../services/tool-call.js';
import type { JsonValue } from '../../core/canonical/json.js';
import { fromZodError, type FieldIssue } from '../../core/errors.js';
import { SHA256_PATTERN, Sha256 } from '../../core/schema.js';

/**
 * An object of free-form members. Checked as a whole, not member by member: a zod record walks
 * every key (the evaluation's `context` holds the whole tool input), which costs more than the
 * decision's own parse on Workers (docs/benchmarks.md "Doors"); the members that matter are
 * parsed where they are used (`WritContext`, the authorize request).
 */
const FreeObject = z.custom<Record<string, unknown>>(
  (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  'expected an object',
);

/** Properties "with a value of null SHOULD be omitted" by senders (§11.5): null reads as absent. */
const Properties = FreeObject.nullish().transform((v) => v ?? undefined);

const Entity = z.object({
  type: z.string().min(1).max(256),
  id: z.string().max(1024),
  properties: Properties,
});
const Action = z.object({ name: z.string().min(1).max(256), properties: Properties });
const Context = FreeObject.nullish().transform((v) => v ?? undefined);

export const Evaluation = z.object({ subject: Entity, action: Action, resource: Entity, context: Context });
export type Evaluation = z.infer<typeof Evaluation>;

// The evaluation endpoint's acceptor. zod's object parse of the envelope (three nested objects,
// jitless on Workers) costs more than the authorize request's own parse (docs/benchmarks.md
// "Doors"), so a well-formed evaluation is accepted by hand, by the same rules, into the same
// values (unknown members dropped, a null `properties`/`context` read as undefined). Anything the
// hand check does not accept goes to `Evaluation` itself, so every rejection and its message is
// zod's. A property test holds the two equal (test/unit/http/authzen-accept.test.ts).
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown, min: number, max: number): v is string =>
  typeof v === 'string' && v.length >= min && v.length <= max;

/** A free-form member as `Properties`/`Context` read it; null when it is not an object. */
const NOT_FREE = null;
function freeMember(v: unknown): Record<string, unknown> | undefined | typeof NOT_FREE {
  if (v === undefined || v === null) return undefined;
  return isObject(v) ? v : NOT_FREE;
}

function entityOf(v: unknown): Evaluation['subject'] | null {
  if (!isObject(v) || !isString(v.type, 1, 256) || !isString(v.id, 0, 1024)) return null;
  const properties = freeMember(v.properties);
  return properties === NOT_FREE ? null : { type: v.type, id: v.id, properties };
}

/** `Evaluation.safeParse`, with a hand-written path for the well-formed case. */
export function acceptEvaluation(
  value: unknown,
): { success: true; data: Evaluation } | { success: false; error: z.ZodError } {
  if (isObject(value)) {
    const subject = entityOf(value.subject);
    const resource = entityOf(value.resource);
    const a = value.action;
    const properties = isObject(a) ? freeMember(a.properties) : NOT_FREE;
    const context = freeMember(value.context);
    if (
      subject !== null &&
      resource !== null &&
      isObject(a) &&
      isString(a.name, 1, 256) &&
      properties !== NOT_FREE &&
      context !== NOT_FREE
    ) {
      return { success: true, data: { subject, action: { name: a.name, properties }, resource, context } };
    }
  }
  const parsed = Evaluation.safeParse(value);
  return parsed.success ? { success: true, data: parsed.data } : { success: false, error: parsed.error };
}

export const EVALUATIONS_SEMANTICS = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'] as const;
export type EvaluationsSemantic = (typeof EVALUATIONS_SEMANTICS)[number];

/** At most this many evaluations per batch: each one is a full authorization. */
export const MAX_EVALUATIONS = 64;

const PartialEvaluation = z.object({
  subject: Entity.optional(),
  action: Action.optional(),
  resource: Entity.optional(),
  context: Context,
});

export const EvaluationsRequest = PartialEvaluation.extend({
  options: z
    .object({ evaluations_semantic: z.enum(EVALUATIONS_SEMANTICS).optional() })
    .nullish()
    .transform((v) => v ?? undefined),
  evaluations: z.array(PartialEvaluation).max(MAX_EVALUATIONS).nullish(),
});
export type EvaluationsRequest = z.infer<typeof EvaluationsRequest>;

/** The action search's body (§8.6): an evaluation without its action. */
export const ActionSearchRequest = Evaluation.omit({ action: true });
export type ActionSearchRequest = z.infer<typeof ActionSearchRequest>;

// The batch and search acceptors: the single evaluation's pattern (`acceptEvaluation`). A
// well-formed body is accepted by hand, by the schema's rules, into the same values; anything
// else goes to the schema, so every rejection and its message is zod's. The property test holds
// each equal to its schema (test/unit/http/authzen-accept.test.ts).

type PartialEvaluation = z.infer<typeof PartialEvaluation>;

/** One member of `PartialEvaluation`: absent is fine, anything present must be well formed. */
function partialOf(v: unknown): PartialEvaluation | null {
  if (!isObject(v)) return null;
  const out: PartialEvaluation = { context: undefined };
  if (v.subject !== undefined) {
    const subject = entityOf(v.subject);
    if (subject === null) return null;
    out.subject = subject;
  }
  if (v.action !== undefined) {
    const a = v.action;
    if (!isObject(a) || !isString(a.name, 1, 256)) return null;
    const properties = freeMember(a.properties);
    if (properties === NOT_FREE) return null;
    out.action = { name: a.name, properties };
  }
  if (v.resource !== undefined) {
    const resource = entityOf(v.resource);
    if (resource === null) return null;
    out.resource = resource;
  }
  const context = freeMember(v.context);
  if (context === NOT_FREE) return null;
  out.context = context;
  return out;
}

const SEMANTICS: ReadonlySet<unknown> = new Set(EVALUATIONS_SEMANTICS);

function acceptedEvaluations(value: unknown): EvaluationsRequest | null {
  const top = partialOf(value);
  if (top === null || !isObject(value)) return null;
  const out: EvaluationsRequest = { ...top, options: undefined };
  const o = value.options;
  if (o !== undefined && o !== null) {
    if (!isObject(o)) return null;
    const semantic = o.evaluations_semantic;
    if (semantic !== undefined && !SEMANTICS.has(semantic)) return null;
    out.options = semantic === undefined ? {} : { evaluations_semantic: semantic as EvaluationsSemantic };
  }
  const list = value.evaluations;
  if (list === null) out.evaluations = null;
  else if (list !== undefined) {
    if (!Array.isArray(list) || list.length > MAX_EVALUATIONS) return null;
    const items: PartialEvaluation[] = [];
    for (const item of list) {
      const p = partialOf(item);
      if (p === null) return null;
      items.push(p);
    }
    out.evaluations = items;
  }
  return out;
}

/** `EvaluationsRequest.safeParse`, with a hand-written path for the well-formed case. */
export function acceptEvaluations(
  value: unknown,
): { success: true; data: EvaluationsRequest } | { success: false; error: z.ZodError } {
  const accepted = acceptedEvaluations(value);
  if (accepted !== null) return { success: true, data: accepted };
  const parsed = EvaluationsRequest.safeParse(value);
  return parsed.success ? { success: true, data: parsed.data } : { success: false, error: parsed.error };
}

/** `ActionSearchRequest.safeParse`, with a hand-written path for the well-formed case. */
export function acceptActionSearch(
  value: unknown,
): { success: true; data: ActionSearchRequest } | { success: false; error: z.ZodError } {
  if (isObject(value)) {
    const subject = entityOf(value.subject);
    const resource = entityOf(value.resource);
    const context = freeMember(value.context);
    if (subject !== null && resource !== null && context !== NOT_FREE) {
      return { success: true, data: { subject, resource, context } };
    }
  }
  const parsed = ActionSearchRequest.safeParse(value);
  return parsed.success ? { success: true, data: parsed.data } : { success: false, error: parsed.error };
}

/**
 * The Writ fields an evaluation carries in its `context`; other members are ignored. Only what
 * routes the call is checked here (a required `input` and `run_id`, the contract digest looked up
 * before the request is parsed); the authorize request's own schema parses every field once, in
 * the service (src/services/tool-call.ts), so nothing is validated twice.
 */
const WritContext = z.object({
  input: z.custom<JsonValue>((v) => v !== undefined, 'is required'),
  run_id: z.string(),
  tool_contract_sha256: Sha256.optional(),
});

/**
 * `WritContext.safeParse`, with the well-formed case checked by hand (the same rules; zod's object
 * parse runs jitless on Workers): anything else goes to `WritContext`, so every issue is zod's.
 */
function writContextOf(
  c: Record<string, unknown>,
): ReturnType<typeof WritContext.safeParse> | { success: true; data: z.infer<typeof WritContext> } {
  const { input, run_id, tool_contract_sha256: digest } = c;
  if (
    input !== undefined &&
    typeof run_id === 'string' &&
    (digest === undefined || (typeof digest === 'string' && SHA256_PATTERN.test(digest)))
  ) {
    return { success: true, data: { input: input as JsonValue, run_id, tool_contract_sha256: digest } };
  }
  return WritContext.safeParse(c);
}

export type Translated =
  | {
      readonly ok: true;
      readonly tool_name: string;
      readonly tool_contract_sha256: string | undefined;
      readonly resource_type: string;
      /** `resource.id`: checked against the derived target's id unless empty (docs/authzen.md). */
      readonly resource_id: string;
      /** The request, less the contract digest the door resolves from the tool name. */
      readonly request: DoorRequest;
    }
  | { readonly ok: false; readonly message: string; readonly issues: readonly FieldIssue[] };

/** One evaluation as Writ's request. The subject is carried as a named principal: checked, never selecting. */
export function translateEvaluation(e: Evaluation): Translated {
  const parsed = writContextOf(e.context ?? {});
  if (!parsed.success) {
    const err = fromZodError('invalid_request', 'context', parsed.error);
    return { ok: false, message: err.message, issues: err.issues };
  }
  const ctx = parsed.data;
  const raw = e.context ?? {};
  const idem = raw.idempotency_key ?? undefined;
  const approval = raw.approval_id ?? undefined;
  // Assigned member by member, not spread from conditional literals (objects per call).
  const request: Record<string, unknown> = { input: ctx.input, run_id: ctx.run_id };
  if (idem !== undefined) request.idempotency_key = idem;
  if (approval !== undefined) request.approval_id = approval;
  request.principal_id = e.subject.id;
  if (e.resource.properties !== undefined) {
    request.target = { type: e.resource.type, attributes: e.resource.properties };
  }
  return {
    ok: true,
    tool_name: e.action.name,
    tool_contract_sha256: ctx.tool_contract_sha256,
    resource_type: e.resource.type,
    resource_id: e.resource.id,
    request,
  };
}

/**
 * The evaluations of a batch with the top-level defaults applied (§7.1.1): a key given in an
 * item replaces the top-level one whole. An absent or empty array is one evaluation of the
 * top-level keys (§7.1). Null when a required key has no value anywhere (a whole-request 400).
 */
export function expandBatch(req: EvaluationsRequest): { single: boolean; items: Evaluation[] } | null {
  const defaults = { subject: req.subject, action: req.action, resource: req.resource, context: req.context };
  const list = req.evaluations ?? [];
  const single = list.length === 0;
  const raw = single
    ? [defaults]
    : list.map((i) => ({
        subject: i.subject ?? defaults.subject,
        action: i.action ?? defaults.action,
        resource: i.resource ?? defaults.resource,
        context: i.context ?? defaults.context,
      }));
  const items: Evaluation[] = [];
  for (const r of raw) {
    if (r.subject === undefined || r.action === undefined || r.resource === undefined) return null;
    items.push({ subject: r.subject, action: r.action, resource: r.resource, context: r.context });
  }
  return { single, items };
}

/** A short-circuiting semantic stops after the first result that decides the batch (§7.1.2.1). */
export function stopsAfter(semantic: EvaluationsSemantic, decision: boolean): boolean {
  return (
    (semantic === 'deny_on_first_deny' && !decision) || (semantic === 'permit_on_first_permit' && decision)
  );
}
