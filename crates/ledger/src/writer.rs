//! The writer: atomic create, open with recovery, durable append, group commit.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;

use crate::error::{LedgerError, Problem, Result};
use crate::frame::{self, Envelope, Payload};
use crate::fs::{LedgerFile, SharedFs};
use crate::header::Header;
use crate::id::validate_id;
use crate::layout::{creating_path, cut_path, cut_time, ledger_path, lock_path};
use crate::lock::WriterLock;
use crate::scan::{CrashWindow, Cut, LineInfo, ScanReport, Scanner, scan_all};

/// Default maximum line size: 16 MiB.
pub const LINE_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;

/// Default bound on the bytes a group-commit writer leaves unsynced: 1 MiB.
pub const UNSYNCED_BYTES_MAX_DEFAULT: usize = 1024 * 1024;

/// When an append is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every append is written and `fdatasync`ed before it returns (the default). A crash can
    /// damage only the last line.
    #[default]
    PerRecord,
    /// Concurrent appends share one `fdatasync`; each returns only after the sync that covers
    /// its bytes. For bulk writers with many threads. Chosen when a ledger is created (its
    /// header then names [`Options::unsynced_bytes_max`], the crash window recovery honours);
    /// a ledger created for per-record appends refuses it.
    Grouped,
    /// No sync at all: for tests and throwaway data only (after a power cut the file may need
    /// `repair`).
    None,
}

/// How a ledger is opened.
#[derive(Clone)]
pub struct Options {
    pub durability: Durability,
    /// Longest line accepted, newline excluded.
    pub line_bytes_max: usize,
    /// For a ledger created with [`Durability::Grouped`]: the most bytes a writer may leave
    /// unsynced at any moment (a single longer line is written alone). Recorded in the header.
    pub unsynced_bytes_max: usize,
    /// The application format name the header must carry (`None`: accept any).
    pub format: Option<String>,
    /// File system to use (the real one unless a test simulates power loss).
    pub fs: SharedFs,
    /// Take the cross-process writer lock (always, except for simulated file systems).
    pub lock: bool,
    /// Test hook: write each line in this many pieces, pausing between them, to widen the
    /// window in which a crash tears a line. 0 or 1 = one write (the product behaviour).
    #[doc(hidden)]
    pub write_pieces: usize,
    #[doc(hidden)]
    pub piece_pause: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::PerRecord,
            line_bytes_max: LINE_BYTES_MAX_DEFAULT,
            unsynced_bytes_max: UNSYNCED_BYTES_MAX_DEFAULT,
            format: None,
            fs: crate::fs::real(),
            lock: true,
            write_pieces: 0,
            piece_pause: Duration::ZERO,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("durability", &self.durability)
            .field("line_bytes_max", &self.line_bytes_max)
            .field("unsynced_bytes_max", &self.unsynced_bytes_max)
            .field("format", &self.format)
            .field("lock", &self.lock)
            .finish_non_exhaustive()
    }
}

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

struct SyncState {
    synced_len: u64,
    syncing: bool,
}

/// The one writer of a ledger. Appends are acknowledged per [`Durability`].
///
/// Safe to share between threads (`&self` methods); in [`Durability::Grouped`] mode that is
/// how many appenders share one `fdatasync`.
pub struct Writer {
    path: PathBuf,
    header: Header,
    file: Box<dyn LedgerFile>,
    opts: Options,
    state: Mutex<State>,
    sync: Mutex<SyncState>,
    synced: Condvar,
    written_len: AtomicU64,
    poisoned: AtomicBool,
    poison_cause: Mutex<String>,
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
}

fn lock_if(opts: &Options, dir: &Path, id: &str, path: &Path) -> Result<Option<WriterLock>> {
    if opts.lock {
        Ok(Some(WriterLock::acquire(&lock_path(dir, id), path)?))
    } else {
        Ok(None)
    }
}

/// Saves `ledger[from..]` beside it under a new `*.cut-<time>` name, durably, before those
/// bytes are cut. `None` when there is nothing after `from`.
pub(crate) fn save_aside(
    opts: &Options,
    ledger: &Path,
    from: u64,
) -> Result<Option<(PathBuf, u64)>> {
    save_aside_at(opts, ledger, from, &cut_time())
}

/// Most names tried for one saved file (`<time>`, `<time>-1`, …) before giving up.
const CUT_NAME_ATTEMPTS_MAX: u32 = 1000;

