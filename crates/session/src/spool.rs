//! The local store's inbox: a spool directory beside the ledger, one file per message.
//!
//! ```text
//! <dir>/<id>.inbox/                      exists while messages may be waiting
//! <dir>/<id>.inbox/<h>.msg               one waiting message (h: SHA-256 of its id, hex)
//! <dir>/<id>.inbox/.<h>.<pid>.<n>.tmp    a delivery being written (renamed into place)
//! <dir>/<id>.inbox/<h>.msg.bad           a spool file that failed its check, set aside
//! ```
//!
//! A spool file holds one line in the ledger's framing (CRC included) whose `seq` is the
//! delivery time in nanoseconds (the drain order), and whose `kind` and `data` are the record
//! the message becomes (`input` or `control`).
//!
//! **Delivery** (anyone, no lock): the line is written to a temporary name created `O_EXCL`,
//! fsynced, and renamed to `<h>.msg` *without replacing* — an existing name is a duplicate
//! delivery, so the message id is the dedup key and a name only ever appears whole; then the
//! spool directory and the session directory are fsynced. Acknowledged means: name and bytes
//! survive a power cut.
//!
//! **Drain** (the writer, holding the session lock): every `*.msg`, oldest first, is appended
//! to the ledger as its record (fdatasync: the log now holds the message id — this append *is*
//! the consumption), then its spool file is unlinked. A crash between the two, or an unlink
//! lost to a power cut, leaves a spool file whose id the log already holds: the next drain
//! only unlinks it. An empty spool directory is removed.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use lazarus_ledger::frame;

use crate::inbox::InboxMessage;

/// Suffix of a session's spool directory.
pub(crate) const INBOX_SUFFIX: &str = ".inbox";

/// The spool directory of session `id` in `dir`.
pub(crate) fn inbox_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}{INBOX_SUFFIX}"))
}

/// The spool file name of a message id: its SHA-256 in hex (fixed length; any id is safe).
pub(crate) fn file_name(message_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(message_id.as_bytes());
    let mut s = String::with_capacity(64 + 4);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s.push_str(".msg");
    s
}

/// A waiting message's file name (not a temporary or set-aside one).
fn is_message_name(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".msg")
}

/// The drain order of deliveries made by this process: nanoseconds since the epoch, strictly
/// increasing within the process.
fn delivery_stamp() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

fn temp_name(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes the spool directory (mode 0700); refuses one that is not a plain directory.
fn make_spool(dir: &Path, id: &str) -> io::Result<PathBuf> {
    let spool = inbox_path(dir, id);
    match std::fs::DirBuilder::new().mode(0o700).create(&spool) {
        Ok(()) => lazarus_ledger::fs::sync_dir(dir)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&spool)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a directory (a symlink or a file?); it is not Lazarus': move it away",
                spool.display()
            ),
        ));
    }
    Ok(spool)
}

use std::os::unix::fs::DirBuilderExt;

/// Makes the (empty) spool directory of `id` durably: a doorbell for a gateway's mail scan.
pub(crate) fn ring(dir: &Path, id: &str) -> io::Result<()> {
    make_spool(dir, id).map(|_| ())
}

/// Delivers `msg` to the spool of session `id` in `dir`: true when placed, false when a
/// message with its id is waiting already. Durable when it returns.
pub(crate) fn deliver(dir: &Path, id: &str, msg: &InboxMessage) -> io::Result<bool> {
    let mut line = Vec::new();
    frame::encode_line(
        &mut line,
        delivery_stamp(),
        &lazarus_ledger::clock::format_ts(jiff::Timestamp::now()),
        msg.kind(),
        &msg.data_json(),
    );
    let name = file_name(msg.message_id());
    // A drain may remove the (empty) spool directory between our mkdir and our create: then
    // make it again. Once our temporary file is in it, it is not empty and stays.
    for _ in 0..100 {
        let spool = make_spool(dir, id)?;
        let tmp = spool.join(temp_name(&name));
        let mut f = match lazarus_ledger::fs::create_exclusive(&tmp, false) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let written = f.write_all(&line).and_then(|()| f.sync_all());
        drop(f);
        let placed = written.and_then(|()| {
            match lazarus_ledger::fs::real().rename(&tmp, &spool.join(&name), false) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            }
        });
        let _ = std::fs::remove_file(&tmp);
        let placed = placed?;
        if placed {
            lazarus_ledger::fs::sync_dir(&spool)?;
        }
        return Ok(placed);
    }
    Err(io::Error::other(format!(
        "cannot place a message in {}: the spool directory keeps disappearing",
        inbox_path(dir, id).display()
    )))
}

