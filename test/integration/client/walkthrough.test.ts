/**
 * The README's TypeScript walkthrough (examples/walkthrough.ts), run as is against the Worker
 * with a freshly seeded tenant: the same code a user runs against `npm run dev`.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { runWalkthrough } from '../../../examples/walkthrough.js';
import { BASE, seedTenant } from '../platform/harness.js';

describe('examples/walkthrough.ts against the Worker', () => {
  it('runs the rollback end to end: authorized, verified, replayed, output admitted as untrusted evidence', async () => {
    const s = await seedTenant('walk');
    const lines: string[] = [];
    const result = await runWalkthrough(
      {
        WRIT: BASE,
        AGENT_KEY: s.agent.api_key,
        APPROVER_KEY: s.approver.api_key,
        EXECUTOR_KEY: s.executor.api_key,
        CONTRACT: s.rollback_contract_sha256,
        TENANT_ID: s.tenant_id,
      },
      { fetch: (request) => exports.default.fetch(request), log: (l) => lines.push(l), suffix: 'test-0001' },
    );
    expect(result).toMatchObject({
      decision: 'authorized',
      execution_status: 'verified_succeeded',
      second_claim: 'replayed',
      observation_decision: 'accepted_untrusted_evidence',
      replay_ok: true,
    });
    expect(result.observation_signals).toContain('instruction_like_text');
    const narration = lines.join('\n');
    for (const key of [s.agent.api_key, s.approver.api_key, s.executor.api_key])
      expect(narration).not.toContain(key);
  });
});
