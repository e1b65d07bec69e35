/**
 * Pinned tool contracts and contract discovery (src/services/contracts.ts). Pinning identical
 * content again is a 200 with the same digest; a new contract is a 201.
 */
import { Hono } from 'hono';
import { ROLES_FOR } from '../../services/context.js';
import {
  DiscoveryRequest,
  QuarantineRequest,
  discover,
  getContract,
  pinContract,
  quarantineContract,
} from '../../services/contracts.js';
import { requireRole } from '../auth.js';
import { readJson, readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';

export const contractRoutes = new Hono<AppEnv>();

contractRoutes.post('/contracts', requireRole(ROLES_FOR.admin), async (c) => {
  const { inserted, contract } = await pinContract(c.var.tenant, await readJsonValue(c));
  return c.json(contract, inserted ? 201 : 200);
});

contractRoutes.get('/contracts/:sha256', async (c) =>
  c.json(await getContract(c.var.tenant, c.req.param('sha256'))),
);

contractRoutes.post('/contracts/:sha256/quarantine', requireRole(ROLES_FOR.admin), async (c) => {
  const body = await readJson(c, QuarantineRequest, { allowEmpty: true });
  return c.json(await quarantineContract(c.var.tenant, c.req.param('sha256'), body));
});

contractRoutes.post('/contracts/discovery', requireRole(ROLES_FOR.admin), async (c) => {
  const body = await readJson(c, DiscoveryRequest);
  return c.json(await discover(c.var.tenant, body));
});
