import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { apiKeyDigest, formatApiKey, parseApiKey } from '../../../src/core/identity/identity.js';
import { placementShard, shardBinding, shardCount } from '../../../src/platform/shards.js';

describe('placementShard', () => {
  it('is the shard with the fewest tenants, the lowest number among equals', () => {
    expect(placementShard([0, 0])).toBe(0);
    expect(placementShard([1, 0])).toBe(1);
    expect(placementShard([3, 2, 2])).toBe(1);
    expect(placementShard([5, 5, 0])).toBe(2); // a newly added shard fills first
    expect(() => placementShard([])).toThrow(RangeError);
  });

  it('placing tenants one by one keeps the shards within one tenant of each other (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 0, max: 200 }), (shards, tenants) => {
        const counts = Array.from({ length: shards }, () => 0);
        for (let i = 0; i < tenants; i++) {
          const at = placementShard(counts);
          counts[at] = (counts[at] ?? 0) + 1;
        }
        expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
      }),
    );
  });
});

describe('shard bindings', () => {
  const d1 = { prepare: () => undefined } as unknown as D1Database;
  const env = (over: Record<string, unknown>) => over as unknown as Env;

  it('are DB and DB_SHARD_N, within WRIT_D1_SHARDS', () => {
    const e = env({ WRIT_D1_SHARDS: '2', DB: d1, DB_SHARD_1: d1, DB_SHARD_2: d1 });
    expect(shardCount(e)).toBe(2);
    expect(shardBinding(e, 0)).toBe(d1);
    expect(shardBinding(e, 1)).toBe(d1);
    // Bound but not counted: never routed to.
    expect(shardBinding(e, 2)).toBeNull();
    expect(shardBinding(e, -1)).toBeNull();
    expect(shardBinding(e, 0.5)).toBeNull();
  });

  it('fail closed when a counted shard is unbound or the count is not a number', () => {
    expect(shardBinding(env({ WRIT_D1_SHARDS: '2', DB: d1 }), 1)).toBeNull();
    expect(shardBinding(env({ WRIT_D1_SHARDS: '2', DB: d1, DB_SHARD_1: 'not a database' }), 1)).toBeNull();
    for (const bad of ['0', '', 'two', '01', '-1', '1e3', '10000']) {
      expect(shardCount(env({ WRIT_D1_SHARDS: bad, DB: d1 }))).toBeNull();
      expect(shardBinding(env({ WRIT_D1_SHARDS: bad, DB: d1 }), 0)).toBeNull();
    }
  });
});

describe('routed keys (property)', () => {
  const key = fc
    .tuple(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.integer({ min: 0, max: 999 }))
    .map(([bytes, shard]) => formatApiKey(bytes, shard));

  it('route to the shard they were issued for', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.integer({ min: 0, max: 999 }),
        (b, shard) => {
          const k = formatApiKey(b, shard);
          expect(parseApiKey(k)).toEqual({ shard, key_sha256: apiKeyDigest(k), legacy: false });
        },
      ),
    );
  });

  it('changed anywhere (routing part or secret) either fail to parse or digest differently', () => {
    fc.assert(
      fc.property(
        key,
        fc.nat(),
        fc.constantFrom(...'0123456789_-ABCXYZabcxyz'.split('')),
        fc.constantFrom('replace', 'insert', 'delete'),
        (k, at, ch, op) => {
          const i = at % k.length;
          const changed =
            op === 'replace'
              ? `${k.slice(0, i)}${ch}${k.slice(i + 1)}`
              : op === 'insert'
                ? `${k.slice(0, i)}${ch}${k.slice(i)}`
                : `${k.slice(0, i)}${k.slice(i + 1)}`;
          fc.pre(changed !== k);
          const route = parseApiKey(changed);
          // The stored digest is of the key as issued: no other string finds it, on any shard.
          if (route !== null) expect(route.key_sha256).not.toBe(apiKeyDigest(k));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
