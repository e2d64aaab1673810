//! The writer: exclusive create, open with recovery, durable append, group commit.

use std::io::Read;
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
use crate::lock::WriterLock;
use crate::scan::{Cut, LineInfo, ScanReport, Scanner, scan_all};

/// Default maximum line size: 16 MiB.
pub const LINE_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;

/// When an append is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every append is written and `fdatasync`ed before it returns (the default).
    #[default]
    PerRecord,
    /// Concurrent appends share one `fdatasync`; each returns only after the sync that covers
    /// its bytes. For bulk writers with many threads.
    Grouped,
    /// No sync at all: for tests and throwaway data only.
    None,
}

/// How a ledger is opened.
#[derive(Clone)]
pub struct Options {
    pub durability: Durability,
    /// Longest line accepted, newline excluded.
    pub line_bytes_max: usize,
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
            .field("format", &self.format)
            .field("lock", &self.lock)
            .finish_non_exhaustive()
    }
}

/// Path of the ledger file for `id` in `dir`.
pub fn ledger_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.jsonl"))
}

/// Path of the writer lock file for `id` in `dir`.
pub fn lock_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.lock"))
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

impl Writer {
    /// Creates a new ledger `dir/<id>.jsonl` holding `header` (plus `prefix`, already-encoded
    /// lines with seq 1, 2, …, used by fork), syncs it and its directory. Never overwrites an
    /// existing ledger.
    pub fn create(dir: &Path, header: Header, prefix: &[u8], opts: Options) -> Result<Writer> {
        validate_id(&header.id)?;
        let id = header.id.clone();
        let path = ledger_path(dir, &id);
        let lock = lock_if(&opts, dir, &id, &path)?;
        let mut line = Vec::new();
        let header_json = frame::data_to_json(&header).map_err(LedgerError::Serialize)?;
        frame::encode_line(&mut line, 0, &header.created_at, "header", &header_json);
        // Check the prefix is a run of good lines with seq 1.. before writing anything.
        let mut next_seq = 1;
        if !prefix.is_empty() {
            let mut sc =
                Scanner::from_position(&path, prefix, opts.line_bytes_max, line.len() as u64, 1, 1);
            while sc.next_record::<serde::de::IgnoredAny>()?.is_some() {}
            if sc.cut().is_some() {
                return Err(LedgerError::Serialize(
                    "fork prefix does not end with a complete, valid line".into(),
                ));
            }
            next_seq = sc.next_seq();
        }
        line.extend_from_slice(prefix);
        let file = match opts.fs.create_new(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                reclaim_headerless(&opts, &path)?
            }
            Err(e) => return Err(LedgerError::io("create", &path, e)),
        };
        let w = Writer::assemble(path, header, file, opts, lock, 0, 0);
        w.write_pieces(&line)?;
        w.file
            .sync_data()
            .map_err(|e| LedgerError::io("fdatasync", &w.path, e))?;
        w.opts
            .fs
            .sync_dir(dir)
            .map_err(|e| LedgerError::io("fsync directory", dir, e))?;
        {
            let mut st = w.lock_state();
            st.len = line.len() as u64;
            st.next_seq = next_seq;
        }
        w.written_len.store(line.len() as u64, Ordering::SeqCst);
        w.sync_state().synced_len = line.len() as u64;
        Ok(w)
    }

    /// Creates a ledger from complete, exported lines (header first), byte for byte, after
    /// checking every line. Never overwrites; syncs the file and its directory.
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
        let file = opts.fs.create_new(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                LedgerError::AlreadyExists { path: path.clone() }
            } else {
                LedgerError::io("create", &path, e)
            }
        })?;
        let w = Writer::assemble(path, header, file, opts, lock, next_seq, bytes.len() as u64);
        w.write_pieces(bytes)?;
        w.file
            .sync_data()
            .map_err(|e| LedgerError::io("fdatasync", &w.path, e))?;
        w.opts
            .fs
            .sync_dir(dir)
            .map_err(|e| LedgerError::io("fsync directory", dir, e))?;
        Ok(w)
    }

    /// Opens an existing ledger for appending: takes the lock, reads and validates every line
    /// (calling `on_record` for each, typed by `P`), cuts crash debris after the last good
    /// record (reported in [`Recovery`]), and refuses a corrupt file.
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
        if let Some(cut) = &report.cut {
            tracing::warn!(
                path = %path.display(),
                offset = cut.offset,
                bytes = cut.bytes,
                reason = %cut.reason,
                "cutting crash debris after the last good record"
            );
            file.truncate(report.good_len)
                .map_err(|e| LedgerError::io("truncate", &path, e))?;
            file.sync_data()
                .map_err(|e| LedgerError::io("fdatasync", &path, e))?;
        }
        let ScanReport {
            header,
            last_seq,
            good_len,
            cut,
            ..
        } = report;
        let w = Writer::assemble(path, header, file, opts, lock, last_seq + 1, good_len);
        Ok((
            w,
            Recovery {
                cut,
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
    ) -> Writer {
        Writer {
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
        }
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
        let offset = st.len;
        let written = self.write_pieces(&buf);
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
            Durability::PerRecord => {
                if let Err(e) = self.file.sync_data() {
                    self.poison(e.to_string());
                    return Err(LedgerError::io("fdatasync", &self.path, e));
                }
                Ok(appended)
            }
            Durability::Grouped => {
                self.written_len.store(end, Ordering::SeqCst);
                drop(st);
                self.wait_synced(end)?;
                Ok(appended)
            }
        }
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
                let target = self.written_len.load(Ordering::SeqCst);
                drop(s);
                let r = self.file.sync_data();
                s = self.sync_state();
                s.syncing = false;
                match r {
                    Ok(()) => s.synced_len = s.synced_len.max(target),
                    Err(e) => self.poison(e.to_string()),
                }
                self.synced.notify_all();
                continue;
            }
            s = self
                .synced
                .wait(s)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn write_pieces(&self, buf: &[u8]) -> Result<()> {
        let pieces = self.opts.write_pieces.max(1);
        if pieces == 1 {
            return self
                .file
                .append(buf)
                .map_err(|e| LedgerError::io("write", &self.path, e));
        }
        let step = buf.len().div_ceil(pieces).max(1);
        for chunk in buf.chunks(step) {
            self.file
                .append(chunk)
                .map_err(|e| LedgerError::io("write", &self.path, e))?;
            if !self.opts.piece_pause.is_zero() {
                std::thread::sleep(self.opts.piece_pause);
            }
        }
        Ok(())
    }

    fn poison(&self, cause: String) {
        tracing::error!(path = %self.path.display(), %cause, "fsync failed; writer poisoned");
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

    /// True once an fsync failed; every later append fails.
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

pub(crate) fn open_read(opts: &Options, path: &Path) -> Result<Box<dyn Read + Send>> {
    opts.fs.open_read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            LedgerError::NotFound {
                path: path.to_path_buf(),
            }
        } else {
            LedgerError::io("open", path, e)
        }
    })
}

