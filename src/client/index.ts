/**
 * `writ/client`: the typed Writ client (package entry point, `"exports": { "./client": ... }`).
 * Runs in Node, browsers and Workers; see docs/client.md.
 */
export * from './client.js';
export { WritApiError, WritGaveUpError, type WireIssue } from './errors.js';
export type { paths, components, operations } from './schema.js';
