/**
 * `targetId` (src/core/contracts/target.ts): the resource id a door holds a caller's named id to
 * (AuthZEN `resource.id`, docs/authzen.md). The claim that matters: two targets of one type and
 * attribute names share an id only when they are the same target, so a PEP's id for resource X
 * can never be answered with a decision about resource Y.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../../../src/core/canonical/canonical.js';
import { deriveTarget } from '../../../../src/core/contracts/contract.js';
import { targetId } from '../../../../src/core/contracts/target.js';
import type { ResourceRef } from '../../../../src/core/model.js';
import { buildContract, rollbackInput } from '../fixtures.js';

/**
 * Values made of the characters the encoding escapes and of look-alikes of the escapes, short, so
 * that two targets whose values only move a "/" or a "%2F" between attributes come up often.
 */
const value = fc
  .array(fc.constantFrom('a', '/', '%', '2', 'F', '5', '%2F', '%25'), { minLength: 1, maxLength: 3 })
  .map((parts) => parts.join(''));

/** The inverse of the encoding, as docs/authzen.md spells it: split on "/", then unescape. */
function decodeId(id: string): string[] {
  return id.split('/').map((p) => p.replace(/%2F|%25/g, (m) => (m === '%2F' ? '/' : '%')));
}

const names = fc.uniqueArray(fc.constantFrom('environment', 'service', 'region', 'a', 'B', '_x'), {
  minLength: 1,
  maxLength: 4,
});

/** Two targets of the same type over the same attribute names. */
const pair = names.chain((ns) =>
  fc
    .tuple(fc.tuple(...ns.map(() => value)), fc.tuple(...ns.map(() => value)))
    .map(([xs, ys]): [ResourceRef, ResourceRef] => [
      { type: 'deployment', attributes: Object.fromEntries(ns.map((n, i) => [n, xs[i] as string])) },
      { type: 'deployment', attributes: Object.fromEntries(ns.map((n, i) => [n, ys[i] as string])) },
    ]),
);

describe('targetId', () => {
  it('is the values in attribute-name order joined by "/", with "%" and "/" escaped', () => {
    expect(targetId({ type: 'deployment', attributes: { service: 'api', environment: 'production' } })).toBe(
      'production/api',
    );
    expect(targetId({ type: 'bucket', attributes: { path: '/reports/q1%.pdf' } })).toBe(
      '%2Freports%2Fq1%25.pdf',
    );
  });

  it('does not depend on the order the attributes were written in', () => {
    const a = targetId({ type: 'd', attributes: { service: 'api', environment: 'prod' } });
    const b = targetId({ type: 'd', attributes: { environment: 'prod', service: 'api' } });
    expect(a).toBe(b);
  });

  it('tells "a/b" + "c" from "a" + "b/c" (the escape is what keeps them apart)', () => {
    const one = targetId({ type: 'd', attributes: { x: 'a/b', y: 'c' } });
    const two = targetId({ type: 'd', attributes: { x: 'a', y: 'b/c' } });
    expect(one).not.toBe(two);
  });

  it('property: the id decodes back to the values in attribute-name order (so it is injective)', () => {
    fc.assert(
      fc.property(pair, ([x]) => {
        const sorted = Object.keys(x.attributes).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        expect(decodeId(targetId(x))).toEqual(sorted.map((n) => x.attributes[n]));
      }),
      { numRuns: 2000 },
    );
  });

  it('property: two targets of one type and attribute names share an id only when equal', () => {
    fc.assert(
      fc.property(pair, ([x, y]) => {
        const same = canonicalize(x) === canonicalize(y);
        expect(targetId(x) === targetId(y)).toBe(same);
      }),
      { numRuns: 2000 },
    );
  });

  it('names the target the contract derives from the input', () => {
    const derived = deriveTarget(buildContract(), rollbackInput());
    if (!derived.ok) throw new Error('the fixture input names no target');
    expect(targetId(derived.value)).toBe(
      `${derived.value.attributes.environment}/${derived.value.attributes.service}`,
    );
  });
});