fn save_aside_at(
    opts: &Options,
    ledger: &Path,
    from: u64,
    time: &str,
) -> Result<Option<(PathBuf, u64)>> {
    let mut attempt = 0;
    loop {
        let aside = cut_path(ledger, time, attempt);
        match opts.fs.save_range(ledger, from, &aside) {
            Ok(0) => {
                // Nothing was there after all: leave no empty file behind.
                let _ = opts.fs.remove_file(&aside);
                return Ok(None);
            }
            Ok(n) => return Ok(Some((aside, n))),
            Err(e)
                if e.kind() == std::io::ErrorKind::AlreadyExists
                    && attempt < CUT_NAME_ATTEMPTS_MAX =>
            {
                attempt += 1;
            }
            Err(e) => return Err(LedgerError::io("save the bytes to be cut", &aside, e)),
        }
    }
}

impl Writer {
    /// Creates a new ledger `dir/<id>.jsonl` holding `header` (plus `prefix`, already-encoded
    /// lines with seq 1, 2, …, used by fork). Atomic: the lines are written to a hidden
    /// temporary name and synced, then renamed into place (never over an existing ledger) and
    /// the directory synced — a crash leaves either no ledger or a whole one.
    pub fn create(dir: &Path, mut header: Header, prefix: &[u8], opts: Options) -> Result<Writer> {
        validate_id(&header.id)?;
        if opts.durability == Durability::Grouped {
            header.unsynced_bytes_max = Some(opts.unsynced_bytes_max as u64);
        }
        let id = header.id.clone();
        let path = ledger_path(dir, &id);
        let lock = lock_if(&opts, dir, &id, &path)?;
        let made = (|| {
            let mut line = Vec::new();
            let header_json = frame::data_to_json(&header).map_err(LedgerError::Serialize)?;
            frame::encode_line(&mut line, 0, &header.created_at, "header", &header_json);
            // Check the prefix is a run of good lines with seq 1.. before writing anything.
            let mut next_seq = 1;
            if !prefix.is_empty() {
                let mut sc = Scanner::from_position(
                    &path,
                    prefix,
                    CrashWindow::per_record(opts.line_bytes_max),
                    line.len() as u64,
                    1,
                    1,
                );
                while sc.next_record::<serde::de::IgnoredAny>()?.is_some() {}
                if sc.cut().is_some() {
                    return Err(LedgerError::Serialize(
                        "fork prefix does not end with a complete, valid line".into(),
                    ));
                }
                next_seq = sc.next_seq();
            }
            line.extend_from_slice(prefix);
            let replace = reclaim_headerless(&opts, &path)?;
            let file = write_into_place(&opts, dir, &id, &path, &line, replace)?;
            Ok((file, next_seq, line.len() as u64))
        })();
        match made {
            Ok((file, next_seq, len)) => {
                Writer::assemble(path, header, file, opts, lock, next_seq, len)
            }
            Err(e) => {
                // A creation that failed leaves nothing behind: not even its lock file (unless
                // a ledger of that name exists, whose lock it is).
                if let Some(lock) = lock
                    && std::fs::symlink_metadata(&path).is_err()
                {
                    lock.remove();
                }
                Err(e)
            }
        }
    }

    /// Creates a ledger from complete, exported lines (header first), byte for byte, after
    /// checking every line. Never overwrites; atomic like [`Writer::create`].
    pub fn import(dir: &Path, bytes: &[u8], opts: Options) -> Result<Writer> {
        let (mut sc, header) = Scanner::from_start(
            Path::new("<import>"),
            bytes,
            opts.line_bytes_max,
            opts.format.as_deref(),
        )?;
        while sc.next_record::<serde::de::IgnoredAny>()?.is_some() {}
        if let Some(cut) = sc.cut() {
            return Err(LedgerError::Serialize(format!(
                "import: line {} (offset {}) is not a complete, valid line: {}",
                cut.line, cut.offset, cut.reason
            )));
        }
        let next_seq = sc.next_seq();
        validate_id(&header.id)?;
        let id = header.id.clone();
        let path = ledger_path(dir, &id);
        let lock = lock_if(&opts, dir, &id, &path)?;
        let file = write_into_place(&opts, dir, &id, &path, bytes, false)?;
        Writer::assemble(path, header, file, opts, lock, next_seq, bytes.len() as u64)
    }

