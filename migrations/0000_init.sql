CREATE TABLE `approvals` (
	`approval_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`requester_principal_id` text NOT NULL,
	`policy_sha256` text NOT NULL,
	`tool_contract_sha256` text NOT NULL,
	`input_sha256` text NOT NULL,
	`input_bytes` integer NOT NULL,
	`input` text NOT NULL,
	`target` text NOT NULL,
	`effect` text NOT NULL,
	`status` text NOT NULL,
	`created_at_unix_ms` integer NOT NULL,
	`decided_by` text,
	`decided_at_unix_ms` integer,
	`expires_at_unix_ms` integer,
	`decision_reason` text,
	`consumed_at_unix_ms` integer,
	`consumed_by_receipt_sha256` text
);
--> statement-breakpoint
CREATE INDEX `approvals_status` ON `approvals` (`tenant_id`,`status`,`created_at_unix_ms`);--> statement-breakpoint
CREATE TABLE `contracts` (
	`tenant_id` text NOT NULL,
	`tool_contract_sha256` text NOT NULL,
	`document` text NOT NULL,
	`tool_name` text NOT NULL,
	`effect` text NOT NULL,
	`pinned_by` text NOT NULL,
	`pinned_at_unix_ms` integer NOT NULL,
	`quarantined_at_unix_ms` integer,
	`quarantine_reason` text,
	PRIMARY KEY(`tenant_id`, `tool_contract_sha256`)
);
--> statement-breakpoint
CREATE TABLE `grants` (
	`grant_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`principal_id` text NOT NULL,
	`grant_sha256` text NOT NULL,
	`document` text NOT NULL,
	`created_by` text NOT NULL,
	`created_at_unix_ms` integer NOT NULL,
	`revoked_at_unix_ms` integer
);
--> statement-breakpoint
CREATE INDEX `grants_principal` ON `grants` (`tenant_id`,`principal_id`,`grant_id`);--> statement-breakpoint
CREATE TABLE `operations` (
	`operation_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`tool_contract_sha256` text NOT NULL,
	`idempotency_key` text NOT NULL,
	`input_sha256` text NOT NULL,
	`state` text NOT NULL,
	`authorization_receipt_sha256` text NOT NULL,
	`execution_receipt_sha256` text,
	`reconciliation_owner` text,
	`reconciliation_deadline_unix_ms` integer,
	`escalated_at_unix_ms` integer,
	`updated_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `operations_key` ON `operations` (`tenant_id`,`tool_contract_sha256`,`idempotency_key`);--> statement-breakpoint
CREATE INDEX `operations_deadline` ON `operations` (`tenant_id`,`state`,`reconciliation_deadline_unix_ms`) WHERE "operations"."escalated_at_unix_ms" IS NULL;--> statement-breakpoint
CREATE TABLE `policies` (
	`tenant_id` text NOT NULL,
	`policy_sha256` text NOT NULL,
	`document` text NOT NULL,
	`created_at_unix_ms` integer NOT NULL,
	PRIMARY KEY(`tenant_id`, `policy_sha256`)
);
--> statement-breakpoint
CREATE TABLE `principals` (
	`principal_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`name` text NOT NULL,
	`roles` text NOT NULL,
	`executor_release` text,
	`key_sha256` text NOT NULL,
	`created_by` text,
	`created_at_unix_ms` integer NOT NULL,
	`revoked_at_unix_ms` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `principals_key_sha256_unique` ON `principals` (`key_sha256`);--> statement-breakpoint
CREATE INDEX `principals_tenant` ON `principals` (`tenant_id`,`principal_id`);--> statement-breakpoint
CREATE TABLE `receipts` (
	`tenant_id` text NOT NULL,
	`sha256` text NOT NULL,
	`kind` text NOT NULL,
	`receipt` text NOT NULL,
	`evidence` text,
	`outcome` text NOT NULL,
	`principal_id` text,
	`created_at_unix_ms` integer NOT NULL,
	PRIMARY KEY(`tenant_id`, `sha256`)
);
--> statement-breakpoint
CREATE INDEX `receipts_kind` ON `receipts` (`tenant_id`,`kind`,`created_at_unix_ms`);--> statement-breakpoint
CREATE TABLE `runs` (
	`run_id` text PRIMARY KEY NOT NULL,
	`tenant_id` text NOT NULL,
	`principal_id` text NOT NULL,
	`run_envelope_sha256` text NOT NULL,
	`envelope` text NOT NULL,
	`max_calls` integer NOT NULL,
	`max_external_writes` integer NOT NULL,
	`deadline_unix_ms` integer NOT NULL,
	`calls_used` integer DEFAULT 0 NOT NULL,
	`writes_used` integer DEFAULT 0 NOT NULL,
	`created_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `runs_tenant` ON `runs` (`tenant_id`,`run_id`);--> statement-breakpoint
CREATE TABLE `tenants` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`policy_sha256` text NOT NULL,
	`created_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tenants_name_unique` ON `tenants` (`name`);