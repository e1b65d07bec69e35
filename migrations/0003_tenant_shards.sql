-- Hand-written (shards, issue 10). The shard directory: which D1 shard holds each tenant.
-- It is read and written on shard 0 only (src/platform/shards.ts); the table exists, empty, on
-- every other shard because all shards share one migrations directory. Authentication never reads
-- it (an API key names its shard); tenant creation, quota changes and tenant moves do.
CREATE TABLE `tenant_shards` (
	`tenant_id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`shard` integer NOT NULL CHECK (`shard` >= 0),
	`created_at_unix_ms` integer NOT NULL,
	`updated_at_unix_ms` integer NOT NULL
);
--> statement-breakpoint
-- Tenant names are unique across all shards: this index decides a creation race.
CREATE UNIQUE INDEX `tenant_shards_name_unique` ON `tenant_shards` (`name`);
--> statement-breakpoint
-- Placement counts tenants per shard.
CREATE INDEX `tenant_shards_shard` ON `tenant_shards` (`shard`);
--> statement-breakpoint
-- Every tenant created before shards lives on shard 0 (this database, when it is shard 0; on a
-- fresh shard there is no tenant to backfill).
INSERT INTO `tenant_shards` (`tenant_id`, `name`, `shard`, `created_at_unix_ms`, `updated_at_unix_ms`)
SELECT `tenant_id`, `name`, 0, `created_at_unix_ms`, `created_at_unix_ms` FROM `tenants`;
