//! Diagnosis (`verify`) and the one destructive operation (`repair`), kept apart from the
//! happy path. Repair never deletes data: the bytes it removes are first saved beside the
//! file as `<file>.cut-<timestamp>` and synced.

use std::path::{Path, PathBuf};

use crate::error::{Corruption, LedgerError, Problem, Result};
use crate::header::Header;
use crate::id::validate_id;
use crate::layout::{ledger_path, lock_path};
use crate::scan::{Cut, scan_all};
use crate::writer::{Options, check_header_id, open_read, save_aside};

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
    verify_file_with::<serde::de::IgnoredAny, _>(path, opts, |_, _| Ok(()))
}

/// [`verify_file`], with every record also decoded as `P` and checked by `on_record` (the
/// same checks an open for writing applies: a record it refuses is reported at its line and
/// offset, as the open would refuse it).
pub fn verify_file_with<P, F>(path: &Path, opts: &Options, mut on_record: F) -> Result<VerifyReport>
where
    P: for<'a> crate::frame::Payload<'a>,
    F: FnMut(
        crate::scan::LineInfo,
        crate::frame::Envelope<'_, P>,
    ) -> std::result::Result<(), Problem>,
{
    // Open first: it refuses anything but a regular file, and then the size is the file's.
    let reader = open_read(opts, path)?;
    let size = std::fs::symlink_metadata(path)
        .map_err(|e| LedgerError::io("stat", path, e))?
        .len();
    let mut report = VerifyReport {
        path: path.to_path_buf(),
        header: None,
        records: 0,
        size,
        problems: Vec::new(),
    };
    let mut records = 0;
    match scan_all::<_, P, _>(
        path,
        reader,
        opts.line_bytes_max,
        opts.format.as_deref(),
        |info, env| {
            on_record(info, env)?;
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
    repair_with::<serde::de::IgnoredAny, _>(dir, id, opts, |_, _| Ok(()))
}

/// [`repair`], with every record also decoded as `P` and checked by `on_record`: a record it
/// refuses is the first bad one (what an open for writing refuses, repair cuts away).
pub fn repair_with<P, F>(
    dir: &Path,
    id: &str,
    opts: &Options,
    on_record: F,
) -> Result<RepairOutcome>
where
    P: for<'a> crate::frame::Payload<'a>,
    F: FnMut(
        crate::scan::LineInfo,
        crate::frame::Envelope<'_, P>,
    ) -> std::result::Result<(), Problem>,
{
    validate_id(id)?;
    let path = ledger_path(dir, id);
    // Before the lock, so a mistyped id leaves no lock file behind.
    drop(open_read(opts, &path)?);
    let _lock = crate::lock::WriterLock::acquire(&lock_path(dir, id), &path)?;
    let reader = open_read(opts, &path)?;
    let cut = match scan_all::<_, P, _>(
        &path,
        reader,
        opts.line_bytes_max,
        opts.format.as_deref(),
        on_record,
    ) {
        Ok(scan) => scan.cut,
        // a newer program's record is not damage: cutting it would lose what it wrote
        Err(LedgerError::Corrupt(c)) if matches!(c.problem, Problem::Newer(_)) => {
            return Err(LedgerError::Corrupt(c));
        }
        Err(LedgerError::Corrupt(c)) => Some(Cut {
            offset: c.offset,
            bytes: 0,
            line: c.line,
            lines: 0,
            reason: c.problem.clone(),
        }),
        Err(LedgerError::NoHeader { .. }) => Some(Cut {
            offset: 0,
            bytes: 0,
            line: 1,
            lines: 0,
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
    let saved = save_aside(opts, &path, cut.offset)?;
    let (saved_to, bytes) = match saved {
        Some((p, n)) => (Some(p), n),
        None => (None, 0),
    };
    cut.bytes = bytes;
    let f = opts
        .fs
        .open_append(&path)
        .map_err(|e| LedgerError::open_failed(&path, e))?;
    f.truncate(cut.offset)
        .map_err(|e| LedgerError::io("truncate", &path, e))?;
    f.sync_data()
        .map_err(|e| LedgerError::io("fdatasync", &path, e))?;
    Ok(RepairOutcome {
        path,
        kept_bytes: cut.offset,
        removed: Some(cut),
        saved_to,
    })
}
