-- Issue 11: every receipt's signature envelope, written in the same D1 batch as the receipt, and
-- the order in which the tenant's transparency log takes them in (`seq`, AUTOINCREMENT: strictly
-- increasing and never reused, so the log sequencer drains "after my cursor" without missing or
-- repeating a row). Stands apart from `receipts` (no column added there), so it applies on top of
-- 0002 whatever the other migrations of this round do.
CREATE TABLE `receipt_signatures` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`tenant_id` text NOT NULL,
	`receipt_sha256` text NOT NULL,
	`envelope` text NOT NULL,
	`created_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `receipt_signatures_receipt` ON `receipt_signatures` (`tenant_id`,`receipt_sha256`);
--> statement-breakpoint
CREATE INDEX `receipt_signatures_drain` ON `receipt_signatures` (`tenant_id`,`seq`);
--> statement-breakpoint
-- Append-only, as receipts are: a signature row is evidence, and a rewritten one would change a
-- log leaf after it was sequenced.
CREATE TRIGGER `receipt_signatures_no_update` BEFORE UPDATE ON `receipt_signatures`
BEGIN SELECT RAISE(ABORT, 'receipt_signature_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `receipt_signatures_no_delete` BEFORE DELETE ON `receipt_signatures`
BEGIN SELECT RAISE(ABORT, 'receipt_signature_immutable'); END;
