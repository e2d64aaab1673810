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
//! **Delivery** (anyone, no writer lock; deliveries to one session take turns on a lock of its
//! spool directory, so its limits hold): the line is written to a temporary name created
//! `O_EXCL`, fsynced, and renamed to `<h>.msg` *without replacing* — an existing name is a
//! duplicate delivery, so the message id is the dedup key and a name only ever appears whole;
//! then the spool directory is fsynced (and the session directory when the spool is new).
//! Acknowledged means: name and bytes survive a power cut.
//!
//! **Drain** (the writer, holding the session lock): every `*.msg`, oldest first, is appended
//! to the ledger as its record (fdatasync: the log now holds the message id — this append *is*
//! the consumption), then its spool file is unlinked. A crash between the two, or an unlink
//! lost to a power cut, leaves a spool file whose id the log already holds: the next drain
//! only unlinks it. An empty spool directory is removed.
//!
//! Every operation goes through the ledger's [`Fs`], so the power-cut simulator runs under
//! this code as it does under the writer's.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use lazarus_ledger::frame;
use lazarus_ledger::fs::Fs;

use crate::inbox::{INBOX_BYTES_MAX, INBOX_MESSAGES_MAX, InboxMessage, Waiting};

/// Suffix of a session's spool directory.
pub(crate) const INBOX_SUFFIX: &str = ".inbox";

/// Suffix of a spool file set aside because it failed its check.
const BAD_SUFFIX: &str = ".bad";

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

/// Makes the spool directory (mode 0700) durably; refuses one that is not a plain directory.
fn make_spool(fs: &dyn Fs, dir: &Path, id: &str) -> io::Result<PathBuf> {
    let spool = inbox_path(dir, id);
    match fs.create_dir(&spool) {
        Ok(()) => fs.sync_dir(dir)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    Ok(spool)
}

/// Makes the (empty) spool directory of `id` durably: a doorbell for a gateway's mail scan.
pub(crate) fn ring(fs: &dyn Fs, dir: &Path, id: &str) -> io::Result<()> {
    make_spool(fs, dir, id).map(|_| ())
}

/// What a delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// Placed: durable now.
    Placed,
    /// A message with this id is waiting already: nothing added.
    Duplicate,
    /// The inbox is at its limit (messages, bytes waiting): nothing added.
    Full { messages: u64, bytes: u64 },
}

/// Delivers `msg` to the spool of session `id` in `dir`. Durable when it returns `Placed`.
pub(crate) fn deliver(
    fs: &dyn Fs,
    dir: &Path,
    id: &str,
    msg: &InboxMessage,
) -> io::Result<Delivered> {
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
        let spool = make_spool(fs, dir, id)?;
        let _turn = match fs.lock_dir(&spool) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if fs.file_len(&spool.join(&name)).is_ok() {
            return Ok(Delivered::Duplicate);
        }
        let (messages, bytes) = match usage(fs, &spool) {
            Ok(u) => u,
            // a drain removed the empty spool meanwhile: make it again
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if messages + 1 > INBOX_MESSAGES_MAX || bytes + line.len() as u64 > INBOX_BYTES_MAX {
            return Ok(Delivered::Full { messages, bytes });
        }
        let tmp = spool.join(temp_name(&name));
        match fs.write_new_durable(&tmp, &line) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
        let placed = match fs.rename(&tmp, &spool.join(&name), false) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        };
        if !matches!(placed, Ok(true)) {
            let _ = fs.remove_file(&tmp);
        }
        if placed? {
            fs.sync_dir(&spool)?;
            return Ok(Delivered::Placed);
        }
        return Ok(Delivered::Duplicate);
    }
    Err(io::Error::other(format!(
        "cannot place a message in {}: the spool directory keeps disappearing",
        inbox_path(dir, id).display()
    )))
}

