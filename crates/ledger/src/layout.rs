//! Where a ledger's files live in its directory. Every name the ledger creates is derived
//! here, from an id already checked by [`crate::validate_id`] (which refuses a leading `.`,
//! so the hidden temporary names below never collide with a ledger).
//!
//! ```text
//! <dir>/<id>.jsonl                 the ledger
//! <dir>/<id>.lock                  the writer lock (flock) and its holder's description
//! <dir>/.<id>.jsonl.creating       a ledger being created, renamed into place once durable
//! <dir>/<id>.jsonl.cut-<UTC time>  bytes cut from the ledger (crash debris, repair), saved
//! ```

use std::path::{Path, PathBuf};

/// Path of the ledger file for `id` in `dir`.
pub fn ledger_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.jsonl"))
}

/// Path of the writer lock file for `id` in `dir`.
pub fn lock_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.lock"))
}

/// Where a new ledger is written before it is renamed into place: never a `*.jsonl` name,
/// so listings never see a half-created ledger.
pub fn creating_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!(".{id}.jsonl.creating"))
}

/// Marker in the names of files holding bytes cut from a ledger.
pub const CUT_MARKER: &str = ".cut-";

/// The time part of a cut file's name: now, in UTC, to the microsecond.
pub fn cut_time() -> String {
    jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%S%.6fZ")
        .to_string()
}

/// `<ledger>.cut-<time>[-N]`: a name for bytes cut from `ledger` at `time` (see
/// [`cut_time`]); `attempt` makes it unique when that name is taken.
pub fn cut_path(ledger: &Path, time: &str, attempt: u32) -> PathBuf {
    let mut name = ledger.as_os_str().to_owned();
    name.push(CUT_MARKER);
    name.push(time);
    if attempt > 0 {
        name.push(format!("-{attempt}"));
    }
    PathBuf::from(name)
}
