/**
 * Issue 11, signed receipts and the tenant's transparency log (src/services/log.ts):
 * `GET /v1/log/checkpoint` (C2SP signed note, text), `GET /v1/log/tile/...` (C2SP tlog-tiles
 * paths: Merkle tiles and entry bundles, binary), `GET /v1/log/consistency?from=&to=`,
 * `GET /v1/receipts/{sha256}/proof` (C2SP tlog-proof with its checkpoint) and
 * `GET /v1/receipts/{sha256}/bundle` (the offline bundle `writ verify` reads). Any authenticated
 * principal of the tenant may read them, as it may read the tenant's receipts.
 *
 * `GET /v1/log/publication` (any principal) and `PUT /v1/log/publication` (tenant admin): whether
 * the log is also served without a key at `/log/<tenant_id>/` (src/http/routes/public-log.ts).
 *
 * `GET /v1/log/witnesses` (any principal) and `PUT /v1/log/witnesses` (tenant admin): the C2SP
 * tlog-witness witnesses the log submits its checkpoints to (docs/transparency-log.md, "Witnesses").
 */
import { Hono } from 'hono';
import { keysPort, receiptLogPort } from '../../platform/bindings.js';
import { ROLES_FOR } from '../../services/context.js';
import {
  SetPublicationRequest,
  SetWitnessesRequest,
  logCheckpoint,
  logConsistency,
  logPublication,
  logTile,
  receiptBundle,
  receiptProof,
  setLogPublication,
  setLogWitnesses,
  logWitnesses,
} from '../../services/log.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const logRoutes = new Hono<AppEnv>();

const TILE_PREFIX = '/v1/log/';

logRoutes.get('/log/checkpoint', async (c) => {
  const cp = await logCheckpoint(c.var.tenant, receiptLogPort(c.env, c.var.tenant.caller.tenant_id));
  c.header('cache-control', 'no-store');
  return c.text(cp.checkpoint);
});

logRoutes.get('/log/tile/*', async (c) => {
  const path = c.req.path.startsWith(TILE_PREFIX) ? c.req.path.slice(TILE_PREFIX.length) : '';
  const bytes = await logTile(c.var.tenant, receiptLogPort(c.env, c.var.tenant.caller.tenant_id), path);
  // A tile path always carries the same bytes (C2SP tlog-tiles): cacheable for as long as any.
  c.header('content-type', 'application/octet-stream');
  c.header('cache-control', 'private, max-age=31536000, immutable');
  return c.body(bytes.slice().buffer);
});

logRoutes.get('/log/consistency', async (c) =>
  c.json(
    await logConsistency(
      c.var.tenant,
      receiptLogPort(c.env, c.var.tenant.caller.tenant_id),
      c.req.query('from'),
      c.req.query('to'),
    ),
  ),
);

logRoutes.get('/receipts/:sha256/proof', async (c) =>
  c.json(
    await receiptProof(
      c.var.tenant,
      receiptLogPort(c.env, c.var.tenant.caller.tenant_id),
      c.req.param('sha256'),
    ),
  ),
);

logRoutes.get('/receipts/:sha256/bundle', async (c) =>
  c.json(
    await receiptBundle(
      c.var.tenant,
      receiptLogPort(c.env, c.var.tenant.caller.tenant_id),
      keysPort(c.env),
      c.req.param('sha256'),
    ),
  ),
);

logRoutes.get('/log/publication', async (c) =>
  c.json(
    await logPublication(c.var.tenant, receiptLogPort(c.env, c.var.tenant.caller.tenant_id), keysPort(c.env)),
  ),
);

logRoutes.put('/log/publication', requireRole(ROLES_FOR.admin), async (c) =>
  c.json(
    await setLogPublication(
      c.var.tenant,
      receiptLogPort(c.env, c.var.tenant.caller.tenant_id),
      keysPort(c.env),
      await readJson(c, SetPublicationRequest),
    ),
  ),
);

logRoutes.get('/log/witnesses', async (c) =>
  c.json(await logWitnesses(c.var.tenant, receiptLogPort(c.env, c.var.tenant.caller.tenant_id))),
);

/** Development only (`.dev.vars`): a witness may be plain http on a loopback host. */
const allowLoopbackHttp = (env: unknown): boolean =>
  (env as { WRIT_WITNESS_HTTP_LOOPBACK?: string }).WRIT_WITNESS_HTTP_LOOPBACK === 'true';

logRoutes.put('/log/witnesses', requireRole(ROLES_FOR.admin), async (c) =>
  c.json(
    await setLogWitnesses(
      c.var.tenant,
      receiptLogPort(c.env, c.var.tenant.caller.tenant_id),
      await readJson(c, SetWitnessesRequest),
      allowLoopbackHttp(c.env),
    ),
  ),
);