    /// Opens an existing ledger for appending: takes the lock, reads and validates every line
    /// (calling `on_record` for each, typed by `P`), and refuses a corrupt file. Crash debris
    /// after the last good record (see [`crate::scan`]) is first saved beside the file, then
    /// cut; both are reported in [`Recovery`].
    pub fn open_with<P, F>(
        dir: &Path,
        id: &str,
        opts: Options,
        on_record: F,
    ) -> Result<(Writer, Recovery)>
    where
        P: for<'a> Payload<'a>,
        F: FnMut(LineInfo, Envelope<'_, P>) -> std::result::Result<(), Problem>,
    {
        validate_id(id)?;
        let path = ledger_path(dir, id);
        let lock = lock_if(&opts, dir, id, &path)?;
        let reader = open_read(&opts, &path)?;
        let report = scan_all(
            &path,
            reader,
            opts.line_bytes_max,
            opts.format.as_deref(),
            on_record,
        )?;
        check_header_id(&path, &report.header, id)?;
        let file = opts
            .fs
            .open_append(&path)
            .map_err(|e| LedgerError::io("open for append", &path, e))?;
        let mut saved_to = None;
        if let Some(cut) = &report.cut {
            let saved = save_aside(&opts, &path, report.good_len)?;
            tracing::warn!(
                path = %path.display(),
                offset = cut.offset,
                bytes = cut.bytes,
                lines = cut.lines,
                reason = %cut.reason,
                saved_to = %saved.as_ref().map(|(p, _)| p.display().to_string()).unwrap_or_default(),
                "cutting crash debris after the last good record (saved beside the file first)"
            );
            file.truncate(report.good_len)
                .map_err(|e| LedgerError::io("truncate", &path, e))?;
            file.sync_data()
                .map_err(|e| LedgerError::io("fdatasync", &path, e))?;
            saved_to = saved.map(|(p, _)| p);
        }
        let ScanReport {
            header,
            last_seq,
            good_len,
            cut,
            ..
        } = report;
        let w = Writer::assemble(path, header, file, opts, lock, last_seq + 1, good_len)?;
        Ok((
            w,
            Recovery {
                cut,
                saved_to,
                records: last_seq,
            },
        ))
    }

    /// [`Writer::open_with`] without looking at the records.
    pub fn open(dir: &Path, id: &str, opts: Options) -> Result<(Writer, Recovery)> {
        Self::open_with::<serde::de::IgnoredAny, _>(dir, id, opts, |_, _| Ok(()))
    }

    fn assemble(
        path: PathBuf,
        header: Header,
        file: Box<dyn LedgerFile>,
        opts: Options,
        lock: Option<WriterLock>,
        next_seq: u64,
        len: u64,
    ) -> Result<Writer> {
        if opts.durability == Durability::Grouped && header.unsynced_bytes_max.is_none() {
            return Err(LedgerError::DurabilityMismatch { path });
        }
        Ok(Writer {
            path,
            header,
            file,
            opts,
            state: Mutex::new(State {
                next_seq,
                len,
                buf: Vec::with_capacity(1024),
            }),
            sync: Mutex::new(SyncState {
                synced_len: len,
                syncing: false,
            }),
            synced: Condvar::new(),
            written_len: AtomicU64::new(len),
            poisoned: AtomicBool::new(false),
            poison_cause: Mutex::new(String::new()),
            _lock: lock,
        })
    }

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

    /// Bytes in the file (all acknowledged in per-record mode).
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
        let end = st.len;
        let appended = Appended {
            seq,
            ts,
            offset,
            len: line_len as u64,
        };
        match self.opts.durability {
            Durability::None => Ok(appended),
            Durability::PerRecord => match self.file.sync_data() {
                Ok(()) => Ok(appended),
                Err(e) => {
                    st.len = offset;
                    Err(self.fail_sync(offset, e))
                }
            },
            Durability::Grouped => {
                self.written_len.store(end, Ordering::SeqCst);
                drop(st);
                self.wait_synced(end)?;
                Ok(appended)
            }
        }
    }

    /// Group commit keeps the unsynced bytes within the ledger's crash window: before a line
    /// that would overflow it is written, everything written so far is synced (so a line
    /// longer than the window is written alone). Called holding the state lock, so nobody
    /// writes meanwhile.
    fn make_room(&self, st: &State, line_len: u64) -> Result<()> {
        let max = self
            .header
            .unsynced_bytes_max
            .unwrap_or(UNSYNCED_BYTES_MAX_DEFAULT as u64);
        let synced = self.sync_state().synced_len;
        let unsynced = st.len - synced;
        if unsynced == 0 || unsynced + line_len <= max {
            return Ok(());
        }
        self.wait_synced(st.len)
    }

