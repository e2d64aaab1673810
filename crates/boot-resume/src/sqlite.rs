//! Other programs' SQLite databases (OpenCode's `opencode.db`, OpenClaw's agent databases),
//! read-only, with one rule for what can go wrong:
//!
//! - the path may be a symbolic link to a regular file (a database moved to another disk):
//!   it is followed, and the file it leads to is opened (SQLite finds the `-wal` beside it);
//!   anything else named like a database (a FIFO, a directory, a link to either, a dangling
//!   link) is refused before SQLite touches it, and said so;
//! - a database is never write-locked; while another program holds it locked, the scan waits
//!   at most [`WAIT_PER_DATABASE`] for it *in all*, however many of its sessions are read
//!   ([`WaitBudget`]): each connection waits once, for its read transaction, and no
//!   statement after that waits;
//! - every error names SQLite's own error first (`database is locked`, `file is not a
//!   database`), then the database, then what to do; "not the schema this build reads" is
//!   said only when a table or column this build reads is missing.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest the scan waits, in all, for one database another program holds locked.
pub const WAIT_PER_DATABASE: Duration = Duration::from_secs(2);

/// What is left of one database's wait.
#[derive(Debug)]
pub struct WaitBudget {
    limit: Duration,
    spent: Mutex<Duration>,
}

impl WaitBudget {
    /// A budget of `limit` for one database.
    pub fn new(limit: Duration) -> Arc<WaitBudget> {
        Arc::new(WaitBudget {
            limit,
            spent: Mutex::new(Duration::ZERO),
        })
    }

    /// The default: [`WAIT_PER_DATABASE`].
    pub fn per_database() -> Arc<WaitBudget> {
        WaitBudget::new(WAIT_PER_DATABASE)
    }

    /// What is left to wait.
    pub fn remaining(&self) -> Duration {
        let spent = *self.spent.lock().unwrap_or_else(|e| e.into_inner());
        self.limit.saturating_sub(spent)
    }

    /// The time waited so far, in all.
    pub fn spent(&self) -> Duration {
        *self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spend(&self, d: Duration) {
        let mut s = self.spent.lock().unwrap_or_else(|e| e.into_inner());
        *s += d;
    }
}

/// Why a database could not be read: SQLite's error (or what the path is) first, then the
/// database, then what to do.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The path is not a regular file, nor a symbolic link to one.
    #[error(
        "{what}: {program} database {path} is not read (only a regular file, or a symbolic link to one, is)"
    )]
    NotAFile {
        program: &'static str,
        path: PathBuf,
        what: String,
    },
    /// SQLite refused to open or read it.
    #[error("{source}: {program} database {path}{hint}")]
    Sqlite {
        program: &'static str,
        path: PathBuf,
        source: Box<rusqlite::Error>,
        hint: String,
    },
    /// It is a database, but without a table or column this build reads.
    #[error("not the schema this build reads ({known}): {program} database {path}: {detail}")]
    Schema {
        program: &'static str,
        path: PathBuf,
        known: &'static str,
        detail: String,
    },
}

impl DbError {
    /// SQLite's error about `path`, with what to do for the common ones; `waited` is how long
    /// the wait for the lock lasted.
    pub fn sqlite(
        program: &'static str,
        path: &Path,
        source: rusqlite::Error,
        waited: Duration,
    ) -> DbError {
        use rusqlite::ErrorCode as C;
        let hint = match source.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => format!(
                " (another program holds it locked; waited {} ms, the most a scan waits for one database; run again when it is idle)",
                waited.as_millis()
            ),
            Some(C::NotADatabase) => {
                " (damaged, or not a database at all; the program that owns it may repair or recreate it)".into()
            }
            Some(C::DatabaseCorrupt) => {
                " (damaged; the program that owns it may repair it, or restore it from a backup)".into()
            }
            Some(C::CannotOpen | C::PermissionDenied | C::ReadOnly) => {
                " (check that it exists and that this user may read it and its directory)".into()
            }
            _ => String::new(),
        };
        DbError::Sqlite {
            program,
            path: path.to_path_buf(),
            source: Box::new(source),
            hint,
        }
    }

    /// Whether a statement's error says a table or column this build reads is missing (the
    /// schema differs), rather than that the database could not be read.
    pub fn is_schema_error(e: &rusqlite::Error) -> bool {
        match e {
            rusqlite::Error::SqliteFailure(f, Some(msg)) => {
                f.code == rusqlite::ErrorCode::Unknown
                    && (msg.contains("no such table") || msg.contains("no such column"))
            }
            _ => false,
        }
    }
}

/// What a non-regular file is, for messages.
fn kind_of(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The regular file a database path names: the path itself, or where its symbolic links
/// lead. Anything else is refused before SQLite touches it.
pub fn resolve(path: &Path, program: &'static str) -> Result<PathBuf, DbError> {
    let not = |what: String| DbError::NotAFile {
        program,
        path: path.to_path_buf(),
        what,
    };
    let md = std::fs::symlink_metadata(path).map_err(|e| not(e.to_string()))?;
    if md.file_type().is_file() {
        return Ok(path.to_path_buf());
    }
    if !md.file_type().is_symlink() {
        return Err(not(format!("it is {}", kind_of(md.file_type()))));
    }
    let target = std::fs::canonicalize(path)
        .map_err(|e| not(format!("a symbolic link that leads nowhere ({e})")))?;
    let tmd = std::fs::metadata(&target).map_err(|e| not(e.to_string()))?;
    if !tmd.file_type().is_file() {
        return Err(not(format!(
            "a symbolic link to {} ({})",
            kind_of(tmd.file_type()),
            target.display()
        )));
    }
    Ok(target)
}

/// Opens a database read-only (SQLite still reads its `-wal`), never through a symbolic
/// link SQLite would follow itself (the path is resolved first), and starts a read
/// transaction, waiting for the lock at most what `budget` has left. No statement on the
/// connection waits after that: a later one meets a held lock with `database is locked`
/// at once.
pub fn open(
    path: &Path,
    program: &'static str,
    budget: &WaitBudget,
) -> Result<rusqlite::Connection, DbError> {
    use rusqlite::OpenFlags;
    let target = resolve(path, program)?;
    let err = |e, waited| DbError::sqlite(program, path, e, waited);
    let c = rusqlite::Connection::open_with_flags(
        &target,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| err(e, Duration::ZERO))?;
    let wait = budget.remaining();
    c.busy_timeout(wait).map_err(|e| err(e, Duration::ZERO))?;
    let t0 = Instant::now();
    let begun = c.execute_batch("BEGIN").and_then(|()| {
        c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
    });
    let waited = t0.elapsed();
    budget.spend(waited);
    begun.map_err(|e| err(e, waited))?;
    c.busy_timeout(Duration::ZERO)
        .map_err(|e| err(e, Duration::ZERO))?;
    Ok(c)
}
