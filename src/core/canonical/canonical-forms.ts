/**
 * One-pass canonical text of the two values every decision hashes: the invocation and the
 * authorization receipt body.
 *
 * `canonicalize` walks a value to prove its key order, then lets JSON.stringify scan every
 * character of every string for escapes. These two values have fixed shapes, so their members are
 * written here in RFC 8785 order directly. A string is quoted without scanning only when it cannot
 * need an escape:
 * - a digest Writ computed itself: lowercase hex from the installed SHA-256 (`useSha256` checks
 *   it against known answers);
 * - a field of a *validated invocation*: one that `parseToolInvocation`'s hand-written parser
 *   accepted and this module deep-froze and recorded (`markValidatedInvocation`), so it can no
 *   longer change. Every such field's pattern excludes `"`, `\`, control characters and lone
 *   surrogates (schema.ts, model.ts), the only characters RFC 8785 escapes. Attribute values,
 *   whose pattern allows `"` and `\`, are always escaped.
 * Every other string goes through `str`, the reference serializer's own rule, and every member of
 * an unexpected type through `canonicalize`.
 *
 * The results are the same text as `canonicalize`: the tests compare them on generated values,
 * and replay (`replay.ts`) recomputes every stored receipt's digest with the reference.
 * Never: reorders, drops or adds a member, or writes unescaped a string it has not validated.
 */
import { canonicalize, canonicalNumber, canonicalString } from './canonical.js';
import type {
  AuthorizationReceiptBody,
  AuthorizationReceiptBodyV2,
  ResourceRef,
  ToolApproval,
  ToolInvocation,
} from '../model.js';

// Invocations the hand-written parser validated, deep-frozen by `markValidatedInvocation`.
const validated = new WeakSet<object>();

/**
 * Record an invocation that `acceptToolInvocation` just built and validated: deep-freeze it (it
 * can no longer change) and remember it, so its strings are quoted without scanning. Only the
 * invocation parser calls this.
 */
export function markValidatedInvocation(inv: ToolInvocation): ToolInvocation {
  Object.freeze(inv.target.attributes);
  Object.freeze(inv.target);
  if (inv.approval !== null) Object.freeze(inv.approval);
  Object.freeze(inv);
  validated.add(inv);
  return inv;
}

/** Whether `inv` came from the hand-written parser (and is therefore frozen and validated). */
export function isValidatedInvocation(inv: ToolInvocation): boolean {
  return validated.has(inv);
}

/** `canonicalize(inv)`, in one pass for a validated invocation. */
export function invocationText(inv: ToolInvocation): string {
  if (!validated.has(inv)) return canonicalize(inv);
  const a = inv.approval;
  return (
    `{"approval":${a === null ? 'null' : approvalText(a)}` +
    `,"idempotency_key":${inv.idempotency_key === null ? 'null' : raw(inv.idempotency_key)}` +
    `,"input_bytes":${num(inv.input_bytes)}` +
    `,"input_sha256":${raw(inv.input_sha256)}` +
    `,"invocation_id":${raw(inv.invocation_id)}` +
    `,"policy_sha256":${raw(inv.policy_sha256)}` +
    `,"principal_id":${raw(inv.principal_id)}` +
    `,"requested_at_unix_ms":${num(inv.requested_at_unix_ms)}` +
    `,"run_envelope_sha256":${raw(inv.run_envelope_sha256)}` +
    `,"target":${targetText(inv.target)}` +
    `,"tenant_id":${raw(inv.tenant_id)}` +
    `,"tool_contract_sha256":${raw(inv.tool_contract_sha256)}}`
  );
}

/** Of a validated invocation only. */
function approvalText(a: ToolApproval): string {
  return (
    `{"approval_id":${raw(a.approval_id)}` +
    `,"approver_principal_id":${raw(a.approver_principal_id)}` +
    `,"effect":${raw(a.effect)}` +
    `,"expires_at_unix_ms":${num(a.expires_at_unix_ms)}` +
    (a.first_approver_principal_id === undefined
      ? ''
      : `,"first_approver_principal_id":${raw(a.first_approver_principal_id)}`) +
    `,"input_sha256":${raw(a.input_sha256)}` +
    `,"policy_sha256":${raw(a.policy_sha256)}` +
    `,"tenant_id":${raw(a.tenant_id)}` +
    `,"tool_contract_sha256":${raw(a.tool_contract_sha256)}}`
  );
}

/** Of a validated invocation only: its attribute names are sorted and need no escape. */
function targetText(t: ResourceRef): string {
  let attributes = '';
  for (const name in t.attributes) {
    attributes += `${attributes === '' ? '' : ','}"${name}":${str(t.attributes[name] as string)}`;
  }
  return `{"attributes":{${attributes}},"type":${raw(t.type)}}`;
}

