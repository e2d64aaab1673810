-- Lazarus PostgreSQL store, schema version 2: leases, the inbox, and titles given by people. `{schema}` is the quoted schema name.

-- One writer per session: the holder of its lease. A writer appends only while the row holds
-- its token and epoch (checked in the append statement itself); a lease not renewed before
-- `expires_at` may be taken by another writer, which raises `epoch`. No connection is held.
CREATE TABLE {schema}.leases (
    session_id text PRIMARY KEY,
    token      text NOT NULL,
    epoch      bigint NOT NULL,
    holder     text NOT NULL,
    taken_at   timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX leases_token_idx ON {schema}.leases (token);

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
