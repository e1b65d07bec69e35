import path from 'node:path';
import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-plugin';
import { defineConfig } from 'vitest/config';

// Every test runs inside workerd, against real D1 and Durable Objects from wrangler.toml.
// D1 migrations are read here (Node side) and applied by test/setup/apply-migrations.ts.
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, 'migrations'));
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: './wrangler.toml' },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            WRIT_ADMIN_TOKEN: 'test-admin-token-0123456789abcdef0123456789abcdef',
          },
        },
      }),
    ],
    test: {
      setupFiles: ['./test/setup/apply-migrations.ts'],
      include: ['test/**/*.test.ts'],
      // The Worker logs one JSON line per request (ids and digests, never bodies); keep them out
      // of the test output unless a test fails.
      onConsoleLog: (log: string) => !log.includes('"request_id"'),
    },
  };
});
