-- Invariants that must hold under concurrent requests. Each RAISE(ABORT) fails the statement and,
-- because D1 runs a batch as one transaction, rolls back the whole batch: a request that lost a
-- race leaves nothing behind and re-evaluates against fresh state (src/http/routes/authorize.ts).

-- An approval is consumed at most once, and only after it was approved (replayed approval).
CREATE TRIGGER `approvals_consume_once` BEFORE UPDATE OF `status` ON `approvals`
WHEN NEW.`status` = 'consumed' AND OLD.`status` <> 'approved'
BEGIN SELECT RAISE(ABORT, 'approval_unusable'); END;
--> statement-breakpoint
-- An approval is decided once (two approvers racing, or a consumed approval re-approved).
CREATE TRIGGER `approvals_decide_once` BEFORE UPDATE OF `status` ON `approvals`
WHEN NEW.`status` IN ('approved', 'denied') AND OLD.`status` <> 'pending'
BEGIN SELECT RAISE(ABORT, 'approval_not_pending'); END;
--> statement-breakpoint
CREATE TRIGGER `approvals_no_reopen` BEFORE UPDATE OF `status` ON `approvals`
WHEN NEW.`status` NOT IN ('approved', 'denied', 'consumed')
BEGIN SELECT RAISE(ABORT, 'approval_transition'); END;
--> statement-breakpoint
-- What an approval binds never changes after it was requested (post-approval repair).
CREATE TRIGGER `approvals_binding_immutable` BEFORE UPDATE OF `tenant_id`, `requester_principal_id`, `policy_sha256`, `tool_contract_sha256`, `input_sha256`, `input_bytes`, `input`, `target`, `effect`, `created_at_unix_ms` ON `approvals`
BEGIN SELECT RAISE(ABORT, 'approval_immutable'); END;
--> statement-breakpoint
-- A consumed approval's record outlives its expiry: approvals are never deleted.
CREATE TRIGGER `approvals_never_deleted` BEFORE DELETE ON `approvals`
BEGIN SELECT RAISE(ABORT, 'approval_immutable'); END;
--> statement-breakpoint
-- A run never spends past its envelope (two authorizations racing for the last call or write).
CREATE TRIGGER `runs_budget` BEFORE UPDATE OF `calls_used`, `writes_used` ON `runs`
WHEN NEW.`calls_used` > NEW.`max_calls` OR NEW.`writes_used` > NEW.`max_external_writes`
BEGIN SELECT RAISE(ABORT, 'run_budget_spent'); END;
--> statement-breakpoint
CREATE TRIGGER `runs_envelope_immutable` BEFORE UPDATE OF `tenant_id`, `principal_id`, `run_envelope_sha256`, `envelope`, `max_calls`, `max_external_writes`, `deadline_unix_ms` ON `runs`
BEGIN SELECT RAISE(ABORT, 'run_immutable'); END;
--> statement-breakpoint
-- Receipts are evidence: append-only.
CREATE TRIGGER `receipts_no_update` BEFORE UPDATE ON `receipts`
BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `receipts_no_delete` BEFORE DELETE ON `receipts`
BEGIN SELECT RAISE(ABORT, 'receipt_immutable'); END;
--> statement-breakpoint
-- A pinned contract is never updated in place, and a quarantine is never lifted.
CREATE TRIGGER `contracts_document_immutable` BEFORE UPDATE OF `tenant_id`, `tool_contract_sha256`, `document`, `tool_name`, `effect` ON `contracts`
BEGIN SELECT RAISE(ABORT, 'contract_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `contracts_quarantine_final` BEFORE UPDATE OF `quarantined_at_unix_ms` ON `contracts`
WHEN OLD.`quarantined_at_unix_ms` IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'contract_quarantined'); END;
--> statement-breakpoint
-- A grant is immutable; revocation is final.
CREATE TRIGGER `grants_document_immutable` BEFORE UPDATE OF `tenant_id`, `principal_id`, `grant_sha256`, `document` ON `grants`
BEGIN SELECT RAISE(ABORT, 'grant_immutable'); END;
--> statement-breakpoint
CREATE TRIGGER `grants_revocation_final` BEFORE UPDATE OF `revoked_at_unix_ms` ON `grants`
WHEN OLD.`revoked_at_unix_ms` IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'grant_revoked'); END;
--> statement-breakpoint
-- A revoked key stays revoked; a key digest and a principal's tenant never change.
CREATE TRIGGER `principals_revocation_final` BEFORE UPDATE OF `revoked_at_unix_ms` ON `principals`
WHEN OLD.`revoked_at_unix_ms` IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'principal_revoked'); END;
--> statement-breakpoint
CREATE TRIGGER `principals_identity_immutable` BEFORE UPDATE OF `tenant_id`, `key_sha256`, `roles`, `executor_release` ON `principals`
BEGIN SELECT RAISE(ABORT, 'principal_immutable'); END;
--> statement-breakpoint
-- A tenant's policy only moves to a policy stored for that tenant.
CREATE TRIGGER `tenants_policy_known` BEFORE UPDATE OF `policy_sha256` ON `tenants`
WHEN NOT EXISTS (SELECT 1 FROM `policies` WHERE `tenant_id` = NEW.`tenant_id` AND `policy_sha256` = NEW.`policy_sha256`)
BEGIN SELECT RAISE(ABORT, 'policy_unknown'); END;
