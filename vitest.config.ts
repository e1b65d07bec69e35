import fs from 'node:fs';
import path from 'node:path';
import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';
import { generateKeyRing } from './src/core/receipts/keys.js';

// Three projects, one run (`npm run test:vitest`, or `vitest run --project node|workers|mcp-agents`):
// - node: pure tests (test/unit/**) in plain Node: no workerd to start, no migrations to apply.
// - workers: integration and conformance tests inside workerd, against real D1 and Durable
//   Objects from wrangler.toml, with the D1 migrations applied before each file.
// - mcp-agents: the `agents` McpAgent example (test/examples/**), in workerd beside Writ (below).

/** The platform admin token the test Worker is given; test/integration/platform/harness.ts sends it. */
const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdef0123456789abcdef';

// wrangler.toml lists WRIT_ADMIN_TOKEN under `[secrets] required`, so `wrangler deploy` refuses to
// publish without it. Wrangler resolves required secrets for local runs from .dev.vars, .env or the
// process environment and warns, once per test file, when none has it. The test Worker gets its
// value from the `miniflare.bindings` below (which win over anything wrangler found); giving the
// same value through the environment is the supported way to satisfy that lookup. A developer's own
// .dev.vars or environment value, when present, is left alone: the binding still overrides it.
process.env.WRIT_ADMIN_TOKEN ??= TEST_ADMIN_TOKEN;

/**
 * The receipt key ring the test Worker signs with (issue 11): a fixed seed, so receipts and
 * checkpoints are reproducible across runs; test/integration/log/keys.ts builds the same ring.
 */
const TEST_RECEIPT_KEYS = JSON.stringify(generateKeyRing(new Uint8Array(32).fill(7), 'writ.test', 0));
process.env.WRIT_RECEIPT_KEYS ??= TEST_RECEIPT_KEYS;

// A test's timeout is a watchdog against a hang, never a speed check (speed is measured by the
// benchmarks). Vitest's 5 s default is met with room to spare on an idle machine, but not on a
// loaded 2-core one: property tests run thousands of cases and integration tests seed tenants
// over HTTP. Tests that set their own timeout keep it.
const WATCHDOG_MS = 60_000;

