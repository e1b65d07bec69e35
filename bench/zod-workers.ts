/**
 * Imported first by the benchmarks: zod as it runs on Workers. workerd forbids `new Function`, so
 * zod (which detects the Cloudflare user agent) parses without its JIT-compiled fast path there.
 * zod reads this setting when a schema is built, hence a module of its own, evaluated before any
 * schema module. `WRIT_BENCH_ZOD_JIT=1` keeps the JIT (what Node alone would run).
 */
import { z } from 'zod';

export const zodJit = process.env.WRIT_BENCH_ZOD_JIT === '1';
if (!zodJit) z.config({ jitless: true });
