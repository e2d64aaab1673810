//! File tools: `read_file`, `write_file`, `edit_file`, `list_dir`.
//!
//! Every path is resolved beneath the workspace by the kernel in the same call that opens it
//! ([`super::path::Workspace`]). Only regular files are read (opened `O_NONBLOCK` after an
//! `O_PATH` look, so a FIFO or a device never blocks or gets opened for real), in bounded
//! chunks: `read_file` stops reading when the lines asked for are in hand. Writes go through
//! [`lazarus_ledger::durable_replace`] in a directory descriptor resolved the same way, and
//! refuse symbolic links and files with other hard links.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use lazarus_ledger::durable_replace::{ReplaceOptions, replace_in_dir};
use rustix::fs::{AtFlags, FileType, OFlags};
use serde_json::{Value, json};

use super::path::{PathError, Workspace, errno, split_last};
use super::{Args, Rerun, Tool, ToolContext, ToolFuture, ToolHooks, ToolOutput};
use crate::model::ToolSpec;

fn refused(reason: String) -> ToolOutput {
    ToolOutput::rejected(format!("error: not started: {reason}"))
}

fn path_err(e: PathError) -> String {
    format!("error: {e}")
}

/// The workspace and the path relative to it.
fn locate(ctx: &ToolContext, path: &str) -> Result<(Workspace, PathBuf), String> {
    let ws = Workspace::open(&ctx.workspace)
        .map_err(path_err)?
        .denying(ctx.sandbox.denied_resolved());
    let rel = ws.relative(path).map_err(path_err)?;
    Ok((ws, rel))
}

fn kind_of(ft: FileType) -> &'static str {
    match ft {
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Symlink => "a symbolic link",
        _ => "not a regular file",
    }
}

/// [`locate`] for a tool that writes: refused outright under the `read-only` sandbox (the
/// file tools run in lazarus itself, so the sandbox's mode is held here), and beneath the
/// workspace's version-control metadata unless the operator allowed writing it.
fn locate_for_write(
    ctx: &ToolContext,
    tool: &str,
    path: &str,
) -> Result<(Workspace, PathBuf), String> {
    if !ctx.sandbox.workspace_writable() {
        return Err(format!(
            "error: {tool} is refused: the sandbox is read-only (--sandbox read-only), so nothing in the workspace may be written"
        ));
    }
    let (ws, rel) = locate(ctx, path)?;
    Ok((ws.read_only(ctx.sandbox.vcs_read_only(&ctx.workspace)), rel))
}

/// Refuses, before anything starts, a path that leaves the workspace (a missing one is
/// reported when the tool runs).
fn precheck(ws: &Workspace, rel: &Path, shown: &str) -> Result<(), String> {
    match ws.open_beneath(rel, OFlags::PATH, shown) {
        Ok(_) | Err(PathError::NotFound(_)) => Ok(()),
        Err(e) => Err(path_err(e)),
    }
}

/// Opens a regular file for reading: an `O_PATH` look first (opens nothing for real), then
/// `O_RDONLY|O_NONBLOCK` and a check that it is the same regular file.
fn open_regular(ws: &Workspace, rel: &Path, shown: &str) -> Result<(std::fs::File, u64), String> {
    let look = ws
        .open_beneath(rel, OFlags::PATH, shown)
        .map_err(path_err)?;
    let st = rustix::fs::fstat(&look)
        .map_err(|e| format!("error: cannot read {shown}: {}", errno(e)))?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft == FileType::Directory {
        return Err(format!("error: {shown} is a directory; use list_dir"));
    }
    if ft != FileType::RegularFile {
        return Err(format!(
            "error: {shown} is {} (not a regular file); read_file and edit_file read regular files only",
            kind_of(ft)
        ));
    }
    let fd = ws
        .open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK, shown)
        .map_err(path_err)?;
    let st2 =
        rustix::fs::fstat(&fd).map_err(|e| format!("error: cannot read {shown}: {}", errno(e)))?;
    if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino)
        || FileType::from_raw_mode(st2.st_mode) != FileType::RegularFile
    {
        return Err(format!(
            "error: {shown} changed while it was being opened; try again"
        ));
    }
    Ok((std::fs::File::from(fd), st2.st_size as u64))
}

