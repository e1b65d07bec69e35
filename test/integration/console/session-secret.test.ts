/**
 * The console's cookie key is derived from `WRIT_ADMIN_TOKEN`. A secret that tenant creation
 * refuses as guessable (the `.dev.vars.example` value, a placeholder, a repeated block) must not
 * key the console either: anyone who knows it could open a stolen session cookie (the approver's
 * API key, for good) or mint one.
 */
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { app } from '../../../src/http/app.js';
import { sealSession } from '../../../src/http/console/session.js';
import { ADMIN_TOKEN } from '../platform/harness.js';
// The example file, as shipped (vitest's `?raw` import).
import devVarsExample from '../../../.dev.vars.example?raw';

async function signInFormWith(configured: string): Promise<number> {
  const res = await app.request('/console/sign-in', {}, { ...env, WRIT_ADMIN_TOKEN: configured });
  await res.arrayBuffer();
  return res.status;
}

describe('the console session secret', () => {
  it('a guessable WRIT_ADMIN_TOKEN of 32+ characters disables the console, as it disables tenant creation', async () => {
    const example = (/^WRIT_ADMIN_TOKEN=(.+)$/m.exec(devVarsExample)?.[1] ?? '').trim();
    expect(example.length).toBeGreaterThanOrEqual(32);
    for (const weak of [
      example,
      'my-admin-token-change-me-before-deploying',
      'abcdefghabcdefghabcdefghabcdefgh',
      'aaaaaaaaaaaaaaaaaaaaaaaaaaabcdefgh',
    ]) {
      expect(await signInFormWith(weak), weak).toBe(500);
      await expect(
        sealSession({ ...env, WRIT_ADMIN_TOKEN: weak }, { v: 1, k: null, c: 'a'.repeat(43), exp: 1 }),
        weak,
      ).rejects.toThrow();
    }
    // The configured test token keys it as before.
    expect(await signInFormWith(ADMIN_TOKEN)).toBe(200);
  });
});
