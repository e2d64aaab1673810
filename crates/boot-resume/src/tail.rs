//! Reading only the end of a session file and classifying it.
//!
//! A dense file up to [`TailOptions::whole_file_max`] (64 KiB) is read whole, in one read: most
//! session files are that small, and a tail window would mostly grow to the whole of it,
//! in several reads. A larger file's first window is [`TailOptions::first_window`] bytes
//! (4 KiB by default). When the classifier says the deciding record lies before the window,
//! the window doubles, up to [`TailOptions::max_window`] (8 MiB). Reads use `pread`, so a
//! file being appended to is never seeked.
use crate::classify::{self, Format};
use crate::verdict::{Classification, IndexFacts, SessionMeta};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Window sizes for tail reads.
#[derive(Debug, Clone, Copy)]
pub struct TailOptions {
    /// First window, in bytes.
    pub first_window: u64,
    /// Largest window, in bytes.
    pub max_window: u64,
    /// A file up to this size is read whole, in one read (0: never).
    pub whole_file_max: u64,
}

impl Default for TailOptions {
    fn default() -> Self {
        TailOptions {
            first_window: 4 * 1024,
            max_window: 8 * 1024 * 1024,
            whole_file_max: 64 * 1024,
        }
    }
}

/// Largest first line (header) read separately from the tail.
const HEAD_MAX: usize = 256 * 1024;

/// Why a file could not be classified.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// Opening failed (missing file, permissions, symlink loop...).
    #[error(
        "cannot open {path}: {source} (check that the file exists and is readable by this user)"
    )]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Reading or stat failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Not a regular file (directory, FIFO, device), or a symbolic link.
    #[error(
        "{path} is not a regular file ({what}); point --source at session .jsonl files or their directory"
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead (`a symbolic link`, `a FIFO`).
        what: String,
    },
    /// The format could not be recognised.
    #[error("{path}: no known session format recognised (use --source FORMAT:PATH to name it)")]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
}

/// Size and modification time of a file, part of the resume fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFacts {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Fewer bytes are allocated than the size says (`st_blocks`): the file may have holes,
    /// so reads look for them (`SEEK_DATA`/`SEEK_HOLE`); a dense file is read as it is.
    pub sparse: bool,
}

/// What the directory listing already told about a file, so it is not asked again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hints {
    /// Claude Code: whether `<dir>/<stem>/subagents/` exists (`None`: look).
    pub subagents: Option<bool>,
}

/// Opens a session file for reading (`O_NOFOLLOW | O_NONBLOCK`, regular files only: a FIFO
/// or a symlink to `/dev/zero` named like a session log is refused, never read), and
/// returns it with its facts.
pub fn open(path: &Path) -> Result<(File, FileFacts), TailError> {
    use lazarus_ledger::fs::NotRegularFile;
    let (file, md) =
        lazarus_ledger::fs::open_regular_meta(path, false, false).map_err(|source| match source
            .get_ref()
            .and_then(|i| i.downcast_ref::<NotRegularFile>())
        {
            Some(NotRegularFile(what)) => TailError::NotAFile {
                path: path.to_path_buf(),
                what: what.to_string(),
            },
            None => TailError::Open {
                path: path.to_path_buf(),
                source,
            },
        })?;
    use std::os::unix::fs::MetadataExt;
    Ok((
        file,
        FileFacts {
            size: md.len(),
            mtime_ns: mtime_ns(md.modified().ok()),
            sparse: md.blocks().saturating_mul(512) < md.len(),
        },
    ))
}

/// Nanoseconds since the epoch (0 if unknown).
pub fn mtime_ns(t: Option<SystemTime>) -> i128 {
    match t.map(|t| t.duration_since(SystemTime::UNIX_EPOCH)) {
        Some(Ok(d)) => d.as_nanos() as i128,
        Some(Err(e)) => -(e.duration().as_nanos() as i128),
        None => 0,
    }
}

