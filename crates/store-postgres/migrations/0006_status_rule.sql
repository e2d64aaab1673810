-- Lazarus PostgreSQL store, schema version 6: the status rule counts a host program's call
-- announced without an outcome as in doubt, and a session a resumer left to its owner as
-- `needs_owner` (record kinds revision 4). Statuses the older rule cached would be wrong for
-- such sessions: every cached status is dropped, and the next listing replays and caches each
-- session again. `{schema}` is the quoted schema name.
UPDATE {schema}.listing SET status_seq = NULL WHERE status_seq IS NOT NULL;
