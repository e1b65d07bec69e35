/**
 * The target of a call: derived from the exact input by the pinned contract, never chosen by the
 * agent. A target named beside the input is only a cross-check.
 *
 * Guarantees: the result is `deriveTarget(contract, input)`; a named target that differs is a
 * typed `target_mismatch` error quoting the derived one (never the named one). `targetId` is one
 * string per target: two targets of one type and attribute names share an id only when they are
 * equal (property-tested), so a door can hold a caller's resource id to the derived target.
 * Never: lets a named target replace or widen the derived one.
 */
import { canonicalize } from '../canonical/canonical.js';
import type { JsonValue } from '../canonical/json.js';
import { coreError, safeText, type CoreError } from '../errors.js';
import type { ResourceRef, ToolContract } from '../model.js';
import { err, type Result } from '../result.js';
import { deriveTarget } from './contract.js';

export function resolveTarget(
  contract: ToolContract,
  input: JsonValue,
  named: ResourceRef | undefined,
): Result<ResourceRef, CoreError> {
  const derived = deriveTarget(contract, input);
  if (!derived.ok) return derived;
  // An agent naming one target while its input names another is a confused or hostile caller.
  if (named !== undefined && canonicalize(named) !== canonicalize(derived.value)) {
    return err(
      coreError('target_mismatch', 'target does not match the target derived from input', [
        // The derived target is input text: quoted through `safeText` like any other.
        { path: 'target', message: `input names ${safeText(canonicalize(derived.value))}` },
      ]),
    );
  }
  return derived;
}

/**
 * The resource id of a target, as a door that names resources by id (AuthZEN `resource.id`)
 * must spell it: the attribute values in the order of their names (code-unit order, as RFC 8785
 * sorts members), joined by `/`, each value with `%` written `%25` and `/` written `%2F`. So
 * `{service: "api", environment: "production"}` is `production/api`, and a one-attribute target
 * is its value (escaped). The escape keeps the id injective: `a/b` + `c` and `a` + `b/c` differ.
 */
export function targetId(target: ResourceRef): string {
  const names = Object.keys(target.attributes).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let id = '';
  for (let i = 0; i < names.length; i++) {
    const value = target.attributes[names[i] as string] as string;
    if (i > 0) id += '/';
    // Most values hold neither character: they are their own spelling.
    id += ESCAPED.test(value) ? value.replaceAll('%', '%25').replaceAll('/', '%2F') : value;
  }
  return id;
}

const ESCAPED = /[%/]/;
