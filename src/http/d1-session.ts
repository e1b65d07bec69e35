/**
 * One D1 session per request (read replication), and its bookmark in `Writ-D1-Bookmark`.
 *
 * `GET /v1/...` and `POST /v1/authorize` (and the doors' authorizations: MCP, AuthZEN's
 * evaluation and batch, Docker's `before`; and Docker's `after`, which writes nothing to D1) start
 * near the caller: their first read may be served
 * by the nearest replica, at least as fresh as the bookmark the client sent back, so a client
 * reads its own writes. Every other request starts at the primary. Writes always go to the
 * primary. Each response carries the newest bookmark of the request's sessions.
 *
 * Bookmarks name their shard (`<shard>:<bookmark>`, comma-separated when a request touched several
 * shards): a D1 bookmark is a position in one database, so a bookmark of shard A (say, kept by a
 * client across a tenant move) must never start a session on shard B. A shard the client sent no
 * bookmark for, while it sent some, starts at the primary; so does every shard for a bare bookmark
 * sent before bookmarks were qualified (its shard is unknown). Correct reads, only slower: never
 * an unconstrained, possibly stale one for a client that asked to read its writes.
 *
 * Guarantees: a bookmark header that is longer than `MAX_BOOKMARK_HEADER_LENGTH`, has more than
 * `MAX_BOOKMARKS` parts, names a shard twice or one outside `MAX_SHARDS`, or has a part not of
 * D1's shape is a 400 `invalid_request` before any storage is touched; a bookmark only ever asks
 * for a read at least as fresh as it (never older than an unconstrained session), so it cannot
 * undo a revocation: authorization's guards run in its write batch, at the primary.
 * Never: starts a write route's session from a client's bookmark, starts one shard's session from
 * another shard's bookmark, logs the bookmark, or answers one to a request refused as
 * unauthenticated.
 */
import { createMiddleware } from 'hono/factory';
import { MAX_SHARDS } from '../core/identity/identity.js';
import {
  type SessionStart,
  formatBookmarkHeader,
  openD1Sessions,
  parseBookmarkHeader,
} from '../db/client.js';
import { shardOfBindingName } from '../platform/shards.js';
import { ServiceError } from '../services/errors.js';
import type { AppEnv } from './env.js';

export const BOOKMARK_HEADER = 'writ-d1-bookmark';

/**
 * The standard doors' authorizations (issue 12), read near the caller as `POST /v1/authorize` is:
 * the same service, the same guards at commit (src/services/tool-call.ts). AuthZEN's batch is a
 * sequence of those authorizations, each guarded at its own commit. Docker's `after` writes
 * nothing to D1 (it screens a result and answers): its key lookup is its only read, and a key
 * revoked a moment ago that a lagging replica still shows can only have a result screened, as a
 * `GET` can only read (SECURITY.md).
 */
const DOOR_NEAR_CALLER =
  /^(?:\/mcp\/v1\/authorize|\/docker-mcp\/v1\/(?:before|after)|(?:\/t\/[^/]+)?\/access\/v1\/evaluations?)$/;

/**
 * Routes whose reads may be served by a replica: reads, authorize and the doors' authorizations
 * (guarded at commit), and Docker's `after` (no D1 write).
 */
function readsNearCaller(method: string, path: string): boolean {
  if (method === 'GET') return path.startsWith('/v1/');
  return method === 'POST' && (path === '/v1/authorize' || DOOR_NEAR_CALLER.test(path));
}

export const d1Session = createMiddleware<AppEnv>(async (c, next) => {
  const sent = c.req.header(BOOKMARK_HEADER);
  const parsed = sent === undefined ? null : parseBookmarkHeader(sent, MAX_SHARDS);
  // A client that sends a malformed bookmark has a bug to see, not a silently stale read.
  if (sent !== undefined && parsed === null) {
    throw new ServiceError('invalid_request', `${BOOKMARK_HEADER} is not a list of <shard>:<d1 bookmark>`);
  }
  const start: SessionStart = !readsNearCaller(c.req.method, c.req.path)
    ? { at: 'primary' }
    : {
        at: 'nearest',
        // An unqualified bookmark came from some shard, which one is unknown: an empty map sends
        // every shard to the primary.
        bookmarks: parsed === null ? null : parsed.kind === 'qualified' ? parsed.bookmarks : new Map(),
      };
  const sessions = openD1Sessions(c.env, start, shardOfBindingName);
  c.env = sessions.env;
  await next();
  const header = formatBookmarkHeader(sessions.bookmarks());
  // A bookmark is a write position of the shard: a caller that did not authenticate (a key
  // naming a shard, but no key of it) is not told how that shard's writes move.
  if (header !== null && c.res.status !== 401) c.header(BOOKMARK_HEADER, header);
});
