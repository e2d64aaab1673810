//! File tools: `read_file`, `write_file`, `edit_file`, `list_dir`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Args, Tool, ToolContext, ToolFuture, ToolHooks, ToolOutput, resolve_in_workspace};

fn resolve(ctx: &ToolContext, path: &str) -> Result<PathBuf, String> {
    resolve_in_workspace(&ctx.workspace, path).map_err(|e| format!("error: {e}"))
}

fn refused(reason: String) -> ToolOutput {
    ToolOutput::rejected(format!("error: not started: {reason}"))
}

/// Writes `content` to `target` through a temporary file in the same directory and a
/// rename, so a crash leaves either the old or the new content, never a mix.
fn write_atomically(target: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.lazarus-tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        if let Ok(meta) = std::fs::metadata(target) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `read_file`: reads a text file, optionally a range of lines. Idempotent (no effect).
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFileTool;

impl Tool for ReadFileTool {
    fn name(&self) -> &'static str {
        "read_file"
    }
    fn description(&self) -> &'static str {
        "Read a text file in the workspace. Optional `offset` (first line, 1-based) and `limit` (number of lines). Long files are cut; use offset/limit to read further."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace"},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return"}
        }, "required": ["path"], "additionalProperties": false})
    }
    fn idempotent(&self) -> bool {
        true
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
                Ok::<_, String>((path, resolve(ctx, path)?, offset, limit))
            })();
            let (shown, full, offset, limit) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            let meta = match std::fs::metadata(&full) {
                Ok(m) => m,
                Err(e) => return ToolOutput::error(format!("error: cannot read {shown}: {e}")),
            };
            if meta.is_dir() {
                return ToolOutput::error(format!("error: {shown} is a directory; use list_dir"));
            }
            let bytes = match std::fs::read(&full) {
                Ok(b) => b,
                Err(e) => return ToolOutput::error(format!("error: cannot read {shown}: {e}")),
            };
            let text = String::from_utf8_lossy(&bytes);
            let max = ctx.limits.read_max_bytes;
            let total_lines = text.lines().count() as u64;
            let whole = offset == 1 && limit.is_none();
            let mut out = String::new();
            let mut shown_lines = 0u64;
            let mut cut = false;
            for line in text
                .split_inclusive('\n')
                .skip((offset - 1) as usize)
                .take(limit.unwrap_or(u64::MAX) as usize)
            {
                if out.len() + line.len() > max {
                    cut = true;
                    break;
                }
                out.push_str(line);
                shown_lines += 1;
            }
            if whole && !cut {
                return ToolOutput::ok(out);
            }
            if offset > total_lines.max(1) && out.is_empty() {
                return ToolOutput::error(format!(
                    "error: {shown} has {total_lines} lines; offset {offset} is past the end"
                ));
            }
            let last = offset + shown_lines.saturating_sub(1);
            let mut note = format!("[lines {offset}-{last} of {total_lines}");
            if cut {
                note.push_str(&format!(
                    "; output cut at {max} bytes, continue with offset {}",
                    last + 1
                ));
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
    fn name(&self) -> &'static str {
        "write_file"
    }
    fn description(&self) -> &'static str {
        "Write a whole text file in the workspace (created or replaced; parent directories are created)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace"},
            "content": {"type": "string", "description": "The complete new content"}
        }, "required": ["path", "content"], "additionalProperties": false})
    }
    fn idempotent(&self) -> bool {
        true
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
                let full = resolve(ctx, path)?;
                if full.is_dir() {
                    return Err(format!("error: {path} is a directory"));
                }
                Ok::<_, String>((path, full, content))
            })();
            let (shown, full, content) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            match write_atomically(&full, content.as_bytes()) {
                Ok(()) => ToolOutput::ok(format!("wrote {} bytes to {shown}", content.len())),
                Err(e) => ToolOutput::error(format!("error: cannot write {shown}: {e}")),
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
    fn name(&self) -> &'static str {
        "edit_file"
    }
    fn description(&self) -> &'static str {
        "Replace exactly one occurrence of `old_string` by `new_string` in a file. Fails if the text is not found or found more than once (then include more surrounding text)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File path relative to the workspace"},
            "old_string": {"type": "string", "description": "Exact text to replace (must occur once)"},
            "new_string": {"type": "string", "description": "Replacement text"}
        }, "required": ["path", "old_string", "new_string"], "additionalProperties": false})
    }
    fn idempotent(&self) -> bool {
        false
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
                let full = resolve(ctx, path)?;
                let bytes =
                    std::fs::read(&full).map_err(|e| format!("error: cannot read {path}: {e}"))?;
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
                Ok::<_, String>((path, full, edited))
            })();
            let (shown, full, edited) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            match write_atomically(&full, edited.as_bytes()) {
                Ok(()) => ToolOutput::ok(format!("edited {shown}: replaced 1 occurrence")),
                Err(e) => ToolOutput::error(format!("error: cannot write {shown}: {e}")),
            }
        })
    }
}

/// `list_dir`: lists a directory. Idempotent (no effect).
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDirTool;

impl Tool for ListDirTool {
    fn name(&self) -> &'static str {
        "list_dir"
    }
    fn description(&self) -> &'static str {
        "List a directory of the workspace (default: the workspace root). Directories end with '/', symbolic links with '@'."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Directory relative to the workspace (default \".\")"}
        }, "additionalProperties": false})
    }
    fn idempotent(&self) -> bool {
        true
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
                Ok::<_, String>((path, resolve(ctx, path)?))
            })();
            let (shown, full) = match prep {
                Ok(p) => p,
                Err(e) => return ToolOutput::rejected(e),
            };
            if let Err(r) = hooks.started(None) {
                return refused(r);
            }
            let rd = match std::fs::read_dir(&full) {
                Ok(r) => r,
                Err(e) => return ToolOutput::error(format!("error: cannot list {shown}: {e}")),
            };
            let mut names: Vec<String> = Vec::new();
            for entry in rd.flatten() {
                let mut name = entry.file_name().to_string_lossy().into_owned();
                match entry.file_type() {
                    Ok(t) if t.is_dir() => name.push('/'),
                    Ok(t) if t.is_symlink() => name.push('@'),
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
