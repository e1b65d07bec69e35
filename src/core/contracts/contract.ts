/**
 * Pinned tool contracts: metadata validation, content identity and target derivation.
 *
 * Guarantees: a contract that passes `validateContract` has a supported schema version, sane
 * non-zero limits, unique capabilities, at least one capability for any effect other than
 * read-only, and capabilities in sorted order, so a contract has exactly one canonical form. Its
 * identity is the SHA-256 of its RFC 8785 bytes; a changed field is a different contract.
 * Never: merges, upgrades or "repairs" a contract, reads a clock, or does I/O.
 */
import { cachedDigest, deepFreeze, isDeepFrozen } from '../canonical/digest-cache.js';
import { coreError, safeText, type CoreError, type FieldIssue } from '../errors.js';
import type { JsonValue } from '../canonical/json.js';
import {
  ATTRIBUTE_VALUE_MAX,
  ATTRIBUTE_VALUE_PATTERN,
  CONTRACT_LIMITS,
  CONTRACT_SCHEMA_VERSION,
  type ResourceRef,
  type ToolContract,
  WRITE_EFFECTS,
} from '../model.js';
import { err, ok, type Result } from '../result.js';

// Deep-frozen contracts that passed validation: immutable, so the result cannot change.
const validContracts = new WeakSet<object>();

/** Validate contract metadata beyond its shape. Returns every problem, sorted by path. */
export function validateContract(contract: ToolContract): Result<ToolContract, CoreError> {
  if (validContracts.has(contract)) return ok(contract);
  const issues: FieldIssue[] = [];
  const add = (path: string, message: string) => issues.push({ path: `contract.${path}`, message });

  // A future or past schema would be interpreted under rules it was not reviewed for.
  if (contract.schema_version !== CONTRACT_SCHEMA_VERSION) {
    add('schema_version', `unsupported schema version ${contract.schema_version}`);
  }
  // Zero limits make every call fail; absurd ones turn the limit into no limit (denial of service).
  checkLimit(add, 'timeout_ms', contract.timeout_ms, CONTRACT_LIMITS.maxTimeoutMs);
  checkLimit(add, 'max_input_bytes', contract.max_input_bytes, CONTRACT_LIMITS.maxInputBytes);
  checkLimit(add, 'max_output_bytes', contract.max_output_bytes, CONTRACT_LIMITS.maxOutputBytes);

  const caps = contract.required_capabilities;
  // A write reachable without any capability would be authorized by tool membership alone.
  if (contract.effect !== 'read_only' && caps.length === 0) {
    add('required_capabilities', 'a contract with a write effect must require at least one capability');
  }
  for (let i = 1; i < caps.length; i++) {
    const prev = caps[i - 1] as string;
    const cur = caps[i] as string;
    // Duplicates hide a typo (one intended capability missing); unsorted lists give one contract two identities.
    if (cur === prev) add(`required_capabilities[${i}]`, `duplicate capability "${cur}"`);
    else if (cur < prev) add(`required_capabilities[${i}]`, 'capabilities must be listed in sorted order');
  }
  for (let i = 0; i < caps.length; i++) {
    const cap = caps[i] as string;
    // A capability for another resource type than the target could never be scoped to the target.
    if (!cap.startsWith(`${contract.resource.type}:`)) {
      add(
        `required_capabilities[${i}]`,
        `capability "${cap}" is not for resource type "${contract.resource.type}"`,
      );
    }
  }
  // A write without a retry key can repeat its effect after a lost response.
  if (WRITE_EFFECTS.has(contract.effect) && contract.idempotency !== 'key_required') {
    add('idempotency', 'external_write and irreversible contracts must require an idempotency key');
  }
  // Claiming an irreversible effect can be undone is a contradiction a reviewer must resolve.
  if (contract.effect === 'irreversible' && contract.reversible) {
    add('reversible', 'an irreversible contract cannot be reversible');
  }
  if (Object.keys(contract.resource.attributes).length === 0) {
    add('resource.attributes', 'the target must be named by at least one attribute');
  }
  if (issues.length > 0) {
    issues.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return err(coreError('invalid_contract', 'contract metadata is not valid', issues));
  }
  if (isDeepFrozen(contract)) validContracts.add(contract);
  return ok(contract);
}

function checkLimit(add: (p: string, m: string) => void, field: string, value: number, max: number): void {
  if (value <= 0) add(field, `${field} must be greater than zero`);
  else if (value > max) add(field, `${field} must be at most ${max}`);
}

/** SHA-256 over the contract's canonical bytes; cached by identity when the contract is frozen. */
export function contractDigest(contract: ToolContract): string {
  return cachedDigest(contract);
}

/** Deep-freeze a validated contract: it is immutable once pinned, and its digest is cached. */
export function pinContract(contract: ToolContract): Readonly<ToolContract> {
  return deepFreeze(contract);
}

/**
 * Resolve an RFC 6901 JSON Pointer. Returns `undefined` when any step is missing.
 * Only own properties are followed, so a pointer can never reach a prototype.
 */
export function resolvePointer(doc: JsonValue, pointer: string): JsonValue | undefined {
  if (pointer === '') return doc;
  let cur: JsonValue | undefined = doc;
  for (const raw of pointer.slice(1).split('/')) {
    // Only a token with "~" has escapes to undo (RFC 6901 §4: "~1" first, then "~0").
    const token = raw.includes('~') ? raw.replace(/~1/g, '/').replace(/~0/g, '~') : raw;
    if (cur === null || typeof cur !== 'object') return undefined;
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      cur = cur[Number(token)];
    } else {
      cur = Object.prototype.hasOwnProperty.call(cur, token) ? cur[token] : undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

/**
 * Derive the invocation target from the exact input through the contract's reviewed resource
 * map. The agent never names its target separately, so target and input cannot disagree.
 */
export function deriveTarget(contract: ToolContract, input: JsonValue): Result<ResourceRef, CoreError> {
  const attributes: Record<string, string> = {};
  const issues: FieldIssue[] = [];
  for (const [name, pointer] of Object.entries(contract.resource.attributes).sort(([a], [b]) =>
    a < b ? -1 : 1,
  )) {
    const v = resolvePointer(input, pointer);
    // The same rule as `AttributeValue`: no control character (C0, DEL, C1) or "*", well-formed.
    if (
      typeof v !== 'string' ||
      v.length > ATTRIBUTE_VALUE_MAX ||
      !ATTRIBUTE_VALUE_PATTERN.test(v) ||
      !v.isWellFormed()
    ) {
      issues.push({
        path: safeText(`input${pointer}`),
        message: `must be a non-empty string naming the target ${name}`,
      });
    } else {
      attributes[name] = v;
    }
  }
  if (issues.length > 0)
    return err(coreError('invalid_request', 'input does not name a valid target', issues));
  return ok({ type: contract.resource.type, attributes });
}
