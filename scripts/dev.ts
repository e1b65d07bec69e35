/**
 * `npm run dev`: the local service, end to end.
 *
 * 1. writes `.dev.vars` with a random platform admin token if it has none, or one the Worker
 *    would refuse (src/http/admin-token.ts: e.g. the example value), and a freshly generated
 *    receipt key ring (`WRIT_RECEIPT_KEYS`, issue 11) if it has no valid one;
 * 2. applies the D1 migrations to every local D1 shard (scripts/migrate.ts: `DB`, `DB_SHARD_1`, ...);
 * 3. starts `wrangler dev` (local D1 and Durable Objects) on 127.0.0.1:8787 (`PORT` overrides);
 * 4. waits for `/v1/healthz`, seeds a demo tenant (scripts/seed.ts) and prints its keys, also
 *    written to `.wrangler/writ-demo.env` for `source`-ing (docs/walkthrough.md);
 * 5. keeps running until Ctrl-C, then stops wrangler.
 *
 * `startLocalWorker` is also used by the HTTP benchmark (bench/http.bench.ts), with its own
 * port and a throwaway state directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { adminTokenProblem } from '../src/http/admin-token.js';
import { parseApiKey } from '../src/core/identity/identity.js';
import { generateKeyRing, parseKeyRing } from '../src/core/receipts/keys.js';
import { applyMigrations } from './migrate.js';
import { seedDemo, seedEnvLines } from './seed.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WRANGLER = path.join(ROOT, 'node_modules', '.bin', 'wrangler');
const DEV_VARS = path.join(ROOT, '.dev.vars');

/** Ensure `.dev.vars` holds a `WRIT_ADMIN_TOKEN` and a receipt key ring; return the token. */
export function ensureDevVars(): string {
  ensureReceiptKeys();
  const existing = existsSync(DEV_VARS) ? readFileSync(DEV_VARS, 'utf8') : '';
  const m = /^WRIT_ADMIN_TOKEN=(.+)$/m.exec(existing);
  // A token the Worker would refuse (the example value, a short or guessable one) is replaced.
  if (m !== null && adminTokenProblem((m[1] as string).trim()) === null) return (m[1] as string).trim();
  const token = randomBytes(32).toString('hex');
  const prefix = existing.length > 0 && !existing.endsWith('\n') ? `${existing}\n` : existing;
  writeFileSync(DEV_VARS, `${prefix.replace(/^WRIT_ADMIN_TOKEN=.*\n?/m, '')}WRIT_ADMIN_TOKEN=${token}\n`, {
    mode: 0o600,
  });
  console.log('wrote a new WRIT_ADMIN_TOKEN to .dev.vars');
  return token;
}

/**
 * Ensure `.dev.vars` holds a valid `WRIT_RECEIPT_KEYS` (issue 11): without one the Worker refuses
 * every write that issues a receipt. A missing or invalid ring is replaced by a new one-key ring
 * (32 random bytes, issuer `writ.local`); a valid one, and so every receipt it signed, is kept.
 */
export function ensureReceiptKeys(): void {
  const existing = existsSync(DEV_VARS) ? readFileSync(DEV_VARS, 'utf8') : '';
  const m = /^WRIT_RECEIPT_KEYS=(.+)$/m.exec(existing);
  if (m !== null && parseKeyRing((m[1] as string).trim()).ok) return;
  const ring = JSON.stringify(generateKeyRing(randomBytes(32), 'writ.local', Date.now()));
  const kept = existing.replace(/^WRIT_RECEIPT_KEYS=.*\n?/m, '');
  const prefix = kept.length > 0 && !kept.endsWith('\n') ? `${kept}\n` : kept;
  writeFileSync(DEV_VARS, `${prefix}WRIT_RECEIPT_KEYS=${ring}\n`, { mode: 0o600 });
  console.log('wrote a new receipt key ring (WRIT_RECEIPT_KEYS) to .dev.vars');
}

