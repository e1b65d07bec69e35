/**
 * What every tenant-scoped service call receives: the authenticated caller, that tenant's store,
 * the operations port, the one clock reading of the request, and a log sink for ids and digests.
 *
 * Guarantees: `caller` comes only from the API key and trusted storage; `now` is read once per
 * request by the door; nothing authority-bearing comes from a request body.
 */
import type { Role } from '../core/identity/identity.js';
import type { ClassifierPort, OperationsPort, TenantStore } from './ports.js';
import { ServiceError } from './errors.js';

/** The caller as established from its API key and trusted storage. */
export interface Caller {
  readonly principal_id: string;
  readonly tenant_id: string;
  readonly roles: readonly Role[];
  /** Set for executors: the executor release this principal runs. */
  readonly executor_release: string | null;
}

/** Digests and ids for the request log line. Never raw arguments. */
export type LogFields = Record<string, string | number | boolean | null>;

export interface TenantContext {
  readonly caller: Caller;
  readonly store: TenantStore;
  readonly operations: OperationsPort;
  /** The D1 shard holding the tenant (from the caller's key): keys minted for it name this shard. */
  readonly shard: number;
  /** Read once when the request arrived: every decision in the request uses this instant. */
  readonly now: number;
  readonly log: (fields: LogFields) => void;
  /** The tenant's optional observation classifier; absent means none can be reached. */
  readonly classifier?: ClassifierPort;
}

/** `forbidden_role` unless the caller holds one of `roles`. Every door's check and the service's. */
export function requireRole(caller: Caller, roles: readonly Role[]): void {
  if (!caller.roles.some((r) => roles.includes(r))) {
    throw new ServiceError('forbidden_role', `requires role ${roles.map((r) => `"${r}"`).join(' or ')}`);
  }
}

/**
 * A tenant or principal named in a body is checked against the authenticated caller and a
 * mismatch is refused: it is never used to select whose authority applies (confused deputy).
 */
export function assertNamedIdentity(
  caller: Caller,
  named: { readonly tenant_id?: string | undefined; readonly principal_id?: string | undefined },
): void {
  if (named.tenant_id !== undefined && named.tenant_id !== caller.tenant_id) {
    throw new ServiceError('tenant_mismatch', 'tenant_id does not match the authenticated tenant');
  }
  if (named.principal_id !== undefined && named.principal_id !== caller.principal_id) {
    throw new ServiceError('principal_mismatch', 'principal_id does not match the authenticated principal');
  }
}

/** The roles each use case admits; doors check them before reading a body, services again. */
export const ROLES_FOR = {
  authorize: ['agent'],
  requestApproval: ['agent'],
  listApprovals: ['approver', 'tenant_admin'],
  readApproval: ['approver', 'tenant_admin', 'agent'],
  decideApproval: ['approver'],
  createRun: ['agent'],
  readRun: ['agent', 'tenant_admin'],
  claim: ['executor'],
  report: ['executor'],
  reconcile: ['executor', 'tenant_admin'],
  readOperations: ['tenant_admin', 'executor'],
  observe: ['executor'],
  admin: ['tenant_admin'],
} as const satisfies Record<string, readonly Role[]>;
