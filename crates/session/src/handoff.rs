//! How an input reaches a session whoever holds it, and how a writer lets go, so that a
//! message accepted into an inbox is never stranded.
//!
//! The rule has two halves, one for each side of a race:
//!
//! * **Whoever becomes the writer drains first** ([`crate::Session::from_parts`]): what waits
//!   in the inbox was accepted before anything the new writer records.
//! * **Nobody leaves a message behind.** A sender delivers to the inbox only when a live
//!   writer holds the session, and then looks again: if the writer let go meanwhile, the
//!   sender opens the session itself (which drains it). A writer, once it let go, looks at
//!   the inbox: if a message arrived after its last drain and nobody holds the session now,
//!   it opens the session again (which drains it) — [`close`]. Since each side looks after
//!   its own step, one of them always sees a message the other missed.
//!
//! A writer that is killed cannot look; its lock dies with it (local files), or its lease is
//! taken over (PostgreSQL: at once on the same host when its process is gone, at the lease's
//! end otherwise), and the next writer drains what waits. Until then listings show it
//! (`waiting`), and a gateway serving the store picks such sessions up by itself.

use std::time::Duration;

use lazarus_ledger::Holder;
use lazarus_ledger::holder::Liveness;

use crate::id::SessionId;
use crate::inbox::InboxMessage;
use crate::store::{HolderView, Result, Session, SessionError, Store};

/// How many times [`close`] reopens a session for messages that keep arriving.
const CLOSE_PASSES_MAX: usize = 8;

