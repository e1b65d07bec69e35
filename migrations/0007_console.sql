-- Issue 14 (the approval console): a second, distinct approver for `irreversible` effects, and the
-- agent's idempotency key on an approval request. Hand-written; applies on top of 0002 alone.
ALTER TABLE `approvals` ADD `first_approved_by` text;
--> statement-breakpoint
ALTER TABLE `approvals` ADD `first_approved_at_unix_ms` integer;
--> statement-breakpoint
ALTER TABLE `approvals` ADD `first_approval_lifetime_ms` integer;
--> statement-breakpoint
ALTER TABLE `approvals` ADD `idempotency_key` text;
--> statement-breakpoint
-- An irreversible request is approved only by a second approver who is neither the requester nor
-- the first approver, after a first approval was recorded (one approver clicking twice, or a
-- writer that skips the service, cannot approve alone). Same write as the decision: the UPDATE
-- that sets `approved` aborts.
CREATE TRIGGER `approvals_second_approver` BEFORE UPDATE OF `status` ON `approvals`
WHEN NEW.`status` = 'approved' AND NEW.`effect` = 'irreversible' AND (
  NEW.`first_approved_by` IS NULL OR NEW.`decided_by` IS NULL
  OR NEW.`decided_by` = NEW.`first_approved_by` OR NEW.`decided_by` = NEW.`requester_principal_id`
  OR NEW.`first_approved_by` = NEW.`requester_principal_id`)
BEGIN SELECT RAISE(ABORT, 'approval_second_approver'); END;
--> statement-breakpoint
-- The first approval is recorded once, on a pending irreversible request, never by the requester
-- (two approvers racing for the first approval: one wins, the other's write aborts).
CREATE TRIGGER `approvals_first_approval_once` BEFORE UPDATE OF `first_approved_by`, `first_approved_at_unix_ms`, `first_approval_lifetime_ms` ON `approvals`
WHEN OLD.`first_approved_by` IS NOT NULL OR OLD.`status` <> 'pending' OR NEW.`effect` <> 'irreversible'
  OR NEW.`first_approved_by` IS NULL OR NEW.`first_approved_by` = NEW.`requester_principal_id`
BEGIN SELECT RAISE(ABORT, 'approval_first_approval'); END;
--> statement-breakpoint
-- A first approval only on an irreversible request, and never at insert (it is a decision).
CREATE TRIGGER `approvals_first_approval_insert` BEFORE INSERT ON `approvals`
WHEN NEW.`first_approved_by` IS NOT NULL OR NEW.`first_approved_at_unix_ms` IS NOT NULL OR NEW.`first_approval_lifetime_ms` IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'approval_first_approval'); END;
--> statement-breakpoint
-- The key is part of what the agent asked approval for.
CREATE TRIGGER `approvals_idempotency_key_immutable` BEFORE UPDATE OF `idempotency_key` ON `approvals`
BEGIN SELECT RAISE(ABORT, 'approval_immutable'); END;
