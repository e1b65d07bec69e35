/**
 * fast-check arbitraries for the fields of a valid `ToolInvocation`, shared by the tests that hold
 * the hot-path parsers to the zod schema (invocation.test.ts, decode-invocation.test.ts). Each
 * follows the schema's pattern and bound (schema.ts, model.ts), with weight on the boundaries.
 */
import fc from 'fast-check';
import { TOOL_EFFECTS } from '../../../src/core/model.js';

const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
export const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '0123456789';
const ID_FIRST = [...UPPER, ...LOWER, ...DIGITS];
const ID_REST = [...ID_FIRST, ...'._:@/+=-'];
const KEY_CHARS = [...UPPER, ...LOWER, ...DIGITS, ...'._:-'];
export const NAME_REST = [...LOWER, ...DIGITS, '_'];

export const chars = (alphabet: readonly string[], minLength: number, maxLength: number) =>
  fc.string({ unit: fc.constantFrom(...alphabet), minLength, maxLength });

/** A first character from `first`, then up to 20 (or, less often, `maxRest - 8` to `maxRest`) from `rest`. */
export const headed = (first: readonly string[], rest: readonly string[], maxRest: number) =>
  fc
    .oneof(
      { weight: 4, arbitrary: fc.tuple(fc.constantFrom(...first), chars(rest, 0, 20)) },
      { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...first), chars(rest, maxRest - 8, maxRest)) },
    )
    .map(([a, b]) => a + b);

/** `/^[A-Za-z0-9][A-Za-z0-9._:@/+=-]*$/`, 1 to 128 characters. */
export const identifierArb = headed(ID_FIRST, ID_REST, 127);
export const sha256Arb = chars([...'0123456789abcdef'], 64, 64);
export const countArb = fc.oneof(fc.nat(), fc.constantFrom(0, 1, Number.MAX_SAFE_INTEGER), fc.maxSafeNat());
export const idempotencyKeyArb = fc.oneof(chars(KEY_CHARS, 8, 30), chars(KEY_CHARS, 120, 128));

/** `/^[a-z][a-z0-9_]*$/`, at most 64 characters, plus the given special names. */
export const attributeNameArbWith = (special: readonly string[]) =>
  fc.oneof(
    { weight: 5, arbitrary: headed([...LOWER], NAME_REST, 63) },
    { weight: 1, arbitrary: fc.constantFrom(...special) },
  );

export const approvalArb = fc
  .record({
    approval_id: identifierArb,
    approver_principal_id: identifierArb,
    tenant_id: identifierArb,
    policy_sha256: sha256Arb,
    tool_contract_sha256: sha256Arb,
    input_sha256: sha256Arb,
    effect: fc.constantFrom(...TOOL_EFFECTS),
    expires_at_unix_ms: countArb,
  })
  .chain((a) =>
    // Half with a first approver (an approval of two approvers, issue 14), half without.
    fc
      .option(identifierArb, { nil: undefined })
      .map((first) => (first === undefined ? a : { ...a, first_approver_principal_id: first })),
  );

/** A target with up to 5 attributes of unique names. */
export const targetArbOf = (nameArb: fc.Arbitrary<string>, valueArb: fc.Arbitrary<string>) =>
  fc.record({
    type: nameArb,
    attributes: fc
      .uniqueArray(fc.tuple(nameArb, valueArb), { maxLength: 5, selector: ([k]) => k })
      .map((entries) => Object.fromEntries(entries) as Record<string, string>),
  });
