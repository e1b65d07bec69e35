/**
 * What bench:edge and bench:tenants share: the Worker started in local workerd through wrangler's
 * `DevEnv` (what `unstable_startWorker` wraps: local D1, Durable Objects and R2, a throwaway state
 * directory, migrations applied to every shard), answering on workerd's own socket.
 *
 * Why not `wrangler dev`'s URL: that is wrangler's dev proxy, a second workerd process that holds
 * each request in a Durable Object and forwards it over one more HTTP exchange; no deployment has
 * it, and on a 2-core machine its CPU competes with the Worker's. Holding the `DevEnv` lets the
 * bench hear where workerd serves the Worker itself (`reloadComplete`). `BENCH_VIA_PROXY=1` sends
 * requests through the proxy, as these benches did before 2026-12-01.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { unstable_DevEnv } from 'wrangler';
import { applyMigrations } from '../scripts/migrate.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** `BENCH_VIA_PROXY=1`: requests go through wrangler's dev proxy. */
export const VIA_PROXY = process.env.BENCH_VIA_PROXY === '1';

export interface DirectWorker {
  /** Where requests go: workerd's own socket, or the proxy with BENCH_VIA_PROXY=1. */
  readonly base: string;
  /** Says which, for the bench's header line. */
  readonly route: string;
  dispose(): Promise<void>;
}

export async function startDirectWorker(o: {
  /** The state directory (local D1, Durable Objects, R2); migrations are applied to it first. */
  readonly state: string;
  /** A bench-only entry instead of wrangler.toml's `main` (bench/edge-worker.ts). */
  readonly entrypoint?: string;
  /** Plain-text bindings over wrangler.toml's vars and .dev.vars. */
  readonly vars?: Readonly<Record<string, string>>;
  /** Build-time constants (what `wrangler dev --define NAME:VALUE` sets). */
  readonly define?: Readonly<Record<string, string>>;
}): Promise<DirectWorker> {
  // Every shard wrangler.toml declares.
  applyMigrations(['--local', '--persist-to', o.state]);
  const devEnv = new unstable_DevEnv();
  type Reloaded = { proxyData?: { userWorkerUrl?: { protocol: string; hostname: string; port: string } } };
  // The proxy is ready (it queues requests) before workerd has loaded the Worker: wait for that.
  const reloaded = new Promise<URL | null>((resolve) => {
    devEnv.once('reloadComplete', (e: Reloaded) => {
      const u = e.proxyData?.userWorkerUrl;
      resolve(u === undefined ? null : new URL(`${u.protocol}//${u.hostname}:${u.port}/`));
    });
  });
  const worker = await devEnv.startWorker({
    config: path.join(ROOT, 'wrangler.toml'),
    ...(o.entrypoint === undefined ? {} : { entrypoint: o.entrypoint }),
    ...(o.define === undefined ? {} : { build: { define: { ...o.define } } }),
    bindings: Object.fromEntries(
      Object.entries(o.vars ?? {}).map(([k, value]) => [k, { type: 'plain_text' as const, value }]),
    ),
    dev: { server: { hostname: '127.0.0.1', port: 0 }, inspector: false, persist: o.state, logLevel: 'warn' },
  });
  try {
    await worker.ready;
    const proxied = await worker.url;
    const direct = VIA_PROXY ? null : await reloaded;
    if (!VIA_PROXY && direct === null) throw new Error('workerd did not say where it serves the Worker');
    return {
      base: (direct ?? proxied).href.replace(/\/$/, ''),
      route: VIA_PROXY
        ? "through wrangler's dev proxy"
        : "workerd directly, not through wrangler's dev proxy",
      dispose: () => worker.dispose(),
    };
  } catch (e) {
    await worker.dispose();
    throw e;
  }
}