pub(crate) fn check_header_id(path: &Path, header: &Header, id: &str) -> Result<()> {
    if header.id != id {
        return Err(LedgerError::Corrupt(Box::new(crate::error::Corruption {
            path: path.to_path_buf(),
            line: 1,
            offset: 0,
            problem: Problem::Invalid(format!(
                "header names session {:?} but the file is named for {id:?}",
                header.id
            )),
        })));
    }
    Ok(())
}

/// An existing file at a new session's path: if its creation never completed (no complete
/// header line), its bytes are set aside and the file is reused; otherwise it is a session.
fn reclaim_headerless(opts: &Options, path: &Path) -> Result<Box<dyn LedgerFile>> {
    let reader = open_read(opts, path)?;
    match Scanner::from_start(path, reader, opts.line_bytes_max, None) {
        Err(LedgerError::NoHeader { .. }) => {}
        _ => {
            return Err(LedgerError::AlreadyExists {
                path: path.to_path_buf(),
            });
        }
    }
    let mut bytes = Vec::new();
    open_read(opts, path)?
        .take(opts.line_bytes_max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| LedgerError::io("read", path, e))?;
    if !bytes.is_empty() {
        let aside = crate::repair::aside_path(path);
        opts.fs
            .write_new_durable(&aside, &bytes)
            .map_err(|e| LedgerError::io("save interrupted creation", &aside, e))?;
        tracing::warn!(path = %path.display(), saved = %aside.display(), "reusing a session file whose creation was interrupted");
    }
    let file = opts
        .fs
        .open_append(path)
        .map_err(|e| LedgerError::io("open for append", path, e))?;
    file.truncate(0)
        .map_err(|e| LedgerError::io("truncate", path, e))?;
    Ok(file)
}
