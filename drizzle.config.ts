import { defineConfig } from 'drizzle-kit';

// `npm run db:generate` writes SQL migrations to migrations/ (committed); wrangler and the test
// setup apply them in file order. Invariant triggers live in a custom migration (0001).
export default defineConfig({
  dialect: 'sqlite',
  schema: './src/db/schema.ts',
  out: './migrations',
});
