//! The writer: atomic create, open with recovery, durable append, group commit.
//!
//! This module holds the [`Writer`] handle itself, what an append and an open report, and the
//! two file operations its children share; the work is split by responsibility:
//! * `options`: the [`Durability`] modes, [`Options`] and their default limits;
//! * `create`: creating, importing and opening a ledger (the lock, the atomic write into
//!   place, recovery on open);
//! * `append`: appending a record and the writer's accessors;
//! * `sync`: group commit, a failed `fdatasync` and the poisoned writer;
//! * `aside`: saving bytes aside before they are cut, and reclaiming a name whose creation
//!   never completed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use crate::error::{LedgerError, Result};
use crate::fs::LedgerFile;
use crate::header::Header;
use crate::lock::WriterLock;
use crate::scan::Cut;

mod append;
mod aside;
mod create;
mod deferred;
mod options;
mod sync;

pub(crate) use aside::save_aside;
pub(crate) use create::check_header_id;
pub use deferred::Deferred;
pub use options::{Durability, LINE_BYTES_MAX_DEFAULT, Options, UNSYNCED_BYTES_MAX_DEFAULT};

/// Where an acknowledged record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    /// The record's timestamp as written.
    pub ts: String,
    /// Byte offset of the line.
    pub offset: u64,
    /// Line length, newline included.
    pub len: u64,
}

struct State {
    next_seq: u64,
    len: u64,
    buf: Vec<u8>,
}

/// What the group-commit leader keeps between syncs (only the leader locks it).
struct SyncState {
    /// The end of what group commit has written (synced or not).
    written_len: u64,
    /// The buffer the leader swaps with the pending batch (kept to reuse its allocation).
    spare: Vec<u8>,
    /// Lines in the last batch, and how long its `write` and `fdatasync` took: the next
    /// leader waits a little for as many lines (the appenders that sync let go, coming back).
    last_lines: usize,
    last_sync: std::time::Duration,
}

/// Group commit's lines waiting for the next sync leader, in seq order.
#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    lines: usize,
}

/// The one writer of a ledger. Appends are acknowledged per [`Durability`].
///
/// Safe to share between threads (`&self` methods); in [`Durability::Grouped`] mode that is
/// how many appenders share one `fdatasync`.
pub struct Writer {
    path: PathBuf,
    header: Header,
    file: std::sync::Arc<dyn LedgerFile>,
    opts: Options,
    state: Mutex<State>,
    sync: Mutex<SyncState>,
    /// Group commit: bytes a sync covered, whether an appender is leading one, and the futex
    /// word the others sleep on (bumped after each sync).
    synced_len: AtomicU64,
    syncing: AtomicBool,
    sync_generation: AtomicU32,
    /// Group commit: lines given seqs but not yet written, in seq order; the sync leader
    /// writes them in one `write`. Lock order: `state`, then `pending`; `sync` and `pending`
    /// are never held together.
    pending: Mutex<Pending>,
    poisoned: AtomicBool,
    poison_cause: Mutex<String>,
    /// Closed while a deferred append is not yet durable ([`Writer::append_json_deferred`]).
    gate: std::sync::Arc<deferred::Gate>,
    _lock: Option<WriterLock>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// What opening an existing ledger for writing found.
#[derive(Debug, Clone)]
pub struct Recovery {
    /// Debris that was cut from the end of the file, if any.
    pub cut: Option<Cut>,
    /// Where the cut bytes were saved (always, before the cut).
    pub saved_to: Option<PathBuf>,
    /// Number of good records, header excluded.
    pub records: u64,
    /// The process that held the writer lock before this one and died holding it.
    pub previous_holder: Option<crate::Holder>,
}

fn write_in_pieces(file: &dyn LedgerFile, buf: &[u8], opts: &Options, path: &Path) -> Result<()> {
    let pieces = opts.write_pieces.max(1);
    if pieces == 1 {
        return file
            .append(buf)
            .map_err(|e| LedgerError::io("write", path, e));
    }
    let step = buf.len().div_ceil(pieces).max(1);
    for chunk in buf.chunks(step) {
        file.append(chunk)
            .map_err(|e| LedgerError::io("write", path, e))?;
        if !opts.piece_pause.is_zero() {
            std::thread::sleep(opts.piece_pause);
        }
    }
    Ok(())
}

pub(crate) fn open_read(opts: &Options, path: &Path) -> Result<Box<dyn std::io::Read + Send>> {
    opts.fs
        .open_read(path)
        .map_err(|e| LedgerError::open_failed(path, e))
}
