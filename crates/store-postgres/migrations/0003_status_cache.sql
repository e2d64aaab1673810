-- Lazarus PostgreSQL store, schema version 3: the status each session's replay gave, so a
-- listing replays only the sessions that changed since. `{schema}` is the quoted schema name.
--
-- A session's status has one rule, the replay of its whole log; the last record alone cannot
-- tell. A row is valid for the session as long as its newest record is `last_seq`; any append
-- makes it stale and the next listing replays the session and writes the row again. Derived
-- data, written by listings: losing it costs replays, never a wrong answer.
CREATE TABLE {schema}.status_cache (
    session_id text PRIMARY KEY,
    last_seq   bigint NOT NULL,
    status     text NOT NULL,
    error      text
);
