/**
 * Bench-only Worker entry for `npm run bench:edge` (never deployed, never imported by src/):
 * the real Worker, the D1 binding of every shard (`DB`, `DB_SHARD_1`, ...: tenants are spread over
 * them) routed as D1 read replication would route it, with a sleep before each round trip:
 * `WRIT_BENCH_PRIMARY_MS` for the primary, `WRIT_BENCH_REPLICA_MS` for a replica
 * (test/support/d1-routing.ts), and `WRIT_BENCH_DO_MS` before each call to a Durable Object the
 * request awaits (in production a Durable Object is a network hop too: it lives where it was
 * first used, which need not be near the caller). The idempotency object's own D1 round trips
 * (its mirror write before it answers a claim or report) go to the primary, delayed and counted
 * like the Worker's (`IdempotencyObject` below).
 *
 * Per request, `writ-bench-replicas: off` models read replication disabled (every round trip to
 * the primary) and `writ-bench-latency: off` skips the sleeps (set-up traffic).
 * `writ-bench-trip: inside` models each round trip's latency as including the storage's own work:
 * instead of sleeping the whole latency before the trip (on top of local D1's or the object's
 * execution in this process), it sleeps after the trip for what remains of the latency, if
 * anything (a trip that took longer locally than its latency is not padded). The answer
 * carries `writ-bench-trips: <primary>,<replica>`, the round trips the request made, and
 * `writ-bench-timeline`: when each storage round trip and Durable Object call started and
 * ended, in ms since the request entered this Worker (`label@ms`, comma-separated). workerd
 * advances its clock only at I/O, so the timeline shows waits, and CPU only as the gap between
 * two I/O events.
 */
import { counting, type RoundTrip, type TripCounts, withRoutedShards } from '../test/support/d1-routing.js';
import { allShards } from '../src/platform/shards.js';
import worker from '../src/worker.js';

import { IdempotencyObject as ServiceIdempotencyObject } from '../src/worker.js';

export { LogSequencerObject, RateLimiterObject } from '../src/worker.js';

