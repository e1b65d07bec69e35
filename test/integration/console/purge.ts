/**
 * A tenant with the irreversible `purge_deployment` contract pinned, the agent granted it, and a
 * second approver (the seeded approver is the first): the setup of the two-approver tests.
 */
import { expect } from 'vitest';
import { PURGE_CONTRACT, type Seeded } from '../../../scripts/seed.js';
import { call, seedTenant } from '../platform/harness.js';

export interface Purge {
  readonly s: Seeded;
  readonly contract: string;
  /** The agent's grant of the irreversible tool (named, so a denial reports its violations). */
  readonly grant_id: string;
  /** A second approver (the seeded one is the first). */
  readonly second: { readonly principal_id: string; readonly api_key: string };
}

/** A tenant with the irreversible contract pinned, the agent granted it, and two approvers. */
export async function purgeTenant(name = 'two'): Promise<Purge> {
  const s = await seedTenant(name);
  const pinned = await call('POST', '/v1/contracts', { key: s.admin.api_key, body: PURGE_CONTRACT });
  expect(pinned.status).toBe(201);
  const scope = [{ type: 'deployment', attributes: { environment: ['production'], service: ['api'] } }];
  const grant = await call('POST', '/v1/grants', {
    key: s.admin.api_key,
    body: {
      principal_id: s.agent.principal_id,
      allowed_tools: ['purge_deployment'],
      allowed_effects: ['irreversible'],
      capabilities: [
        { capability: 'deployment:read', resources: scope },
        { capability: 'deployment:rollback', resources: scope },
      ],
      expires_at_unix_ms: Date.now() + 600_000,
    },
  });
  expect(grant.status).toBe(201);
  const second = await call('POST', '/v1/principals', {
    key: s.admin.api_key,
    body: { name: 'second-approver', roles: ['approver'] },
  });
  expect(second.status).toBe(201);
  return {
    s,
    contract: pinned.body.tool_contract_sha256 as string,
    grant_id: grant.body.grant_id as string,
    second: { principal_id: second.body.principal_id, api_key: second.body.api_key },
  };
}
