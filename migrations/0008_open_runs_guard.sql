-- Hand-written (hardening, issue 9): the open-run cap's count goes through its own index.
-- `POST /v1/runs` inserts a run only when the principal holds fewer open runs than the policy's
-- cap, counted in the same statement (src/db/tenant-store.ts `insertRun`); this index bounds
-- that count to the principal's runs whose deadline has not passed.
CREATE INDEX `runs_principal_open` ON `runs` (`tenant_id`,`principal_id`,`deadline_unix_ms`);
--> statement-breakpoint
-- `GET /v1/operations` pages newest first (`updated_at_unix_ms`, then `operation_id`), with or
-- without a state filter: both orders come from an index, so a page reads `limit` rows instead
-- of sorting the tenant's whole history.
CREATE INDEX `operations_recent` ON `operations` (`tenant_id`,`updated_at_unix_ms`,`operation_id`);
--> statement-breakpoint
CREATE INDEX `operations_state_recent` ON `operations` (`tenant_id`,`state`,`updated_at_unix_ms`,`operation_id`);