/// The directory a write goes to, and the file name in it. `create` makes missing
/// directories (beneath the workspace only).
fn target_dir(
    ws: &Workspace,
    rel: &Path,
    shown: &str,
    create: bool,
) -> Result<(OwnedFd, std::ffi::OsString), String> {
    let Some((parent, name)) = split_last(rel) else {
        return Err(format!(
            "error: {shown} is the workspace directory, not a file"
        ));
    };
    let dir = if create {
        ws.create_dirs(parent, shown)
    } else {
        ws.open_beneath(parent, OFlags::RDONLY | OFlags::DIRECTORY, shown)
    }
    .map_err(path_err)?;
    ws.check_entry(&dir, name, shown).map_err(path_err)?;
    Ok((dir, name.to_os_string()))
}

/// Checks, before anything happens, what a write to `rel` would replace: a directory, a
/// symbolic link, something not a regular file, or a file with other hard links is refused.
fn check_write_target(ws: &Workspace, rel: &Path, shown: &str) -> Result<(), String> {
    let Some((parent, name)) = split_last(rel) else {
        return Err(format!(
            "error: {shown} is the workspace directory, not a file"
        ));
    };
    let dir = match ws.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY, shown) {
        Ok(d) => d,
        // missing directories are created at write time
        Err(PathError::NotFound(_)) => return Ok(()),
        Err(e) => return Err(path_err(e)),
    };
    ws.check_entry(&dir, name, shown).map_err(path_err)?;
    match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let ft = FileType::from_raw_mode(st.st_mode);
            if ft == FileType::Symlink {
                return Err(format!(
                    "error: {shown} is a symbolic link; write to the file it points to"
                ));
            }
            if ft != FileType::RegularFile {
                return Err(format!(
                    "error: {shown} is {}; refusing to replace it",
                    kind_of(ft)
                ));
            }
            if st.st_nlink > 1 {
                return Err(format!(
                    "error: {shown} has {} hard links; refusing to replace a file that has other names",
                    st.st_nlink
                ));
            }
            Ok(())
        }
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(format!("error: cannot inspect {shown}: {}", errno(e))),
    }
}

const WRITE_OPTIONS: ReplaceOptions = ReplaceOptions {
    new_file_mode: 0o666,
    refuse_hard_links: true,
    refuse_symlinks: true,
};

/// Replaces the file at `rel` with `content` (directories created as needed).
fn write_beneath(ws: &Workspace, rel: &Path, shown: &str, content: &[u8]) -> Result<(), String> {
    let (dir, name) = target_dir(ws, rel, shown, true)?;
    replace_in_dir(dir.as_fd(), &name, content, &WRITE_OPTIONS)
        .map_err(|e| format!("error: cannot write {shown}: {e}"))
}

/// What [`read_window`] found.
#[derive(Debug, Default)]
struct Window {
    out: Vec<u8>,
    shown_lines: u64,
    /// Stopped because the next line would pass the byte limit.
    cut: bool,
    /// The first line of the window alone is longer than the byte limit (its start is shown).
    long_line: bool,
    /// Lines in the file, when everything was read.
    total_lines: Option<u64>,
}

