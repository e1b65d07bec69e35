/**
 * The drizzle handle over a D1 binding, and the request's D1 session (read replication).
 *
 * A request's bindings are session-backed (`openD1Sessions`): a route that may read near the
 * caller starts its session unconstrained or from the client's bookmark, so reads go to the
 * nearest replica at least that fresh; every other route starts `first-primary`. Writes always go
 * to the primary. `atPrimary` opens a fresh primary session for a read that must see every
 * committed write (a replica miss, or a re-read after a lost race).
 * Guarantees: a stale replica can delay what a read sees, never what a write batch checks: the
 * authorization path's guards run in its write batch, at the primary (src/db/tenant-store.ts).
 * Never: lets a client's bookmark select a primary or make a session older than unconstrained.
 */
import { drizzle, type DrizzleD1Database } from 'drizzle-orm/d1';
import * as schema from './schema.js';

export type Db = DrizzleD1Database<typeof schema>;

export function database(env: { DB: D1Database }): Db {
  return drizzle(env.DB, { schema });
}

// -- D1 sessions (read replication) ----------------------------------------------------------

/** How a request's sessions start: near the caller (replica reads) or at the primary. */
export type SessionStart =
  { readonly at: 'nearest'; readonly bookmark: string | null } | { readonly at: 'primary' };

/** Longest bookmark accepted from a client; checked before the pattern. */
export const MAX_BOOKMARK_LENGTH = 128;
/** D1's bookmark shape: four hex fields (`0000007b-0000b26e-00001538-<32 hex>`). */
const BOOKMARK_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/;

/** True for a well-formed bookmark: bounded and of D1's charset and shape, nothing else. */
export function isBookmark(value: string): boolean {
  return value.length <= MAX_BOOKMARK_LENGTH && BOOKMARK_PATTERN.test(value);
}

/** A binding whose queries run in D1 sessions; `primary()` opens one that starts at the primary. */
interface SessionBinding {
  readonly [SESSIONED]: true;
  primary(): D1Database;
}
const SESSIONED = Symbol('writ.d1.sessioned');

function isD1Binding(v: unknown): v is D1Database {
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof (v as Partial<D1Database>).withSession === 'function' &&
    typeof (v as Partial<D1Database>).prepare === 'function'
  );
}

function isSessionBinding(v: unknown): v is SessionBinding {
  return typeof v === 'object' && v !== null && SESSIONED in v;
}

/**
 * A D1Database whose queries run in one lazily opened session of `raw`. drizzle only prepares
 * and batches, so the session stands in for the binding.
 */
function sessionBinding(raw: D1Database, start: string, opened: D1DatabaseSession[]): D1Database {
  let session: D1DatabaseSession | null = null;
  const open = (): D1DatabaseSession => {
    if (session === null) {
      session = raw.withSession(start);
      opened.push(session);
    }
    return session;
  };
  const binding: SessionBinding & Pick<D1Database, 'prepare' | 'batch'> = {
    [SESSIONED]: true,
    prepare: (query) => open().prepare(query),
    batch: (statements) => open().batch(statements),
    primary: () => sessionBinding(raw, 'first-primary', opened),
  };
  // Only `prepare` and `batch` are used over a session; `exec` and `dump` are not session calls.
  return binding as unknown as D1Database;
}

export interface D1Sessions<E> {
  /** `env` with every D1 binding replaced by its session-backed stand-in. */
  readonly env: E;
  /** The newest bookmark of the request's sessions, or null when none ran a query. */
  bookmark(): string | null;
}

/**
 * Session-backed D1 bindings for one request. Bindings are wrapped when first read (no
 * enumeration of `env`), each in its own session, so a request on one database never opens another.
 */
export function openD1Sessions<E extends object>(env: E, start: SessionStart): D1Sessions<E> {
  const constraint = start.at === 'primary' ? 'first-primary' : (start.bookmark ?? 'first-unconstrained');
  const opened: D1DatabaseSession[] = [];
  const wrapped = new Map<PropertyKey, D1Database>();
  const proxy = new Proxy(env, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key);
      if (!isD1Binding(value) || isSessionBinding(value)) return value;
      let w = wrapped.get(key);
      if (w === undefined) {
        w = sessionBinding(value, constraint, opened);
        wrapped.set(key, w);
      }
      return w;
    },
  });
  return {
    env: proxy,
    bookmark: () => {
      // D1 bookmarks are fixed-width hex fields, so the newest is the greatest string.
      let newest: string | null = null;
      for (const s of opened) {
        const b = s.getBookmark();
        if (b !== null && (newest === null || b > newest)) newest = b;
      }
      return newest;
    },
  };
}

/**
 * The same database with every query at the primary: a fresh `first-primary` session when `db`
 * runs in sessions, else `db` itself (a plain binding always queries the primary).
 */
export function atPrimary(db: Db): Db {
  // drizzle keeps the client it was opened over; `Db` does not declare it.
  const client: unknown = (db as { readonly $client?: unknown }).$client;
  return isSessionBinding(client) ? drizzle(client.primary(), { schema }) : db;
}

/** Message fragments of the invariant triggers in migrations/0001_invariants.sql. */
export type InvariantViolation =
  | 'approval_unusable'
  | 'approval_not_pending'
  | 'approval_second_approver'
  | 'approval_first_approval'
  | 'run_budget_spent'
  | 'contract_quarantined'
  | 'grant_revoked'
  | 'principal_revoked';

const INVARIANTS: readonly InvariantViolation[] = [
  'approval_unusable',
  'approval_not_pending',
  // migrations/0007_console.sql
  'approval_second_approver',
  'approval_first_approval',
  'run_budget_spent',
  'contract_quarantined',
  'grant_revoked',
  'principal_revoked',
];

/**
 * Which invariant trigger aborted a statement, if any. D1 reports `RAISE(ABORT, msg)` in the
 * error message (possibly wrapped in a `cause`), so the trigger message is the only signal.
 */
export function invariantViolation(e: unknown): InvariantViolation | null {
  let cur: unknown = e;
  for (let depth = 0; depth < 4 && cur instanceof Error; depth++) {
    const hit = INVARIANTS.find((name) => cur instanceof Error && cur.message.includes(name));
    if (hit !== undefined) return hit;
    cur = cur.cause;
  }
  return null;
}
