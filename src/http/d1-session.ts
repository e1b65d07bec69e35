/**
 * One D1 session per request (read replication), and its bookmark in `Writ-D1-Bookmark`.
 *
 * `GET /v1/...` and `POST /v1/authorize` (and the doors' authorizations: MCP, AuthZEN's single
 * evaluation, Docker's `before`) start near the caller: their first read may be served
 * by the nearest replica, at least as fresh as the bookmark the client sent back, so a client
 * reads its own writes. Every other request starts at the primary. Writes always go to the
 * primary. Each response carries the newest bookmark of the request's sessions.
 *
 * Guarantees: a bookmark header that is longer than `MAX_BOOKMARK_LENGTH` or not of D1's shape
 * is a 400 `invalid_request` before any storage is touched; a bookmark only ever asks for a read
 * at least as fresh as it (never older than an unconstrained session), so it cannot undo a
 * revocation: authorization's guards run in its write batch, at the primary.
 * Never: starts a write route's session from a client's bookmark, or logs the bookmark.
 */
import { createMiddleware } from 'hono/factory';
import { isBookmark, openD1Sessions, type SessionStart } from '../db/client.js';
import { ServiceError } from '../services/errors.js';
import type { AppEnv } from './env.js';

export const BOOKMARK_HEADER = 'writ-d1-bookmark';

/**
 * The standard doors' authorizations (issue 12), read near the caller as `POST /v1/authorize` is:
 * the same service, the same guards at commit (src/services/tool-call.ts).
 */
const DOOR_AUTHORIZE =
  /^(?:\/mcp\/v1\/authorize|\/docker-mcp\/v1\/before|(?:\/t\/[^/]+)?\/access\/v1\/evaluation)$/;

/** Routes whose reads may be served by a replica: reads, and authorize (guarded at commit). */
function readsNearCaller(method: string, path: string): boolean {
  if (method === 'GET') return path.startsWith('/v1/');
  return method === 'POST' && (path === '/v1/authorize' || DOOR_AUTHORIZE.test(path));
}

export const d1Session = createMiddleware<AppEnv>(async (c, next) => {
  const sent = c.req.header(BOOKMARK_HEADER);
  // A client that sends a malformed bookmark has a bug to see, not a silently stale read.
  if (sent !== undefined && !isBookmark(sent)) {
    throw new ServiceError('invalid_request', `${BOOKMARK_HEADER} is not a d1 bookmark`);
  }
  const start: SessionStart = readsNearCaller(c.req.method, c.req.path)
    ? { at: 'nearest', bookmark: sent ?? null }
    : { at: 'primary' };
  const sessions = openD1Sessions(c.env, start);
  c.env = sessions.env;
  await next();
  const bookmark = sessions.bookmark();
  if (bookmark !== null) c.header(BOOKMARK_HEADER, bookmark);
});
