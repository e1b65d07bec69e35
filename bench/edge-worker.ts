/**
 * Bench-only Worker entry for `npm run bench:edge` (never deployed, never imported by src/):
 * the real Worker, its `DB` binding routed as D1 read replication would route it, with a sleep
 * before each round trip: `WRIT_BENCH_PRIMARY_MS` for the primary, `WRIT_BENCH_REPLICA_MS` for a
 * replica (test/support/d1-routing.ts).
 *
 * Per request, `writ-bench-replicas: off` models read replication disabled (every round trip to
 * the primary) and `writ-bench-latency: off` skips the sleeps (set-up traffic). The answer
 * carries `writ-bench-trips: <primary>,<replica>`, the round trips the request made.
 */
import { counting, routedD1, type TripCounts } from '../test/support/d1-routing.js';
import worker from '../src/worker.js';

export { IdempotencyObject, RateLimiterObject } from '../src/worker.js';

interface BenchEnv extends Env {
  readonly WRIT_BENCH_PRIMARY_MS?: string;
  readonly WRIT_BENCH_REPLICA_MS?: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function ms(value: string | undefined, fallback: number): number {
  const n = Number(value ?? fallback);
  return Number.isFinite(n) && n >= 0 ? n : fallback;
}

export default {
  async fetch(request: Request, env: BenchEnv, ctx: ExecutionContext): Promise<Response> {
    const primaryMs = ms(env.WRIT_BENCH_PRIMARY_MS, 80);
    const replicaMs = ms(env.WRIT_BENCH_REPLICA_MS, 5);
    const latency = request.headers.get('writ-bench-latency') !== 'off';
    const trips: TripCounts = { primary: 0, replica: 0, stale: 0 };
    const count = counting(trips);
    const DB = routedD1(env.DB, {
      replicas: request.headers.get('writ-bench-replicas') !== 'off',
      onRoundTrip: async (trip) => {
        count(trip);
        if (latency) await sleep(trip.where === 'primary' ? primaryMs : replicaMs);
      },
    });
    const res = await worker.fetch(request, { ...env, DB }, ctx);
    const out = new Response(res.body, res);
    out.headers.set('writ-bench-trips', `${trips.primary},${trips.replica}`);
    return out;
  },
} satisfies ExportedHandler<BenchEnv>;
