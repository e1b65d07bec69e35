/**
 * How an authorization receipt's evidence is stored in `receipts.evidence` (issue 10, "Bounded
 * D1"). None changes the evidence: every reader (replay, `GET /v1/receipts/{sha}`, bundles,
 * archives, tenant-move exports) gets the same canonical evidence object back.
 * - An object: the canonical evidence itself (every row written before this encoding, and any
 *   evidence the positional form cannot give back exactly).
 * - An array (authorization rows only, migration-free): the canonical array
 *   `[evidence_version, ...values]`, the values in the order of that version's frozen layout
 *   (`EVIDENCE_LAYOUTS`). Self-describing by its first character: every authorization evidence
 *   ever stored as an object is a JSON object (`{`), so an array (`[`) is never an old row, and
 *   the evidence's encoding stays independent of the receipt's (`receipt_encoding`).
 *
 * Both directions check the evidence against the digests the receipt body binds (trusted state,
 * grant, invocation): the writer stores an array only when it reads back as exactly the evidence
 * and is bound to the body, and the reader accepts only such an array (its length, types,
 * canonical text, digests), so an edited array is refused (`StoredDocumentError`, a 500 or an
 * import refusal), never read as other evidence. Accepted trade-off: no digest covers the absence
 * of an embedded grant, so removing the empty grant (several bytes) decodes; replay then reports
 * `body.grant_sha256` (that grant has no row), as it does for the same edit of an object.
 */
import { digestOf } from '../core/canonical/canonical.js';
import type { JsonValue } from '../core/canonical/json.js';
import type { AuthorizationReceiptBody, ToolApproval, ToolInvocation } from '../core/model.js';
import { StoredDocumentError, parseStoredJson, toCanonicalText } from './documents.js';

/**
 * How a layout member is stored: `flag` a boolean as 0 or 1; `names` a list of strings as is;
 * `optional` an optional object member, as is when present, `null` when absent (and left out
 * when it and every member after it are absent, so the array never ends in `null`).
 */
export type EvidenceMemberForm = 'flag' | 'names' | 'optional';

export interface EvidenceMember {
  /** `a.b`: member `b` of the required object `a`, flattened; `a`: a top-level member. */
  readonly path: string;
  readonly form: EvidenceMemberForm;
}

/**
 * The frozen member order of each positional layout, by `evidence_version`: a stored row's
 * meaning depends on it, so a layout is never edited (a new evidence version gets a new entry).
 * Required members first, optional ones last (most often present first): the evidence of an
 * allowed read-only call is the trusted state alone. `evidence_version` is the first element.
 */
export const EVIDENCE_LAYOUTS: ReadonlyMap<number, readonly EvidenceMember[]> = new Map([
  [
    2,
    [
      { path: 'trusted_state.approval_required_effects', form: 'names' },
      { path: 'trusted_state.approval_unusable', form: 'flag' },
      { path: 'trusted_state.contract_quarantined', form: 'flag' },
      { path: 'trusted_state.grant_revoked', form: 'flag' },
      { path: 'trusted_state.principal_revoked', form: 'flag' },
      { path: 'trusted_state.run_violations', form: 'names' },
      { path: 'approval', form: 'optional' },
      { path: 'grant', form: 'optional' },
      { path: 'invocation', form: 'optional' },
    ],
  ],
]);

type JsonObject = { readonly [key: string]: JsonValue };

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNames = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const split = (path: string) => path.split('.') as [string, string | undefined];

/** The objects a layout flattens, each with its members. */
function nestedOf(layout: readonly EvidenceMember[]): Map<string, string[]> {
  const nested = new Map<string, string[]>();
  for (const { path } of layout) {
    const [top, member] = split(path);
    if (member !== undefined) nested.set(top, [...(nested.get(top) ?? []), member]);
  }
  return nested;
}

/**
 * The text to store for evidence of a receipt of `kind` with `body`: the positional array when it
 * reads back as exactly this evidence (see the file header), else the canonical object.
 */
export function storedEvidenceText(kind: string, evidence: unknown, body: unknown): string {
  const object = toCanonicalText(evidence);
  if (kind !== 'authorization') return object;
  const positional = positionalText(evidence);
  if (positional === null) return object;
  try {
    const parsed = parseStoredJson('receipt evidence', positional);
    if (toCanonicalText(evidenceFromPositional(parsed, positional, body)) === object) return positional;
  } catch (e) {
    if (!(e instanceof StoredDocumentError)) throw e;
  }
  return object;
}

/**
 * The evidence object a row's `evidence` text stands for, given the row's kind and its decoded
 * receipt body; throws `StoredDocumentError` on text the writer did not write.
 */
export function evidenceFromStored(kind: string, text: string, body: unknown): JsonValue {
  const parsed = parseStoredJson('receipt evidence', text);
  // Any array, not only text starting with `[`: a padded array is no evidence the writer wrote.
  if (kind !== 'authorization' || !Array.isArray(parsed)) return parsed;
  return evidenceFromPositional(parsed, text, body);
}