/// Reads lines `offset..offset+limit` (1-based) in 64 KiB chunks, keeping at most `max`
/// bytes and reading nothing past the window (except the rest of the last chunk, which only
/// counts lines). Skipping to `offset` may read at most `scan_max` bytes.
fn read_window(
    file: &mut impl Read,
    size: u64,
    offset: u64,
    limit: Option<u64>,
    max: usize,
    scan_max: u64,
) -> Result<Window, String> {
    let end = limit.map(|l| offset.saturating_add(l));
    let mut w = Window::default();
    let mut buf = vec![0u8; 64 * 1024];
    let mut line = 1u64; // the line the next byte belongs to
    let mut cur: Vec<u8> = Vec::new(); // the current line, when it is in the window
    let mut line_started = false;
    let mut read_total = 0u64;
    let in_window = |line: u64| line >= offset && end.is_none_or(|e| line < e);
    'chunks: loop {
        let n = match file.read(&mut buf) {
            Ok(0) => {
                if in_window(line) && !cur.is_empty() {
                    w.out.append(&mut cur);
                    w.shown_lines += 1;
                }
                w.total_lines = Some(line - 1 + u64::from(line_started));
                return Ok(w);
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("error: read failed: {e}")),
        };
        read_total += n as u64;
        // when this chunk ends the file, the total is known whatever stops us below
        let whole_total = (read_total >= size).then(|| {
            let newlines = buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
            line - 1 + newlines + u64::from(buf[n - 1] != b'\n')
        });
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let (seg, newline) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..=i], true),
                None => (rest, false),
            };
            rest = &rest[seg.len()..];
            line_started = true;
            if in_window(line) {
                if w.out.len() + cur.len() + seg.len() > max {
                    if w.out.is_empty() {
                        cur.extend_from_slice(seg);
                        cur.truncate(max);
                        w.out = cur;
                        w.shown_lines = 1;
                        w.long_line = true;
                    }
                    w.cut = true;
                    w.total_lines = whole_total;
                    return Ok(w);
                }
                cur.extend_from_slice(seg);
            }
            if newline {
                if in_window(line) {
                    w.out.append(&mut cur);
                    w.shown_lines += 1;
                }
                line += 1;
                line_started = false;
                if end.is_some_and(|e| line >= e) {
                    // the window is complete; the total is known only if the whole file
                    // was read
                    w.total_lines = whole_total;
                    break 'chunks;
                }
            }
        }
        if line < offset && read_total > scan_max {
            return Err(format!(
                "error: line {offset} is not within the first {scan_max} bytes, which is as far as read_file looks; use shell (e.g. sed -n) for such files"
            ));
        }
    }
    Ok(w)
}

/// `read_file`: reads a text file, optionally a range of lines. Idempotent (no effect).
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFileTool;

impl Tool for ReadFileTool {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec {
            name: "read_file".into(),
            description: "Read a text file in the workspace. Optional `offset` (first line, 1-based) and `limit` (number of lines). Long files are cut; use offset/limit to read further.".into(),
            parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return"}
                }, "required": ["path"], "additionalProperties": false}),
        }
        });
        &SPEC
    }
    fn read_only(&self) -> bool {
        true
    }
    fn rerun(&self) -> Rerun {
        Rerun::fixed(true)
    }
    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let prep = (|| {
                let a = Args::new("read_file", arguments)?;
                let path = a.string("path")?;
                let offset = a.opt_u64("offset")?.unwrap_or(1).max(1);
                let limit = a.opt_u64("limit")?;
                let (ws, rel) = locate(ctx, path)?;
                precheck(&ws, &rel, path)?;
                Ok::<_, String>((path, ws, rel, offset, limit))
            })();
            let (shown, ws, rel, offset, limit) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            let (mut file, size) = match open_regular(&ws, &rel, shown) {
                Ok(f) => f,
                Err(e) => return ToolOutput::error(e),
            };
            let max = ctx.limits.read_max_bytes;
            let w = match read_window(
                &mut file,
                size,
                offset,
                limit,
                max,
                ctx.limits.read_scan_max_bytes,
            ) {
                Ok(w) => w,
                Err(e) => return ToolOutput::error(format!("{e} ({shown})")),
            };
            let mut out = String::from_utf8_lossy(&w.out).into_owned();
            let whole = offset == 1 && limit.is_none();
            if whole && !w.cut && w.total_lines.is_some() {
                return ToolOutput::ok(out);
            }
            if w.shown_lines == 0
                && let Some(total) = w.total_lines
            {
                return ToolOutput::error(format!(
                    "error: {shown} has {total} lines; offset {offset} is past the end"
                ));
            }
            let last = offset + w.shown_lines.saturating_sub(1);
            let mut note = match w.total_lines {
                Some(total) => format!("[lines {offset}-{last} of {total}"),
                None => format!("[lines {offset}-{last}; the file goes on"),
            };
            if w.long_line {
                note.push_str(&format!(
                    "; line {offset} is longer than {max} bytes and was cut; use shell to see more of it"
                ));
            } else if w.cut {
                note.push_str(&format!(
                    "; output cut at {max} bytes, continue with offset {}",
                    last + 1
                ));
            } else if w.total_lines.is_none() {
                note.push_str(&format!(", continue with offset {}", last + 1));
            }
            note.push(']');
            if !out.ends_with('\n') && !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&note);
            ToolOutput::ok(out)
        })
    }
}

