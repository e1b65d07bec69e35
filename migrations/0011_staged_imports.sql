-- Hand-written (bigimport, issue 10): a tenant import larger than one D1 batch. The rows are
-- written in bounded chunks while the tenant stays invisible, and one last batch makes it live
-- (src/db/tenant-rows.ts, docs/scaling.md "Moving a tenant"). Applies on top of 0008; touches no
-- table or trigger of an earlier migration.
--
-- One row per import in progress on this shard. While it exists the tenant is staged: its
-- principals wait in `tenant_import_principals` (so no API key reaches it), the directory does
-- not point here, and retention skips it. `rows_done` counts the export's lines written so far.
CREATE TABLE `tenant_imports` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`file_sha256` text NOT NULL,
	`rows_total` integer NOT NULL CHECK (`rows_total` > 0),
	`rows_done` integer NOT NULL DEFAULT 0 CHECK (`rows_done` >= 0 AND `rows_done` <= `rows_total`),
	`started_at_unix_ms` integer NOT NULL,
	`updated_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
-- The staged tenant's principals: the columns of `principals`, with no key index and no
-- immutability triggers, so a retried import can give each live principal a new key before the
-- last batch copies them into `principals`. `key_sha256` NULL means "not keyed yet": the copy
-- into `principals` (NOT NULL) then fails and nothing goes live.
CREATE TABLE `tenant_import_principals` (
	`principal_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`roles` text NOT NULL,
	`executor_release` text,
	`key_sha256` text,
	`created_by` text,
	`created_at_unix_ms` integer NOT NULL,
	`revoked_at_unix_ms` integer
);
--> statement-breakpoint
CREATE INDEX `tenant_import_principals_tenant` ON `tenant_import_principals` (`tenant_id`);
--> statement-breakpoint
-- Never holds a row: each chunk's batch first inserts into it when the import's progress is not
-- the one the chunk was cut against, and this trigger then aborts the whole batch. So two
-- importers of one file never both write a chunk, and nothing is written for an import that has
-- finished or never started.
CREATE TABLE `tenant_import_guard` (
	`tenant_id` text NOT NULL
);
--> statement-breakpoint
CREATE TRIGGER `tenant_import_guard_refuses` BEFORE INSERT ON `tenant_import_guard`
BEGIN SELECT RAISE(ABORT, 'import_progress_moved'); END;
