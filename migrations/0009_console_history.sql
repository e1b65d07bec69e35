-- Hand-written (issue 14, the console's history): each decided approval with the receipts it led
-- to, newest decision first, in one bounded query per page (src/db/tenant-store.ts
-- `approvalHistory`, docs/console.md "History").
--
-- The operation index keeps the reconciliation receipt's digest, as it keeps the execution
-- receipt's: the receipts table has no operation column, so without it a history row could not
-- link the receipt that settled an indeterminate call. The Durable Object mirror writes it from
-- now on (src/db/operation-index.ts); operations reconciled before this migration get it from
-- their stored reconciliation receipt (body `operation_id`; encoding 1 wraps the body in
-- `{sha256, body}`, encoding 2 stores the body itself). A receipt already archived to R2 is not
-- found here: its row keeps null and the history shows the resolution without a link.
ALTER TABLE `operations` ADD `reconciliation_receipt_sha256` text;
--> statement-breakpoint
UPDATE `operations` SET `reconciliation_receipt_sha256` = (
  SELECT r.`sha256` FROM `receipts` r
  WHERE r.`tenant_id` = `operations`.`tenant_id`
    AND r.`kind` = 'reconciliation'
    AND coalesce(json_extract(r.`receipt`, '$.body.operation_id'), json_extract(r.`receipt`, '$.operation_id')) = `operations`.`operation_id`
  ORDER BY r.`created_at_unix_ms`, r.`sha256`
  LIMIT 1
)
WHERE `state` IN ('reconciled_succeeded', 'reconciled_no_effect');
--> statement-breakpoint
-- An approval's history row finds the operation its authorization receipt was claimed as (the
-- first by id, should there ever be two: `operation_id` in the index orders them without a sort).
CREATE INDEX `operations_authorization` ON `operations` (`tenant_id`,`authorization_receipt_sha256`,`operation_id`);
--> statement-breakpoint
-- History pages, newest decision first, across outcomes or of one stored status; the count of
-- decided approvals is a walk of the same index (only decided rows are in it).
CREATE INDEX `approvals_decided` ON `approvals` (`tenant_id`,`decided_at_unix_ms`,`approval_id`) WHERE `decided_at_unix_ms` IS NOT NULL;
--> statement-breakpoint
CREATE INDEX `approvals_status_decided` ON `approvals` (`tenant_id`,`status`,`decided_at_unix_ms`,`approval_id`) WHERE `decided_at_unix_ms` IS NOT NULL;
