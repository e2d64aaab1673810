-- Lazarus PostgreSQL store, schema version 2: the inbox, and titles given by people. `{schema}` is the quoted schema name.

-- Messages delivered to a session without its writer (see the session crate's `inbox`):
-- one row per (session, message id), so a redelivered id is never a second message. The
-- writer appends each as its record, then deletes the row; a row whose id the session's log
-- already holds is only deleted. `data` is the record's data as the ledger will hold it.
CREATE TABLE {schema}.inbox (
    session_id   text NOT NULL,
    message_id   text NOT NULL,
    position     bigserial,
    kind         text NOT NULL CHECK (kind IN ('input', 'control')),
    data         bytea NOT NULL,
    delivered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, message_id)
);
CREATE INDEX inbox_order_idx ON {schema}.inbox (session_id, position);

-- The title a person gave a session (`lazarus sessions rename`): a label beside the session,
-- not part of its log (an export does not carry it). No row: the first input is the title.
CREATE TABLE {schema}.titles (
    session_id text PRIMARY KEY,
    title      text NOT NULL,
    set_at     timestamptz NOT NULL DEFAULT now()
);
