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
        if data_json.first() != Some(&b'{') || data_json.contains(&b'\n') {
            return Err(LedgerError::Serialize(
                "record data must be one-line compact JSON object text".into(),
            ));
        }
        self.check_poison()?;
        let ts = frame::format_ts(jiff::Timestamp::now());
        let mut st = self.lock_state();
        // Again under the lock: a failed sync may have cut the file back meanwhile.
        self.check_poison()?;
        let seq = st.next_seq;
        let mut buf = std::mem::take(&mut st.buf);
        frame::encode_line(&mut buf, seq, &ts, kind, data_json);
        let line_len = buf.len();
        if line_len - 1 > self.opts.line_bytes_max {
            st.buf = buf;
            return Err(LedgerError::RecordTooLarge {
                len: line_len - 1,
                max: self.opts.line_bytes_max,
            });
        }
        if self.opts.durability == Durability::Grouped
            && let Err(e) = self.make_room(&st, line_len as u64)
        {
            st.buf = buf;
            return Err(e);
        }
        let appended = Appended {
            seq,
            ts,
            offset: st.len,
            len: line_len as u64,
        };
        if self.opts.durability == Durability::Grouped {
            // Group commit: the line joins the batch the next sync leader writes in one
            // `write` before its `fdatasync` (in seq order: it is queued under the state lock).
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
            return Ok(appended);
        }
        let offset = appended.offset;
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
        if self.opts.durability == Durability::None {
            return Ok(appended);
        }
        match self.file.sync_data() {
            Ok(()) => Ok(appended),
            Err(e) => {
                st.len = offset;
                Err(self.fail_sync(offset, e))
            }
        }
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn lock_pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}
