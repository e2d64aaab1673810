//! Who holds a session's lease: the `holder` text a lease row carries (`pid=… host=…
//! start=…`) and what it says of the process, for the writer that takes leases and the
//! listings that show them.

use lazarus_ledger::Holder;

/// Who holds a session's lease, as the `leases` table says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// `pid=<pid> host=<host> start=<ticks>` of the process holding it.
    pub holder: String,
    /// When the lease was taken (RFC 3339, UTC).
    pub since: String,
    /// When it runs out unless renewed (RFC 3339, UTC).
    pub expires_at: String,
    /// How many times the session's lease was taken (the fencing number).
    pub epoch: i64,
    /// Milliseconds until it runs out unless renewed (0 or less: run out).
    pub expires_in_ms: i64,
}

impl LockHolder {
    /// The Lazarus process holding the lease.
    pub fn holder(&self) -> Option<Holder> {
        let mut pid = None;
        let mut host = None;
        let mut start = None;
        for part in self.holder.split(' ') {
            if let Some(p) = part.strip_prefix("pid=") {
                pid = p.parse::<u32>().ok();
            } else if let Some(h) = part.strip_prefix("host=") {
                host = Some(h.to_string());
            } else if let Some(t) = part.strip_prefix("start=") {
                start = t.parse::<u64>().ok();
            }
        }
        Some(Holder {
            pid: pid?,
            host: host?,
            since: self.since.clone(),
            start_ticks: start,
        })
    }

    /// Whether the lease is still in force (not run out).
    pub fn is_live(&self) -> bool {
        self.expires_in_ms > 0
    }
}

/// The `holder` text of a lease this process takes.
pub(crate) fn holder_text() -> String {
    let me = Holder::current();
    match me.start_ticks {
        Some(t) => format!("pid={} host={} start={t}", me.pid, me.host),
        None => format!("pid={} host={}", me.pid, me.host),
    }
}