/// Whether the spool of `id` exists (one `stat`: messages may be waiting).
pub(crate) fn may_have_waiting(dir: &Path, id: &str) -> bool {
    inbox_path(dir, id).is_dir()
}

/// Sessions in `dir` that have a spool directory (messages may be waiting): one read of
/// the directory.
pub(crate) fn sessions_with_spool(dir: &Path) -> io::Result<Vec<crate::SessionId>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(INBOX_SUFFIX))
            .and_then(|n| crate::SessionId::parse(n).ok())
        {
            out.push(id);
        }
    }
    Ok(out)
}

/// Decodes one spool file; the error says what is wrong with it.
fn decode(name: &str, bytes: &[u8]) -> Result<(u64, InboxMessage), String> {
    let line = bytes
        .strip_suffix(b"\n")
        .ok_or("no complete line (no newline at the end)")?;
    let env: frame::Envelope<serde_json::Value> =
        frame::decode_line(line).map_err(|p| p.to_string())?;
    let data = serde_json::to_vec(&env.data).map_err(|e| e.to_string())?;
    let msg = InboxMessage::from_parts(env.kind, &data)?;
    if file_name(msg.message_id()) != name {
        return Err(format!(
            "holds message {:?}, which is not the message this name is for",
            msg.message_id()
        ));
    }
    Ok((env.seq, msg))
}

/// Up to `limit` messages waiting in the spool of `id`, oldest first. A file that fails its
/// check is set aside as `<name>.bad` (and logged), never dropped silently.
pub(crate) fn waiting(
    dir: &Path,
    id: &str,
    limit: usize,
    line_max: usize,
) -> io::Result<Vec<InboxMessage>> {
    let spool = inbox_path(dir, id);
    let entries = match std::fs::read_dir(&spool) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !is_message_name(&name) {
            continue;
        }
        let path = spool.join(&name);
        let bytes = match read_limited(&path, line_max) {
            Ok(b) => b,
            // consumed meanwhile
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                set_aside(&path, &e.to_string());
                continue;
            }
            Err(e) => return Err(e),
        };
        match decode(&name, &bytes) {
            Ok((order, msg)) => found.push((order, name, msg)),
            Err(why) => set_aside(&path, &why),
        }
    }
    found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok(found.into_iter().take(limit).map(|(_, _, m)| m).collect())
}

fn read_limited(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    let f: File = lazarus_ledger::fs::open_regular(path, false, false).map_err(|e| {
        if lazarus_ledger::fs::is_not_regular(&e) {
            io::Error::new(io::ErrorKind::InvalidData, "not a regular file")
        } else {
            e
        }
    })?;
    let mut buf = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(buf)
}

fn set_aside(path: &Path, why: &str) {
    let mut bad = path.as_os_str().to_owned();
    bad.push(".bad");
    tracing::warn!(
        file = %path.display(),
        error = why,
        "an inbox spool file failed its check; set aside with .bad (not delivered, not deleted)"
    );
    if let Err(e) = std::fs::rename(path, &bad) {
        tracing::warn!(file = %path.display(), error = %e, "cannot set the spool file aside");
    }
}

/// Consumes message `message_id` (after the log took it). Gone already is fine.
pub(crate) fn consume(dir: &Path, id: &str, message_id: &str) -> io::Result<()> {
    match std::fs::remove_file(inbox_path(dir, id).join(file_name(message_id))) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// After a drain found nothing waiting: removes the spool directory if it is empty (a
/// set-aside `.bad` file keeps it). Removes temporary files of deliverers that died first.
pub(crate) fn tidy(dir: &Path, id: &str) -> io::Result<()> {
    let spool = inbox_path(dir, id);
    match std::fs::remove_dir(&spool) {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::DirectoryNotEmpty
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Removes the whole spool of a session being removed (`sessions rm`).
pub(crate) fn remove_all(dir: &Path, id: &str) -> io::Result<()> {
    match std::fs::remove_dir_all(inbox_path(dir, id)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
