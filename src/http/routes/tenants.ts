/**
 * `POST /v1/tenants` (platform admin): a tenant, its default policy and its first admin;
 * `PUT /v1/tenants/{tenant_id}/quotas` (platform admin): the tenant's storage quotas
 * (src/services/admin.ts); `POST /v1/tenants/{tenant_id}/export`, `POST /v1/tenants/import` and
 * `POST /v1/tenants/import/{tenant_id}/abort` (platform admin): move a tenant between D1 shards
 * (src/services/tenant-moves.ts); `/v1/tenants/import-uploads...` (platform admin): an export too
 * large for one request, uploaded in parts and imported from there (src/services/import-uploads.ts).
 * The platform admin can do nothing else.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { platformStore, tenantMovePort } from '../../platform/bindings.js';
import { CreateTenantRequest, SetQuotasRequest, createTenant, setQuotas } from '../../services/admin.js';
import { ServiceError } from '../../services/errors.js';
import {
  MAX_IMPORT_BYTES,
  TenantExportRequest,
  abortImport,
  exportTenantText,
  importTenant,
} from '../../services/tenant-moves.js';
import {
  CompleteUploadRequest,
  IMPORT_PART_MAX_BYTES,
  abortImportUpload,
  completeImportUpload,
  createImportUpload,
  importUpload,
  putImportPart,
} from '../../services/import-uploads.js';
import { importUploadStore } from '../../platform/bindings.js';
import { requirePlatformAdmin } from '../auth.js';
import { readBytes, readJson } from '../body.js';
import type { AppEnv } from '../env.js';

export const tenantRoutes = new Hono<AppEnv>();

tenantRoutes.post('/tenants', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, CreateTenantRequest);
  const created = await createTenant(platformStore(c.env), body, c.var.now, (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(created, 201);
});

tenantRoutes.put('/tenants/:tenant_id/quotas', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, SetQuotasRequest);
  const set = await setQuotas(platformStore(c.env), c.req.param('tenant_id'), body, c.var.now, (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(set);
});

// ---------------------------------------------------------------------------------------------
// Shards: moving a tenant (docs/scaling.md, "Shards")

export const NDJSON = 'application/x-ndjson';

const EmptyRequest = z.strictObject({});

tenantRoutes.post('/tenants/:tenant_id/export', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, TenantExportRequest, { allowEmpty: true });
  const exported = await exportTenantText(
    tenantMovePort(c.env),
    c.req.param('tenant_id'),
    body,
    c.var.now,
    (fields) => c.set('log', { ...c.var.log, ...fields }),
  );
  const headers: Record<string, string> = { 'content-type': NDJSON };
  // A segment says whether it is the last; a client that stops early has no complete file.
  if (exported.segmented) headers['writ-export-complete'] = exported.next === null ? 'true' : 'false';
  if (exported.next !== null) headers['writ-export-next'] = exported.next;
  return new Response(exported.text, { status: 200, headers });
});

tenantRoutes.post('/tenants/import', requirePlatformAdmin, async (c) => {
  const shard = shardParam(c.req.query('shard'));
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/x-ndjson\s*(;|$)/i.test(type)) {
    throw new ServiceError('unsupported_media_type', `content-type must be ${NDJSON}`);
  }
  const bytes = await readBytes(c, MAX_IMPORT_BYTES);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ServiceError('malformed_json', 'the export is not valid UTF-8');
  }
  const imported = await importTenant(tenantMovePort(c.env), shard, text, c.var.now, (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(imported, 201);
});

function shardParam(shard: string | undefined): number {
  if (shard === undefined || !/^(0|[1-9][0-9]{0,3})$/.test(shard)) {
    throw new ServiceError('invalid_request', 'query parameter shard must be a shard number');
  }
  return Number(shard);
}

// Abort a staged import that will not be finished (docs/scaling.md, "Moving a tenant").
tenantRoutes.post('/tenants/import/:tenant_id/abort', requirePlatformAdmin, async (c) => {
  const aborted = await abortImport(
    tenantMovePort(c.env),
    shardParam(c.req.query('shard')),
    c.req.param('tenant_id'),
    c.var.now,
    (fields) => c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(aborted);
});

// ---------------------------------------------------------------------------------------------
// An export larger than one request: uploaded in parts to R2, imported from there
// (docs/scaling.md, "Moving a tenant larger than one request")

tenantRoutes.post('/tenants/import-uploads', requirePlatformAdmin, async (c) => {
  await readJson(c, EmptyRequest, { allowEmpty: true });
  const created = await createImportUpload(importUploadStore(c.env), c.var.now, (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(created, 201);
});

tenantRoutes.put('/tenants/import-uploads/:upload_id/parts/:part_number', requirePlatformAdmin, async (c) => {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/octet-stream\s*(;|$)/i.test(type)) {
    throw new ServiceError('unsupported_media_type', 'content-type must be application/octet-stream');
  }
  const bytes = await readBytes(c, IMPORT_PART_MAX_BYTES);
  const part = await putImportPart(
    importUploadStore(c.env),
    c.req.param('upload_id'),
    c.req.param('part_number'),
    bytes,
    (fields) => c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(part);
});

tenantRoutes.post('/tenants/import-uploads/:upload_id/complete', requirePlatformAdmin, async (c) => {
  const body = await readJson(c, CompleteUploadRequest);
  const completed = await completeImportUpload(
    importUploadStore(c.env),
    c.req.param('upload_id'),
    body,
    (fields) => c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(completed);
});

tenantRoutes.post('/tenants/import-uploads/:upload_id/abort', requirePlatformAdmin, async (c) => {
  await readJson(c, EmptyRequest, { allowEmpty: true });
  const aborted = await abortImportUpload(importUploadStore(c.env), c.req.param('upload_id'), (fields) =>
    c.set('log', { ...c.var.log, ...fields }),
  );
  return c.json(aborted);
});

tenantRoutes.post('/tenants/import-uploads/:upload_id/import', requirePlatformAdmin, async (c) => {
  const shard = shardParam(c.req.query('shard'));
  await readJson(c, EmptyRequest, { allowEmpty: true });
  const imported = await importUpload(
    tenantMovePort(c.env),
    importUploadStore(c.env),
    shard,
    c.req.param('upload_id'),
    c.var.now,
    (fields) => c.set('log', { ...c.var.log, ...fields }),
  );
  // Live: the new keys (201). Stopped at this call's budget: how far it got (202, call again).
  return 'keys' in imported ? c.json(imported, 201) : c.json(imported, 202);
});
