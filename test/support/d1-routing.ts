/**
 * Tests and benches only: a stand-in for a D1 binding that models where each round trip goes
 * under D1 read replication, so tests can count primary and replica round trips, the edge bench
 * can add latency per kind, and a stale replica can be simulated.
 *
 * The model follows D1's Sessions API: without a session every query goes to the primary; a
 * write goes to the primary; in a `first-primary` session the first query goes to the primary and
 * later reads to a replica; in an unconstrained session (or one started from a bookmark) reads
 * go to a replica. A `batch` is one round trip, a write if any statement in it writes.
 * With `replicas: false` (read replication disabled) every round trip is a primary one.
 *
 * Stale reads: given `staleReplica`, reads that D1 could serve from a lagging replica (an
 * unconstrained session that has not written yet) are answered from that database, a snapshot
 * of the primary taken earlier (`snapshotDatabase`). Every other read is answered by the primary,
 * which is at least as fresh as any bookmark. Locally D1 has one database and no lag, so this is
 * the only way to show what a stale read can and cannot do.
 */
export type Where = 'primary' | 'replica';

export interface RoundTrip {
  readonly where: Where;
  readonly write: boolean;
  /** Answered by the stale snapshot. */
  readonly stale: boolean;
}

export interface RoutingOptions {
  /** Called before each round trip: count it, or sleep. */
  readonly onRoundTrip?: (trip: RoundTrip) => void | Promise<void>;
  /**
   * Called when a round trip's answer (or error) is back, and awaited before the caller gets it:
   * the edge bench's timeline, and its `inside` mode's padding of a trip up to its latency.
   */
  readonly afterRoundTrip?: (trip: RoundTrip) => void | Promise<void>;
  /** False models read replication disabled: every round trip goes to the primary. */
  readonly replicas?: boolean;
  /** Where replica reads of unconstrained sessions are answered (a stale snapshot). */
  readonly staleReplica?: D1Database;
}

const READ = /^\s*(select|with)\b/i;
const isWrite = (sql: string): boolean => !READ.test(sql);

type Target = D1Database | D1DatabaseSession;

/** A prepared statement that runs wherever its session routes it, when it is executed. */
class RoutedStatement {
  constructor(
    readonly sql: string,
    readonly args: readonly unknown[],
    readonly route: Route,
  ) {}

  bind(...args: unknown[]): RoutedStatement {
    return new RoutedStatement(this.sql, args, this.route);
  }

  on(target: Target): D1PreparedStatement {
    return target.prepare(this.sql).bind(...this.args);
  }

  first(column?: string): Promise<unknown> {
    return this.route.one(this, (s) => (column === undefined ? s.first() : s.first(column)));
  }

  all(): Promise<unknown> {
    return this.route.one(this, (s) => s.all());
  }

  run(): Promise<unknown> {
    return this.route.one(this, (s) => s.run());
  }

  raw(options?: { columnNames?: boolean }): Promise<unknown> {
    return this.route.one(this, (s) =>
      options?.columnNames === true ? s.raw({ columnNames: true }) : s.raw(),
    );
  }
}

/**
 * `foreign`: a session started from a bookmark this database never issued (another database's,
 * say another shard's). D1 orders bookmarks within one database only, so such a bookmark gives no
 * freshness here: the model serves it like an unconstrained session, from the stale replica.
 */
type Start = 'none' | 'first-primary' | 'unconstrained' | 'bookmark' | 'foreign';

/** Bookmarks each database (by its primary binding) has handed out, for telling `foreign` ones. */
const issued = new WeakMap<D1Database, Set<string>>();

class Route {
  #queried = false;
  #wrote = false;

  constructor(
    readonly start: Start,
    readonly primary: Target,
    readonly o: RoutingOptions,
  ) {}

  #where(write: boolean): Where {
    if (this.o.replicas === false || this.start === 'none' || write) return 'primary';
    if (this.start === 'first-primary' && !this.#queried) return 'primary';
    return 'replica';
  }

  async #trip<T>(write: boolean, f: (target: Target) => Promise<T>): Promise<T> {
    const where = this.#where(write);
    // A lagging replica serves only a session that has no bookmark to be consistent with yet.
    const replica = this.o.staleReplica;
    const lagging =
      where === 'replica' && (this.start === 'unconstrained' || this.start === 'foreign') && !this.#wrote;
    const target = lagging && replica !== undefined ? replica : this.primary;
    const trip: RoundTrip = { where, write, stale: target === replica };
    await this.o.onRoundTrip?.(trip);
    this.#queried = true;
    if (write) this.#wrote = true;
    try {
      return await f(target);
    } finally {
      await this.o.afterRoundTrip?.(trip);
    }
  }

  one<T>(st: RoutedStatement, f: (s: D1PreparedStatement) => Promise<T>): Promise<T> {
    return this.#trip(isWrite(st.sql), (target) => f(st.on(target)));
  }

  batch(statements: readonly RoutedStatement[]): Promise<D1Result[]> {
    return this.#trip(
      statements.some((s) => isWrite(s.sql)),
      (target) => target.batch(statements.map((s) => s.on(target))),
    );
  }

  prepare(sql: string): RoutedStatement {
    return new RoutedStatement(sql, [], this);
  }
}

