-- Lazarus PostgreSQL store, schema version 1. `{schema}` is replaced by the quoted schema name.

-- One row per session: its header (also stored, byte for byte, as record seq 0) and the
-- fork lineage. Never updated after creation: an append touches only `records`.
CREATE TABLE {schema}.sessions (
    id          text PRIMARY KEY,
    header      jsonb NOT NULL,
    created_at  text NOT NULL,
    parent_id   text,
    parent_seq  bigint,
    inserted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_created_idx ON {schema}.sessions (created_at, id);
CREATE INDEX sessions_parent_idx ON {schema}.sessions (parent_id) WHERE parent_id IS NOT NULL;

-- One row per record, keyed by (session, seq): a taken seq can never be written twice.
-- `line` is the exact line a local ledger file holds (newline excluded), CRC included.
-- `end_offset` is where the line ends in the session's JSONL export, newline included, so
-- the newest record of a session gives its size, and a listing reads one index entry per
-- session (the primary key, backwards) instead of scanning records.
CREATE TABLE {schema}.records (
    session_id  text NOT NULL,
    seq         bigint NOT NULL CHECK (seq >= 0),
    kind        text NOT NULL,
    line        bytea NOT NULL,
    end_offset  bigint NOT NULL CHECK (end_offset > 0),
    PRIMARY KEY (session_id, seq)
);