/** The positional text of evidence with exactly a layout's members, or null. */
function positionalText(evidence: unknown): string | null {
  if (!isObject(evidence) || typeof evidence.evidence_version !== 'number') return null;
  const layout = EVIDENCE_LAYOUTS.get(evidence.evidence_version);
  if (layout === undefined) return null;
  const nested = nestedOf(layout);
  const topLevel = new Set(layout.filter((m) => split(m.path)[1] === undefined).map((m) => m.path));
  for (const k of Object.keys(evidence)) {
    if (k !== 'evidence_version' && !topLevel.has(k) && !nested.has(k)) return null;
  }
  for (const [top, members] of nested) {
    const o = evidence[top];
    if (
      !isObject(o) ||
      Object.keys(o).length !== members.length ||
      !members.every((m) => Object.hasOwn(o, m))
    ) {
      return null;
    }
  }
  const values: JsonValue[] = [evidence.evidence_version];
  for (const { path, form } of layout) {
    const [top, member] = split(path);
    const v = member === undefined ? evidence[top] : (evidence[top] as JsonObject)[member];
    if (form === 'flag') {
      if (typeof v !== 'boolean') return null;
      values.push(v ? 1 : 0);
    } else if (form === 'names') {
      if (!isNames(v)) return null;
      values.push(v);
    } else {
      // `null` stands for an absent member, so a member that is null cannot be written this way.
      if (v === null || (v !== undefined && !isObject(v))) return null;
      values.push(v ?? null);
    }
  }
  while (values.at(-1) === null) values.pop();
  return toCanonicalText(values);
}

/** The evidence of a positional array, checked against the body's digests; throws on anything else. */
function evidenceFromPositional(parsed: JsonValue, text: string, body: unknown): JsonValue {
  const refuse = () => new StoredDocumentError('stored receipt evidence does not match its encoding');
  // Canonical text only: the writer stores nothing else, so other spellings are edits.
  if (!Array.isArray(parsed) || toCanonicalText(parsed) !== text) throw refuse();
  const version = parsed[0];
  const layout = typeof version === 'number' ? EVIDENCE_LAYOUTS.get(version) : undefined;
  if (layout === undefined) throw refuse();
  // Every required member, and never a trailing `null` (the writer leaves absent ones out).
  const required = layout.filter((m) => m.form !== 'optional').length;
  if (parsed.length < required + 1 || parsed.length > layout.length + 1 || parsed.at(-1) === null) {
    throw refuse();
  }
  const evidence: Record<string, JsonValue> = { evidence_version: version as number };
  const nested: Record<string, Record<string, JsonValue>> = {};
  layout.forEach(({ path, form }, i) => {
    const v = i + 1 < parsed.length ? (parsed[i + 1] as JsonValue) : null;
    const [top, member] = split(path);
    let value: JsonValue;
    if (form === 'flag') {
      if (v !== 0 && v !== 1) throw refuse();
      value = v === 1;
    } else if (form === 'names') {
      if (!isNames(v)) throw refuse();
      value = v;
    } else {
      if (v === null) return;
      if (!isObject(v)) throw refuse();
      value = v;
    }
    if (member === undefined) evidence[top] = value;
    else (nested[top] ??= {})[member] = value;
  });
  Object.assign(evidence, nested);
  if (!boundToBody(evidence, body)) throw refuse();
  return evidence;
}

/**
 * Whether evidence holds what the receipt body binds by digest: the trusted state, any embedded
 * grant, and the invocation (stored whole, or rebuilt from the body and the approval). An edited
 * value cannot keep its digest, so a bound array is the one the writer stored.
 */
function boundToBody(evidence: Readonly<Record<string, JsonValue>>, body: unknown): boolean {
  if (!isObject(body) || body.receipt_kind !== 'authorization') return false;
  try {
    if (digestOf(evidence.trusted_state) !== body.trusted_state_sha256) return false;
    if (evidence.grant !== undefined && digestOf(evidence.grant) !== body.grant_sha256) return false;
    const invocation =
      evidence.invocation ??
      invocationFromReceiptBody(
        body as unknown as AuthorizationReceiptBody,
        (evidence.approval ?? null) as ToolApproval | null,
      );
    return digestOf(invocation) === body.invocation_sha256;
  } catch {
    // A body missing a member the invocation is rebuilt from: not bound.
    return false;
  }
}

/**
 * The invocation an authorization receipt was computed from, rebuilt from the receipt body (which
 * carries every invocation field but the approval, of which it keeps the id) and the approval.
 * Sound by construction: the body binds `invocation_sha256`, so a rebuilt invocation is only ever
 * used when it hashes to that digest (checked on write, and by replay).
 */
export function invocationFromReceiptBody(
  body: AuthorizationReceiptBody,
  approval: ToolApproval | null,
): ToolInvocation {
  return {
    invocation_id: body.invocation_id,
    run_envelope_sha256: body.run_envelope_sha256,
    tenant_id: body.tenant_id,
    principal_id: body.principal_id,
    policy_sha256: body.policy_sha256,
    tool_contract_sha256: body.tool_contract_sha256,
    input_sha256: body.input_sha256,
    input_bytes: body.input_bytes,
    target: body.target,
    requested_at_unix_ms: body.requested_at_unix_ms,
    idempotency_key: body.idempotency_key,
    approval,
  };
}

/**
 * The `evidence` text of a receipt row as a tenant move carries it: `object` gives the evidence
 * object's canonical text (what every export carried before the positional encoding, so an
 * export reads the same on any version), `stored` the text this shard stores for it (an import
 * re-encodes). Rows of other kinds, and object text, come back unchanged; a receipt or an array
 * that does not decode throws `StoredDocumentError`.
 */
export function movedEvidenceText(
  row: {
    readonly kind: string;
    readonly evidence: string | null;
    readonly body: () => unknown;
  },
  as: 'object' | 'stored',
): string | null {
  if (row.kind !== 'authorization' || row.evidence === null) return row.evidence;
  const parsed = parseStoredJson('receipt evidence', row.evidence);
  if (as === 'object' && !Array.isArray(parsed)) return row.evidence;
  const body = row.body();
  const evidence = Array.isArray(parsed) ? evidenceFromPositional(parsed, row.evidence, body) : parsed;
  return as === 'object' ? toCanonicalText(evidence) : storedEvidenceText(row.kind, evidence, body);
}