/// Reads up to `len` bytes at `off` into `buf` (replacing its contents); a file that
/// shrank meanwhile yields fewer bytes.
fn pread(file: &File, off: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    append_read(file, off, len, buf)
}

/// Appends up to `len` bytes read at `off` to `buf`, into its spare capacity (never zeroed
/// first: the kernel writes every byte it reports).
fn append_read(file: &File, off: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.reserve(len);
    let end = buf.len() + len;
    let mut at = off;
    while buf.len() < end {
        let want = end - buf.len();
        let before = buf.len();
        let spare = &mut buf.spare_capacity_mut()[..want];
        match rustix::io::pread(file, spare, at) {
            Ok(([], _)) => break,
            Ok((init, _)) => {
                let n = init.len();
                // SAFETY: `pread` initialised the first `n` bytes of the spare capacity.
                unsafe { buf.set_len(before + n) };
                at += n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Appends `[off, off + len)` of the file to `buf` with every hole in it (a range the
/// filesystem reports never written: sparse, or unwritten extents left by a crash; it reads
/// as zeros) collapsed to one NUL byte. A run of NULs holds no newline, so it lies inside one
/// line, which NUL makes unparsable JSON whatever its length: every classifier judges the
/// collapsed bytes as it would the zeros, without the file's holes being read or scanned.
/// Filesystems without `SEEK_DATA` are read as they are, and so is a file that is not sparse
/// (no `lseek` at all: most files have no holes).
fn append_collapsing_holes(
    file: &File,
    off: u64,
    len: u64,
    buf: &mut Vec<u8>,
    sparse: bool,
) -> io::Result<()> {
    use rustix::fs::{SeekFrom, seek};
    if !sparse {
        return append_read(file, off, len as usize, buf);
    }
    let end = off + len;
    let mut pos = off;
    while pos < end {
        let data = match seek(file, SeekFrom::Data(pos)) {
            Ok(d) => d.min(end),
            // no data after `pos`: the rest is a hole
            Err(rustix::io::Errno::NXIO) => end,
            // SEEK_DATA unsupported: read everything
            Err(_) => pos,
        };
        if data > pos {
            buf.push(0);
            pos = data;
            if pos >= end {
                break;
            }
        }
        let hole = match seek(file, SeekFrom::Hole(pos)) {
            Ok(h) => h.min(end),
            Err(_) => end,
        };
        let n = hole.max(pos + 1).min(end) - pos;
        append_read(file, pos, n as usize, buf)?;
        pos += n;
    }
    Ok(())
}

/// Largest decompressed size of a `.jsonl.zst` rollout that is read.
pub const MAX_DECOMPRESSED: u64 = 256 << 20;

/// A zstd-compressed transcript (Codex `rollout-*.jsonl.zst`): it cannot be read from the
/// end, so it is decompressed (up to [`MAX_DECOMPRESSED`]) and classified whole.
fn classify_compressed(
    file: &File,
    facts: FileFacts,
    path: &Path,
    format: Option<Format>,
    index: Option<&IndexFacts>,
    opts: TailOptions,
    buf: &mut Vec<u8>,
) -> Result<FileResult, TailError> {
    use std::io::Read;
    let rd = |e| TailError::Read {
        path: path.to_path_buf(),
        source: e,
    };
    buf.clear();
    let dec = zstd::stream::read::Decoder::new(file).map_err(rd)?;
    dec.take(MAX_DECOMPRESSED + 1)
        .read_to_end(buf)
        .map_err(rd)?;
    if buf.len() as u64 > MAX_DECOMPRESSED {
        return Err(rd(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "decompresses to more than {} MiB; not reading it",
                MAX_DECOMPRESSED >> 20
            ),
        )));
    }
    let path_str = path.to_string_lossy();
    let (whole, damage) = crate::damage::repair(buf, true);
    let header = memchr::memchr(b'\n', &whole).map(|n| &whole[..n]);
    let f = match format.or_else(|| classify::detect(header, &whole, &path_str)) {
        Some(f) => f,
        None => {
            return Err(TailError::UnknownFormat {
                path: path.to_path_buf(),
            });
        }
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let meta = SessionMeta {
        header,
        at_start: true,
        at_cap: true,
        file_name: name.strip_suffix(".zst").unwrap_or(name),
        subagent_path: path_str.contains("/subagents/"),
        index,
        has_subagents: false,
    };
    let _ = opts;
    let mut c = f.classify(&whole, &meta);
    note_damage(&mut c, damage);
    Ok(FileResult {
        format: f,
        classification: c,
        facts,
        window: buf.len() as u64,
    })
}

/// The start of a file, read once and only as far as needed (4 KiB, then ×4 up to
/// [`HEAD_MAX`]): its first line (a header: ids, cwd, Codex `source`) and, for Claude Code,
/// the first line naming an `entrypoint` (who created the session), which the same bytes
/// usually hold. Holes are collapsed as in the window.
struct Head {
    bytes: Vec<u8>,
    read_to: u64,
}

impl Head {
    fn new() -> Head {
        Head {
            bytes: Vec::new(),
            read_to: 0,
        }
    }

    /// Reads on, 4 KiB first, then four times as far; false when there is no more to read.
    fn more(&mut self, file: &File, facts: FileFacts) -> io::Result<bool> {
        let limit = facts.size.min(HEAD_MAX as u64);
        if self.read_to >= limit {
            return Ok(false);
        }
        let upto = (self.read_to * 4).clamp(4096, HEAD_MAX as u64).min(limit);
        append_collapsing_holes(
            file,
            self.read_to,
            upto - self.read_to,
            &mut self.bytes,
            facts.sparse,
        )?;
        self.read_to = upto;
        Ok(true)
    }

    /// The complete lines read so far, as the damage rule reads them.
    fn lines(&self) -> std::borrow::Cow<'_, [u8]> {
        let complete = memchr::memrchr(b'\n', &self.bytes).map_or(0, |i| i + 1);
        crate::damage::repair(&self.bytes[..complete], true).0
    }

    /// The first line.
    fn first_line(&mut self, file: &File, facts: FileFacts) -> io::Result<Option<Vec<u8>>> {
        loop {
            if memchr::memchr(b'\n', &self.bytes).is_some() {
                let lines = self.lines();
                return Ok(lines.split(|b| *b == b'\n').next().map(<[u8]>::to_vec));
            }
            if !self.more(file, facts)? {
                return Ok(None);
            }
        }
    }

    /// The first complete line that names an `entrypoint` (Claude Code).
    fn owner_line(&mut self, file: &File, facts: FileFacts) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(l) = self
                .lines()
                .split(|b| *b == b'\n')
                .find(|l| crate::lines::contains(l, b"\"entrypoint\":"))
            {
                return Ok(Some(l.to_vec()));
            }
            if !self.more(file, facts)? {
                return Ok(None);
            }
        }
    }
}

/// The permission mode of the newest Claude Code line that carries one, before a window
/// that starts at `end` with the partial line `partial` (its bytes up to the first newline):
/// read backwards 64 KiB at a time, holes collapsed as in the window, only the lines that
/// name `permissionMode` parsed. Memory is bounded by the longest line; the search ends at
/// the first line that carries a mode, or at the file's start.
fn permission_mode_before(
    file: &File,
    end: u64,
    partial: &[u8],
    sparse: bool,
) -> io::Result<Option<String>> {
    use crate::formats::claude_code::record::Line;
    const STEP: u64 = 64 * 1024;
    // `acc` holds the bytes from `pos` up to the end of the partial line: an incomplete
    // line first, then complete ones not yet looked at.
    let mut acc = partial.to_vec();
    let mut pos = end;
    let mut chunk = Vec::new();
    while pos > 0 {
        let from = pos.saturating_sub(STEP);
        chunk.clear();
        append_collapsing_holes(file, from, pos - from, &mut chunk, sparse)?;
        chunk.extend_from_slice(&acc);
        std::mem::swap(&mut acc, &mut chunk);
        pos = from;
        let complete = if pos == 0 {
            0
        } else {
            match memchr::memchr(b'\n', &acc) {
                Some(i) => i + 1,
                None => continue,
            }
        };
        // the complete lines, newest first
        let body = &acc[complete..];
        let mut hi = body.len();
        loop {
            let lo = memchr::memrchr(b'\n', &body[..hi]).map_or(0, |i| i + 1);
            let line = &body[lo..hi];
            if crate::lines::contains(line, b"\"permissionMode\"") {
                // the damage rule, as in the window: NUL debris ends a line
                let (fixed, _) = crate::damage::repair(line, false);
                for part in fixed.rsplit(|b| *b == b'\n') {
                    if let Ok(l) = serde_json::from_slice::<Line>(part)
                        && !l.is_sidechain
                        && let Some(m) = l.permission_mode
                    {
                        return Ok(Some(m));
                    }
                }
            }
            if lo == 0 {
                break;
            }
            hi = lo - 1;
        }
        acc.truncate(complete);
    }
    Ok(None)
}

/// Says in the reason what the damage rule cut or replaced in the window.
fn note_damage(c: &mut Classification, d: crate::damage::Damage) {
    if let Some(n) = d.describe() {
        c.reason.push_str("; read through damage: ");
        c.reason.push_str(&n);
    }
}

/// Whether sub-agent transcripts lie beside this Claude Code session file
/// (`<dir>/<id>.jsonl` and `<dir>/<id>/subagents/`).
fn fmt_may_have_subagents(path: &Path) -> bool {
    match (path.parent(), path.file_stem()) {
        (Some(dir), Some(stem)) => dir.join(stem).join("subagents").is_dir(),
        _ => false,
    }
}

/// Result of classifying one file.
#[derive(Debug, Clone)]
pub struct FileResult {
    /// The format used.
    pub format: Format,
    /// The classification.
    pub classification: Classification,
    /// Size and mtime at open time.
    pub facts: FileFacts,
    /// Bytes read from the end (largest window used).
    pub window: u64,
}

/// Classifies one file: `format` `None` means auto-detect.
/// `buf` is a reusable buffer (one per worker thread).
pub fn classify_file(
    path: &Path,
    format: Option<Format>,
    index: Option<&IndexFacts>,
    opts: TailOptions,
    buf: &mut Vec<u8>,
) -> Result<FileResult, TailError> {
    let (file, facts) = open(path)?;
    classify_open(
        &file,
        facts,
        path,
        format,
        index,
        opts,
        Hints::default(),
        buf,
    )
}

/// Like [`classify_file`] for a file already opened with [`open`], with what the directory
/// listing told about it. Reads the file's end, growing the window only while the deciding
/// record lies before it, and its start only as far as a header (or Claude Code's owner
/// line) needs; a dense file is read without looking for holes.
#[allow(clippy::too_many_arguments)]
pub fn classify_open(
    file: &File,
    facts: FileFacts,
    path: &Path,
    format: Option<Format>,
    index: Option<&IndexFacts>,
    opts: TailOptions,
    hints: Hints,
    buf: &mut Vec<u8>,
) -> Result<FileResult, TailError> {
    let rd = |e| TailError::Read {
        path: path.to_path_buf(),
        source: e,
    };
    if path.extension().is_some_and(|x| x == "zst") {
        return classify_compressed(file, facts, path, format, index, opts, buf);
    }
    let size = facts.size;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let path_str = path.to_string_lossy();
    let subagent_path = path_str.contains("/subagents/");
    let first = opts.first_window.max(64);
    let cap = opts.max_window.max(first);

    let mut head = Head::new();
    // the first line and the owner line, each read once when first needed
    let mut first_line: Option<Option<Vec<u8>>> = None;
    let mut owner_line: Option<Option<Vec<u8>>> = None;
    // (a sparse file is read from its end: its holes are never read)
    let mut window = if size <= opts.whole_file_max && !facts.sparse {
        size
    } else {
        first.min(size)
    };
    let mut fmt = format;
    let mut subagents = hints.subagents;
    // File offset where `buf` starts: a grown window reads only what lies before it, holes
    // collapsed, and keeps what was read.
    let mut have: Option<u64> = None;
    let mut grown = Vec::new();
    loop {
        let off = size - window;
        match have {
            None => pread(file, off, window as usize, buf).map_err(rd)?,
            Some(h) if off < h => {
                grown.clear();
                append_collapsing_holes(file, off, h - off, &mut grown, facts.sparse)
                    .map_err(rd)?;
                grown.extend_from_slice(buf);
                std::mem::swap(buf, &mut grown);
            }
            Some(_) => {}
        }
        have = Some(off);
        let at_start = off == 0;
        // The window as the damage rule reads it (a byte order mark, NUL debris, invalid
        // UTF-8); borrowed when clean.
        let (w, damage) = crate::damage::repair(buf, at_start);
        let in_window = || memchr::memchr(b'\n', &w).map(|n| &w[..n]);
        let f = match fmt {
            Some(f) => f,
            None => {
                if !at_start && first_line.is_none() {
                    first_line = Some(head.first_line(file, facts).map_err(rd)?);
                }
                let header = match &first_line {
                    Some(h) if !at_start => h.as_deref(),
                    _ if at_start => in_window(),
                    _ => None,
                };
                match classify::detect(header, &w, &path_str) {
                    Some(f) => {
                        fmt = Some(f);
                        f
                    }
                    None if !at_start && window < cap => {
                        window = (window * 2).min(size).min(cap);
                        continue;
                    }
                    None if size == 0 => Format::Pi,
                    None => {
                        return Err(TailError::UnknownFormat {
                            path: path.to_path_buf(),
                        });
                    }
                }
            }
        };
        // The header a classifier is given: the window's first line when it starts the
        // file; else the first line (Claude Code: the first line naming an entrypoint).
        let header: Option<&[u8]> = if at_start {
            in_window()
        } else if f == Format::ClaudeCode {
            if owner_line.is_none() {
                owner_line = Some(head.owner_line(file, facts).map_err(rd)?);
            }
            owner_line.as_ref().and_then(|o| o.as_deref())
        } else {
            if first_line.is_none() {
                first_line = Some(head.first_line(file, facts).map_err(rd)?);
            }
            first_line.as_ref().and_then(|o| o.as_deref())
        };
        let meta = SessionMeta {
            header,
            at_start,
            at_cap: window >= cap,
            file_name,
            subagent_path,
            index,
            has_subagents: f == Format::ClaudeCode
                && *subagents.get_or_insert_with(|| fmt_may_have_subagents(path)),
        };
        if !at_start && window >= cap && crate::lines::split(&w, false).lines.is_empty() {
            let mut c = Classification::new(
                crate::verdict::Verdict::Skipped(crate::verdict::SkipWhy::Unreadable),
                format!(
                    "the last record is larger than the {} KiB tail cap; not guessing (a torn or runaway line?)",
                    cap / 1024
                ),
            );
            c.torn = memchr::memrchr(b'\n', buf).is_none_or(|i| i + 1 < buf.len());
            return Ok(FileResult {
                format: f,
                classification: c,
                facts,
                window,
            });
        }
        let mut c = f.classify(&w, &meta);
        if c.need_more && !at_start && window < cap {
            window = (window * 2).min(size).min(cap);
            continue;
        }
        note_damage(&mut c, damage);
        if f == Format::ClaudeCode
            && !at_start
            && c.permission_mode.is_none()
            && c.verdict.is_resumable(true)
        {
            // The mode a resume must run in lies before the window: look back for it.
            let partial = memchr::memchr(b'\n', buf).map_or(buf.len(), |i| i + 1);
            c.permission_mode =
                permission_mode_before(file, off, &buf[..partial], facts.sparse).map_err(rd)?;
        }
        return Ok(FileResult {
            format: f,
            classification: c,
            facts,
            window,
        });
    }
}
