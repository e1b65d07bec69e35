/**
 * Issue 9, finding 2: the example admin token in `.dev.vars.example` passed the length check.
 * A configured token that is an example value, a placeholder or guessable admits nothing.
 */
import { env } from 'cloudflare:workers';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { adminTokenProblem, EXAMPLE_ADMIN_TOKENS } from '../../../src/http/admin-token.js';
import { app } from '../../../src/http/app.js';
import { ADMIN_TOKEN, uniqueName } from '../platform/harness.js';
// The example file, as shipped (vitest's `?raw` import).
import devVarsExample from '../../../.dev.vars.example?raw';

/** `POST /v1/tenants` against a Worker configured with `configured` as its admin token. */
async function createTenantWith(configured: string): Promise<number> {
  const res = await app.request(
    '/v1/tenants',
    {
      method: 'POST',
      headers: { authorization: `Bearer ${configured}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: uniqueName('tok') }),
    },
    { ...env, WRIT_ADMIN_TOKEN: configured },
  );
  await res.arrayBuffer();
  return res.status;
}

describe('the platform admin token', () => {
  it('the value in .dev.vars.example is refused, even when presented exactly', async () => {
    const m = /^WRIT_ADMIN_TOKEN=(.+)$/m.exec(devVarsExample);
    const example = (m?.[1] ?? '').trim();
    expect(example.length).toBeGreaterThanOrEqual(32);
    expect(EXAMPLE_ADMIN_TOKENS.has(example)).toBe(true);
    expect(await createTenantWith(example)).toBe(401);
  });

  it('placeholders, repeated blocks and low-entropy tokens of 32+ characters are refused', async () => {
    const weak: [string, string][] = [
      ['my-admin-token-change-me-before-deploying', 'placeholder'],
      ['REPLACE_ME_REPLACE_ME_REPLACE_ME_0', 'placeholder'],
      ['passwordpasswordpasswordpassword1', 'placeholder'],
      ['abcdefghabcdefghabcdefghabcdefgh', 'repeated'],
      ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab', 'few_distinct_characters'],
      ['aaaaaaaaaaaaaaaaaaaaaaaaaaabcdefgh', 'low_entropy'],
      ['0123456789abcde', 'too_short'],
    ];
    for (const [token, problem] of weak) {
      expect(adminTokenProblem(token), token).toBe(problem);
      expect(await createTenantWith(token), token).toBe(401);
    }
  });

  it('random tokens (as npm run dev and openssl make them) and the test token are accepted', async () => {
    // 128-bit tokens, the shortest accepted length: seeded, so the run is deterministic.
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (bytes) => {
        const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
        expect(adminTokenProblem(hex), hex).toBeNull();
      }),
      { seed: 0x9a7, numRuns: 500 },
    );
    expect(adminTokenProblem(ADMIN_TOKEN)).toBeNull();
    expect(await createTenantWith(ADMIN_TOKEN)).toBe(201);
  });
});
