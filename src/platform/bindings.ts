/**
 * Cloudflare bindings to service ports: the one place that knows which D1 database holds a
 * tenant and how an operation's Durable Object is named. Doors (HTTP, and later MCP, AuthZEN,
 * the console) open their ports here and hand them to the services.
 */
import { operationStub } from '../../durable-objects/idempotency.js';
import { database } from '../db/client.js';
import { d1PlatformStore } from '../db/platform-store.js';
import { d1TenantStore } from '../db/tenant-store.js';
import type { OperationsPort, PlatformStore, TenantStore } from '../services/ports.js';

export function platformStore(env: Env): PlatformStore {
  return d1PlatformStore(database(env));
}

export function tenantStore(env: Env, tenant_id: string): TenantStore {
  return d1TenantStore(database(env), tenant_id);
}

export function operationsPort(env: Env): OperationsPort {
  return {
    claim: (req) => operationStub(env, req.operation_id).claim(req),
    report: (id, req) => operationStub(env, id).report(req),
    reconcile: (id, req) => operationStub(env, id).reconcile(req),
    read: (id, tenant_id) => operationStub(env, id).read(tenant_id),
  };
}