/// How many messages wait in `spool` and their bytes: names and sizes only (what a delivery
/// checks its limits against).
fn usage(fs: &dyn Fs, spool: &Path) -> io::Result<(u64, u64)> {
    let mut messages = 0;
    let mut bytes = 0;
    for name in fs.read_dir(spool)?.iter().filter(|n| is_message_name(n)) {
        match fs.file_len(&spool.join(name)) {
            Ok(n) => {
                messages += 1;
                bytes += n;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok((messages, bytes))
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

/// One decoded spool file.
struct Stored {
    /// The drain order (delivery time in nanoseconds).
    order: u64,
    /// When it was delivered (RFC 3339).
    ts: String,
    bytes: u64,
    msg: InboxMessage,
}

/// Decodes one spool file; the error says what is wrong with it.
fn decode(name: &str, bytes: &[u8]) -> Result<Stored, String> {
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
    Ok(Stored {
        order: env.seq,
        ts: env.ts.to_string(),
        bytes: bytes.len() as u64,
        msg,
    })
}

/// Every message waiting in the spool of `id`, oldest first, and how many files were set
/// aside. A file that fails its check is set aside as `<name>.bad` (and logged), never
/// dropped silently.
fn read_all(fs: &dyn Fs, dir: &Path, id: &str, line_max: usize) -> io::Result<(Vec<Stored>, u64)> {
    let spool = inbox_path(dir, id);
    let names = match fs.read_dir(&spool) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    let mut set_aside_files = names.iter().filter(|n| n.ends_with(BAD_SUFFIX)).count() as u64;
    for name in names.iter().filter(|n| is_message_name(n)) {
        let path = spool.join(name);
        let bytes = match fs.read_at(&path, 0, line_max as u64 + 2) {
            Ok(b) if b.len() > line_max + 1 => {
                set_aside(fs, &path, &format!("larger than {line_max} bytes"));
                set_aside_files += 1;
                continue;
            }
            Ok(b) => b,
            // consumed meanwhile
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) if lazarus_ledger::fs::is_not_regular(&e) => {
                set_aside(fs, &path, "not a regular file");
                set_aside_files += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        match decode(name, &bytes) {
            Ok(stored) => found.push((name.clone(), stored)),
            Err(why) => {
                set_aside(fs, &path, &why);
                set_aside_files += 1;
            }
        }
    }
    found.sort_by(|a, b| (a.1.order, &a.0).cmp(&(b.1.order, &b.0)));
    Ok((found.into_iter().map(|(_, s)| s).collect(), set_aside_files))
}

/// Up to `limit` messages waiting in the spool of `id`, oldest first.
pub(crate) fn waiting(
    fs: &dyn Fs,
    dir: &Path,
    id: &str,
    limit: usize,
    line_max: usize,
) -> io::Result<Vec<InboxMessage>> {
    let (all, _) = read_all(fs, dir, id, line_max)?;
    Ok(all.into_iter().take(limit).map(|s| s.msg).collect())
}

/// What waits in the spool of `id`: how many messages, their bytes, the oldest's delivery
/// time, and the files set aside.
pub(crate) fn stats(fs: &dyn Fs, dir: &Path, id: &str, line_max: usize) -> io::Result<Waiting> {
    let (all, set_aside) = read_all(fs, dir, id, line_max)?;
    Ok(Waiting {
        messages: all.len() as u64,
        bytes: all.iter().map(|s| s.bytes).sum(),
        oldest: all.first().map(|s| s.ts.clone()),
        set_aside,
    })
}

fn set_aside(fs: &dyn Fs, path: &Path, why: &str) {
    let mut bad = path.as_os_str().to_owned();
    bad.push(BAD_SUFFIX);
    tracing::warn!(
        file = %path.display(),
        error = why,
        "an inbox spool file failed its check; set aside with .bad (not delivered, not deleted)"
    );
    if let Err(e) = fs.rename(path, Path::new(&bad), false) {
        tracing::warn!(file = %path.display(), error = %e, "cannot set the spool file aside");
    }
}

/// Consumes message `message_id` (after the log took it). Gone already is fine.
pub(crate) fn consume(fs: &dyn Fs, dir: &Path, id: &str, message_id: &str) -> io::Result<()> {
    match fs.remove_file(&inbox_path(dir, id).join(file_name(message_id))) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// After a drain found nothing waiting: removes the spool directory if it is empty (a
/// set-aside `.bad` file keeps it).
pub(crate) fn tidy(fs: &dyn Fs, dir: &Path, id: &str) -> io::Result<()> {
    match fs.remove_dir(&inbox_path(dir, id)) {
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