/// `write_file`: writes a whole file (creating parent directories).
///
/// Idempotent: the effect is "the file at `path` has exactly `content`". Running the same call
/// a second time (same path, same full content) leaves the same state as running it once, so
/// re-running an interrupted call is safe. (Another writer in between could be overwritten —
/// exactly as the first run would have done.)
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteFileTool;

impl Tool for WriteFileTool {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec {
            name: "write_file".into(),
            description: "Write a whole text file in the workspace (created or replaced; parent directories are created).".into(),
            parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace"},
                    "content": {"type": "string", "description": "The complete new content"}
                }, "required": ["path", "content"], "additionalProperties": false}),
        }
        });
        &SPEC
    }
    fn rerun(&self) -> Rerun {
        Rerun::fixed(true)
    }
    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let prep = (|| {
                let a = Args::new("write_file", arguments)?;
                let path = a.string("path")?;
                let content = a.string("content")?;
                if content.len() > ctx.limits.write_max_bytes {
                    return Err(format!(
                        "error: content is {} bytes; the limit is {} bytes",
                        content.len(),
                        ctx.limits.write_max_bytes
                    ));
                }
                let (ws, rel) = locate_for_write(ctx, "write_file", path)?;
                check_write_target(&ws, &rel, path)?;
                Ok::<_, String>((path, ws, rel, content))
            })();
            let (shown, ws, rel, content) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            match write_beneath(&ws, &rel, shown, content.as_bytes()) {
                Ok(()) => ToolOutput::ok(format!("wrote {} bytes to {shown}", content.len())),
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

/// `edit_file`: replaces one exact, unique occurrence of `old_string` by `new_string`.
/// Not idempotent: after the first run the old text is gone (or, if `new_string` contains it,
/// a second run would edit again).
#[derive(Debug, Default, Clone, Copy)]
pub struct EditFileTool;

impl Tool for EditFileTool {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec {
            name: "edit_file".into(),
            description: "Replace exactly one occurrence of `old_string` by `new_string` in a file. Fails if the text is not found or found more than once (then include more surrounding text).".into(),
            parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace"},
                    "old_string": {"type": "string", "description": "Exact text to replace (must occur once)"},
                    "new_string": {"type": "string", "description": "Replacement text"}
                }, "required": ["path", "old_string", "new_string"], "additionalProperties": false}),
        }
        });
        &SPEC
    }
    fn rerun(&self) -> Rerun {
        Rerun::fixed(false)
    }
    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let prep = (|| {
                let a = Args::new("edit_file", arguments)?;
                let path = a.string("path")?;
                let old = a.string("old_string")?;
                let new = a.string("new_string")?;
                if old.is_empty() {
                    return Err("error: old_string is empty; give the exact text to replace".into());
                }
                if old == new {
                    return Err(
                        "error: old_string and new_string are the same; nothing to do".into(),
                    );
                }
                let (ws, rel) = locate_for_write(ctx, "edit_file", path)?;
                check_write_target(&ws, &rel, path)?;
                let (file, size) = open_regular(&ws, &rel, path)?;
                let cap = ctx.limits.write_max_bytes;
                if size > cap as u64 {
                    return Err(format!(
                        "error: {path} is {size} bytes; edit_file handles files up to {cap} bytes (use shell for bigger ones)"
                    ));
                }
                let mut bytes = Vec::new();
                file.take(cap as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| format!("error: cannot read {path}: {e}"))?;
                if bytes.len() > cap {
                    return Err(format!(
                        "error: {path} grew past {cap} bytes while it was read; edit_file handles files up to {cap} bytes"
                    ));
                }
                let text = String::from_utf8(bytes).map_err(|_| {
                    format!("error: {path} is not UTF-8 text; edit_file needs text")
                })?;
                let count = text.matches(old).count();
                if count == 0 {
                    return Err(format!(
                        "error: old_string was not found in {path}; read the file and copy the exact text (whitespace included)"
                    ));
                }
                if count > 1 {
                    return Err(format!(
                        "error: old_string occurs {count} times in {path}; include more surrounding text so it occurs exactly once"
                    ));
                }
                let edited = text.replacen(old, new, 1);
                if edited.len() > ctx.limits.write_max_bytes {
                    return Err(format!(
                        "error: the edited file would be {} bytes; the limit is {} bytes",
                        edited.len(),
                        ctx.limits.write_max_bytes
                    ));
                }
                Ok::<_, String>((path, ws, rel, edited))
            })();
            let (shown, ws, rel, edited) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            let written = target_dir(&ws, &rel, shown, false).and_then(|(dir, name)| {
                replace_in_dir(dir.as_fd(), &name, edited.as_bytes(), &WRITE_OPTIONS)
                    .map_err(|e| format!("error: cannot write {shown}: {e}"))
            });
            match written {
                Ok(()) => ToolOutput::ok(format!("edited {shown}: replaced 1 occurrence")),
                Err(e) => ToolOutput::error(e),
            }
        })
    }
}

