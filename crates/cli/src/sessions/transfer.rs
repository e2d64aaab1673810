//! `sessions export` and `sessions import`: a session's exact JSON Lines out and back in.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lazarus_session::{SessionId, Store};
use serde_json::json;

pub(super) fn export(
    store: &dyn Store,
    id: &SessionId,
    output: Option<PathBuf>,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    // An export holds the log; what waits in the inbox is not in it yet: say so.
    let waiting = store.waiting(id).unwrap_or_default();
    if waiting.messages > 0 {
        eprintln!(
            "note: {} message(s) wait in the inbox of {id} (accepted, not yet recorded): this export does not hold them; they are recorded when a writer next opens the session",
            waiting.messages
        );
    }
    let Some(path) = &output else {
        store.export_to(id, out)?;
        return Ok(());
    };
    // Replaced atomically and durably (0600: sessions hold user text); a failed export
    // leaves what was there.
    let mut n = 0;
    let mut failure = None;
    lazarus_ledger::durable_replace::replace_file_with(
        path,
        &lazarus_ledger::durable_replace::ReplaceOptions::default(),
        |f| match store.export_to(id, f) {
            Ok(bytes) => {
                n = bytes;
                Ok(())
            }
            Err(e) => {
                failure = Some(e);
                Err(std::io::Error::other("export failed"))
            }
        },
    )
    .map_err(|e| match failure.take() {
        Some(f) => anyhow::Error::from(f),
        None => anyhow::Error::from(e),
    })
    .with_context(|| format!("writing {}", path.display()))?;
    if json {
        writeln!(
            out,
            "{}",
            json!({"id": id, "bytes": n, "output": output, "waiting": waiting.messages})
        )?;
    } else {
        writeln!(out, "exported {id}: {n} bytes")?;
    }
    Ok(())
}

pub(super) fn import(
    store: &dyn Store,
    file: &Path,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let s = store.import(&bytes)?;
    if json {
        writeln!(out, "{}", serde_json::to_string(&s)?)?;
    } else {
        writeln!(
            out,
            "imported {} ({} records) into {}",
            s.id,
            s.records,
            store.location()
        )?;
    }
    Ok(())
}
