import type { D1Migration } from '@cloudflare/vitest-plugin';

// Test-only bindings, declared apart from the generated Worker Env.
declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
    }
  }
}
export {};
