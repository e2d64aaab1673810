//! Reading one session for its page: every record that can be read, the damage `verify`
//! reports, the live status and the forks made from it. Blocking; the handlers call it on the
//! blocking pool.

use lazarus_ledger::LedgerError;
use lazarus_session::{SessionError, SessionId, SessionSummary, Status, Store, StoredRecord};

use crate::Web;
use crate::timeline::{self, Timeline};

/// Records read from the store per call.
const READ_PAGE: usize = 1000;

/// One bad line of a session's log.
#[derive(Debug, Clone)]
pub struct Damage {
    pub path: String,
    pub line: u64,
    pub offset: u64,
    pub problem: String,
    /// Crash debris (a torn tail): invisible to readers, cut and saved aside at the next
    /// open for writing.
    pub debris: bool,
}

/// Everything the page shows of one session.
pub struct Loaded {
    pub summary: SessionSummary,
    pub status: Status,
    pub timeline: Timeline,
    /// Why reading stopped before the end (the records before it are shown).
    pub read_error: Option<String>,
    pub damage: Vec<Damage>,
    /// Sessions forked from this one, with the turn they were forked at.
    pub children: Vec<(SessionId, Option<u64>)>,
    pub running: bool,
}

/// The session's records from the store, as many as can be read: when a page of records
/// fails, the good records before the bad one are read one at a time, and the error is kept.
pub fn read_records(
    store: &dyn Store,
    id: &SessionId,
    mut push: impl FnMut(StoredRecord),
) -> Option<SessionError> {
    let mut after = 0;
    loop {
        match store.records(id, after, READ_PAGE) {
            Ok(batch) => {
                let n = batch.len();
                for r in batch {
                    after = r.seq;
                    push(r);
                }
                if n < READ_PAGE {
                    return None;
                }
            }
            Err(_) => loop {
                match store.records(id, after, 1) {
                    Ok(mut one) => match one.pop() {
                        Some(r) => {
                            after = r.seq;
                            push(r);
                        }
                        None => return None,
                    },
                    Err(e) => return Some(e),
                }
            },
        }
    }
}

/// The fork point recorded in `child` (the record right after its copied prefix).
pub(crate) fn fork_point_of(store: &dyn Store, child: &SessionId) -> Option<u64> {
    let mut after = 0;
    loop {
        let batch = store.records(child, after, READ_PAGE).ok()?;
        for r in &batch {
            if r.kind == "fork" {
                return r.data["at_turn"].as_u64();
            }
            after = r.seq;
        }
        if batch.len() < READ_PAGE {
            return None;
        }
    }
}

/// Children whose fork turn is looked up, at most (each lookup reads the child's prefix).
const CHILDREN_MAX: usize = 50;

/// Reads one session for its page (blocking).
pub fn load(web: &Web, id: &SessionId) -> Result<Loaded, SessionError> {
    let store = &*web.cfg.store;
    let summary = store.summary(id)?;
    let mut builder = timeline::Builder::new(timeline::header_of(&summary));
    let read_error = read_records(store, id, |r| builder.push(r));
    let timeline = builder.finish();
    let live = web.gateway().and_then(|g| g.live_status(id));
    // open in this gateway: its live state (the gateway holds the writer lock of an idle
    // session too, which the store's summary would take for a run); else the store's word
    let running = match live {
        Some(st) => st == Status::Running,
        None => summary.status == Status::Running,
    };
    let status = if running {
        Status::Running
    } else if read_error.is_some() {
        Status::Corrupt
    } else {
        timeline.status()
    };
    let mut damage = Vec::new();
    if let Some(local) = &web.cfg.local {
        // verify's report: every bad line, crash debris included (not while a writer may be
        // appending the last line right now)
        if (read_error.is_some() || !running)
            && let Ok(report) =
                lazarus_ledger::verify_file(&local.path_of(id), local.ledger_options())
        {
            damage.extend(report.problems.iter().map(|f| Damage {
                path: report.path.display().to_string(),
                line: f.line,
                offset: f.offset,
                problem: f.problem.to_string(),
                debris: f.recoverable,
            }));
        }
    }
    if damage.is_empty()
        && let Some(SessionError::Ledger(LedgerError::Corrupt(c))) = &read_error
    {
        damage.push(Damage {
            path: c.path.display().to_string(),
            line: c.line,
            offset: c.offset,
            problem: match &c.context {
                Some(ctx) => format!("{} ({ctx})", c.problem),
                None => c.problem.to_string(),
            },
            debris: false,
        });
    }
    let children = match web.list_recent() {
        Ok(list) => list
            .iter()
            .filter(|s| s.parent.as_deref() == Some(id.as_str()))
            .enumerate()
            .map(|(i, s)| {
                let turn = (i < CHILDREN_MAX)
                    .then(|| fork_point_of(store, &s.id))
                    .flatten();
                (s.id.clone(), turn)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    Ok(Loaded {
        summary,
        status,
        timeline,
        read_error: read_error.map(|e| e.to_string()),
        damage,
        children,
        running,
    })
}
