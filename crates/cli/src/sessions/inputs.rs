//! `sessions create` and `sessions send`: a new session, and a message recorded by this
//! process or queued for the one that holds the session.

use std::io::Write;

use anyhow::Result;
use lazarus_session::{CreateOptions, InboxMessage, SessionError, SessionId, Store};
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
    let mut s = match store.open(&id) {
        Ok(s) => s,
        // Another process (a `lazarus run`, a gateway) is the writer: hand the message to
        // it through the session's inbox; it records and answers it.
        Err(SessionError::Locked { holder, .. }) => {
            let msg = InboxMessage::input(&message_id, "user", text);
            let d = store.deliver(&id, &msg)?;
            let by = lazarus_ledger::holder::describe(&holder);
            if json {
                writeln!(
                    out,
                    "{}",
                    json!({"id": id, "message_id": message_id, "queued": true, "duplicate": d.duplicate, "holder": by})
                )?;
            } else if d.duplicate {
                writeln!(
                    out,
                    "message {} is waiting in the inbox of {id} already; nothing added",
                    escape(&message_id)
                )?;
            } else {
                writeln!(
                    out,
                    "queued in the inbox of {id} (message {}): {by} holds the session and will record and answer it",
                    escape(&message_id)
                )?;
            }
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let ack = s.append_input(&message_id, "user", text)?;
    drop(s);
    if !ack.duplicate {
        // a gateway serving this directory learns that the session owes work
        store.ring(&id)?;
    }
    if json {
        writeln!(
            out,
            "{}",
            json!({"id": id, "message_id": message_id, "seq": ack.seq, "duplicate": ack.duplicate})
        )?;
    } else if ack.duplicate {
        writeln!(
            out,
            "{} (duplicate of message {}; nothing written)",
            ack.seq,
            escape(&message_id)
        )?;
        if !explicit {
            eprintln!(
                "note: the same text was sent to {id} before (seq {}); without --message-id a message's id comes from its text, so it is recorded once. Give --message-id to send it again.",
                ack.seq
            );
        }
    } else {
        writeln!(out, "{}", ack.seq)?;
    }
    Ok(())
}
