/**
 * Test set-up shared by the log tests: put a sequencer object's `meta` table back in the layout of
 * schema version 1 (no `shard` beside the cursor), as an object stored before the cursor named its
 * shard, and record `version` as its schema version. `cursor` replaces the stored cursor (a move
 * can leave it past rows never read); without it the cursor is kept.
 */
export function restoreMetaWithoutShard(sql: SqlStorage, version: number, cursor?: number): void {
  sql.exec('ALTER TABLE meta DROP COLUMN shard');
  const left = sql.exec<{ n: number }>(
    "SELECT count(*) AS n FROM pragma_table_info('meta') WHERE name = 'shard'",
  );
  if (left.one().n !== 0) throw new Error('meta still has its shard column');
  if (cursor !== undefined) sql.exec('UPDATE meta SET cursor = ?', cursor);
  sql.exec('UPDATE schema_version SET v = ?', version);
}