/// Longest wait for a lease held on another host to run out before a message is left in
/// the inbox instead.
pub const LEASE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Lets go of a session this process wrote, then records what was delivered to its inbox
/// while it held it and nobody will record now: when messages wait and nobody holds the
/// session, it is opened again (opening drains). Returns how many messages that recorded.
pub fn close(store: &dyn Store, session: Session) -> Result<usize> {
    let id = SessionId::parse(session.id())?;
    drop(session);
    let mut recorded = 0;
    for _ in 0..CLOSE_PASSES_MAX {
        if store.waiting(&id)?.messages == 0 {
            break;
        }
        match store.open(&id) {
            // opening drained them
            Ok(mut s) => {
                recorded += s.take_drained().iter().filter(|d| !d.duplicate).count();
            }
            // its writer now records them (it drains before anything of its own)
            Err(SessionError::Locked { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(recorded)
}

/// Where a message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handed {
    /// Recorded by this process: in the log at `seq` (the original record's seq for an id
    /// the log held already, `duplicate`), after `earlier` messages that waited in the inbox
    /// (accepted before it). `previous_holder`: the writer before this one died holding the
    /// session.
    Recorded {
        seq: u64,
        duplicate: bool,
        earlier: usize,
        previous_holder: Option<Holder>,
    },
    /// Left in the inbox of the live writer `holder`, which records it before anything of
    /// its own; `duplicate` when a message with its id was waiting already.
    Queued {
        holder: Option<HolderView>,
        duplicate: bool,
    },
}

/// What [`open_or_deliver`] got.
pub enum Opened {
    /// This process is the writer (the message is not delivered: it is the caller's to
    /// record, unless the drain at open recorded it already).
    Writer(Box<Session>),
    /// A live writer holds the session: the message waits in its inbox. `holder` as it was
    /// when last looked at.
    Queued {
        holder: Option<HolderView>,
        duplicate: bool,
    },
}

/// Opens session `id` for writing, or, when a live writer holds it, leaves `msg` in its
/// inbox — and then looks again, in case that writer let go meanwhile (then this process
/// opens it, and the drain at open records the message). A lease held on another host that
/// runs out within [`LEASE_WAIT_MAX`] is waited for (`on_wait` is told who and for how long
/// first), then taken over.
pub fn open_or_deliver(
    store: &dyn Store,
    id: &SessionId,
    msg: &InboxMessage,
    on_wait: &mut dyn FnMut(&Option<Holder>, Duration),
) -> Result<Opened> {
    let mut waited = false;
    loop {
        let (holder, expires_in_ms) = match store.open(id) {
            Ok(s) => return Ok(Opened::Writer(Box::new(s))),
            Err(SessionError::Locked {
                holder,
                expires_in_ms,
                ..
            }) => (holder.map(|h| *h), expires_in_ms),
            Err(e) => return Err(e),
        };
        let lease_ends = expires_in_ms.map(|ms| Duration::from_millis(ms.into()));
        let other_host = holder.as_ref().is_none_or(|h| !h.is_alive_here());
        if let Some(wait) = lease_ends.filter(|w| other_host && !waited && *w <= LEASE_WAIT_MAX) {
            on_wait(&holder, wait);
            std::thread::sleep(wait + Duration::from_millis(50));
            waited = true;
            continue;
        }
        let delivery = store.deliver(id, msg)?;
        // The writer may have let go (or died) between our open and our delivery: look again,
        // until a writer is found alive or this process becomes the writer.
        for _ in 0..DEAD_HOLDER_LOOKS_MAX {
            match store.open(id) {
                Ok(s) => return Ok(Opened::Writer(Box::new(s))),
                Err(SessionError::Locked { holder: now, .. }) => {
                    let view = now
                        .map(|h| *h)
                        .or(holder.clone())
                        .map(|h| HolderView::of(&h));
                    if view.as_ref().is_some_and(|v| v.alive == Liveness::Dead) {
                        // its lock or lease is being let go: the next look takes it over
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    return Ok(Opened::Queued {
                        holder: view,
                        duplicate: delivery.duplicate,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        return Err(SessionError::Backend(format!(
            "session {id}: its holder is gone but its writer could not be taken over; retry"
        )));
    }
}

/// How many times [`open_or_deliver`] looks again at a holder known to be gone.
const DEAD_HOLDER_LOOKS_MAX: usize = 50;

/// Hands `msg` to session `id`: records it when this process can be the writer (after what
/// waits in the inbox), else leaves it in the inbox of the live writer ([`open_or_deliver`]).
/// A writer lost while recording ([`SessionError::WriterLost`]) opens again, up to
/// [`HAND_OVER_ATTEMPTS`] times.
pub fn hand_over(
    store: &dyn Store,
    id: &SessionId,
    msg: &InboxMessage,
    on_wait: &mut dyn FnMut(&Option<Holder>, Duration),
) -> Result<Handed> {
    // A writer that lost the session while recording (its lease taken over when it was not
    // renewed in time, e.g. on a starved machine) does not know whether its append
    // committed: open again and record it again — the message id makes that exactly once.
    let mut attempt = 1;
    loop {
        match hand_over_once(store, id, msg, on_wait) {
            Err(SessionError::WriterLost { .. }) if attempt < HAND_OVER_ATTEMPTS => attempt += 1,
            done => return done,
        }
    }
}

/// Times [`hand_over`] opens the session when its writer is lost while recording.
pub const HAND_OVER_ATTEMPTS: u32 = 3;

fn hand_over_once(
    store: &dyn Store,
    id: &SessionId,
    msg: &InboxMessage,
    on_wait: &mut dyn FnMut(&Option<Holder>, Duration),
) -> Result<Handed> {
    let mut s = match open_or_deliver(store, id, msg, on_wait)? {
        Opened::Writer(s) => *s,
        Opened::Queued { holder, duplicate } => return Ok(Handed::Queued { holder, duplicate }),
    };
    let previous_holder = s.open_report().previous_holder.clone();
    let (seq, duplicate) = match s
        .take_drained()
        .iter()
        .find(|d| d.message_id == msg.message_id())
    {
        // delivered, then recorded by the drain at open
        Some(d) => (d.seq, d.duplicate),
        None => {
            let ack = s.append_message(msg)?;
            (ack.seq, ack.duplicate)
        }
    };
    let mine = usize::from(!duplicate);
    let earlier = usize::try_from(
        s.state()
            .last_seq
            .saturating_sub(s.open_report().records_replayed),
    )
    .unwrap_or(0)
    .saturating_sub(mine);
    let handed = Handed::Recorded {
        seq,
        duplicate,
        earlier,
        previous_holder,
    };
    close(store, s)?;
    Ok(handed)
}
