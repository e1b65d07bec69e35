-- Hand-written (importabort, issue 10): abort a staged import, and finish an import that went
-- live but whose directory write failed (src/db/tenant-rows.ts, docs/scaling.md "Moving a
-- tenant"). Applies on top of 0012: it adds a column to `tenant_imports` (0011), a table, and
-- replaces the delete guards of the append-only tables and the principals' key guard with ones
-- that have a single, named exception each; no other table or trigger is touched.
--
-- 1. Abort. A staged import is `staged` or `aborting`. The abort marks it `aborting` first (one
-- statement); from then on every chunk, key and flip batch of that import aborts (their guard
-- reads `state`, and the triggers below refuse them even without it), and the abort deletes the
-- tenant's rows on this shard in bounded batches, the quota row and the mark last.
ALTER TABLE `tenant_imports` ADD `state` text DEFAULT 'staged' NOT NULL CHECK (`state` IN ('staged', 'aborting'));
--> statement-breakpoint
-- An aborting import is final: no progress (a chunk's batch moves `rows_done`), no way back to staged.
CREATE TRIGGER `tenant_imports_aborting_final` BEFORE UPDATE ON `tenant_imports`
WHEN OLD.`state` = 'aborting'
BEGIN SELECT RAISE(ABORT, 'import_progress_moved'); END;
--> statement-breakpoint
-- The flip removes the mark while the quota row stays; an abort removes the quota row first. So a
-- flip of an aborting import aborts (a half-deleted tenant never goes live).
CREATE TRIGGER `tenant_imports_aborting_not_live` BEFORE DELETE ON `tenant_imports`
WHEN OLD.`state` = 'aborting' AND EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = OLD.`tenant_id`)
BEGIN SELECT RAISE(ABORT, 'import_progress_moved'); END;
--> statement-breakpoint
-- A mark opens only for a tenant with no rows here (the import's first batch writes the mark
-- before the quota row). So a live tenant, or a frozen copy, never has a mark, and the exception
-- below never reaches its rows.
CREATE TRIGGER `tenant_imports_only_new` BEFORE INSERT ON `tenant_imports`
WHEN EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
  OR EXISTS (SELECT 1 FROM `tenants` t WHERE t.`tenant_id` = NEW.`tenant_id`)
BEGIN SELECT RAISE(ABORT, 'import_tenant_exists'); END;
--> statement-breakpoint
-- The append-only tables (0001, 0004, 0005) stay append-only, with one exception: rows of a tenant
-- whose import on this shard is aborting (staged rows no key ever reached). The receipts guard
-- keeps its archive exception (0004).
DROP TRIGGER `receipts_no_delete`;
--> statement-breakpoint
CREATE TRIGGER `receipts_no_delete` BEFORE DELETE ON `receipts`
WHEN NOT EXISTS (SELECT 1 FROM `receipt_archive_entries` e WHERE e.`tenant_id` = OLD.`tenant_id` AND e.`sha256` = OLD.`sha256`)
  AND NOT EXISTS (SELECT 1 FROM `tenant_imports` i WHERE i.`tenant_id` = OLD.`tenant_id` AND i.`state` = 'aborting')
BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END;
--> statement-breakpoint
DROP TRIGGER `receipt_signatures_no_delete`;
--> statement-breakpoint
CREATE TRIGGER `receipt_signatures_no_delete` BEFORE DELETE ON `receipt_signatures`
WHEN NOT EXISTS (SELECT 1 FROM `tenant_imports` i WHERE i.`tenant_id` = OLD.`tenant_id` AND i.`state` = 'aborting')
BEGIN SELECT RAISE(ABORT, 'receipt_signature_immutable'); END;
--> statement-breakpoint
DROP TRIGGER `receipt_archives_never_deleted`;
--> statement-breakpoint
CREATE TRIGGER `receipt_archives_never_deleted` BEFORE DELETE ON `receipt_archives`
WHEN NOT EXISTS (SELECT 1 FROM `tenant_imports` i WHERE i.`tenant_id` = OLD.`tenant_id` AND i.`state` = 'aborting')
BEGIN SELECT RAISE(ABORT, 'receipt_archive_immutable'); END;
--> statement-breakpoint
DROP TRIGGER `receipt_archive_entries_never_deleted`;
--> statement-breakpoint
CREATE TRIGGER `receipt_archive_entries_never_deleted` BEFORE DELETE ON `receipt_archive_entries`
WHEN NOT EXISTS (SELECT 1 FROM `tenant_imports` i WHERE i.`tenant_id` = OLD.`tenant_id` AND i.`state` = 'aborting')
BEGIN SELECT RAISE(ABORT, 'receipt_archive_immutable'); END;
--> statement-breakpoint
DROP TRIGGER `approvals_never_deleted`;
--> statement-breakpoint
CREATE TRIGGER `approvals_never_deleted` BEFORE DELETE ON `approvals`
WHEN NOT EXISTS (SELECT 1 FROM `tenant_imports` i WHERE i.`tenant_id` = OLD.`tenant_id` AND i.`state` = 'aborting')
BEGIN SELECT RAISE(ABORT, 'approval_immutable'); END;
--> statement-breakpoint
-- 2. An import that went live on this shard whose directory write is not confirmed yet. Written
-- by the flip, in its batch (only for the import it flips), removed once the directory points
-- here. While it exists, a retry of the same file may give the tenant's live principals new keys
-- (the keys of the failed attempt were never delivered); `attempt` orders concurrent retries, so
-- only the last one's keys are kept and returned.
CREATE TABLE `tenant_imports_unrecorded` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`file_sha256` text NOT NULL,
	`attempt` integer DEFAULT 0 NOT NULL,
	`live_at_unix_ms` integer NOT NULL,
	`updated_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TRIGGER `tenant_imports_unrecorded_flip_only` BEFORE INSERT ON `tenant_imports_unrecorded`
WHEN NOT EXISTS (SELECT 1 FROM `tenant_imports` i WHERE i.`tenant_id` = NEW.`tenant_id` AND i.`file_sha256` = NEW.`file_sha256`
  AND i.`state` = 'staged' AND i.`rows_done` = i.`rows_total`)
BEGIN SELECT RAISE(ABORT, 'import_progress_moved'); END;
--> statement-breakpoint
CREATE TRIGGER `tenant_imports_unrecorded_immutable` BEFORE UPDATE OF `tenant_id`, `file_sha256` ON `tenant_imports_unrecorded`
BEGIN SELECT RAISE(ABORT, 'import_progress_moved'); END;
--> statement-breakpoint
-- A key digest still never changes (0001), with one exception: an unrevoked principal of a tenant
-- whose import here is unrecorded (re-keyed by the retry that records it).
DROP TRIGGER `principals_identity_immutable`;
--> statement-breakpoint
CREATE TRIGGER `principals_identity_immutable` BEFORE UPDATE OF `tenant_id`, `roles`, `executor_release` ON `principals`
BEGIN SELECT RAISE(ABORT, 'principal_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `principals_key_immutable` BEFORE UPDATE OF `key_sha256` ON `principals`
WHEN OLD.`revoked_at_unix_ms` IS NOT NULL
  OR NOT EXISTS (SELECT 1 FROM `tenant_imports_unrecorded` u WHERE u.`tenant_id` = OLD.`tenant_id`)
BEGIN SELECT RAISE(ABORT, 'principal_immutable'); END;
