-- Lazarus PostgreSQL store, schema version 5: the inbox also carries decisions on tool calls
-- waiting for approval (`approval` records, keyed like inputs by their id), so `lazarus
-- sessions approve` works while another gateway holds the session. `{schema}` is the quoted
-- schema name.
ALTER TABLE {schema}.inbox DROP CONSTRAINT inbox_kind_check;
ALTER TABLE {schema}.inbox ADD CONSTRAINT inbox_kind_check
    CHECK (kind IN ('input', 'control', 'approval'));
