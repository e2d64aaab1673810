//! Diagnosis (`verify`) and the one destructive operation (`repair`), kept apart from the
//! happy path. Repair never deletes data: the bytes it removes are first saved beside the
//! file as `<file>.corrupt-<timestamp>` and synced.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Corruption, LedgerError, Problem, Result};
use crate::header::Header;
use crate::id::validate_id;
use crate::scan::{Cut, scan_all};
use crate::writer::{Options, check_header_id, ledger_path, lock_path, open_read};

/// What `verify` found.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    pub path: PathBuf,
    pub header: Option<Header>,
    /// Good records, header excluded.
    pub records: u64,
    /// Bytes of the file.
    pub size: u64,
    /// Problems, each with line and offset. Empty = clean.
    pub problems: Vec<Finding>,
}

/// One problem found by `verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub line: u64,
    pub offset: u64,
    pub problem: Problem,
    /// True when the next open for writing cuts it away by itself (crash debris).
    pub recoverable: bool,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Reads and checks every line of `path`, changing nothing. Takes no lock.
pub fn verify_file(path: &Path, opts: &Options) -> Result<VerifyReport> {
    let size = std::fs::metadata(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                LedgerError::NotFound {
                    path: path.to_path_buf(),
                }
            } else {
                LedgerError::io("stat", path, e)
            }
        })?
        .len();
    let mut report = VerifyReport {
        path: path.to_path_buf(),
        header: None,
        records: 0,
        size,
        problems: Vec::new(),
    };
    let reader = open_read(opts, path)?;
    let mut records = 0;
    match scan_all::<_, serde::de::IgnoredAny, _>(
        path,
        reader,
        opts.line_bytes_max,
        opts.format.as_deref(),
        |_, _| {
            records += 1;
            Ok(())
        },
    ) {
        Ok(scan) => {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                && let Err(LedgerError::Corrupt(c)) = check_header_id(path, &scan.header, stem)
            {
                report.problems.push(finding(&c, false));
            }
            report.records = scan.last_seq;
            report.header = Some(scan.header);
            if let Some(cut) = scan.cut {
                report.problems.push(Finding {
                    line: cut.line,
                    offset: cut.offset,
                    problem: cut.reason,
                    recoverable: true,
                });
            }
        }
        Err(LedgerError::Corrupt(c)) => {
            report.records = records;
            report.problems.push(finding(&c, false));
        }
        Err(LedgerError::NoHeader { .. }) => {
            report.problems.push(Finding {
                line: 1,
                offset: 0,
                problem: Problem::Invalid(
                    "no complete header line (creation was interrupted)".into(),
                ),
                recoverable: false,
            });
        }
        Err(e) => return Err(e),
    }
    Ok(report)
}

fn finding(c: &Corruption, recoverable: bool) -> Finding {
    Finding {
        line: c.line,
        offset: c.offset,
        problem: c.problem.clone(),
        recoverable,
    }
}

/// What `repair` did.
#[derive(Debug, Clone)]
pub struct RepairOutcome {
    pub path: PathBuf,
    /// Where the log now ends (bytes kept).
    pub kept_bytes: u64,
    /// The first bad line, if anything was removed.
    pub removed: Option<Cut>,
    /// Where the removed bytes were saved.
    pub saved_to: Option<PathBuf>,
}

/// Cuts the session `dir/<id>.jsonl` back to its last good record, after saving the removed
/// bytes beside it. Takes the writer lock (fails if a writer is running).
pub fn repair(dir: &Path, id: &str, opts: &Options) -> Result<RepairOutcome> {
    validate_id(id)?;
    let path = ledger_path(dir, id);
    let _lock = crate::lock::WriterLock::acquire(&lock_path(dir, id), &path)?;
    let reader = open_read(opts, &path)?;
    let cut = match scan_all::<_, serde::de::IgnoredAny, _>(
        &path,
        reader,
        opts.line_bytes_max,
        opts.format.as_deref(),
        |_, _| Ok(()),
    ) {
        Ok(scan) => scan.cut,
        Err(LedgerError::Corrupt(c)) => Some(Cut {
            offset: c.offset,
            bytes: 0,
            line: c.line,
            reason: c.problem.clone(),
        }),
        Err(LedgerError::NoHeader { .. }) => Some(Cut {
            offset: 0,
            bytes: 0,
            line: 1,
            reason: Problem::Invalid("no complete header line".into()),
        }),
        Err(e) => return Err(e),
    };
    let Some(mut cut) = cut else {
        let kept_bytes = std::fs::metadata(&path)
            .map_err(|e| LedgerError::io("stat", &path, e))?
            .len();
        return Ok(RepairOutcome {
            path,
            kept_bytes,
            removed: None,
            saved_to: None,
        });
    };
    let aside = aside_path(&path);
    let saved = save_tail(&path, cut.offset, &aside)?;
    cut.bytes = saved;
    let f = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| LedgerError::io("open for repair", &path, e))?;
    f.set_len(cut.offset)
        .map_err(|e| LedgerError::io("truncate", &path, e))?;
    f.sync_all()
        .map_err(|e| LedgerError::io("fsync", &path, e))?;
    Ok(RepairOutcome {
        path,
        kept_bytes: cut.offset,
        removed: Some(cut),
        saved_to: Some(aside),
    })
}

/// `<file>.corrupt-<UTC timestamp>`; unique within this process.
pub(crate) fn aside_path(path: &Path) -> PathBuf {
    let ts = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%S%.6fZ")
        .to_string();
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".corrupt-{ts}"));
    PathBuf::from(name)
}

/// Copies `path[from..]` into a new file `aside`, synced, with its directory synced.
fn save_tail(path: &Path, from: u64, aside: &Path) -> Result<u64> {
    let mut src = File::open(path).map_err(|e| LedgerError::io("open", path, e))?;
    src.seek(SeekFrom::Start(from))
        .map_err(|e| LedgerError::io("seek", path, e))?;
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(aside)
        .map_err(|e| LedgerError::io("create", aside, e))?;
    let n = std::io::copy(&mut src, &mut dst).map_err(|e| LedgerError::io("copy", aside, e))?;
    dst.sync_all()
        .map_err(|e| LedgerError::io("fsync", aside, e))?;
    if let Some(dir) = aside.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| LedgerError::io("fsync directory", dir, e))?;
    }
    Ok(n)
}