export interface LocalWorker {
  readonly baseUrl: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly port: number;
  /** State directory for local D1 / Durable Objects; wrangler's default (.wrangler/state) if absent. */
  readonly persistTo?: string;
  /** Forward wrangler's output to this process's stdout/stderr. */
  readonly inheritOutput: boolean;
  /** wrangler's own log level (`info` prints a line per request). */
  readonly logLevel?: 'debug' | 'info' | 'log' | 'warn' | 'error' | 'none';
  /**
   * Start wrangler in its own process group and stop the whole group (wrangler and its workerd),
   * so nothing outlives a test run that is interrupted (the browser test, scripts/console-browser.ts).
   */
  readonly ownProcessGroup?: boolean;
  /** How long to wait for `/v1/healthz` (default 90 s). */
  readonly readyTimeoutMs?: number;
  /** More `wrangler dev` arguments (bench/log.bench.ts: a `--define` for its log-off build). */
  readonly extraArgs?: readonly string[];
}

/** A loopback port free right now, for a `wrangler dev` the caller starts (benches, browser test). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Apply migrations, start `wrangler dev`, and wait until `/v1/healthz` answers. */
export async function startLocalWorker(o: StartOptions): Promise<LocalWorker> {
  const persist = o.persistTo === undefined ? [] : ['--persist-to', o.persistTo];
  const env = { ...process.env, CI: 'true', WRANGLER_SEND_METRICS: 'false' };
  // Every shard: the demo tenants land on both (docs/scaling.md, "Shards").
  const migrated = applyMigrations(['--local', ...persist]);
  if (o.inheritOutput) console.log(migrated.trim());
  const child = spawn(
    WRANGLER,
    [
      'dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(o.port),
      '--show-interactive-dev-session=false',
      ...persist,
      ...(o.extraArgs ?? []),
    ],
    {
      cwd: ROOT,
      env,
      stdio: o.inheritOutput ? ['ignore', 'inherit', 'inherit'] : 'ignore',
      detached: o.ownProcessGroup === true,
    },
  );
  const baseUrl = `http://127.0.0.1:${o.port}`;
  const kill = (signal: NodeJS.Signals) => {
    if (o.ownProcessGroup === true && child.pid !== undefined) {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // the group is already gone
      }
    } else child.kill(signal);
  };
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        // wrangler is gone; its group may not be.
        if (o.ownProcessGroup === true) kill('SIGKILL');
        return resolve();
      }
      child.once('exit', () => {
        if (o.ownProcessGroup === true) kill('SIGKILL');
        resolve();
      });
      kill('SIGTERM');
      setTimeout(() => kill('SIGKILL'), 5_000).unref();
    });
  const deadline = Date.now() + (o.readyTimeoutMs ?? 90_000);
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`wrangler dev exited with ${child.exitCode}`);
    }
    try {
      const r = await fetch(`${baseUrl}/v1/healthz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`wrangler dev did not become healthy within ${(o.readyTimeoutMs ?? 90_000) / 1000} s`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { baseUrl, child, stop };
}

async function main(): Promise<void> {
  const adminToken = ensureDevVars();
  const port = Number(process.env.PORT ?? 8787);
  console.log('applying local D1 migrations and starting wrangler dev ...');
  const worker = await startLocalWorker({ port, inheritOutput: true });
  const shutdown = () => {
    void worker.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
  worker.child.once('exit', (code) => process.exit(code ?? 0));

  const seeded = await seedDemo({ baseUrl: worker.baseUrl, adminToken, fetch, now: Date.now() });
  const lines = seedEnvLines(worker.baseUrl, seeded);
  mkdirSync(path.join(ROOT, '.wrangler'), { recursive: true });
  writeFileSync(path.join(ROOT, '.wrangler', 'writ-demo.env'), `${lines.join('\n')}\n`, { mode: 0o600 });
  console.log(
    [
      '',
      `Writ is running at ${worker.baseUrl} (local D1 and Durable Objects).`,
      `Seeded tenant "${seeded.tenant_name}" (${seeded.tenant_id}) on D1 shard ${parseApiKey(seeded.admin.api_key)?.shard ?? '?'}. Keys are shown once:`,
      '',
      ...lines.map((l) => `  ${l}`),
      '',
      'These lines are also in .wrangler/writ-demo.env: `source .wrangler/writ-demo.env`, then follow',
      'docs/walkthrough.md. Ctrl-C stops the service.',
      '',
    ].join('\n'),
  );
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  });
}
