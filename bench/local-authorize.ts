/**
 * What the `wrangler dev` benches (bench:http, bench:log) share: autocannon's typed entry point
 * and a seeded demo tenant ready to authorize the read-only contract repeatedly (an approval is
 * single use, so a write could not be repeated; the run budget is raised so every call is
 * authorized). Traffic goes to 127.0.0.1 only.
 */
import { createRequire } from 'node:module';
import { DEMO_POLICY, seedDemo } from '../scripts/seed.js';

export interface AutocannonOptions {
  url: string;
  connections: number;
  duration: number;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}
export interface Histogram {
  average: number;
  p50: number;
  p99: number;
  total: number;
}
export interface AutocannonResult {
  requests: Histogram;
  latency: Histogram;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
}
// autocannon ships no type declarations; this is the part of its API the benches use.
export const autocannon = createRequire(import.meta.url)('autocannon') as (
  o: AutocannonOptions,
) => Promise<AutocannonResult>;

/** A seeded local Worker's agent: its request headers and one authorize body, probed once. */
export interface AuthorizeTarget {
  readonly agent: Record<string, string>;
  readonly body: string;
}

/**
 * Seeds a demo tenant on the Worker at `baseUrl`, opens a run for it, and checks that one
 * authorize call with the returned body is answered 200 (a bench over failures measures nothing).
 */
export async function seedAuthorizeTarget(baseUrl: string, adminToken: string): Promise<AuthorizeTarget> {
  const policy = {
    ...DEMO_POLICY,
    run_budget_limits: { ...DEMO_POLICY.run_budget_limits, max_calls: 100_000 },
  };
  const s = await seedDemo({ baseUrl, adminToken, fetch, now: Date.now(), name: 'bench', policy });
  const agent = { authorization: `Bearer ${s.agent.api_key}`, 'content-type': 'application/json' };
  const runRes = await fetch(`${baseUrl}/v1/runs`, {
    method: 'POST',
    headers: agent,
    body: JSON.stringify({ max_calls: 100_000, max_external_writes: 0, max_duration_ms: 3_600_000 }),
  });
  const run = (await runRes.json()) as { run_id: string };
  const body = JSON.stringify({
    tool_contract_sha256: s.read_contract_sha256,
    input: { service: 'api', environment: 'production' },
    run_id: run.run_id,
  });
  const probe = await fetch(`${baseUrl}/v1/authorize`, { method: 'POST', headers: agent, body });
  if (probe.status !== 200)
    throw new Error(`authorize probe answered ${probe.status}: ${await probe.text()}`);
  return { agent, body };
}
