/**
 * `parseToolInvocation`: the `ToolInvocation` schema on the per-call hot path.
 *
 * The zod schema (`model.ts`) is the definition. `acceptToolInvocation` is a hand-written parser
 * for the same schema that only ever *accepts*: it returns a fresh invocation when the value is
 * certainly valid, and `undefined` otherwise, in which case zod decides and produces the
 * field-level issues. It shares every pattern and bound with the zod schema, and the tests hold it
 * to zod: on valid invocations both give the same value, on every mutation it never accepts what
 * zod refuses (test/unit/library/invocation.test.ts), and its field lists equal the schema's shapes.
 *
 * Its output is built with keys in RFC 8785 order (and `target.attributes` sorted);
 * `parseToolInvocation` deep-freezes it and records it as validated (`canonical-forms.ts`), so the
 * invocation digest and the receipt are written in one pass, not walked and re-escaped.
 *
 * `decodeToolInvocation` starts from the JSON text: `JSON.parse` into the acceptor when the few
 * properties the acceptor does not already imply hold (see `decodeInvocationFast`), else the
 * strict decoder and `parseToolInvocation`; the tests hold the two routes to the same answer.
 *
 * Never: accepts a value zod refuses, accepts text the strict decoder refuses, returns the caller's object (a later mutation of the input
 * cannot change a parsed invocation), reads a clock or does I/O.
 */
import { markValidatedInvocation } from '../core/canonical/canonical-forms.js';
import { fromJsonError, fromZodError, type CoreError } from '../core/errors.js';
import {
  countMembers,
  decodeJsonText,
  DEFAULT_JSON_LIMITS,
  exceedsBytes,
  hasEscapedSurrogate,
  isForbiddenKey,
  type JsonLimits,
} from '../core/canonical/json.js';
import {
  ATTRIBUTE_NAME_MAX,
  ATTRIBUTE_NAME_PATTERN,
  ATTRIBUTE_VALUE_MAX,
  ATTRIBUTE_VALUE_PATTERN,
  IDEMPOTENCY_KEY_MAX,
  IDEMPOTENCY_KEY_MIN,
  IDEMPOTENCY_KEY_PATTERN,
  type ResourceRef,
  type ToolApproval,
  TOOL_EFFECTS,
  type ToolEffect,
  ToolInvocation,
} from '../core/model.js';
import { err, ok, type Result } from '../core/result.js';
import { IDENTIFIER_MAX, IDENTIFIER_PATTERN, SHA256_PATTERN } from '../core/schema.js';

/**
 * Decode a `ToolInvocation` from JSON text: the strict decoder (`decodeJsonText`, same limits),
 * then `parseToolInvocation`. A `malformed_json` error for text the strict decoder refuses,
 * `invalid_invocation` for a value the schema refuses.
 */
export function decodeToolInvocation(
  text: string,
  limits: JsonLimits = DEFAULT_JSON_LIMITS,
): Result<ToolInvocation, CoreError> {
  const fast = decodeInvocationFast(text, limits);
  if (fast !== undefined) return ok(markValidatedInvocation(fast));
  const decoded = decodeJsonText(text, limits);
  if (!decoded.ok) return err(fromJsonError(decoded.error));
  return parseToolInvocation(decoded.value);
}

/**
 * `JSON.parse` straight into the acceptor, without the strict decoder's generic walk: what that
 * walk proves is already implied by an accepted invocation (only known ASCII keys, strings that
 * match their patterns or are checked well-formed, safe non-negative integers, depth 3), except
 * what is checked here: the size bound, no key dropped as a duplicate (members in the text equal
 * the keys of the accepted value), no escaped surrogate, and no attribute named `constructor` or
 * `prototype`, keys the decoder refuses everywhere. Otherwise `undefined`: the general route
 * decides, with its typed errors.
 */