/// `list_dir`: lists a directory. Idempotent (no effect).
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDirTool;

impl Tool for ListDirTool {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec {
            name: "list_dir".into(),
            description: "List a directory of the workspace (default: the workspace root). Directories end with '/', symbolic links with '@'.".into(),
            parameters: json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "Directory relative to the workspace (default \".\")"}
                }, "additionalProperties": false}),
        }
        });
        &SPEC
    }
    fn read_only(&self) -> bool {
        true
    }
    fn rerun(&self) -> Rerun {
        Rerun::fixed(true)
    }
    fn run<'a>(
        &'a self,
        ctx: &'a ToolContext,
        arguments: &'a Value,
        hooks: &'a mut dyn ToolHooks,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let prep = (|| {
                let a = Args::new("list_dir", arguments)?;
                let path = a.opt_string("path")?.unwrap_or(".");
                let (ws, rel) = locate(ctx, path)?;
                precheck(&ws, &rel, path)?;
                Ok::<_, String>((path, ws, rel))
            })();
            let (shown, ws, rel) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            let dir = match ws.open_beneath(
                &rel,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK,
                shown,
            ) {
                Ok(d) => d,
                Err(PathError::Io(_, e)) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                    return ToolOutput::error(format!("error: {shown} is not a directory"));
                }
                Err(e) => return ToolOutput::error(format!("error: cannot list {shown}: {e}")),
            };
            let entries = match rustix::fs::Dir::read_from(&dir) {
                Ok(d) => d,
                Err(e) => {
                    return ToolOutput::error(format!("error: cannot list {shown}: {}", errno(e)));
                }
            };
            let mut names: Vec<String> = Vec::new();
            for entry in entries {
                let Ok(entry) = entry else {
                    return ToolOutput::error(format!("error: cannot list {shown}: read failed"));
                };
                let raw = entry.file_name().to_bytes();
                if raw == b"." || raw == b".." {
                    continue;
                }
                let mut name = String::from_utf8_lossy(raw).into_owned();
                let mut ft = entry.file_type();
                if ft == FileType::Unknown {
                    ft = rustix::fs::statat(&dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| FileType::from_raw_mode(st.st_mode))
                        .unwrap_or(FileType::Unknown);
                }
                match ft {
                    FileType::Directory => name.push('/'),
                    FileType::Symlink => name.push('@'),
                    _ => {}
                }
                names.push(name);
            }
            names.sort();
            let total = names.len();
            let max = ctx.limits.list_max_entries;
            let mut text = names.into_iter().take(max).collect::<Vec<_>>().join("\n");
            if total > max {
                text.push_str(&format!("\n[{} more entries not shown]", total - max));
            }
            if total == 0 {
                text = format!("({shown} is empty)");
            }
            ToolOutput::ok(text)
        })
    }
}
