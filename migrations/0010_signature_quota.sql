-- Issue 11: signature rows (`receipt_signatures`, migration 0005) count toward the tenant's
-- `stored_bytes`, as every other stored document does (migration 0002): envelope bytes plus the
-- fixed 200 per row. Hand-written; it touches only `receipt_signatures` triggers and
-- `tenant_quotas.stored_bytes`, so it applies on top of 0008 whatever 0009 and 0011 do.
--
-- A signature row is written in its receipt's own batch, right after the receipt, and is refused
-- by the receipt kind's own tier (docs/storage.md "Quotas"): authorization at 100% of the quota,
-- other kinds at 90%; execution and reconciliation signatures are counted but never refused (they
-- record effects that already happened). A refusal aborts the whole batch: the receipt is not
-- written without its signature. Signature rows are never deleted (migration 0005), so nothing
-- is ever subtracted for them, also not when their receipt moves to an R2 archive.
CREATE TRIGGER `receipt_signatures_quota` BEFORE INSERT ON `receipt_signatures`
WHEN coalesce(json_extract(NEW.`envelope`, '$.receipt_kind'), '') NOT IN ('execution', 'reconciliation')
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`envelope` AS BLOB)) + 200 > q.`max_stored_bytes` * (CASE WHEN json_extract(NEW.`envelope`, '$.receipt_kind') = 'authorization' THEN 100 ELSE 90 END) / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `receipt_signatures_usage` AFTER INSERT ON `receipt_signatures`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + length(CAST(NEW.`envelope` AS BLOB)) + 200
  WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
-- The rows stored before this migration, once.
UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + coalesce(
  (SELECT sum(length(CAST(s.`envelope` AS BLOB)) + 200) FROM `receipt_signatures` s WHERE s.`tenant_id` = `tenant_quotas`.`tenant_id`),
  0);
