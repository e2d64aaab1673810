-- For scripts/bench-scale.sh (PostgreSQL, schema `bench`): what the client counts, one row
-- each: session<TAB>input_id per input record; session<TAB>@takeover<TAB>UNIX_TIME per
-- takeover receipt; session<TAB>#final when the session's last record is a final answer.
SELECT session_id, convert_from(line, 'UTF8')::json->'data'->>'input_id'
  FROM bench.records WHERE kind = 'input'
UNION ALL
SELECT session_id, '@takeover' || chr(9)
       || extract(epoch FROM (convert_from(line, 'UTF8')::json->>'ts')::timestamptz)::text
  FROM bench.records
 WHERE kind = 'resume'
   AND convert_from(line, 'UTF8')::json->'data'->>'trigger' = 'gateway-takeover'
UNION ALL
SELECT session_id, '#final' FROM (
  SELECT DISTINCT ON (session_id) session_id, kind, convert_from(line, 'UTF8')::json->'data' AS d
    FROM bench.records ORDER BY session_id, seq DESC) last
 WHERE kind = 'response' AND d->'failure' IS NULL AND d::text NOT LIKE '%"tool_call"%';