interface BenchEnv extends Env {
  readonly WRIT_BENCH_PRIMARY_MS?: string;
  readonly WRIT_BENCH_REPLICA_MS?: string;
  readonly WRIT_BENCH_DO_MS?: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function ms(value: string | undefined, fallback: number): number {
  const n = Number(value ?? fallback);
  return Number.isFinite(n) && n >= 0 ? n : fallback;
}

type Mark = (label: string) => void;

/**
 * How injected latency is applied: `before` sleeps the latency before each round trip or object
 * call (added to the local execution), `inside` pads each one after it returns up to the latency
 * (the latency includes the execution, as a real round trip's does), `none` injects nothing.
 */
type Injection = 'before' | 'inside' | 'none';

/**
 * A Durable Object stub whose method calls are marked on the timeline (and preceded by `delay`
 * ms when `wait` is true). `then` is hidden so the wrapper is never mistaken for a promise.
 */
function timedStub(
  stub: object,
  name: string,
  mark: Mark,
  delay: number,
  wait: boolean,
  inside: boolean,
): object {
  return new Proxy(stub, {
    get(target, prop) {
      if (prop === 'then') return undefined;
      const value: unknown = Reflect.get(target, prop);
      if (typeof prop !== 'string' || typeof value !== 'function') return value;
      const call = prop;
      return async (...args: unknown[]) => {
        mark(`${name}.${call}>`);
        // The kick is fire-and-forget (`waitUntil`): its latency is nobody's wait.
        if (wait && delay > 0 && !inside) await sleep(delay);
        const started = performance.now();
        try {
          // Called as a method of the stub: an RPC method is a stub too, with no `apply` of its own.
          const method = target as Record<string, (...a: unknown[]) => Promise<unknown>>;
          return await method[call]?.(...args);
        } finally {
          if (wait && delay > 0 && inside) await sleep(Math.max(0, delay - (performance.now() - started)));
          mark(`${name}.${call}<`);
        }
      };
    },
  });
}

function timedNamespace<N extends object>(
  ns: N,
  name: string,
  mark: Mark,
  delay: number,
  wait: boolean,
  inside: boolean,
): N {
  return new Proxy(ns, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (typeof value !== 'function') return value;
      if (prop === 'get') {
        return (...args: unknown[]) =>
          timedStub(
            (value as (...a: unknown[]) => object).apply(target, args),
            name,
            mark,
            delay,
            wait,
            inside,
          );
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

/**
 * The request being served, as the idempotency object's own D1 round trips should see it. The
 * object mirrors an operation into its tenant's D1 shard before it answers a claim or report, so
 * that write is on the request's path, at the primary (an object's D1 writes go to the primary
 * wherever the object lives). bench:edge sends one request at a time, and workerd runs this
 * script's Worker and Durable Objects in one isolate, so module state carries it; set per request
 * in `fetch`, cleared after.
 */
const serving: {
  latency: Injection;
  primaryMs: number;
  mark: Mark | null;
  count: ((t: RoundTrip) => void) | null;
} = {
  latency: 'none',
  primaryMs: 0,
  mark: null,
  count: null,
};

/** When each round trip of an `inside` request started (the same trip object is passed to both hooks). */
const started = new Map<RoundTrip, number>();

/** After an `inside` round trip: sleep what remains of its latency `ms`, if anything. */
async function padInside(trip: RoundTrip, ms: number): Promise<void> {
  const t = started.get(trip);
  started.delete(trip);
  if (t !== undefined) await sleep(Math.max(0, ms - (performance.now() - t)));
}

/** The service's idempotency object with its shard bindings routed and delayed as above. */
export class IdempotencyObject extends ServiceIdempotencyObject {
  constructor(ctx: DurableObjectState, env: Env) {
    super(
      ctx,
      withRoutedShards(env, allShards(env), () => ({
        replicas: false,
        onRoundTrip: async (trip) => {
          serving.count?.(trip);
          serving.mark?.(`do.${trip.where}${trip.write ? '.write' : ''}>`);
          if (serving.latency === 'before') await sleep(serving.primaryMs);
          if (serving.latency === 'inside') started.set(trip, performance.now());
        },
        afterRoundTrip: async (trip) => {
          await padInside(trip, serving.primaryMs);
          serving.mark?.(`do.${trip.where}${trip.write ? '.write' : ''}<`);
        },
      })),
    );
  }
}

export default {
  async fetch(request: Request, env: BenchEnv, ctx: ExecutionContext): Promise<Response> {
    const t0 = performance.now();
    const entered = Date.now();
    const timeline: string[] = [];
    const mark: Mark = (label) => timeline.push(`${label}@${(performance.now() - t0).toFixed(1)}`);
    const primaryMs = ms(env.WRIT_BENCH_PRIMARY_MS, 80);
    const replicaMs = ms(env.WRIT_BENCH_REPLICA_MS, 5);
    const doMs = ms(env.WRIT_BENCH_DO_MS, 0);
    const latency: Injection =
      request.headers.get('writ-bench-latency') === 'off'
        ? 'none'
        : request.headers.get('writ-bench-trip') === 'inside'
          ? 'inside'
          : 'before';
    const trips: TripCounts = { primary: 0, replica: 0, stale: 0 };
    const count = counting(trips);
    // Every shard, one count: a tenant request touches only its own shard, set-up traffic (tenant
    // creation) also the directory on shard 0.
    const routed = withRoutedShards(env, allShards(env), () => ({
      replicas: request.headers.get('writ-bench-replicas') !== 'off',
      onRoundTrip: async (trip) => {
        count(trip);
        mark(`${trip.where}${trip.write ? '.write' : ''}>`);
        if (latency === 'before') await sleep(trip.where === 'primary' ? primaryMs : replicaMs);
        if (latency === 'inside') started.set(trip, performance.now());
      },
      afterRoundTrip: async (trip) => {
        await padInside(trip, trip.where === 'primary' ? primaryMs : replicaMs);
        mark(`${trip.where}${trip.write ? '.write' : ''}<`);
      },
    }));
    const delay = latency === 'none' ? 0 : doMs;
    const inside = latency === 'inside';
    const timed: BenchEnv = {
      ...routed,
      RATE_LIMITER: timedNamespace(env.RATE_LIMITER, 'limiter', mark, delay, true, inside),
      IDEMPOTENCY: timedNamespace(env.IDEMPOTENCY, 'idempotency', mark, delay, true, inside),
      LOG_SEQUENCER: timedNamespace(env.LOG_SEQUENCER, 'log', mark, delay, false, inside),
    };
    // Diagnosis only (`BENCH_LOG=off`): no log sequencer kick, so no drain runs between requests.
    if (request.headers.get('writ-bench-log') === 'off') {
      Object.assign(timed, {
        LOG_SEQUENCER: { idFromName: () => null, get: () => ({ kick: async () => {} }) },
      });
    }
    Object.assign(serving, { latency, primaryMs, mark, count });
    let res: Response;
    try {
      res = await worker.fetch(request, timed, ctx);
    } finally {
      Object.assign(serving, { latency: 'none', mark: null, count: null });
    }
    mark('response');
    const out = new Response(res.body, res);
    out.headers.set('writ-bench-trips', `${trips.primary},${trips.replica}`);
    out.headers.set('writ-bench-timeline', timeline.join(','));
    // Wall clock (shared with the client on this machine): when the Worker got the request and
    // when it answered, so the client can tell queueing before the Worker from time after it.
    out.headers.set('writ-bench-wall', `${entered},${Date.now()}`);
    return out;
  },
} satisfies ExportedHandler<BenchEnv>;
