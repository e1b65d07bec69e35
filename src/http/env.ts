/**
 * The Hono environment shared by every route: generated Worker bindings and per-request
 * variables. `principal` and `now` are the only sources of identity and time a route may use,
 * and `tenant` is the service context built from them (src/http/auth.ts); nothing
 * authority-bearing is read from a request body.
 */
import type { Caller, LogFields, TenantContext } from '../services/context.js';

export type { Role } from '../core/identity/identity.js';
export type { LogFields } from '../services/context.js';

/** The caller as established from `Authorization: Bearer <api key>` and trusted storage. */
export type AuthenticatedPrincipal = Caller;

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    /** An inbound request id a door must echo (AuthZEN `X-Request-ID`), if any. */
    requestIdEcho?: string;
    principal: AuthenticatedPrincipal;
    /** The caller's service context: its tenant's store, the operations port, `now`, the log. */
    tenant: TenantContext;
    /** `Date.now()`, read once when the request arrived. */
    now: number;
    log: LogFields;
  };
};
