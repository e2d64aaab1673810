//! Creating, importing and opening a ledger: the writer lock, the atomic write into place
//! (temporary name, sync, rename, directory sync), and recovery on open (debris saved aside,
//! then cut). Every [`Writer`] is assembled here.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use crate::error::{LedgerError, Problem, Result};
use crate::frame::{self, Envelope, Payload};
use crate::fs::LedgerFile;
use crate::header::Header;
use crate::id::validate_id;
use crate::layout::{creating_path, ledger_path, lock_path};
use crate::lock::WriterLock;
use crate::parallel::scan_all_parallel;
use crate::scan::{CrashWindow, LineInfo, ScanReport, Scanner, scan_all};

use super::aside::{reclaim_headerless, save_aside};
use super::{
    Durability, Options, Pending, Recovery, State, SyncState, Writer, open_read, write_in_pieces,
};

fn lock_if(opts: &Options, dir: &Path, id: &str, path: &Path) -> Result<Option<WriterLock>> {
    if opts.lock {
        Ok(Some(WriterLock::acquire(&lock_path(dir, id), path)?))
    } else {
        Ok(None)
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
        Self::open_scanning(dir, id, opts, |path, reader, opts| {
            scan_all(
                path,
                reader,
                opts.line_bytes_max,
                opts.format.as_deref(),
                on_record,
            )
        })
    }

    /// [`Writer::open_with`] for a caller that needs each record's seq and typed data only:
    /// a big ledger's records are decoded on more than one core ([`crate::parallel`]), and
    /// `on_record` still sees them one by one, in order, on this thread.
    pub fn open_replaying<P, F>(
        dir: &Path,
        id: &str,
        opts: Options,
        on_record: F,
    ) -> Result<(Writer, Recovery)>
    where
        P: for<'a> Payload<'a> + Send + 'static,
        F: FnMut(LineInfo, u64, P) -> std::result::Result<(), Problem>,
    {
        Self::open_scanning(dir, id, opts, |path, reader, opts| {
            let size = opts.fs.file_len(path).unwrap_or(0);
            scan_all_parallel(
                path,
                reader,
                opts.line_bytes_max,
                opts.format.as_deref(),
                crate::parallel::workers_for(size, opts.replay_workers),
                size,
                on_record,
            )
        })
    }

    fn open_scanning(
        dir: &Path,
        id: &str,
        opts: Options,
        scan: impl FnOnce(&Path, Box<dyn std::io::Read + Send>, &Options) -> Result<ScanReport>,
    ) -> Result<(Writer, Recovery)> {
        validate_id(id)?;
        let path = ledger_path(dir, id);
        let lock = lock_if(&opts, dir, id, &path)?;
        let reader = open_read(&opts, &path)?;
        let report = scan(&path, reader, &opts)?;
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
        let previous_holder = lock.as_ref().and_then(|l| l.previous().cloned());
        let w = Writer::assemble(path, header, file, opts, lock, last_seq + 1, good_len)?;
        Ok((
            w,
            Recovery {
                cut,
                saved_to,
                records: last_seq,
                previous_holder,
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
            file: std::sync::Arc::from(file),
            opts,
            state: Mutex::new(State {
                next_seq,
                len,
                buf: Vec::with_capacity(1024),
            }),
            sync: Mutex::new(SyncState {
                written_len: len,
                spare: Vec::new(),
                last_lines: 0,
                last_sync: std::time::Duration::ZERO,
            }),
            synced_len: AtomicU64::new(len),
            syncing: AtomicBool::new(false),
            sync_generation: AtomicU32::new(0),
            pending: Mutex::new(Pending::default()),
            poisoned: AtomicBool::new(false),
            poison_cause: Mutex::new(String::new()),
            gate: Default::default(),
            _lock: lock,
        })
    }
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
