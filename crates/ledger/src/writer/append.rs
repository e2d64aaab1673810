//! Appending a record: one line encoded, checked against the line limit, written in one
//! `write`, then acknowledged per the [`Durability`] mode; and the writer's accessors.

use std::path::Path;
use std::sync::MutexGuard;

use serde::Serialize;

use crate::error::{LedgerError, Result};
use crate::frame;
use crate::header::Header;

use super::{Appended, Durability, Pending, State, Writer, write_in_pieces};

impl Writer {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Seq the next append will get.
    pub fn next_seq(&self) -> u64 {
        self.lock_state().next_seq
    }

    /// Bytes appended so far (all acknowledged in per-record mode; with group commit, the
    /// last batch may not have reached the file yet).
    pub fn len(&self) -> u64 {
        self.lock_state().len
    }

    pub fn is_empty(&self) -> bool {
        self.next_seq() <= 1
    }

    /// Appends one record; returns once it is durable (per the durability mode).
    pub fn append<T: Serialize + ?Sized>(&self, kind: &str, data: &T) -> Result<Appended> {
        let json = frame::data_to_json(data).map_err(LedgerError::Serialize)?;
        self.append_json(kind, &json)
    }

    /// Appends one record whose data is given as compact JSON object text (no newlines).
    pub fn append_json(&self, kind: &str, data_json: &[u8]) -> Result<Appended> {
        check_data(data_json)?;
        self.check_poison()?;
        let ts = frame::format_ts(jiff::Timestamp::now());
        let mut st = self.lock_state();
        // A deferred append in flight is waited for (and its failure acted on) first.
        self.settle_gate(&mut st)?;
        // Again under the lock: a failed sync may have cut the file back meanwhile.
        self.check_poison()?;
        if self.opts.durability == Durability::Grouped {
            return self.append_grouped(st, ts, kind, data_json);
        }
        let ticket = self.opts.shared_sync.as_ref().map(|s| s.ticket());
        let appended = self.write_line(&mut st, &ts, kind, data_json)?;
        if self.opts.durability == Durability::None {
            return Ok(appended);
        }
        match self.sync_per_record(ticket) {
            Ok(()) => Ok(appended),
            Err(e) => {
                st.len = appended.offset;
                Err(self.fail_sync(appended.offset, e))
            }
        }
    }

    /// The next line (seq `st.next_seq`) encoded in the state's reusable buffer, taken out of
    /// it (give it back); refused, buffer kept, when it is over the line limit.
    fn encode_next(
        &self,
        st: &mut State,
        ts: &str,
        kind: &str,
        data_json: &[u8],
    ) -> Result<Vec<u8>> {
        let mut buf = std::mem::take(&mut st.buf);
        frame::encode_line(&mut buf, st.next_seq, ts, kind, data_json);
        if buf.len() - 1 > self.opts.line_bytes_max {
            let len = buf.len() - 1;
            st.buf = buf;
            return Err(LedgerError::RecordTooLarge {
                len,
                max: self.opts.line_bytes_max,
            });
        }
        Ok(buf)
    }

    /// Encodes the next line and writes it (not synced); the state moves past it.
    pub(super) fn write_line(
        &self,
        st: &mut State,
        ts: &str,
        kind: &str,
        data_json: &[u8],
    ) -> Result<Appended> {
        let seq = st.next_seq;
        let buf = self.encode_next(st, ts, kind, data_json)?;
        let line_len = buf.len();
        let offset = st.len;
        let written = write_in_pieces(&*self.file, &buf, &self.opts, &self.path);
        st.buf = buf;
        if let Err(e) = written {
            // A failed write may have left part of a line: cut it back, or give up the handle.
            if self.file.truncate(offset).is_err() {
                self.poison(format!("write failed and could not be undone: {e}"));
            }
            return Err(e);
        }
        st.next_seq += 1;
        st.len += line_len as u64;
        Ok(Appended {
            seq,
            ts: ts.to_string(),
            offset,
            len: line_len as u64,
        })
    }

    /// Group commit: the line joins the batch the next sync leader writes in one `write`
    /// before its `fdatasync` (in seq order: it is queued under the state lock).
    fn append_grouped(
        &self,
        mut st: MutexGuard<'_, State>,
        ts: String,
        kind: &str,
        data_json: &[u8],
    ) -> Result<Appended> {
        let seq = st.next_seq;
        let buf = self.encode_next(&mut st, &ts, kind, data_json)?;
        let line_len = buf.len();
        if let Err(e) = self.make_room(&st, line_len as u64) {
            st.buf = buf;
            return Err(e);
        }
        let appended = Appended {
            seq,
            ts,
            offset: st.len,
            len: line_len as u64,
        };
        {
            let mut pending = self.lock_pending();
            pending.bytes.extend_from_slice(&buf);
            pending.lines += 1;
        }
        st.buf = buf;
        st.next_seq += 1;
        st.len += line_len as u64;
        let end = st.len;
        drop(st);
        self.wait_synced(end)?;
        Ok(appended)
    }

    /// Makes what this writer wrote durable: its own `fdatasync`, or a `syncfs` shared with
    /// the other writers on the file system that began after the write; when that batch
    /// failed, the file's own `fdatasync` tells whether these bytes were lost.
    fn sync_per_record(&self, ticket: Option<crate::shared_sync::Ticket>) -> std::io::Result<()> {
        if let (Some(shared), Some(ticket)) = (&self.opts.shared_sync, ticket)
            && shared.wait(ticket).is_ok()
        {
            return Ok(());
        }
        self.file.sync_data()
    }

    pub(super) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn lock_pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Record data must be one line of compact JSON object text.
pub(super) fn check_data(data_json: &[u8]) -> Result<()> {
    if data_json.first() != Some(&b'{') || data_json.contains(&b'\n') {
        return Err(LedgerError::Serialize(
            "record data must be one-line compact JSON object text".into(),
        ));
    }
    Ok(())
}
