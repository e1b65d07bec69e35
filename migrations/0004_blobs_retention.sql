-- Bounded D1 (issue 10): large evidence held in R2 by digest, a compact receipt encoding, and
-- retention (receipts older than a tenant's window move to R2 archives). Applies on top of 0002
-- whatever other migrations exist: new columns and tables only, plus the receipts delete guard.
--
-- receipt_encoding: 1 = canonical `{sha256, body}` (every row written before 0004); 2 = the
-- canonical body without `tenant_id` and `principal_id`, which the row's columns hold (the reader
-- puts them back and re-hashes against `sha256`). Neither changes what any receipt binds.
ALTER TABLE `receipts` ADD `receipt_encoding` integer DEFAULT 1 NOT NULL;
--> statement-breakpoint
-- Evidence too large for a row lives in R2 under `sha256/<evidence_sha256>` (then `evidence` is NULL).
ALTER TABLE `receipts` ADD `evidence_sha256` text;
--> statement-breakpoint
ALTER TABLE `receipts` ADD `evidence_bytes` integer;
--> statement-breakpoint
-- Retention finds a tenant's oldest receipts by time across kinds (`receipts_kind` leads with kind).
CREATE INDEX `receipts_created` ON `receipts` (`tenant_id`,`created_at_unix_ms`);
--> statement-breakpoint
-- Days a receipt stays in D1 before it moves to an R2 archive (platform admin setting).
ALTER TABLE `tenant_quotas` ADD `receipt_retention_days` integer DEFAULT 90 NOT NULL;
--> statement-breakpoint
-- One archive object (canonical JSON lines of receipt rows of one tenant and one UTC day) in R2
-- under `sha256/<archive_sha256>`. Written before any row it holds may be deleted.
CREATE TABLE `receipt_archives` (
	`tenant_id` text NOT NULL,
	`archive_sha256` text NOT NULL,
	`day` integer NOT NULL,
	`receipts` integer NOT NULL,
	`bytes` integer NOT NULL,
	`created_at_unix_ms` integer NOT NULL,
	PRIMARY KEY(`tenant_id`, `archive_sha256`)
);
--> statement-breakpoint
CREATE INDEX `receipt_archives_day` ON `receipt_archives` (`tenant_id`,`day`);
--> statement-breakpoint
-- Which archive holds an archived receipt (GET /v1/receipts/{sha256} finds it by one key lookup).
CREATE TABLE `receipt_archive_entries` (
	`tenant_id` text NOT NULL,
	`sha256` text NOT NULL,
	`archive_sha256` text NOT NULL,
	PRIMARY KEY(`tenant_id`, `sha256`)
);
--> statement-breakpoint
-- Manifests and entries are evidence of where receipts went: append-only.
CREATE TRIGGER `receipt_archives_immutable` BEFORE UPDATE ON `receipt_archives`
BEGIN SELECT RAISE(ABORT, 'receipt_archive_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `receipt_archives_never_deleted` BEFORE DELETE ON `receipt_archives`
BEGIN SELECT RAISE(ABORT, 'receipt_archive_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `receipt_archive_entries_immutable` BEFORE UPDATE ON `receipt_archive_entries`
BEGIN SELECT RAISE(ABORT, 'receipt_archive_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `receipt_archive_entries_never_deleted` BEFORE DELETE ON `receipt_archive_entries`
BEGIN SELECT RAISE(ABORT, 'receipt_archive_immutable'); END;
--> statement-breakpoint
-- An entry names an archive whose manifest is already stored (a receipt cannot be "proven
-- archived" by an entry pointing nowhere).
CREATE TRIGGER `receipt_archive_entries_manifest` BEFORE INSERT ON `receipt_archive_entries`
WHEN NOT EXISTS (SELECT 1 FROM `receipt_archives` a WHERE a.`tenant_id` = NEW.`tenant_id` AND a.`archive_sha256` = NEW.`archive_sha256`)
BEGIN SELECT RAISE(ABORT, 'receipt_archive_unknown'); END;
--> statement-breakpoint
-- Receipts stay append-only, with one exception: a row whose archive entry (and so its manifest)
-- is stored may leave D1. Any other delete still aborts.
DROP TRIGGER `receipts_no_delete`;
--> statement-breakpoint
CREATE TRIGGER `receipts_no_delete` BEFORE DELETE ON `receipts`
WHEN NOT EXISTS (SELECT 1 FROM `receipt_archive_entries` e WHERE e.`tenant_id` = OLD.`tenant_id` AND e.`sha256` = OLD.`sha256`)
BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END;
--> statement-breakpoint
-- Evidence held in R2 counts against the tenant's stored bytes like evidence in the row did
-- (observations are refused at 90% of the quota, as by `receipts_quota`).
CREATE TRIGGER `receipts_blob_quota` BEFORE INSERT ON `receipts`
WHEN NEW.`evidence_bytes` IS NOT NULL AND NEW.`kind` NOT IN ('execution', 'reconciliation')
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE (SELECT q.`stored_bytes` + length(CAST(NEW.`receipt` AS BLOB)) + NEW.`evidence_bytes` + 200 > q.`max_stored_bytes` * (CASE WHEN NEW.`kind` = 'authorization' THEN 100 ELSE 90 END) / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `receipts_blob_usage` AFTER INSERT ON `receipts`
WHEN NEW.`evidence_bytes` IS NOT NULL
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + NEW.`evidence_bytes` WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
-- A receipt that moved to an archive gives back what it counted (row, in-row or R2 evidence);
-- its archive entry costs a fixed 200 bytes (tenant id, digest, archive digest, key entries).
CREATE TRIGGER `receipts_archived_usage` AFTER DELETE ON `receipts`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = max(0, `stored_bytes` - (length(CAST(OLD.`receipt` AS BLOB)) + coalesce(length(CAST(OLD.`evidence` AS BLOB)), 0) + coalesce(OLD.`evidence_bytes`, 0) + 200) + 200)
  WHERE `tenant_id` = OLD.`tenant_id`;
END;
