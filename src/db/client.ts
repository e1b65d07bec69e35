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
 * A client's bookmarks name their shard; a shard the client sent none for (while it sent some)
 * starts at the primary, never unconstrained, so a bookmark of one database never stands in for
 * another's.
 * Never: lets a client's bookmark select a primary or make a session older than unconstrained.
 */
import { drizzle, type DrizzleD1Database } from 'drizzle-orm/d1';
import * as schema from './schema.js';

export type Db = DrizzleD1Database<typeof schema>;

export function database(env: { DB: D1Database }): Db {
  return drizzle(env.DB, { schema });
}

// -- D1 sessions (read replication) ----------------------------------------------------------

/**
 * How a request's sessions start: near the caller (replica reads) or at the primary. Near the
 * caller, `bookmarks` is null when the client sent none (every session unconstrained), else the
 * bookmarks it sent by shard: a shard's session starts from its own bookmark, and a shard the
 * client sent none for starts at the primary (a bookmark of another database says nothing about
 * this one, and the client asked to read its writes: the primary is the only safe answer).
 */
export type SessionStart =
  | { readonly at: 'nearest'; readonly bookmarks: ReadonlyMap<number, string> | null }
  | { readonly at: 'primary' };

/** Longest bookmark accepted from a client; checked before the pattern. */
export const MAX_BOOKMARK_LENGTH = 128;
/** D1's bookmark shape: four hex fields (`0000007b-0000b26e-00001538-<32 hex>`). */
const BOOKMARK_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32}$/;

/** True for a well-formed bookmark: bounded and of D1's charset and shape, nothing else. */
export function isBookmark(value: string): boolean {
  return value.length <= MAX_BOOKMARK_LENGTH && BOOKMARK_PATTERN.test(value);
}

// Shard-qualified bookmarks (`Writ-D1-Bookmark: <shard>:<bookmark>[,<shard>:<bookmark>...]`).
// A D1 bookmark is a position in one database's history: handed to another database it is
// meaningless (it may be far behind that database's position for the client's own writes), so the
// header names the shard each bookmark came from.

/** Longest `Writ-D1-Bookmark` value accepted; checked before anything is split. */
export const MAX_BOOKMARK_HEADER_LENGTH = 1024;
/** Most shard-qualified bookmarks in one header (a request touches one shard, an admin's a few). */
export const MAX_BOOKMARKS = 8;
const QUALIFIED = /^(0|[1-9][0-9]{0,3}):(.*)$/s;

/**
 * The header's value: `qualified` bookmarks by shard, or `unqualified` (one bare D1 bookmark, as
 * sent before bookmarks named their shard: which database issued it is unknown), or null when it
 * is malformed (too long, too many, a repeated shard, a shard number outside `max_shards`, a part
 * not of D1's shape).
 */
export function parseBookmarkHeader(
  value: string,
  max_shards: number,
):
  | { readonly kind: 'qualified'; readonly bookmarks: ReadonlyMap<number, string> }
  | { readonly kind: 'unqualified' }
  | null {
  if (value.length > MAX_BOOKMARK_HEADER_LENGTH) return null;
  if (isBookmark(value)) return { kind: 'unqualified' };
  const parts = value.split(',');
  if (parts.length > MAX_BOOKMARKS) return null;
  const bookmarks = new Map<number, string>();
  for (const part of parts) {
    const m = QUALIFIED.exec(part);
    if (m === null) return null;
    const shard = Number(m[1]);
    const bookmark = m[2] as string;
    // Two bookmarks for one shard: which one the client meant is a guess; refuse.
    if (shard >= max_shards || bookmarks.has(shard) || !isBookmark(bookmark)) return null;
    bookmarks.set(shard, bookmark);
  }
  return { kind: 'qualified', bookmarks };
}

/** The header value for `bookmarks` (by shard, in shard order). */
export function formatBookmarkHeader(bookmarks: ReadonlyMap<number, string>): string | null {
  if (bookmarks.size === 0) return null;
  return [...bookmarks]
    .sort(([a], [b]) => a - b)
    .map(([shard, b]) => `${shard}:${b}`)
    .join(',');
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
  /**
   * The newest bookmark of each shard the request's sessions queried, by shard (a D1 binding that
   * is not a shard gives none).
   */
  bookmarks(): ReadonlyMap<number, string>;
}

/** Where a shard's session starts under `start` (see `SessionStart`). */
export function sessionConstraint(start: SessionStart, shard: number | null): string {
  if (start.at === 'primary') return 'first-primary';
  if (start.bookmarks === null) return 'first-unconstrained';
  // The client sent bookmarks, but none of this database: fail safe, at the primary.
  return (shard === null ? undefined : start.bookmarks.get(shard)) ?? 'first-primary';
}

/**
 * Session-backed D1 bindings for one request. Bindings are wrapped when first read (no
 * enumeration of `env`), each in its own session, so a request on one database never opens another.
 * `shardOf` names the shard a binding is (src/platform/shards.ts), or null for another binding.
 */
export function openD1Sessions<E extends object>(
  env: E,
  start: SessionStart,
  shardOf: (binding: string) => number | null,
): D1Sessions<E> {
  const opened: { readonly shard: number | null; readonly sessions: D1DatabaseSession[] }[] = [];
  const wrapped = new Map<PropertyKey, D1Database>();
  const proxy = new Proxy(env, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key);
      if (!isD1Binding(value) || isSessionBinding(value)) return value;
      let w = wrapped.get(key);
      if (w === undefined) {
        const shard = typeof key === 'string' ? shardOf(key) : null;
        const sessions: D1DatabaseSession[] = [];
        opened.push({ shard, sessions });
        w = sessionBinding(value, sessionConstraint(start, shard), sessions);
        wrapped.set(key, w);
      }
      return w;
    },
  });
  return {
    env: proxy,
    bookmarks: () => {
      const out = new Map<number, string>();
      for (const { shard, sessions } of opened) {
        if (shard === null) continue;
        for (const s of sessions) {
          const b = s.getBookmark();
          // Within one database, bookmarks are fixed-width hex fields: the newest is the greatest.
          const had = out.get(shard);
          if (b !== null && (had === undefined || b > had)) out.set(shard, b);
        }
      }
      return out;
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
