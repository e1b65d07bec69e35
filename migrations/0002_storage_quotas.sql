CREATE TABLE `tenant_quotas` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`max_stored_bytes` integer DEFAULT 268435456 NOT NULL,
	`max_receipts_per_day` integer DEFAULT 200000 NOT NULL,
	`max_open_approvals` integer DEFAULT 1000 NOT NULL,
	`max_open_runs` integer DEFAULT 10000 NOT NULL,
	`stored_bytes` integer DEFAULT 0 NOT NULL,
	`receipts_day` integer DEFAULT 0 NOT NULL,
	`receipts_today` integer DEFAULT 0 NOT NULL,
	`updated_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `receipts` ADD `observation_id` text;
--> statement-breakpoint
ALTER TABLE `receipts` ADD `observation_raw_sha256` text;
--> statement-breakpoint
ALTER TABLE `receipts` ADD `observation_claim` text;
--> statement-breakpoint
CREATE INDEX `grants_live` ON `grants` (`tenant_id`,`principal_id`,`grant_id`) WHERE "grants"."revoked_at_unix_ms" IS NULL;
--> statement-breakpoint
CREATE INDEX `grants_digest` ON `grants` (`tenant_id`,`grant_sha256`);
--> statement-breakpoint
CREATE INDEX `runs_open` ON `runs` (`tenant_id`,`deadline_unix_ms`);
--> statement-breakpoint
-- Hand-written below (as 0001): backfills, quota triggers and the live-grant bound. Sizes are
-- the UTF-8 bytes of the stored documents plus 200 bytes per row for keys, columns and index
-- entries (docs/storage.md, "Quotas").

-- Every existing tenant gets the default quotas and its current usage.
INSERT INTO `tenant_quotas` (`tenant_id`, `stored_bytes`, `updated_at_unix_ms`)
SELECT t.`tenant_id`,
  coalesce((SELECT sum(length(CAST(r.`receipt` AS BLOB)) + coalesce(length(CAST(r.`evidence` AS BLOB)), 0) + 200) FROM `receipts` r WHERE r.`tenant_id` = t.`tenant_id`), 0)
  + coalesce((SELECT sum(length(CAST(a.`input` AS BLOB)) + length(CAST(a.`target` AS BLOB)) + 200) FROM `approvals` a WHERE a.`tenant_id` = t.`tenant_id`), 0)
  + coalesce((SELECT sum(length(CAST(x.`envelope` AS BLOB)) + 200) FROM `runs` x WHERE x.`tenant_id` = t.`tenant_id`), 0)
  + coalesce((SELECT sum(length(CAST(g.`document` AS BLOB)) + 200) FROM `grants` g WHERE g.`tenant_id` = t.`tenant_id`), 0)
  + coalesce((SELECT sum(length(CAST(c.`document` AS BLOB)) + 200) FROM `contracts` c WHERE c.`tenant_id` = t.`tenant_id`), 0)
  + coalesce((SELECT sum(length(CAST(p.`document` AS BLOB)) + 200) FROM `policies` p WHERE p.`tenant_id` = t.`tenant_id`), 0),
  t.`created_at_unix_ms`
FROM `tenants` t;
--> statement-breakpoint
-- Observation receipts get their id columns (receipts are append-only: the guard is lifted for
-- this backfill only and restored below, unchanged).
DROP TRIGGER `receipts_no_update`;
--> statement-breakpoint
UPDATE `receipts`
SET `observation_id` = json_extract(`receipt`, '$.body.observation_id'),
  `observation_raw_sha256` = json_extract(`receipt`, '$.body.raw_observation_sha256'),
  `observation_claim` = CASE
    WHEN EXISTS (SELECT 1 FROM json_each(`receipt`, '$.body.violations') WHERE `value` = 'observation_id_conflict') THEN NULL
    ELSE json_extract(`receipt`, '$.body.observation_id') END
WHERE `kind` IN ('observation', 'error_observation');
--> statement-breakpoint
CREATE INDEX `receipts_observation_backfill` ON `receipts` (`tenant_id`, `kind`, `observation_id`, `observation_raw_sha256`);
--> statement-breakpoint
CREATE INDEX `receipts_claim_backfill` ON `receipts` (`tenant_id`, `kind`, `observation_claim`);
--> statement-breakpoint
-- Before the unique indexes: of rows that raced for one id (or stored one content twice), the
-- earliest keeps it. The earliest row is never changed, so the order of this update is irrelevant.
UPDATE `receipts` SET `observation_claim` = NULL
WHERE `observation_claim` IS NOT NULL AND EXISTS (
  SELECT 1 FROM `receipts` r2 WHERE r2.`tenant_id` = `receipts`.`tenant_id` AND r2.`kind` = `receipts`.`kind`
    AND r2.`observation_claim` = `receipts`.`observation_claim`
    AND (r2.`created_at_unix_ms` < `receipts`.`created_at_unix_ms` OR (r2.`created_at_unix_ms` = `receipts`.`created_at_unix_ms` AND r2.`sha256` < `receipts`.`sha256`)));
--> statement-breakpoint
UPDATE `receipts` SET `observation_id` = NULL, `observation_raw_sha256` = NULL, `observation_claim` = NULL
WHERE `observation_id` IS NOT NULL AND `observation_claim` IS NULL AND EXISTS (
  SELECT 1 FROM `receipts` r2 WHERE r2.`tenant_id` = `receipts`.`tenant_id` AND r2.`kind` = `receipts`.`kind`
    AND r2.`observation_id` = `receipts`.`observation_id` AND r2.`observation_raw_sha256` = `receipts`.`observation_raw_sha256`
    AND (r2.`observation_claim` IS NOT NULL OR r2.`created_at_unix_ms` < `receipts`.`created_at_unix_ms` OR (r2.`created_at_unix_ms` = `receipts`.`created_at_unix_ms` AND r2.`sha256` < `receipts`.`sha256`)));
--> statement-breakpoint
DROP INDEX `receipts_observation_backfill`;
--> statement-breakpoint
DROP INDEX `receipts_claim_backfill`;
--> statement-breakpoint
CREATE UNIQUE INDEX `receipts_observation_claim` ON `receipts` (`tenant_id`,`kind`,`observation_claim`) WHERE "receipts"."observation_claim" IS NOT NULL;
--> statement-breakpoint
CREATE UNIQUE INDEX `receipts_observation_raw` ON `receipts` (`tenant_id`,`kind`,`observation_id`,`observation_raw_sha256`) WHERE "receipts"."observation_id" IS NOT NULL;
--> statement-breakpoint
CREATE TRIGGER `receipts_no_update` BEFORE UPDATE ON `receipts`
BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END;
--> statement-breakpoint
-- Quotas. Refusal order as usage grows (docs/storage.md): new runs, approval requests and
-- administrative documents at 80% of a quota, observations at 90%, authorizations at 100%.
-- Execution and reconciliation receipts are counted but never refused: they record effects that
-- already happened, at most a few per authorized call. A tenant without a quota row is refused.
CREATE TRIGGER `receipts_quota` BEFORE INSERT ON `receipts`
WHEN NEW.`kind` NOT IN ('execution', 'reconciliation')
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`receipt` AS BLOB)) + coalesce(length(CAST(NEW.`evidence` AS BLOB)), 0) + 200 > q.`max_stored_bytes` * (CASE WHEN NEW.`kind` = 'authorization' THEN 100 ELSE 90 END) / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
  SELECT RAISE(ABORT, 'quota_exceeded:receipts_per_day')
  WHERE (SELECT (CASE WHEN q.`receipts_day` = NEW.`created_at_unix_ms` / 86400000 THEN q.`receipts_today` ELSE 0 END) + 1
          > q.`max_receipts_per_day` * (CASE WHEN NEW.`kind` = 'authorization' THEN 100 ELSE 90 END) / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `receipts_usage` AFTER INSERT ON `receipts`
BEGIN
  UPDATE `tenant_quotas` SET
    `stored_bytes` = `stored_bytes` + length(CAST(NEW.`receipt` AS BLOB)) + coalesce(length(CAST(NEW.`evidence` AS BLOB)), 0) + 200,
    `receipts_today` = CASE
      WHEN NEW.`created_at_unix_ms` / 86400000 > `receipts_day` THEN 1
      WHEN NEW.`created_at_unix_ms` / 86400000 = `receipts_day` THEN `receipts_today` + 1
      ELSE `receipts_today` END,
    `receipts_day` = max(`receipts_day`, NEW.`created_at_unix_ms` / 86400000)
  WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `runs_quota` BEFORE INSERT ON `runs`
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:open_runs')
  WHERE (SELECT count(*) FROM `runs` r WHERE r.`tenant_id` = NEW.`tenant_id` AND r.`deadline_unix_ms` > NEW.`created_at_unix_ms`)
    >= (SELECT q.`max_open_runs` FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
  SELECT RAISE(ABORT, 'quota_exceeded:receipts_per_day')
  WHERE (SELECT (CASE WHEN q.`receipts_day` = NEW.`created_at_unix_ms` / 86400000 THEN q.`receipts_today` ELSE 0 END)
          >= q.`max_receipts_per_day` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`envelope` AS BLOB)) + 200 > q.`max_stored_bytes` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `runs_usage` AFTER INSERT ON `runs`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + length(CAST(NEW.`envelope` AS BLOB)) + 200 WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `approvals_quota` BEFORE INSERT ON `approvals`
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:open_approvals')
  WHERE (SELECT count(*) FROM `approvals` a WHERE a.`tenant_id` = NEW.`tenant_id` AND a.`status` = 'pending')
    >= (SELECT q.`max_open_approvals` FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
  SELECT RAISE(ABORT, 'quota_exceeded:receipts_per_day')
  WHERE (SELECT (CASE WHEN q.`receipts_day` = NEW.`created_at_unix_ms` / 86400000 THEN q.`receipts_today` ELSE 0 END)
          >= q.`max_receipts_per_day` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`input` AS BLOB)) + length(CAST(NEW.`target` AS BLOB)) + 200 > q.`max_stored_bytes` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `approvals_usage` AFTER INSERT ON `approvals`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + length(CAST(NEW.`input` AS BLOB)) + length(CAST(NEW.`target` AS BLOB)) + 200 WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `grants_quota` BEFORE INSERT ON `grants`
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`document` AS BLOB)) + 200 > q.`max_stored_bytes` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `grants_usage` AFTER INSERT ON `grants`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + length(CAST(NEW.`document` AS BLOB)) + 200 WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `contracts_quota` BEFORE INSERT ON `contracts`
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`document` AS BLOB)) + 200 > q.`max_stored_bytes` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `contracts_usage` AFTER INSERT ON `contracts`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + length(CAST(NEW.`document` AS BLOB)) + 200 WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `policies_quota` BEFORE INSERT ON `policies`
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`document` AS BLOB)) + 200 > q.`max_stored_bytes` * 80 / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
--> statement-breakpoint
CREATE TRIGGER `policies_usage` AFTER INSERT ON `policies`
BEGIN
  UPDATE `tenant_quotas` SET `stored_bytes` = `stored_bytes` + length(CAST(NEW.`document` AS BLOB)) + 200 WHERE `tenant_id` = NEW.`tenant_id`;
END;
--> statement-breakpoint
-- Every unrevoked grant of a principal is evaluated on each authorization; the bound is checked
-- here, at creation, so two creations racing cannot both pass it (MAX_LIVE_GRANTS in ports.ts).
CREATE TRIGGER `grants_live_bound` BEFORE INSERT ON `grants`
WHEN (SELECT count(*) FROM `grants` g WHERE g.`tenant_id` = NEW.`tenant_id` AND g.`principal_id` = NEW.`principal_id` AND g.`revoked_at_unix_ms` IS NULL) >= 64
BEGIN SELECT RAISE(ABORT, 'grant_limit'); END;
