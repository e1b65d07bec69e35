/**
 * Digest cache for immutable objects, keyed by object identity.
 *
 * Only frozen objects are cached: a frozen object cannot change after its digest was taken, so a
 * cached identity can never go stale. Unfrozen objects are hashed every time. Decisions are
 * never cached, only content identities (spec: "cache immutable contracts by identity").
 */
import { digestOf } from './canonical.js';

const cache = new WeakMap<object, string>();

export function cachedDigest(value: object): string {
  const hit = cache.get(value);
  if (hit !== undefined) return hit;
  const d = digestOf(value);
  if (isDeepFrozen(value)) cache.set(value, d);
  return d;
}

/** True when `v` and everything reachable from it is frozen: it can never change again. */
export function isDeepFrozen(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return true;
  if (!Object.isFrozen(v)) return false;
  for (const k of Object.keys(v)) if (!isDeepFrozen((v as Record<string, unknown>)[k])) return false;
  return true;
}

/** Recursively freeze a value so its digest can be cached. Returns the same object. */
export function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object') {
    // Recurse even into an already frozen object: a shallow freeze leaves its children mutable.
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
