//! `sessions export` and `sessions import`: a session's exact JSON Lines out and back in, an
//! ATIF trajectory or OpenTelemetry spans out, another agent's log in.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lazarus_boot_resume::Format;
use lazarus_boot_resume::formats::{self, Limits, ReadOptions, stream};
use lazarus_session::{SessionId, Store};
use serde_json::json;

use crate::term::escape;

/// What `sessions export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Jsonl,
    Atif,
    Otel,
}

/// Writes the export to `w`; returns the bytes written.
fn render(
    store: &dyn Store,
    id: &SessionId,
    format: ExportFormat,
    w: &mut dyn Write,
) -> Result<u64> {
    Ok(match format {
        ExportFormat::Jsonl => store.export_to(id, w)?,
        ExportFormat::Atif => {
            let t = lazarus_interchange::atif::trajectory(store, id)?;
            let mut bytes = serde_json::to_vec_pretty(&t)?;
            bytes.push(b'\n');
            w.write_all(&bytes)?;
            bytes.len() as u64
        }
        ExportFormat::Otel => {
            let v = lazarus_telemetry::export::otlp_json(store, id)?;
            let mut bytes = serde_json::to_vec(&v)?;
            bytes.push(b'\n');
            w.write_all(&bytes)?;
            bytes.len() as u64
        }
    })
}

pub(super) fn export(
    store: &dyn Store,
    id: &SessionId,
    output: Option<PathBuf>,
    format: ExportFormat,
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
        render(store, id, format, out)?;
        return Ok(());
    };
    // Replaced atomically and durably (0600: sessions hold user text); a failed export
    // leaves what was there.
    let mut n = 0;
    let mut failure = None;
    lazarus_ledger::durable_replace::replace_file_with(
        path,
        &lazarus_ledger::durable_replace::ReplaceOptions::default(),
        |f| match render(store, id, format, f) {
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
        Some(f) => f,
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

/// `sessions import`'s options beyond the source.
pub(super) struct ImportArgs {
    pub from: String,
    pub new_id: Option<SessionId>,
    pub source_session: Option<String>,
    pub branches: bool,
}

pub(super) fn import(
    store: &dyn Store,
    file: &Path,
    args: &ImportArgs,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let limits = Limits::default();
    let (format, detected) = match args.from.as_str() {
        "auto" => (formats::detect(file, &limits)?, true),
        name => match Format::parse(name) {
            Some(f) => (f, false),
            None => bail!(
                "--from {}: not a format this build reads; use lazarus, claude-code, codex, pi, openclaw, gemini-cli, opencode or auto",
                escape(name)
            ),
        },
    };
    if detected {
        eprintln!("{}: read as {}", file.display(), format.as_str());
    }
    if format == Format::Lazarus {
        if args.new_id.is_some() || args.source_session.is_some() || args.branches {
            bail!(
                "--id, --source-session and --branches are for another agent's log (--from claude-code|codex|pi|openclaw|gemini-cli|opencode); an export keeps its own id"
            );
        }
        return import_native(store, file, &limits, json, out);
    }
    if !matches!(format, Format::Openclaw | Format::Opencode) && args.source_session.is_some() {
        bail!(
            "--source-session names a session in an OpenClaw state directory or an OpenCode database; a {} log holds one session",
            format.as_str()
        );
    }
    let conv = formats::read(
        format,
        file,
        &ReadOptions {
            limits,
            session_key: args.source_session.clone(),
            branches: args.branches,
        },
    )?;
    let imported = lazarus_interchange::import(store, &conv, args.new_id.clone())?;
    if json {
        let mut v = serde_json::to_value(&imported)?;
        v["from"] = json!(format.as_str());
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let c = imported.counts;
    writeln!(
        out,
        "imported {} {}session{} from {} ({} bytes, sha256 {}) as {}",
        format.as_str(),
        imported
            .agent_version
            .as_deref()
            .map(|v| format!("{} ", escape(v)))
            .unwrap_or_default(),
        conv.session_id
            .as_deref()
            .map(|s| format!(" {}", escape(s)))
            .unwrap_or_default(),
        file.display(),
        imported.bytes,
        &imported.sha256[..16.min(imported.sha256.len())],
        imported.id
    )?;
    writeln!(
        out,
        "  {} user messages, {} tool calls, {} results{}, {} records",
        c.user_messages,
        c.tool_calls,
        c.tool_results,
        if c.in_doubt > 0 {
            format!(" ({} calls had no result: closed in doubt)", c.in_doubt)
        } else {
            String::new()
        },
        imported.records
    )?;
    if let Some(at) = imported.torn_at {
        writeln!(
            out,
            "  the source's last record (byte {at} on) was torn: imported up to the last whole record"
        )?;
    }
    for d in &imported.dropped {
        writeln!(
            out,
            "  not imported: {} × {} ({})",
            d.count,
            escape(&d.what),
            escape(&d.why)
        )?;
    }
    for r in &imported.related {
        writeln!(
            out,
            "  also imported {} from {} ({} records)",
            r.id,
            escape(&r.source),
            r.records
        )?;
    }
    writeln!(out, "continue it: lazarus run --session {}", imported.id)?;
    Ok(())
}

/// A native export, read within the limits (a regular file, lines bounded) before it is
/// checked and written.
fn import_native(
    store: &dyn Store,
    file: &Path,
    limits: &Limits,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let mut lines = stream::Lines::open(file, limits)?;
    let mut bytes = Vec::new();
    while let Some(l) = lines.next_line()? {
        bytes.extend_from_slice(l.bytes);
        if l.terminated {
            bytes.push(b'\n');
        }
    }
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
