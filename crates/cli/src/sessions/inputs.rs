//! `sessions create` and `sessions send`: a new session, and a message recorded by this
//! process or queued for the one that holds the session.

use std::io::Write;

use anyhow::Result;
use lazarus_session::handoff::{Handed, hand_over};
use lazarus_session::{CreateOptions, InboxMessage, SessionId, Store};
use serde_json::json;

use crate::term::escape;

pub(super) fn create(
    store: &dyn Store,
    id: Option<SessionId>,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let s = store.create(CreateOptions { id, meta: None })?;
    if json {
        writeln!(out, "{}", json!({"id": s.id(), "location": s.location()}))?;
    } else {
        writeln!(out, "created session {} at {}", s.id(), s.location())?;
    }
    Ok(())
}

/// Who holds a session, in words (for "queued: … holds the session").
pub(super) fn holder_words(holder: &Option<lazarus_session::HolderView>) -> String {
    holder.as_ref().map_or(
        "another process (holder details unavailable)".to_string(),
        |v| v.to_string(),
    )
}

/// Says that a delivery waits for a lease to run out (a holder that stopped renewing it).
pub(super) fn note_lease_wait(holder: &Option<lazarus_ledger::Holder>, wait: std::time::Duration) {
    eprintln!(
        "waiting up to {} s for the lease of {} (it runs out unless its holder renews it)",
        wait.as_secs_f64().ceil(),
        lazarus_ledger::holder::describe(holder)
    );
}

pub(super) fn send(
    store: &dyn Store,
    id: SessionId,
    message_id: Option<String>,
    text: &str,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let explicit = message_id.is_some();
    let message_id =
        message_id.unwrap_or_else(|| lazarus_session::record::derived_input_id(&id, "user", text));
    let msg = InboxMessage::input(&message_id, "user", text);
    // Whoever holds the session records it (after what waits in its inbox); when nobody
    // does, this process becomes the writer and records it (after what waits) itself.
    let handed = hand_over(store, &id, &msg, &mut note_lease_wait)?;
    match handed {
        Handed::Queued { holder, duplicate } => {
            let view = holder;
            let by = holder_words(&view);
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "message_id": message_id, "queued": true, "duplicate": duplicate, "holder": view})
                )?;
            } else if duplicate {
                writeln!(
                    out,
                    "message {} is waiting in the inbox of {id} already; nothing added",
                    escape(&message_id)
                )?;
            } else {
                writeln!(
                    out,
                    "queued in the inbox of {id} (message {}): {by} holds the session; it records the message before anything of its own",
                    escape(&message_id)
                )?;
            }
        }
        Handed::Recorded {
            seq,
            duplicate,
            earlier,
            previous_holder,
        } => {
            if let Some(h) = &previous_holder {
                eprintln!(
                    "note: {h} held {id} and died without letting go; its lock was taken over"
                );
            }
            if earlier > 0 {
                eprintln!(
                    "note: {earlier} message(s) waiting in the inbox of {id} (accepted earlier) were recorded first"
                );
            }
            if !duplicate {
                // a gateway serving this directory learns that the session owes work
                store.ring(&id)?;
            }
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "message_id": message_id, "seq": seq, "duplicate": duplicate, "recorded_before": earlier})
                )?;
            } else if duplicate {
                writeln!(
                    out,
                    "{seq} (duplicate of message {}; nothing written)",
                    escape(&message_id)
                )?;
                if !explicit {
                    eprintln!(
                        "note: the same text was sent to {id} before (seq {seq}); without --message-id a message's id comes from its text, so it is recorded once. Give --message-id to send it again."
                    );
                }
            } else {
                writeln!(out, "{seq}")?;
            }
        }
    }
    Ok(())
}
