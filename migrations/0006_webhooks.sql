-- Signed webhooks for executors (Standard Webhooks; docs/api.md, "Signed webhooks"). Hand-written;
-- independent of every other migration after 0002.

-- Per-executor signing secrets. `secret` is the `whsec_...` text itself: HMAC verification needs
-- the key, so it cannot be stored as a one-way digest (SECURITY.md, "Webhook signing secrets").
-- A secret verifies while `expires_at_unix_ms` is null or in the future; a rotation dates the
-- previous ones.
CREATE TABLE `webhook_secrets` (
	`tenant_id` text NOT NULL,
	`principal_id` text NOT NULL,
	`secret_id` text NOT NULL,
	`secret` text NOT NULL,
	`created_by` text NOT NULL,
	`created_at_unix_ms` integer NOT NULL,
	`expires_at_unix_ms` integer,
	PRIMARY KEY(`tenant_id`, `principal_id`, `secret_id`)
);
--> statement-breakpoint
-- Delivered `webhook-id`s, one row per (tenant, executor, id): the first delivery claims the id,
-- and the answer it got is stored so a retry of the same message gets the same answer and writes
-- nothing. Rows are kept at least as long as the timestamp window (purged after a day).
CREATE TABLE `webhook_deliveries` (
	`tenant_id` text NOT NULL,
	`principal_id` text NOT NULL,
	`webhook_id` text NOT NULL,
	`route` text NOT NULL,
	`body_sha256` text NOT NULL,
	`received_at_unix_ms` integer NOT NULL,
	`status` integer,
	`response` text,
	PRIMARY KEY(`tenant_id`, `principal_id`, `webhook_id`)
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_received` ON `webhook_deliveries` (`tenant_id`,`received_at_unix_ms`);
