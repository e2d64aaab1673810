//! The other branches of a session tree (pi, OpenClaw) imported as forks of the current one:
//! forked at the last turn boundary the branch shares with it (the records up to there are the
//! same), then the branch's own events planned on the fork's state. A branch that shares no
//! turn boundary (it differs from the first prompt on) is imported as a session of its own.

use lazarus_boot_resume::formats::{Conversation, Event};
use lazarus_session::{SessionId, SessionState, Store};

use crate::plan::Plan;
use crate::{ImportError, Imported, write};

/// The current branch, as imported.
pub(crate) struct Main<'a> {
    pub id: &'a SessionId,
    pub events: &'a [Event],
    /// Last seq written by each of its events.
    pub ends: &'a [u64],
    pub state: &'a SessionState,
}

/// Events planned by the time `seq` is written.
fn events_through(ends: &[u64], seq: u64) -> usize {
    ends.iter().take_while(|&&e| e <= seq).count()
}

/// The turn to fork at and the number of branch events it covers.
fn fork_point(main: &Main, events: &[Event], branch: &Plan) -> Option<(u64, usize)> {
    let shared = main
        .events
        .iter()
        .zip(events)
        .take_while(|(a, b)| a == b)
        .count();
    (0..=main.state.turn).rev().find_map(|t| {
        let bm = main.state.fork_boundary(t).ok()?;
        let bb = branch.state.fork_boundary(t).ok()?;
        let n = events_through(main.ends, bm);
        let same = bm == bb
            && n <= shared
            && n == events_through(&branch.ends, bb)
            && main.ends[..n] == branch.ends[..n];
        same.then_some((t, n))
    })
}

/// Writes one branch: a fork of the current branch, or a session of its own.
pub(crate) fn write_branch(
    store: &dyn Store,
    conv: &Conversation,
    main: &Main,
    events: &[Event],
    id: &SessionId,
    branch: Plan,
) -> Result<Imported, ImportError> {
    let Some((turn, covered)) = fork_point(main, events, &branch) else {
        return write(store, conv, id, branch);
    };
    store.fork(main.id, turn, Some(id))?;
    let mut session = store.open(id)?;
    let mut p = Plan::new(session.state().clone());
    for e in &events[covered..] {
        p.event(e)?;
    }
    p.finish()?;
    for rec in p.records {
        session.append(rec)?;
    }
    let st = session.state();
    Ok(Imported {
        id: id.to_string(),
        agent: conv.format.as_str().to_string(),
        agent_version: conv.agent_version.clone(),
        source: conv.source.to_string_lossy().into_owned(),
        bytes: conv.bytes,
        sha256: conv.sha256.clone(),
        records: st.last_seq,
        counts: p.counts,
        dropped: Vec::new(),
        torn_at: None,
        related: Vec::new(),
    })
}
