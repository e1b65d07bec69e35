/**
 * The Hono environment shared by every route: generated Worker bindings and per-request
 * variables. `principal`, `tenant_id` and `now` are the only sources of identity and time a route
 * may use; nothing authority-bearing is read from a request body.
 */
import type { Role } from '../core/identity/identity.js';

export type { Role } from '../core/identity/identity.js';

/** The caller as established from `Authorization: Bearer <api key>` and trusted storage. */
export interface AuthenticatedPrincipal {
  readonly principal_id: string;
  readonly tenant_id: string;
  readonly roles: readonly Role[];
  /** Set for executors: the executor release this principal runs. */
  readonly executor_release: string | null;
}

/** Digests and ids a route wants in the request log line. Never raw arguments. */
export type LogFields = Record<string, string | number | boolean | null>;

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    principal: AuthenticatedPrincipal;
    /** `Date.now()`, read once when the request arrived. */
    now: number;
    log: LogFields;
  };
};