// Inside workerd, every module a test file imports is fetched from Vite one at a time over the
// pool's socket and evaluated anew for each file (each file gets a fresh workerd). Loading the
// Worker (src/worker.ts) that way was ~420 modules, half of them zod's and drizzle-orm's own files,
// and most of each workers file's set-up time. Pre-bundled (Vite's dependency optimizer, built
// once per run into node_modules/.vite), each package is a few modules; the code is the same.
// Every entry point of these packages that the repository imports is bundled, found by scanning
// the sources below, so a new import of one is picked up without editing this list: a package
// loaded partly bundled and partly as its own files would run two copies of the same module
// (two zods, two hono HTTPExceptions) where there was one.
const PREBUNDLED_PACKAGES = new Set([
  'zod',
  'drizzle-orm',
  'hono',
  '@noble/curves',
  '@noble/hashes',
  'fast-check',
  'standardwebhooks',
  'openapi-fetch',
  '@modelcontextprotocol/sdk',
]);
// The MCP SDK's own ways into zod, so that the SDK and Writ share one zod, as unbundled.
const PREBUNDLED_TRANSITIVE = ['zod/v3', 'zod/v4', 'zod/v4-mini', 'zod/v4/core', 'zod-to-json-schema'];
function prebundledEntries(): string[] {
  const found = new Set(PREBUNDLED_TRANSITIVE);
  const root = import.meta.dirname;
  for (const dir of ['src', 'durable-objects', 'examples', 'scripts', 'test']) {
    for (const file of fs.readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts')) continue;
      const text = fs.readFileSync(path.join(root, dir, file), 'utf8');
      for (const m of text.matchAll(/(?:from |import\()'([^'./][^']*)'/g)) {
        const spec = m[1] as string;
        const parts = spec.split('/');
        const pkg = spec.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
        if (PREBUNDLED_PACKAGES.has(pkg)) found.add(spec);
      }
    }
  }
  return [...found].sort();
}
const workerdDeps = { optimizer: { ssr: { enabled: true, include: prebundledEntries() } } };

export default defineConfig({
  test: {
    // Three test files at a time on the 2-core CI machine. Vitest's default outside watch mode is
    // one fewer than the CPUs, so on that machine it ran every file one after another. The files
    // share no state (each workers file has its own storage; no test writes files or listens on a
    // fixed port), and nothing depends on timing (WATCHDOG_MS above), so how many run at once only
    // changes how long the run takes. A workers file spends much of its time waiting (its workerd
    // fetches each module from Vite in this process, one round trip at a time), so a third file
    // fills the CPUs those waits leave idle: measured against two, the same 24 workers files took
    // 47 s and 44 s instead of 50 s and 47 s, and 26 mixed node and workers files 30 s and 29 s
    // instead of 34 s and 33 s (runs alternated, load ~2-3).
    maxWorkers: 3,
    projects: [
      {
        test: {
          name: 'node',
          testTimeout: WATCHDOG_MS,
          hookTimeout: WATCHDOG_MS,
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        plugins: [
          cloudflareTest(async () => ({
            wrangler: { configPath: './wrangler.toml' },
            miniflare: {
              // Test-only: the stale snapshots a lagging read replica serves (test/support/d1-routing.ts),
              // one per D1 shard (DB, DB_SHARD_1), each its own database.
              d1Databases: {
                DB_STALE_REPLICA: 'writ-stale-replica',
                DB_STALE_REPLICA_1: 'writ-stale-replica-1',
                // Test-only: a third shard for the tests that need three (a tenant on one shard
                // moved to two others at once); they pass it as DB_SHARD_2 with WRIT_D1_SHARDS = 3.
                DB_THIRD_SHARD: 'writ-third-shard',
              },
              bindings: {
                // Read here (Node side), applied by test/setup/apply-migrations.ts.
                TEST_MIGRATIONS: await readD1Migrations(path.join(import.meta.dirname, 'migrations')),
                WRIT_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
                WRIT_RECEIPT_KEYS: TEST_RECEIPT_KEYS,
              },
            },
          })),
        ],
        test: {
          name: 'workers',
          deps: workerdDeps,
          testTimeout: WATCHDOG_MS,
          hookTimeout: WATCHDOG_MS,
          include: ['test/integration/**/*.test.ts', 'test/conformance/**/*.test.ts'],
          setupFiles: ['./test/setup/apply-migrations.ts'],
        },
      },
      // ---- mcp-agents: the `agents` McpAgent example (issue 12) ---------------------------------
      // Its own project because the Worker differs: test/examples/mcp-agents/entry.ts serves Writ
      // (wrangler.toml's bindings) and, beside it, the example McpAgent Durable Objects, which
      // reach Writ through a service binding to this same Worker.
      {
        plugins: [
          cloudflareTest(async () => ({
            main: './test/examples/mcp-agents/entry.ts',
            wrangler: { configPath: './wrangler.toml' },
            miniflare: {
              durableObjects: {
                MCP_OBJECT: { className: 'DeployTools', useSQLite: true },
                MCP_DOWN: { className: 'DeployToolsWritDown', useSQLite: true },
              },
              serviceBindings: { WRIT: 'writ' },
              bindings: {
                TEST_MIGRATIONS: await readD1Migrations(path.join(import.meta.dirname, 'migrations')),
                WRIT_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
                WRIT_RECEIPT_KEYS: TEST_RECEIPT_KEYS,
              },
            },
          })),
        ],
        test: {
          name: 'mcp-agents',
          testTimeout: WATCHDOG_MS,
          hookTimeout: WATCHDOG_MS,
          include: ['test/examples/**/*.test.ts'],
          setupFiles: ['./test/setup/apply-migrations.ts'],
        },
      },
    ],
    // The Worker logs one JSON line per request (ids and digests, never bodies); keep them out
    // of the test output unless a test fails.
    onConsoleLog: (log: string) => !log.includes('"request_id"'),
  },
});
