//! MCP servers: started for `run`, `resume` and `serve` (their tools offered as
//! `mcp__<server>__<tool>`), and `lazarus mcp list|check` to see what is configured and what
//! each server offers, before a run depends on it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lazarus_agent::sandbox::Sandbox;
use lazarus_mcp::config::{Server, Servers, Transport};
use lazarus_mcp::server::{McpServer, start_all};
use lazarus_mcp::tool::McpSource;
use serde_json::{Value, json};

use crate::Usage;
use crate::term::escape;

/// The servers to start: the config file's `[mcp_servers]`, then each `--mcp-config` file.
/// A mistake in either is a usage error naming the file and the server.
pub fn configured(files: &[PathBuf], none: bool) -> Result<Servers> {
    if none {
        return Ok(Servers::default());
    }
    let source = crate::config::loaded_from()
        .unwrap_or_else(crate::config::path)
        .display()
        .to_string();
    // by their absolute paths: a session's world records where each server came from
    let files: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            f.canonicalize().map_err(|e| {
                Usage(format!(
                    "--mcp-config {}: {e}",
                    escape(&f.display().to_string())
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    Servers::gather(crate::config::file_mcp_servers(), &source, &files)
        .map_err(|e| Usage(e.to_string()).into())
}

/// A `.mcp.json` in the workspace that was not passed with `--mcp-config` is not started (a
/// file in a checked-out repository naming programs to run is not consent to run them; Claude
/// Code asks first): say so once on stderr, with the flag that starts it.
pub fn note_unused_project_file(workspace: &Path, files: &[PathBuf], none: bool) {
    let project = workspace.join(".mcp.json");
    if none || !project.is_file() {
        return;
    }
    let same = |f: &PathBuf| {
        f.canonicalize()
            .ok()
            .zip(project.canonicalize().ok())
            .is_some_and(|(a, b)| a == b)
    };
    if !files.iter().any(same) {
        eprintln!(
            "mcp: {} is not started; pass --mcp-config {} to offer its servers' tools",
            escape(&project.display().to_string()),
            escape(&project.display().to_string())
        );
    }
}

/// Starts `servers` (none: no source), saying on stderr what each is and offers. Any server
/// that does not start is an error, before anything is written: a run never goes on without
/// tools it was configured with.
pub async fn start(
    servers: &Servers,
    workspace: &Path,
    sandbox: &Arc<Sandbox>,
) -> Result<Option<Arc<McpSource>>> {
    if servers.is_empty() {
        return Ok(None);
    }
    let started = start_all(&servers.servers, workspace, Some(sandbox.clone()))
        .await
        .context(
            "starting the MCP servers (fix the server or its configuration, or run with --no-mcp)",
        )?;
    for s in &started {
        eprintln!("mcp: {}", describe(s));
    }
    let source = McpSource::new(started)?;
    Ok(Some(source))
}

/// `files: secure-files 1.2.0, 11 tools, trusted, sandboxed`.
fn describe(s: &McpServer) -> String {
    let mut parts = vec![
        format!(
            "{}{}",
            escape(&s.info.name),
            if s.info.version.is_empty() {
                String::new()
            } else {
                format!(" {}", escape(&s.info.version))
            }
        ),
        format!("{} tools", s.tools_now().len()),
        if s.config.trusted {
            "trusted".into()
        } else {
            "untrusted (an interrupted call is never run again)".into()
        },
    ];
    if s.config.sandbox {
        parts.push("sandboxed".into());
    }
    format!("{}: {}", s.config.name, parts.join(", "))
}

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured server (the config file's `[mcp_servers]` and any
    /// `--mcp-config` file), show whether it started, its tools with their annotations and
    /// whether an interrupted call would run again, and whether it is trusted; then stop
    /// them. `--no-start` only lists the configuration.
    List {
        /// Also these `.mcp.json` files (repeatable).
        #[arg(long, value_name = "FILE")]
        mcp_config: Vec<PathBuf>,
        /// Do not start the servers: show the configuration only.
        #[arg(long)]
        no_start: bool,
        /// Directory a stdio server runs in [default: current directory].
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// One JSON object per server, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Start one server (or those named), report on it as `list` does, and stop it. Exit 1
    /// when one does not start.
    Check {
        /// Servers to check [default: all configured]
        names: Vec<String>,
        /// Also these `.mcp.json` files (repeatable).
        #[arg(long, value_name = "FILE")]
        mcp_config: Vec<PathBuf>,
        /// Directory a stdio server runs in [default: current directory].
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// One JSON object per server, one per line.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: McpArgs) -> Result<i32> {
    match args.command {
        McpCommand::List {
            mcp_config,
            no_start,
            workspace,
            json,
        } => {
            let servers = configured(&mcp_config, false)?;
            if servers.is_empty() && !json {
                eprintln!(
                    "no MCP server configured: add [mcp_servers.NAME] to {} or pass --mcp-config FILE (docs/mcp.md)",
                    crate::config::path().display()
                );
            }
            if no_start {
                list_config(&servers.servers, json);
                return Ok(0);
            }
            inspect(servers.servers, workspace, json)?;
            Ok(0)
        }
        McpCommand::Check {
            names,
            mcp_config,
            workspace,
            json,
        } => {
            let servers = configured(&mcp_config, false)?;
            for n in &names {
                if !servers.servers.iter().any(|s| &s.name == n) {
                    let known: Vec<&str> =
                        servers.servers.iter().map(|s| s.name.as_str()).collect();
                    return Err(Usage(format!(
                        "no MCP server {n:?} is configured; configured: {}",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ))
                    .into());
                }
            }
            let chosen: Vec<Server> = servers
                .servers
                .into_iter()
                .filter(|s| names.is_empty() || names.contains(&s.name))
                .collect();
            if chosen.is_empty() {
                return Err(
                    Usage("no MCP server configured (see `lazarus mcp list`)".into()).into(),
                );
            }
            let failed = inspect(chosen, workspace, json)?;
            Ok(if failed > 0 { 1 } else { 0 })
        }
    }
}

fn transport_json(s: &Server) -> Value {
    match &s.transport {
        Transport::Stdio {
            command, args, cwd, ..
        } => json!({"transport": "stdio", "command": command, "args": args, "cwd": cwd}),
        Transport::Http { url, .. } => json!({"transport": "http", "url": url}),
    }
}

fn server_json(s: &Server) -> serde_json::Map<String, Value> {
    let mut m = match transport_json(s) {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    m.insert("name".into(), json!(s.name));
    m.insert("source".into(), json!(s.source));
    m.insert("trusted".into(), json!(s.trusted));
    m.insert("sandbox".into(), json!(s.sandbox));
    m.insert("enabled_tools".into(), json!(s.enabled_tools));
    m.insert("disabled_tools".into(), json!(s.disabled_tools));
    m.insert(
        "startup_timeout_sec".into(),
        json!(s.startup_timeout.as_secs()),
    );
    m.insert("tool_timeout_sec".into(), json!(s.tool_timeout.as_secs()));
    m
}

/// `files  npx -y … [trusted, sandboxed]  from FILE`.
fn config_line(s: &Server) -> String {
    let how = match &s.transport {
        Transport::Stdio { command, args, .. } => {
            let mut line = escape(command).to_string();
            for a in args {
                line.push(' ');
                line.push_str(&escape(a));
            }
            line
        }
        Transport::Http { url, .. } => escape(url).to_string(),
    };
    let mut flags = vec![if s.trusted { "trusted" } else { "untrusted" }];
    if s.sandbox {
        flags.push("sandboxed");
    }
    format!(
        "{:<16} {}  [{}]  from {}",
        s.name,
        how,
        flags.join(", "),
        escape(&s.source)
    )
}

fn list_config(servers: &[Server], json_out: bool) {
    for s in servers {
        if json_out {
            println!("{}", Value::Object(server_json(s)));
        } else {
            println!("{}", config_line(s));
        }
    }
}

/// Starts `servers` (all at once), reports on each in order, stops them; how many failed.
fn inspect(servers: Vec<Server>, workspace: Option<PathBuf>, json_out: bool) -> Result<usize> {
    let workspace = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("current directory")?,
    };
    let sandbox = Arc::new(
        lazarus_agent::sandbox::default_probed()
            .as_ref()
            .clone()
            .with_env(crate::config::file_env_policy()),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (i, s) in servers.iter().cloned().enumerate() {
            let (workspace, sandbox) = (workspace.clone(), sandbox.clone());
            set.spawn(async move { (i, McpServer::start(s, &workspace, Some(&sandbox)).await) });
        }
        let mut results = std::collections::BTreeMap::new();
        while let Some(joined) = set.join_next().await {
            let (i, r) = joined.context("starting an MCP server")?;
            results.insert(i, r);
        }
        let mut failed = 0;
        for (i, r) in results {
            let config = &servers[i];
            match r {
                Ok(server) => report(&Arc::new(server), json_out)?,
                Err(e) => {
                    failed += 1;
                    if json_out {
                        let mut m = server_json(config);
                        m.insert("started".into(), json!(false));
                        m.insert("error".into(), json!(e.to_string()));
                        println!("{}", Value::Object(m));
                    } else {
                        println!("{}", config_line(config));
                        println!("  did not start: {}", escape(&e.to_string()));
                    }
                }
            }
        }
        Ok(failed)
    })
}

/// One started server: its tools, their names for the model, annotations and re-run answer.
fn report(server: &Arc<McpServer>, json_out: bool) -> Result<()> {
    let source = McpSource::new(vec![server.clone()])?;
    let tools = lazarus_agent::tools::ToolSource::tools(&*source);
    let listed = server.tools_now();
    let mut rows = Vec::new();
    for (tool, l) in tools.iter().zip(listed.iter()) {
        let rerun = tool.rerun();
        // why not, in words: an untrusted server's hints are never acted on
        let why = rerun
            .basis
            .as_ref()
            .and_then(lazarus_mcp::tool::rerun_refused_why);
        rows.push(json!({
            "name": l.name,
            "model_name": tool.name(),
            "annotations": l.annotations,
            "rerun_after_crash": rerun.idempotent,
            "rerun_refused_why": why,
        }));
    }
    if json_out {
        let mut m = server_json(&server.config);
        m.insert("started".into(), json!(true));
        m.insert(
            "server_info".into(),
            json!({"name": server.info.name, "version": server.info.version}),
        );
        m.insert(
            "protocol_version".into(),
            json!(server.info.protocol_version),
        );
        m.insert("tasks".into(), json!(server.info.tasks));
        m.insert("tools".into(), Value::Array(rows));
        println!("{}", Value::Object(m));
        return Ok(());
    }
    println!("{}", config_line(&server.config));
    println!("  started: {}", describe(server));
    for r in rows {
        let hints: Vec<String> = r["annotations"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| **v == Value::Bool(true))
                    .map(|(k, _)| k.trim_end_matches("Hint").to_string())
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {:<40} {:<28} interrupted: {}",
            r["model_name"].as_str().unwrap_or(""),
            if hints.is_empty() {
                "-".to_string()
            } else {
                hints.join(",")
            },
            if r["rerun_after_crash"] == Value::Bool(true) {
                "runs again".to_string()
            } else {
                match r["rerun_refused_why"].as_str() {
                    Some(why) => format!("in doubt ({})", escape(why)),
                    None => "in doubt".to_string(),
                }
            }
        );
    }
    Ok(())
}
