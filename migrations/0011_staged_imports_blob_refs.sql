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
--> statement-breakpoint
-- Orphan blob collection (issue 10; src/services/blob-collection.ts, docs/storage.md "Blobs").
-- An R2 object under `sha256/<hex>` is referenced by a receipt's `evidence_sha256`, by an
-- archive's `archive_sha256`, or by a line of an archive object (an archived receipt's evidence).
-- The first two are D1 columns (indexed here for the collector's lookups); the third is copied
-- into `blob_archive_refs` by the collector, which reads each archive once. Every archive starts
-- in `blob_archives_unindexed` (the trigger below, in the archive's own batch; the backfill for
-- archives written before this migration), and the collector deletes nothing while any shard has
-- one left: an archived receipt's evidence is never taken for an orphan.
CREATE INDEX `receipts_evidence_blob` ON `receipts` (`evidence_sha256`) WHERE `evidence_sha256` IS NOT NULL;
--> statement-breakpoint
CREATE INDEX `receipt_archives_object` ON `receipt_archives` (`archive_sha256`);
--> statement-breakpoint
CREATE TABLE `blob_archive_refs` (
	`evidence_sha256` text NOT NULL,
	`archive_sha256` text NOT NULL,
	PRIMARY KEY(`evidence_sha256`, `archive_sha256`)
);
--> statement-breakpoint
CREATE TABLE `blob_archives_unindexed` (
	`archive_sha256` text PRIMARY KEY NOT NULL
);
--> statement-breakpoint
CREATE TRIGGER `receipt_archives_unindexed` AFTER INSERT ON `receipt_archives`
BEGIN INSERT OR IGNORE INTO `blob_archives_unindexed` (`archive_sha256`) VALUES (NEW.`archive_sha256`); END;
--> statement-breakpoint
INSERT OR IGNORE INTO `blob_archives_unindexed` (`archive_sha256`) SELECT `archive_sha256` FROM `receipt_archives`;
--> statement-breakpoint
-- Where the collector's walks over the bucket stand (one row, on shard 0 only): live objects
-- (`start_after`) and retired ones (`retired_after`). Each run goes on after the last key the
-- previous run looked at, and starts over at the end.
CREATE TABLE `blob_collection` (
	`id` integer PRIMARY KEY NOT NULL CHECK (`id` = 0),
	`start_after` text,
	`retired_after` text,
	`updated_at_unix_ms` integer NOT NULL
);
