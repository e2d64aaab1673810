//! Saving bytes aside before they are cut (recovery on open, a failed sync, reclaiming a
//! name), and reclaiming the name of a ledger whose creation never completed. No path cuts
//! bytes from a ledger without going through here first.

use std::path::{Path, PathBuf};

use crate::error::{LedgerError, Result};
use crate::layout::{cut_path, cut_time};
use crate::scan::Scanner;

use super::{Options, open_read};

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

/// Whether a new ledger may take the name `path`: `false` when the name is free. An existing
/// file whose creation never completed (no complete header line, written by versions that
/// created ledgers in place) has its bytes set aside and may be replaced (`true`); anything
/// else at that name is a ledger and is never overwritten.
pub(super) fn reclaim_headerless(opts: &Options, path: &Path) -> Result<bool> {
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
}
