/**
 * The target of a call: derived from the exact input by the pinned contract, never chosen by the
 * agent. A target named beside the input is only a cross-check.
 *
 * Guarantees: the result is `deriveTarget(contract, input)`; a named target that differs is a
 * typed `target_mismatch` error quoting the derived one (never the named one).
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
