/**
 * The tenant policy (src/services/admin.ts). `PUT` stores a new document by digest and makes it
 * the one in force, atomically; history is kept so every receipt's policy can be read back.
 */
import { Hono } from 'hono';
import { getPolicy, putPolicy } from '../../services/admin.js';
import { ROLES_FOR } from '../../services/context.js';
import { requireRole } from '../auth.js';
import { readJsonValue } from '../body.js';
import type { AppEnv } from '../env.js';

export const policyRoutes = new Hono<AppEnv>();

policyRoutes.get('/policy', async (c) => c.json(await getPolicy(c.var.tenant)));

policyRoutes.put('/policy', requireRole(ROLES_FOR.admin), async (c) =>
  c.json(await putPolicy(c.var.tenant, await readJsonValue(c))),
);
