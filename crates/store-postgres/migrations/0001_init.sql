-- Lazarus PostgreSQL store, schema version 1. `{schema}` is replaced by the quoted schema name.

-- One row per session: its header (also stored as record seq 0) and its tail, so listings
-- get the status without reading records.
CREATE TABLE {schema}.sessions (
    id          text PRIMARY KEY,
    header      jsonb NOT NULL,
    created_at  text NOT NULL,
    parent_id   text,
    parent_seq  bigint,
    last_seq    bigint NOT NULL CHECK (last_seq >= 0),
    last_kind   text NOT NULL,
    -- The last record's data with long strings shortened (what status_from_tail reads).
    last_data   jsonb NOT NULL,
    last_ts     text NOT NULL,
    -- Bytes of the session's JSONL export (every line plus its newline).
    size        bigint NOT NULL CHECK (size >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_created_idx ON {schema}.sessions (created_at, id);
CREATE INDEX sessions_parent_idx ON {schema}.sessions (parent_id) WHERE parent_id IS NOT NULL;

-- One row per record, keyed by (session, seq): a taken seq can never be written twice.
-- `line` is the exact line a local ledger file holds (newline excluded), CRC included.
CREATE TABLE {schema}.records (
    session_id  text NOT NULL,
    seq         bigint NOT NULL CHECK (seq >= 0),
    kind        text NOT NULL,
    line        bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);
