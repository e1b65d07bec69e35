/**
 * `GET /v1/receipts/{sha256}`: any receipt of the caller's tenant, with the evidence it was
 * computed from; authorization receipts are replayed on read (src/services/receipts.ts).
 */
import { Hono } from 'hono';
import { getReceipt } from '../../services/receipts.js';
import type { AppEnv } from '../env.js';

export const receiptRoutes = new Hono<AppEnv>();

receiptRoutes.get('/receipts/:sha256', async (c) =>
  c.json(await getReceipt(c.var.tenant, c.req.param('sha256'))),
);