/** `primary` wrapped: every query, session and batch is routed (and reported) as D1 would. */
export function routedD1(primary: D1Database, o: RoutingOptions = {}): D1Database {
  const root = new Route('none', primary, o);
  const wrapper = {
    prepare: (sql: string) => root.prepare(sql),
    batch: (statements: RoutedStatement[]) => root.batch(statements),
    exec: (sql: string) => primary.exec(sql),
    dump: () => primary.dump(),
    withSession: (arg?: string) => {
      let own = issued.get(primary);
      if (own === undefined) {
        own = new Set();
        issued.set(primary, own);
      }
      const mine = own;
      const start: Start =
        arg === 'first-primary'
          ? 'first-primary'
          : arg === undefined || arg === 'first-unconstrained'
            ? 'unconstrained'
            : mine.has(arg)
              ? 'bookmark'
              : 'foreign';
      // A real session underneath, so bookmarks are D1's own.
      const real = primary.withSession(arg);
      const route = new Route(start, real, o);
      return {
        prepare: (sql: string) => route.prepare(sql),
        batch: (statements: RoutedStatement[]) => route.batch(statements),
        getBookmark: () => {
          const b = real.getBookmark();
          if (b !== null) mine.add(b);
          return b;
        },
      };
    },
  };
  // The stand-in implements the part of D1's API that Writ and drizzle call.
  return wrapper as unknown as D1Database;
}

/**
 * The binding name of D1 shard `n`, as src/platform/shards.ts names it: shard 0 is `DB`, shard
 * N >= 1 is `DB_SHARD_N`. Tenants are spread over the shards, so a test or bench that routes
 * "the" database must route the shard (or shards) its tenants live on.
 */
export function shardBindingName(n: number): string {
  return n === 0 ? 'DB' : `DB_SHARD_${n}`;
}

/**
 * `env` with the D1 binding of each shard in `shards` routed by `routedD1`, `options(n)` giving
 * shard n's routing (one counter may be shared, so a request's round trips are counted on
 * whichever shard they went to). A shard without its binding is a set-up error.
 */
export function withRoutedShards<E extends object>(
  env: E,
  shards: readonly number[],
  options: (shard: number) => RoutingOptions,
): E {
  const routed: Record<string, D1Database> = {};
  for (const n of shards) {
    const name = shardBindingName(n);
    const d1: unknown = Reflect.get(env, name);
    if (typeof d1 !== 'object' || d1 === null || typeof (d1 as D1Database).prepare !== 'function') {
      throw new Error(`shard ${n}: no D1 binding ${name}`);
    }
    routed[name] = routedD1(d1 as D1Database, options(n));
  }
  return { ...env, ...routed };
}

/** Counts of round trips by kind, filled by `counting`. */
export interface TripCounts {
  primary: number;
  replica: number;
  /** Of the replica reads, those the stale snapshot answered. */
  stale: number;
}

export function counting(counts: TripCounts): NonNullable<RoutingOptions['onRoundTrip']> {
  return (trip) => {
    counts[trip.where] += 1;
    if (trip.stale) counts.stale += 1;
  };
}

const SKIP_TABLES = /^(sqlite_|_cf_|d1_migrations$)/;

/**
 * Make `replica` a copy of `primary` as it is now: the stale snapshot a lagging replica serves.
 * `replica` must carry the schema without triggers (it is only ever read or copied into).
 */
export async function snapshotDatabase(primary: D1Database, replica: D1Database): Promise<void> {
  const tables = await primary
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    .all<{ name: string }>();
  const statements: D1PreparedStatement[] = [];
  for (const { name } of tables.results) {
    if (SKIP_TABLES.test(name)) continue;
    statements.push(replica.prepare(`DELETE FROM "${name}"`));
    const rows = await primary.prepare(`SELECT * FROM "${name}"`).all<Record<string, unknown>>();
    for (const row of rows.results) {
      const cols = Object.keys(row);
      statements.push(
        replica
          .prepare(
            `INSERT INTO "${name}" (${cols.map((c) => `"${c}"`).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`,
          )
          .bind(...cols.map((c) => row[c] ?? null)),
      );
    }
  }
  if (statements.length > 0) await replica.batch(statements);
}

/** Drop every trigger of `db` (a snapshot target is written by copying, never by the app). */
export async function dropTriggers(db: D1Database): Promise<void> {
  const triggers = await db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    .all<{ name: string }>();
  const drops = triggers.results.map((t) => db.prepare(`DROP TRIGGER IF EXISTS "${t.name}"`));
  if (drops.length > 0) await db.batch(drops);
}