    /// Group commit: wait until a sync covers `end`, leading one if none is running.
    fn wait_synced(&self, end: u64) -> Result<()> {
        let mut s = self.sync_state();
        loop {
            self.check_poison()?;
            if s.synced_len >= end {
                return Ok(());
            }
            if !s.syncing {
                s.syncing = true;
                // What this sync covers: the bytes written before it starts. Read before the
                // sync, never after: bytes written while it runs are not covered.
                let target = self.written_len.load(Ordering::SeqCst);
                let durable = s.synced_len;
                drop(s);
                let r = self.file.sync_data();
                let failed = r.err().map(|e| self.fail_sync(durable, e));
                s = self.sync_state();
                s.syncing = false;
                if failed.is_none() {
                    s.synced_len = s.synced_len.max(target);
                }
                self.synced.notify_all();
                if let Some(e) = failed {
                    return Err(e);
                }
                continue;
            }
            s = self
                .synced
                .wait(s)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// After a failed `fdatasync`. Linux may have dropped the dirty pages: reads still show
    /// the bytes, and a retried fsync "succeeds" without ever writing them. So the writer never
    /// retries; it poisons itself, saves the bytes after `durable_len` (the last synced end)
    /// aside, and cuts the file back to it, so nobody reopening the session builds on records
    /// that are not on the disk. Needs no lock beyond the poison flag: appenders check it
    /// before writing.
    fn fail_sync(&self, durable_len: u64, cause: std::io::Error) -> LedgerError {
        let mut note = format!("fdatasync failed: {cause}");
        self.poison(note.clone());
        match save_aside(&self.opts, &self.path, durable_len) {
            Ok(Some((p, n))) => {
                note.push_str(&format!("; {n} unsynced bytes saved to {}", p.display()))
            }
            Ok(None) => {}
            Err(e) => note.push_str(&format!("; the unsynced bytes could not be saved: {e}")),
        }
        match self
            .file
            .truncate(durable_len)
            .and_then(|()| self.file.sync_data())
        {
            Ok(()) => note.push_str("; the file was cut back to its last durable record"),
            Err(e) => note.push_str(&format!(
                "; the file could not be cut back to its last durable record ({e}): check the disk before reopening the session"
            )),
        }
        tracing::error!(path = %self.path.display(), cause = %note, "writer poisoned");
        *self.poison_cause.lock().unwrap_or_else(|p| p.into_inner()) = note;
        LedgerError::io("fdatasync", &self.path, cause)
    }

    fn poison(&self, cause: String) {
        *self.poison_cause.lock().unwrap_or_else(|p| p.into_inner()) = cause;
        self.poisoned.store(true, Ordering::SeqCst);
    }

    fn check_poison(&self) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            let cause = self
                .poison_cause
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            return Err(LedgerError::Poisoned {
                path: self.path.clone(),
                cause,
            });
        }
        Ok(())
    }

    /// True once an fsync (or undoing a failed write) failed; every later append fails.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sync_state(&self) -> MutexGuard<'_, SyncState> {
        self.sync.lock().unwrap_or_else(|p| p.into_inner())
    }
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

/// Writes `bytes` as the new ledger `path`: into the hidden temporary name first, synced,
/// then renamed into place (over `path` only when `replace`, i.e. after its bytes were set
/// aside) and the directory synced. Returns the file, open for appending.
fn write_into_place(
    opts: &Options,
    dir: &Path,
    id: &str,
    path: &Path,
    bytes: &[u8],
    replace: bool,
) -> Result<Box<dyn LedgerFile>> {
    let tmp = creating_path(dir, id);
    let file = match opts.fs.create_new(&tmp) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Left by a creation that crashed before it was acknowledged; we hold the lock.
            opts.fs
                .remove_file(&tmp)
                .map_err(|e| LedgerError::io("remove", &tmp, e))?;
            opts.fs
                .create_new(&tmp)
                .map_err(|e| LedgerError::io("create", &tmp, e))?
        }
        Err(e) => return Err(LedgerError::io("create", &tmp, e)),
    };
    // Durability::None (tests, throwaway data) skips the syncs, here as everywhere.
    let sync = opts.durability != Durability::None;
    let written = write_in_pieces(&*file, bytes, opts, &tmp).and_then(|()| {
        if !sync {
            return Ok(());
        }
        file.sync_data()
            .map_err(|e| LedgerError::io("fdatasync", &tmp, e))
    });
    if let Err(e) = written {
        let _ = opts.fs.remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = opts.fs.rename(&tmp, path, replace) {
        let _ = opts.fs.remove_file(&tmp);
        return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
            LedgerError::AlreadyExists {
                path: path.to_path_buf(),
            }
        } else {
            LedgerError::io("rename into place", path, e)
        });
    }
    if sync {
        opts.fs
            .sync_dir(dir)
            .map_err(|e| LedgerError::io("fsync directory", dir, e))?;
    }
    Ok(file)
}

