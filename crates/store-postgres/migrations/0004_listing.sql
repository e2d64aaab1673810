-- Lazarus PostgreSQL store, schema version 4: one listing row per session, kept by the
-- statements that write records, so a listing reads one table instead of probing `records`
-- twice per session (10^5 sessions: 1.8 s before). `{schema}` is the quoted schema name.
-- Stop processes of older builds before migrating: their appends do not keep the rows.
--
-- The statements that insert records write the row in the same transaction: an append's
-- INSERT updates it in the same statement; a create, an import and a fork rebuild it from
-- the records they wrote before they commit. So the row says what the newest committed
-- record is, and a kill -9 of any writer leaves it exactly as right as the records. (A
-- trigger on every insert did the same at ~80 µs of server time per append, against ~15 µs
-- for the statement's own update.) A record changed or deleted by hand makes the cached
-- status stale, so the next listing replays the session and finds what was done to it.
--
-- The replayed status moves here from `status_cache` (dropped): valid while `status_seq`
-- is `last_seq`. Derived, like `updated_at` (the `ts` of the newest record) and
-- `first_input` (record 1 when it is an input, up to 64 KiB: the title).

-- No record is inserted while the rows are built.
LOCK TABLE {schema}.records IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE {schema}.listing (
    session_id   text PRIMARY KEY,
    created_at   text NOT NULL,
    parent_id    text,
    meta         text,         -- the header's `meta` as JSON text (jsonb's output costs more)
    last_seq     bigint NOT NULL,
    last_kind    text NOT NULL,
    end_offset   bigint NOT NULL,
    updated_at   text NOT NULL,
    first_input  bytea,
    status_seq   bigint,
    status       text,
    status_error text
) WITH (fillfactor = 50); -- room on the page: an append's update stays a HOT update

-- The `ts` of a record's line, `{"seq":N,"ts":"…",…`; '' when it cannot be read there (the
-- listing then reads the line itself). Never raises: a rebuild that raised would fail the
-- create, import or fork it belongs to.
CREATE FUNCTION {schema}.record_ts(line bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(
        substring(encode(substring(line FROM 1 FOR 160), 'escape')
                  FROM '^\{"seq":[0-9]+,"ts":"([^"\\]*)"'),
        '')
$$;

CREATE FUNCTION {schema}.listing_forget_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.listing SET status_seq = NULL
    WHERE session_id = OLD.session_id AND status_seq IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER records_listing_change AFTER UPDATE OR DELETE ON {schema}.records
    FOR EACH ROW EXECUTE FUNCTION {schema}.listing_forget_status();

-- Builds (or builds again) the listing rows of the sessions `ids` from their records: for a
-- create, an import and a fork, after they wrote them and in their transaction, and here for
-- every session. A cached status is kept: it is valid only while `status_seq` is `last_seq`.
CREATE FUNCTION {schema}.rebuild_listing(ids text[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {schema}.listing AS l
        (session_id, created_at, parent_id, meta, last_seq, last_kind, end_offset, updated_at,
         first_input)
    SELECT s.id, s.created_at, s.parent_id, (s.header->'meta')::text, t.seq, t.kind,
           t.end_offset, {schema}.record_ts(t.line), f.line
    FROM {schema}.sessions s
    CROSS JOIN LATERAL (
        SELECT r.seq, r.kind, r.end_offset, r.line FROM {schema}.records r
        WHERE r.session_id = s.id ORDER BY r.seq DESC LIMIT 1) t
    LEFT JOIN {schema}.records f ON f.session_id = s.id AND f.seq = 1 AND f.kind = 'input'
        AND octet_length(f.line) <= 65536
    WHERE s.id = ANY (ids)
    ON CONFLICT (session_id) DO UPDATE SET last_seq = excluded.last_seq,
        last_kind = excluded.last_kind, end_offset = excluded.end_offset,
        updated_at = excluded.updated_at, first_input = excluded.first_input
$$;

SELECT {schema}.rebuild_listing(ARRAY(SELECT id FROM {schema}.sessions));
UPDATE {schema}.listing l SET status_seq = sc.last_seq, status = sc.status, status_error = sc.error
FROM {schema}.status_cache sc WHERE sc.session_id = l.session_id;

DROP TABLE {schema}.status_cache;
