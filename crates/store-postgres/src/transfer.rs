//! Export and import: a session as the exact JSONL a local ledger file holds, both ways.

use lazarus_ledger::Problem;
use lazarus_ledger::frame;
use lazarus_session::{Result, SessionError, SessionId, SessionSummary, Store};

use crate::PgStore;
use crate::lines::{Replay, check_end, check_line, corrupt, parse_header};
use crate::rows::{insert_session, rebuild_listing};
use crate::schema::{self};

impl PgStore {
    /// The session's exact JSONL: every stored line in seq order, each followed by `\n` —
    /// byte for byte what a local session file holds. Every line is checked on the way.
    pub fn export(&self, id: &SessionId) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.export_to(id, &mut out)?;
        Ok(out)
    }

    /// Writes the session's exact JSONL to `out` (in batches; memory stays bounded).
    /// Returns the bytes written.
    pub fn export_to(&self, id: &SessionId, out: &mut dyn std::io::Write) -> Result<u64> {
        let location = self.shared.ctx.session_location(id);
        let mut next: i64 = 0;
        let mut written: u64 = 0;
        loop {
            let batch = self.fetch_lines(id, next - 1, 1024)?;
            if batch.is_empty() {
                if next == 0 {
                    return Err(self.shared.ctx.not_found(id).into());
                }
                return Ok(written);
            }
            for (seq, line, end) in batch {
                if seq != next {
                    return Err(corrupt(
                        &location,
                        next as u64,
                        written,
                        Problem::SeqGap {
                            expected: next as u64,
                            found: seq as u64,
                        },
                    ));
                }
                if seq == 0 {
                    parse_header(&location, id, &line)?;
                } else {
                    check_line(&location, seq as u64, written, &line)?;
                }
                check_end(&location, seq as u64, written, &line, end)?;
                out.write_all(&line)
                    .and_then(|()| out.write_all(b"\n"))
                    .map_err(|e| SessionError::Backend(format!("export {id}: write: {e}")))?;
                written += line.len() as u64 + 1;
                next += 1;
            }
        }
    }

    /// Lines with seq > `after` (use -1 to include the header), at most `limit`, with their
    /// end offsets.
    pub(crate) fn fetch_lines(
        &self,
        id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, Vec<u8>, i64)>> {
        let id = id.to_string();
        self.run(move |ctx| async move {
            let c = ctx.conn().await?;
            let rows = c
                .query(&ctx.sql.records_after, &[&id, &after, &limit])
                .await
                .map_err(ctx.db("read records"))?;
            Ok(rows
                .into_iter()
                .map(|r| {
                    (
                        r.get::<_, i64>(0),
                        r.get::<_, Vec<u8>>(1),
                        r.get::<_, i64>(2),
                    )
                })
                .collect())
        })
    }

    /// Stores a whole session given as its JSONL (e.g. a local session file): every line is
    /// checked (CRC, framing, gap-free seqs, header, replay) and kept byte for byte, so
    /// `export` gives back exactly `jsonl`. Never overwrites an existing session.
    pub fn import_lines(&self, jsonl: &[u8]) -> Result<SessionSummary> {
        if jsonl.is_empty() {
            return Err(SessionError::Backend("import: no lines given".into()));
        }
        if jsonl.last() != Some(&b'\n') {
            return Err(SessionError::Backend(
                "import: the last line is not complete (torn tail); run `lazarus sessions repair` on the file first".into(),
            ));
        }
        let body = &jsonl[..jsonl.len() - 1];
        let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
        // The id comes from the header; check it before anything else.
        let first: frame::Envelope<serde_json::Value> =
            frame::decode_line(lines[0]).map_err(|p| corrupt("import", 0, 0, p))?;
        let id = first
            .data
            .get("id")
            .and_then(|v| v.as_str())
            .ok_or_else(|| corrupt("import", 0, 0, Problem::Invalid("header has no id".into())))?;
        // The imported file names its id: it enters here.
        let id = SessionId::parse(id)?;
        let location = self.shared.ctx.session_location(&id);
        let mut replay = Replay::new(&location, &id);
        let mut end: i64 = 0;
        for (i, line) in lines.iter().enumerate() {
            end += line.len() as i64 + 1;
            replay.feed(i as i64, line, end)?;
        }
        let header = replay.finish().expect("at least the header").header.clone();
        let mut end: i64 = 0;
        let rows: Vec<(i64, String, Vec<u8>, i64)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let kind = if i == 0 {
                    "header".to_string()
                } else {
                    frame::decode_envelope::<serde::de::IgnoredAny>(l)
                        .map(|e| e.kind.to_string())
                        .unwrap_or_default()
                };
                end += l.len() as i64 + 1;
                (i as i64, kind, l.to_vec(), end)
            })
            .collect();
        let id2 = id.clone();
        self.run(move |ctx| async move {
            let mut c = ctx.conn().await?;
            let tx = c.transaction().await.map_err(ctx.db("begin import"))?;
            tx.execute(schema::DURABLE_TX, &[])
                .await
                .map_err(ctx.db("begin import"))?;
            if !insert_session(&ctx, &tx, &header).await? {
                return Err(ctx.already_exists(&id2));
            }
            for chunk in rows.chunks(1000) {
                let seqs: Vec<i64> = chunk.iter().map(|r| r.0).collect();
                let kinds: Vec<String> = chunk.iter().map(|r| r.1.clone()).collect();
                let lines: Vec<Vec<u8>> = chunk.iter().map(|r| r.2.clone()).collect();
                let ends: Vec<i64> = chunk.iter().map(|r| r.3).collect();
                tx.execute(
                    &ctx.sql.insert_records,
                    &[&id2.as_str(), &seqs, &kinds, &lines, &ends],
                )
                .await
                .map_err(ctx.db("import records"))?;
            }
            rebuild_listing(&ctx, &tx, &id2).await?;
            tx.commit().await.map_err(ctx.db("commit import"))?;
            Ok(())
        })?;
        self.summary(&id)
    }
}
