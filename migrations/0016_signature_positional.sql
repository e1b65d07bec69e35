-- Issue 10 ("Bounded D1"), hand-written: a signature row's `envelope` is now stored either as the
-- canonical envelope object (every row written before, `{...}`) or in its positional form
-- (src/db/signature-rows.ts, `[1, issued_at_unix_ms, issuer, key_id, receipt_kind, signature,
-- check]`): the first character tells which, with no new column. The quota trigger of 0010 read
-- the receipt kind by name (`$.receipt_kind`), which a positional row does not have; it is
-- re-created here to read the kind of either form: `$[4]` of a positional row of exactly that
-- layout (version 1, 7 values), `$.receipt_kind` of an object. Any other text has no kind, so it
-- gets no exemption and the 90% tier (fail closed), as a missing kind did before; text that is not
-- JSON makes `json_extract` raise, and the insert fails.
--
-- The arithmetic is 0010's: a row counts its stored `envelope` bytes + 200 (the positional form
-- counts its own, shorter, length), refused at its kind's tier (authorization 100%, execution and
-- reconciliation never, any other kind 90%). `receipt_signatures_usage` reads no kind and stays as
-- it is. Rows already stored are not rewritten (they are append-only) and stay counted as they are.
DROP TRIGGER `receipt_signatures_quota`;
--> statement-breakpoint
CREATE TRIGGER `receipt_signatures_quota` BEFORE INSERT ON `receipt_signatures`
WHEN coalesce(
  CASE substr(NEW.`envelope`, 1, 1)
    WHEN '[' THEN (CASE WHEN json_extract(NEW.`envelope`, '$[0]') = 1 AND json_array_length(NEW.`envelope`) = 7 THEN json_extract(NEW.`envelope`, '$[4]') END)
    WHEN '{' THEN json_extract(NEW.`envelope`, '$.receipt_kind')
  END, '') NOT IN ('execution', 'reconciliation')
BEGIN
  SELECT RAISE(ABORT, 'quota_exceeded:stored_bytes')
  WHERE NOT EXISTS (SELECT 1 FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`)
    OR (SELECT q.`stored_bytes` + length(CAST(NEW.`envelope` AS BLOB)) + 200 > q.`max_stored_bytes` * (CASE
          CASE substr(NEW.`envelope`, 1, 1)
            WHEN '[' THEN (CASE WHEN json_extract(NEW.`envelope`, '$[0]') = 1 AND json_array_length(NEW.`envelope`) = 7 THEN json_extract(NEW.`envelope`, '$[4]') END)
            WHEN '{' THEN json_extract(NEW.`envelope`, '$.receipt_kind')
          END WHEN 'authorization' THEN 100 ELSE 90 END) / 100
        FROM `tenant_quotas` q WHERE q.`tenant_id` = NEW.`tenant_id`);
END;
