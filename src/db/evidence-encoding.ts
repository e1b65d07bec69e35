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
 * and is bound to the body, and the reader accepts only such an array (exact length, types,
 * canonical text, digests), so an edited array is refused (`StoredDocumentError`, a 500 or an
 * import refusal), never read as other evidence.
 */
import { digestOf } from '../core/canonical/canonical.js';
import type { JsonValue } from '../core/canonical/json.js';
import type { AuthorizationReceiptBody, ToolApproval, ToolInvocation } from '../core/model.js';
import { StoredDocumentError, parseStoredJson, toCanonicalText } from './documents.js';

/**
 * The frozen member order of each positional layout, by `evidence_version`: a stored row's
 * meaning depends on it, so a layout is never edited (a new evidence version gets a new entry).
 * `a.b` is member `b` of the required object `a` (flattened, every member present); a top-level
 * name is an optional member, `null` in the array when absent (so never stored when it is null).
 * `evidence_version` is the array's first element.
 */
export const EVIDENCE_LAYOUTS: ReadonlyMap<number, readonly string[]> = new Map([
  [
    2,
    [
      'grant',
      'approval',
      'invocation',
      'trusted_state.approval_required_effects',
      'trusted_state.approval_unusable',
      'trusted_state.contract_quarantined',
      'trusted_state.grant_revoked',
      'trusted_state.principal_revoked',
      'trusted_state.run_violations',
    ],
  ],
]);

type JsonObject = { readonly [key: string]: JsonValue };

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A layout's top-level members: optional ones (`null` when absent) and flattened objects. */
function shapeOf(layout: readonly string[]) {
  const optional = new Set<string>();
  const nested = new Map<string, string[]>();
  for (const path of layout) {
    const [top, member] = path.split('.') as [string, string | undefined];
    if (member === undefined) optional.add(top);
    else nested.set(top, [...(nested.get(top) ?? []), member]);
  }
  return { optional, nested };
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
  const { optional, nested } = shapeOf(layout);
  for (const k of Object.keys(evidence)) {
    if (k !== 'evidence_version' && !optional.has(k) && !nested.has(k)) return null;
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
  for (const path of layout) {
    const [top, member] = path.split('.') as [string, string | undefined];
    if (member === undefined) {
      // `null` stands for an absent member, so a member that is null cannot be written this way.
      if (evidence[top] === null) return null;
      values.push(evidence[top] ?? null);
    } else {
      values.push((evidence[top] as JsonObject)[member] as JsonValue);
    }
  }
  return toCanonicalText(values);
}

/** The evidence of a positional text, checked against the body's digests; throws on anything else. */
function evidenceFromPositional(parsed: JsonValue, text: string, body: unknown): JsonValue {
  const refuse = () => new StoredDocumentError('stored receipt evidence does not match its encoding');
  // Canonical text only: the writer stores nothing else, so other spellings are edits.
  if (!Array.isArray(parsed) || toCanonicalText(parsed) !== text) throw refuse();
  const version = parsed[0];
  const layout = typeof version === 'number' ? EVIDENCE_LAYOUTS.get(version) : undefined;
  if (layout === undefined || parsed.length !== layout.length + 1) throw refuse();
  const evidence: Record<string, JsonValue> = { evidence_version: version as number };
  const nested: Record<string, Record<string, JsonValue>> = {};
  layout.forEach((path, i) => {
    const v = parsed[i + 1] as JsonValue;
    const [top, member] = path.split('.') as [string, string | undefined];
    if (member === undefined) {
      if (v === null) return;
      if (!isObject(v)) throw refuse();
      evidence[top] = v;
    } else {
      // Flattened members are the trusted state's: flags and lists of names.
      if (typeof v !== 'boolean' && !(Array.isArray(v) && v.every((x) => typeof x === 'string'))) {
        throw refuse();
      }
      (nested[top] ??= {})[member] = v;
    }
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