function decodeInvocationFast(text: string, limits: JsonLimits): ToolInvocation | undefined {
  if (limits.maxDepth < 3 || exceedsBytes(text, limits.maxBytes) || hasEscapedSurrogate(text)) {
    return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const inv = acceptToolInvocation(value);
  if (inv === undefined) return undefined;
  let keys = ACCEPTED_FIELDS.invocation.length + ACCEPTED_FIELDS.target.length;
  if (inv.approval !== null) keys += Object.keys(inv.approval).length;
  for (const name in inv.target.attributes) {
    if (isForbiddenKey(name)) return undefined;
    keys++;
  }
  return keys === countMembers(text) ? inv : undefined;
}

/** Parse a decoded JSON value as a `ToolInvocation` ("cannot evaluate" on any invalid field). */
export function parseToolInvocation(value: unknown): Result<ToolInvocation, CoreError> {
  const fast = acceptToolInvocation(value);
  // Deep-frozen and recorded: its digest and its receipt are then written in one pass.
  if (fast !== undefined) return ok(markValidatedInvocation(fast));
  const parsed = ToolInvocation.safeParse(value);
  if (parsed.success) return ok(parsed.data);
  return err(fromZodError('invalid_invocation', 'invocation', parsed.error));
}

/** The fields the hand-written parser reads, checked against the zod shapes by the tests. */
export const ACCEPTED_FIELDS = {
  invocation: [
    'approval',
    'idempotency_key',
    'input_bytes',
    'input_sha256',
    'invocation_id',
    'policy_sha256',
    'principal_id',
    'requested_at_unix_ms',
    'run_envelope_sha256',
    'target',
    'tenant_id',
    'tool_contract_sha256',
  ],
  approval: [
    'approval_id',
    'approver_principal_id',
    'effect',
    'expires_at_unix_ms',
    'first_approver_principal_id',
    'input_sha256',
    'policy_sha256',
    'tenant_id',
    'tool_contract_sha256',
  ],
  target: ['attributes', 'type'],
} as const;

type Fields = Record<string, unknown>;

const INVOCATION_FIELDS: ReadonlySet<string> = new Set(ACCEPTED_FIELDS.invocation);
const APPROVAL_FIELDS: ReadonlySet<string> = new Set(ACCEPTED_FIELDS.approval);
// `first_approver_principal_id` is present only on an approval of two approvers (issue 14).
const SINGLE_APPROVAL_FIELDS: ReadonlySet<string> = new Set(
  ACCEPTED_FIELDS.approval.filter((k) => k !== 'first_approver_principal_id'),
);
const TARGET_FIELDS: ReadonlySet<string> = new Set(ACCEPTED_FIELDS.target);

/**
 * A fresh `ToolInvocation` when `value` certainly satisfies the zod schema, else `undefined`
 * (which means only "let zod decide", never "invalid").
 */
export function acceptToolInvocation(value: unknown): ToolInvocation | undefined {
  if (!isRecordWithKeys(value, INVOCATION_FIELDS)) return undefined;
  const v = value;
  const approval = v.approval === null ? null : acceptApproval(v.approval);
  const idempotencyKey = v.idempotency_key;
  const target = acceptTarget(v.target);
  if (
    approval === undefined ||
    target === undefined ||
    !(idempotencyKey === null || isIdempotencyKey(idempotencyKey)) ||
    !isCount(v.input_bytes) ||
    !isSha256(v.input_sha256) ||
    !isIdentifier(v.invocation_id) ||
    !isSha256(v.policy_sha256) ||
    !isIdentifier(v.principal_id) ||
    !isCount(v.requested_at_unix_ms) ||
    !isSha256(v.run_envelope_sha256) ||
    !isIdentifier(v.tenant_id) ||
    !isSha256(v.tool_contract_sha256)
  ) {
    return undefined;
  }
  // RFC 8785 key order.
  return {
    approval,
    idempotency_key: idempotencyKey,
    input_bytes: v.input_bytes,
    input_sha256: v.input_sha256,
    invocation_id: v.invocation_id,
    policy_sha256: v.policy_sha256,
    principal_id: v.principal_id,
    requested_at_unix_ms: v.requested_at_unix_ms,
    run_envelope_sha256: v.run_envelope_sha256,
    target,
    tenant_id: v.tenant_id,
    tool_contract_sha256: v.tool_contract_sha256,
  };
}

function acceptApproval(value: unknown): ToolApproval | undefined {
  const two = isPlainRecord(value) && Object.hasOwn(value, 'first_approver_principal_id');
  if (!isRecordWithKeys(value, two ? APPROVAL_FIELDS : SINGLE_APPROVAL_FIELDS)) return undefined;
  const v = value;
  if (
    (two && !isIdentifier(v.first_approver_principal_id)) ||
    !isIdentifier(v.approval_id) ||
    !isIdentifier(v.approver_principal_id) ||
    !isEffect(v.effect) ||
    !isCount(v.expires_at_unix_ms) ||
    !isSha256(v.input_sha256) ||
    !isSha256(v.policy_sha256) ||
    !isIdentifier(v.tenant_id) ||
    !isSha256(v.tool_contract_sha256)
  ) {
    return undefined;
  }
  return {
    approval_id: v.approval_id,
    approver_principal_id: v.approver_principal_id,
    effect: v.effect,
    expires_at_unix_ms: v.expires_at_unix_ms,
    ...(two ? { first_approver_principal_id: v.first_approver_principal_id as string } : {}),
    input_sha256: v.input_sha256,
    policy_sha256: v.policy_sha256,
    tenant_id: v.tenant_id,
    tool_contract_sha256: v.tool_contract_sha256,
  };
}

function acceptTarget(value: unknown): ResourceRef | undefined {
  if (!isRecordWithKeys(value, TARGET_FIELDS)) return undefined;
  const type = value.type;
  const attrs = value.attributes;
  if (!isAttributeName(type) || !isPlainRecord(attrs)) return undefined;
  const names = Object.keys(attrs);
  // zod's record also reads symbol and non-enumerable keys; a long record is not the hot path.
  if (names.length > 32 || Reflect.ownKeys(attrs).length !== names.length) return undefined;
  for (const name of names) {
    if (!isAttributeName(name) || !isAttributeValue(attrs[name])) return undefined;
  }
  names.sort(); // RFC 8785 order: `sort` without a comparator compares UTF-16 code units.
  const attributes: Record<string, string> = {};
  for (const name of names) attributes[name] = attrs[name] as string;
  return { attributes, type };
}

/**
 * A plain object (as JSON.parse builds) whose enumerable keys, own or inherited, are exactly the
 * field set, every one of them own: zod's strict object walks the same keys (`for...in`), so no
 * unknown key can be present and no field can be hidden from that walk.
 */
function isRecordWithKeys(value: unknown, fields: ReadonlySet<string>): value is Fields {
  if (!isPlainRecord(value)) return false;
  let count = 0;
  for (const k in value) {
    if (!Object.hasOwn(value, k) || !fields.has(k)) return false;
    count++;
  }
  return count === fields.size;
}

function isPlainRecord(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

function isSha256(v: unknown): v is string {
  return typeof v === 'string' && SHA256_PATTERN.test(v);
}

function isIdentifier(v: unknown): v is string {
  return typeof v === 'string' && v.length <= IDENTIFIER_MAX && IDENTIFIER_PATTERN.test(v);
}

function isIdempotencyKey(v: unknown): v is string {
  return (
    typeof v === 'string' &&
    v.length >= IDEMPOTENCY_KEY_MIN &&
    v.length <= IDEMPOTENCY_KEY_MAX &&
    IDEMPOTENCY_KEY_PATTERN.test(v)
  );
}

function isAttributeName(v: unknown): v is string {
  return typeof v === 'string' && v.length <= ATTRIBUTE_NAME_MAX && ATTRIBUTE_NAME_PATTERN.test(v);
}

function isAttributeValue(v: unknown): v is string {
  return (
    typeof v === 'string' &&
    v.length <= ATTRIBUTE_VALUE_MAX &&
    ATTRIBUTE_VALUE_PATTERN.test(v) &&
    v.isWellFormed()
  );
}

/** `Count` and `UnixMs`: a safe, non-negative integer. */
function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function isEffect(v: unknown): v is ToolEffect {
  return (TOOL_EFFECTS as readonly unknown[]).includes(v);
}
