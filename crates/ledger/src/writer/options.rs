//! What a writer is opened with: the durability modes, [`Options`] and their default limits.
//! Plain data, apart from the writer's machinery, so every part of it (and the reader) can
//! name the same settings.

use std::time::Duration;

use crate::fs::SharedFs;

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
    /// Threads that decode records while a whole ledger is replayed: `None` picks by the
    /// file's size and the cores ([`crate::parallel::workers_for`]); `Some(0)` decodes on the
    /// calling thread.
    pub replay_workers: Option<usize>,
    /// [`Durability::PerRecord`] made durable by a `syncfs` shared with every other writer on
    /// the file system ([`crate::shared_sync`]) instead of an `fdatasync` of its own. The
    /// acknowledgement means the same; only who issues the sync changes.
    pub shared_sync: Option<crate::SharedSync>,
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
            replay_workers: None,
            shared_sync: None,
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
            .field("shared_sync", &self.shared_sync.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