/**
 * `canonicalize(body)` in one pass. `invocationValidated` says the body's invocation fields came
 * from a validated invocation (`isValidatedInvocation`), so they are quoted without scanning.
 * Version 2 bodies add `dispatch_deadline_unix_ms`, `executor_principal_id`, `executor_release`,
 * `named_principal_id` and `named_tenant_id`, written in their sorted places. Which members to
 * write is decided by which are present (all five, or none), not by `receipt_version`, so the text is the reference's for any body; a body
 * with only some of them goes to the reference serializer. `executor_release` is a contract label
 * that may hold a quote or a backslash, so it is always escaped.
 */
export function authorizationBodyText(body: AuthorizationReceiptBody, invocationValidated: boolean): string {
  const audience = audienceMembers(body);
  if (audience === 'partial') return canonicalize(body);
  const v2 = audience === 'all';
  const inv = invocationValidated ? raw : str;
  let violations: string;
  if (Array.isArray(body.violations)) {
    violations = '[';
    for (let i = 0; i < body.violations.length; i++) {
      violations += (i > 0 ? ',' : '') + str(body.violations[i] as string);
    }
    violations += ']';
  } else violations = canonicalize(body.violations);
  return (
    `{"approval_id":${body.approval_id === null ? 'null' : inv(body.approval_id)}` +
    `,"decision":${str(body.decision)}` +
    (v2
      ? `,"dispatch_deadline_unix_ms":${num((body as AuthorizationReceiptBodyV2).dispatch_deadline_unix_ms)}`
      : '') +
    `,"effect":${str(body.effect)}` +
    `,"evaluated_at_unix_ms":${num(body.evaluated_at_unix_ms)}` +
    (v2 ? audienceText(body as AuthorizationReceiptBodyV2) : '') +
    `,"grant_sha256":${raw(body.grant_sha256)}` +
    `,"idempotency_key":${body.idempotency_key === null ? 'null' : inv(body.idempotency_key)}` +
    `,"input_bytes":${num(body.input_bytes)}` +
    `,"input_sha256":${inv(body.input_sha256)}` +
    `,"invocation_id":${inv(body.invocation_id)}` +
    `,"invocation_sha256":${raw(body.invocation_sha256)}` +
    (v2 ? namedText(body as AuthorizationReceiptBodyV2) : '') +
    `,"policy_sha256":${inv(body.policy_sha256)}` +
    `,"principal_id":${inv(body.principal_id)}` +
    `,"receipt_kind":${str(body.receipt_kind)}` +
    `,"receipt_version":${num(body.receipt_version)}` +
    `,"requested_at_unix_ms":${num(body.requested_at_unix_ms)}` +
    `,"run_envelope_sha256":${inv(body.run_envelope_sha256)}` +
    `,"target":${invocationValidated ? targetText(body.target) : canonicalize(body.target)}` +
    `,"tenant_id":${inv(body.tenant_id)}` +
    `,"tool_contract_sha256":${raw(body.tool_contract_sha256)}` +
    `,"trusted_state_sha256":${raw(body.trusted_state_sha256)}` +
    `,"violations":${violations}}`
  );
}

const AUDIENCE_MEMBERS = [
  'dispatch_deadline_unix_ms',
  'executor_principal_id',
  'executor_release',
  'named_principal_id',
  'named_tenant_id',
] as const;

function audienceMembers(body: AuthorizationReceiptBody): 'none' | 'all' | 'partial' {
  let n = 0;
  for (const k of AUDIENCE_MEMBERS) if (Object.prototype.hasOwnProperty.call(body, k)) n++;
  return n === 0 ? 'none' : n === AUDIENCE_MEMBERS.length ? 'all' : 'partial';
}

/** The two audience members between `evaluated_at_unix_ms` and `grant_sha256`. */
function audienceText(body: AuthorizationReceiptBodyV2): string {
  const p = body.executor_principal_id;
  return `,"executor_principal_id":${p === null ? 'null' : str(p)},"executor_release":${str(body.executor_release)}`;
}

/** The two named-identity members between `invocation_sha256` and `policy_sha256`. */
function namedText(body: AuthorizationReceiptBodyV2): string {
  const p = body.named_principal_id;
  const t = body.named_tenant_id;
  return `,"named_principal_id":${p === null ? 'null' : str(p)},"named_tenant_id":${t === null ? 'null' : str(t)}`;
}

/** A string known to need no escape (see the module comment); any other value as `canonicalize`. */
function raw(s: string): string {
  return typeof s === 'string' ? `"${s}"` : canonicalize(s);
}

/** The reference serializer's rule for a string; any other value as `canonicalize` writes it. */
function str(s: string): string {
  return typeof s === 'string' ? canonicalString(s) : canonicalize(s);
}

/** The reference serializer's rule for a number; any other value as `canonicalize` writes it. */
function num(n: number): string {
  return typeof n === 'number' ? canonicalNumber(n) : canonicalize(n);
}
