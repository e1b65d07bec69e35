/**
 * Bench-only Worker entry for `npm run bench:edge` (never deployed, never imported by src/):
 * the real Worker, the D1 binding of every shard (`DB`, `DB_SHARD_1`, ...: tenants are spread over
 * them) routed as D1 read replication would route it, with a sleep before each round trip:
 * `WRIT_BENCH_PRIMARY_MS` for the primary, `WRIT_BENCH_REPLICA_MS` for a replica
 * (test/support/d1-routing.ts).
 *
 * Per request, `writ-bench-replicas: off` models read replication disabled (every round trip to
 * the primary) and `writ-bench-latency: off` skips the sleeps (set-up traffic). The answer
 * carries `writ-bench-trips: <primary>,<replica>`, the round trips the request made.
 */
import { counting, type TripCounts, withRoutedShards } from '../test/support/d1-routing.js';
import { allShards } from '../src/platform/shards.js';
import worker from '../src/worker.js';

export { IdempotencyObject, LogSequencerObject, RateLimiterObject } from '../src/worker.js';

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
    // Every shard, one count: a tenant request touches only its own shard, set-up traffic (tenant
    // creation) also the directory on shard 0.
    const routed = withRoutedShards(env, allShards(env), () => ({
      replicas: request.headers.get('writ-bench-replicas') !== 'off',
      onRoundTrip: async (trip) => {
        count(trip);
        if (latency) await sleep(trip.where === 'primary' ? primaryMs : replicaMs);
      },
    }));
    const res = await worker.fetch(request, routed, ctx);
    const out = new Response(res.body, res);
    out.headers.set('writ-bench-trips', `${trips.primary},${trips.replica}`);
    return out;
  },
} satisfies ExportedHandler<BenchEnv>;
