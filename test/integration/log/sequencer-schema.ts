/**
 * Test set-up shared by the log tests: put a sequencer object's `meta` table back in the layout of
 * schema version 1 (no `shard` beside the cursor), as an object stored before the cursor named its
 * shard, and record `version` as its schema version. `cursor` replaces the stored cursor (a move
 * can leave it past rows never read); without it the cursor is kept.
 */
export function restoreMetaWithoutShard(sql: SqlStorage, version: number, cursor?: number): void {
  sql.exec(`CREATE TABLE meta_v1 (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    tenant_id TEXT NOT NULL,
    cursor INTEGER NOT NULL,
    state BLOB NOT NULL,
    checkpoint TEXT
  )`);
  if (cursor === undefined)
    sql.exec('INSERT INTO meta_v1 SELECT singleton, tenant_id, cursor, state, checkpoint FROM meta');
  else sql.exec('INSERT INTO meta_v1 SELECT singleton, tenant_id, ?, state, checkpoint FROM meta', cursor);
  sql.exec('DROP TABLE meta');
  sql.exec('ALTER TABLE meta_v1 RENAME TO meta');
  sql.exec('UPDATE schema_version SET v = ?', version);
}
