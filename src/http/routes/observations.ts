/**
 * `POST /v1/observations` (executor of the contract's release): a raw observation in, its
 * receipt out (src/services/observations.ts). Accepted: 201 (200 when it replays a recorded
 * one), with the evidence, whose authority is only ever `untrusted_evidence_only`; rejected: 403
 * with every violation.
 *
 * Body: `{ "kind": "output", "observation": RawToolObservation }` for the output of a verified
 * success, or `{ "kind": "error", "observation": RawToolErrorObservation }` for the diagnostics
 * of a verified no-effect failure.
 */
import { Hono } from 'hono';
import { ROLES_FOR } from '../../services/context.js';
import { ObservationBody, observe } from '../../services/observations.js';
import { requireRole } from '../auth.js';
import { readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const observationRoutes = new Hono<AppEnv>();

observationRoutes.post('/observations', requireRole(ROLES_FOR.observe), async (c) => {
  const body = await readJson(c, ObservationBody);
  const { replayed, ...answer } = await observe(c.var.tenant, body);
  return c.json(answer, answer.decision === 'rejected' ? 403 : replayed ? 200 : 201);
});
