-- Hand-written (hardening, issue 9): the open-run cap's count goes through its own index.
-- `POST /v1/runs` inserts a run only when the principal holds fewer open runs than the policy's
-- cap, counted in the same statement (src/db/tenant-store.ts `insertRun`); this index bounds
-- that count to the principal's runs whose deadline has not passed.
CREATE INDEX `runs_principal_open` ON `runs` (`tenant_id`,`principal_id`,`deadline_unix_ms`);