pub(crate) fn open_read(opts: &Options, path: &Path) -> Result<Box<dyn std::io::Read + Send>> {
    opts.fs
        .open_read(path)
        .map_err(|e| LedgerError::open_failed(path, e))
}

pub(crate) fn check_header_id(path: &Path, header: &Header, id: &str) -> Result<()> {
    if header.id != id {
        return Err(LedgerError::Corrupt(Box::new(
            crate::error::Corruption::new(
                path,
                1,
                0,
                Problem::Invalid(format!(
                    "header names session {:?} but the file is named for {id:?}",
                    header.id
                )),
            ),
        )));
    }
    Ok(())
}

/// Whether a new ledger may take the name `path`: `false` when the name is free. An existing
/// file whose creation never completed (no complete header line, written by versions that
/// created ledgers in place) has its bytes set aside and may be replaced (`true`); anything
/// else at that name is a ledger and is never overwritten.
fn reclaim_headerless(opts: &Options, path: &Path) -> Result<bool> {
    let reader = match opts.fs.open_read(path) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(LedgerError::open_failed(path, e)),
    };
    let exists = || LedgerError::AlreadyExists {
        path: path.to_path_buf(),
    };
    match Scanner::from_start(path, reader, opts.line_bytes_max, None) {
        Err(LedgerError::NoHeader { .. }) => {}
        _ => return Err(exists()),
    }
    // A damaged header before records is a damaged session, not an interrupted creation.
    if crate::scan::any_valid_line(path, open_read(opts, path)?, opts.line_bytes_max)? {
        return Err(exists());
    }
    if let Some((aside, n)) = save_aside(opts, path, 0)? {
        tracing::warn!(path = %path.display(), saved = %aside.display(), bytes = n, "replacing a session file whose creation was interrupted (its bytes were saved)");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Fs;
    use crate::sim::SimFs;

    fn sim_opts(fs: &SimFs) -> Options {
        Options {
            fs: std::sync::Arc::new(fs.clone()),
            lock: false,
            ..Options::default()
        }
    }

    #[test]
    fn a_saved_file_takes_the_next_free_name_and_gives_up_after_the_last() {
        let fs = SimFs::new();
        let o = sim_opts(&fs);
        let ledger = Path::new("/d/s.jsonl");
        fs.write_new_durable(ledger, b"good\ndebris").unwrap();
        let t = "20260101T000000.000000Z";
        for taken in [cut_path(ledger, t, 0), cut_path(ledger, t, 1)] {
            fs.write_new_durable(&taken, b"earlier").unwrap();
        }
        let (p, n) = save_aside_at(&o, ledger, 5, t).unwrap().unwrap();
        assert_eq!(p, cut_path(ledger, t, 2));
        assert_eq!(n, 6);
        assert_eq!(fs.contents(&p).unwrap(), b"debris");
        for a in 3..=CUT_NAME_ATTEMPTS_MAX {
            fs.write_new_durable(&cut_path(ledger, t, a), b"x").unwrap();
        }
        let e = save_aside_at(&o, ledger, 5, t).unwrap_err();
        assert!(matches!(e, LedgerError::Io { .. }), "{e}");
        // nothing after `from`: nothing saved, no empty file left
        assert!(save_aside_at(&o, ledger, 11, "other").unwrap().is_none());
        assert!(fs.contents(&cut_path(ledger, "other", 0)).is_none());
    }

    #[test]
    fn the_defaults_are_the_documented_limits() {
        assert_eq!(LINE_BYTES_MAX_DEFAULT, 16 * 1024 * 1024);
        assert_eq!(UNSYNCED_BYTES_MAX_DEFAULT, 1024 * 1024);
        let o = Options::default();
        let shown = format!("{o:?}");
        assert!(
            shown.contains("PerRecord") && shown.contains("16777216"),
            "{shown}"
        );
    }
}
