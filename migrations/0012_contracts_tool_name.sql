-- Hand-written (issue 12, the doors): a door binds a tool name to its pinned contracts in the
-- authorization's one-batch read (src/db/tenant-store.ts `authorizationStateQueries` with a
-- `tool_name` selector, and `contractsForTool`). Without this index that read searched every
-- contract of the tenant and sorted the matches; with it the read is an index search already in
-- the order it asks for (oldest pin first, digest as tie-break).
CREATE INDEX `contracts_tool_name` ON `contracts` (`tenant_id`,`tool_name`,`pinned_at_unix_ms`,`tool_contract_sha256`);
