//! `always` grants: the approvals policy file beside the configuration
//! (`approvals.toml` in the directory of `config.toml`), and `lazarus approvals list|revoke`.
//!
//! A grant says "every call of this tool, in every session, is allowed without asking". It is
//! written when a person answers a request with `always` (on the terminal, `sessions approve
//! --scope always`, the HTTP API, the web view), atomically (a temporary file, fsync, rename,
//! directory fsync) under a lock, so two writers never lose each other's grant. Runners read
//! it at each call that would need approval, so a revoke counts from the next call.
//!
//! ```toml
//! [[always]]
//! tool = "shell"
//! granted_at = "2026-12-06T10:00:00.000Z"
//! by = "cli"
//! session = "fix-tests"
//! call_id = "call_1"
//!
//! [[always]]
//! tool = "mcp__files__write"
//! granted_at = "2026-12-06T10:05:00.000Z"
//! by = "web"
//! session = "fix-tests"
//! call_id = "call_7"
//! fingerprint = "3f1c…"                # the server's (command and arguments, or URL)
//! ```
//!
//! A grant for an MCP tool holds its server's fingerprint
//! ([`lazarus_mcp::config::Server::fingerprint`]): the same tool name on another program is
//! asked for again. Whoever answers writes the grant; the runner that lets the answered call
//! go on binds it to the server that very call goes to (until then it covers nothing).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

/// The policy file's name, beside the configuration file.
const FILE_NAME: &str = "approvals.toml";
/// Most bytes read of the policy file (it holds a few lines per tool).
const FILE_BYTES_MAX: u64 = 1024 * 1024;

/// One `always` grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    pub tool: String,
    pub granted_at: String,
    pub by: String,
    /// The session and call whose answer gave it.
    pub session: String,
    pub call_id: String,
    /// For an MCP tool: its server's fingerprint, once bound (a grant without one covers
    /// only a tool without one: the built-ins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    always: Vec<Grant>,
}

/// Where the policy file is: beside the configuration file.
pub fn policy_path() -> PathBuf {
    crate::config::path().with_file_name(FILE_NAME)
}

/// The lock two writers of the policy file take, beside it.
pub fn lock_path() -> PathBuf {
    policy_path().with_file_name(".approvals.lock")
}

/// Reads the grants (none without a file). A file that does not parse is an error naming it.
pub fn grants() -> Result<Vec<Grant>> {
    read(&policy_path()).map(|p| p.always)
}

fn read(path: &std::path::Path) -> Result<PolicyFile> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PolicyFile::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut text = String::new();
    file.take(FILE_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > FILE_BYTES_MAX {
        anyhow::bail!(
            "approvals policy file {} is over {FILE_BYTES_MAX} bytes; revoke grants or remove it",
            path.display()
        );
    }
    toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "approvals policy file {}: {}; fix it, or remove it to drop every `always` grant",
            path.display(),
            e.message()
        )
    })
}

/// Runs `change` on the file's grants under its lock and writes the result durably.
fn update<T>(change: impl FnOnce(&mut Vec<Grant>) -> T) -> Result<T> {
    let path = policy_path();
    let dir = path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| ".".into());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let lock_path = lock_path();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let mut policy = read(&path)?;
    let out = change(&mut policy.always);
    let text = toml::to_string(&policy).context("writing the approvals policy")?;
    let header = "# Lazarus approvals: `always` grants (lazarus approvals list|revoke).\n";
    lazarus_ledger::durable_replace::replace_file(
        &path,
        format!("{header}{text}").as_bytes(),
        &Default::default(),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(out)
}

/// Adds an `always` grant for `tool`, given answering `call_id` of `session` (the same
/// answer again adds nothing). An MCP tool's grant is bound to its server by [`bind`].
pub fn grant_always(tool: &str, by: &str, session: &str, call_id: &str) -> Result<()> {
    update(|always| {
        if !always
            .iter()
            .any(|g| g.tool == tool && g.session == session && g.call_id == call_id)
        {
            always.push(Grant {
                tool: tool.to_string(),
                granted_at: lazarus_ledger::clock::now_ts(),
                by: by.to_string(),
                session: session.to_string(),
                call_id: call_id.to_string(),
                fingerprint: None,
            });
        }
    })
}

/// Binds the grant given answering `call_id` of `session` to `fingerprint` (a grant of the
/// same tool and server already there makes it redundant: it goes).
pub fn bind(tool: &str, fingerprint: &str, session: &str, call_id: &str) -> Result<()> {
    update(|always| {
        let Some(i) = always.iter().position(|g| {
            g.tool == tool
                && g.session == session
                && g.call_id == call_id
                && g.fingerprint.is_none()
        }) else {
            return;
        };
        if always
            .iter()
            .any(|g| g.tool == tool && g.fingerprint.as_deref() == Some(fingerprint))
        {
            always.remove(i);
        } else {
            always[i].fingerprint = Some(fingerprint.to_string());
        }
    })
}

/// Whether `grants` cover `tool` (with `key`, its server's fingerprint for an MCP tool).
pub fn covered(grants: &[Grant], tool: &str, key: Option<&str>) -> bool {
    grants
        .iter()
        .any(|g| g.tool == tool && g.fingerprint.as_deref() == key)
}

/// The runner's view of the policy file: read at each call that would need approval.
#[derive(Debug)]
pub struct FileGrants;

impl lazarus_agent::runner::AlwaysGrants for FileGrants {
    fn covers(&self, tool: &str, key: Option<&str>) -> bool {
        match grants() {
            Ok(g) => covered(&g, tool, key),
            Err(e) => {
                // an unreadable policy grants nothing: the call is asked for
                tracing::warn!(error = %format!("{e:#}"), "approvals policy not read");
                false
            }
        }
    }

    fn grant(&self, tool: &str, by: &str, session: &str, call_id: &str) -> Result<(), String> {
        grant_always(tool, by, session, call_id).map_err(|e| format!("{e:#}"))
    }

    fn bind(&self, tool: &str, key: &str, session: &str, call_id: &str) -> Result<(), String> {
        bind(tool, key, session, call_id).map_err(|e| format!("{e:#}"))
    }
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    command: ApprovalsCommand,
}

#[derive(Debug, Subcommand)]
enum ApprovalsCommand {
    /// The `always` grants: tools whose calls run without asking, in every session.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Revokes the `always` grant of a tool: its calls are asked for again (from the next
    /// call, also in runs and gateways going on now).
    Revoke {
        /// The tool (as `approvals list` shows it).
        tool: String,
    },
}

pub fn run(args: ApprovalsArgs) -> Result<i32> {
    let mut out = std::io::stdout().lock();
    match args.command {
        ApprovalsCommand::List { json } => {
            let grants = grants()?;
            if json {
                for g in &grants {
                    writeln!(out, "{}", serde_json::to_string(g)?)?;
                }
            } else if grants.is_empty() {
                writeln!(out, "no `always` grants ({})", policy_path().display())?;
            } else {
                use crate::term::escape;
                for g in &grants {
                    let server = match &g.fingerprint {
                        Some(f) => format!(", server {}", escape(&f[..f.len().min(12)])),
                        None if g.tool.starts_with("mcp__") => {
                            ", not bound to a server yet (covers nothing)".to_string()
                        }
                        None => String::new(),
                    };
                    writeln!(
                        out,
                        "{}\tgranted {} by {} (session {}, call {}{server})",
                        escape(&g.tool),
                        escape(&g.granted_at),
                        escape(&g.by),
                        escape(&g.session),
                        escape(&g.call_id)
                    )?;
                }
            }
            Ok(0)
        }
        ApprovalsCommand::Revoke { tool } => {
            let removed = update(|always| {
                let before = always.len();
                always.retain(|g| g.tool != tool);
                before - always.len()
            })?;
            if removed == 0 {
                let known: Vec<String> = grants()?.into_iter().map(|g| g.tool).collect();
                return Err(crate::Usage(format!(
                    "no `always` grant for {tool:?}{}",
                    if known.is_empty() {
                        String::new()
                    } else {
                        format!("; granted: {}", known.join(", "))
                    }
                ))
                .into());
            }
            writeln!(
                out,
                "revoked the `always` grant of {tool}: its calls are asked for again ({})",
                policy_path().display()
            )?;
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(tool: &str, fingerprint: Option<&str>) -> Grant {
        Grant {
            tool: tool.into(),
            granted_at: "t".into(),
            by: "cli".into(),
            session: "s".into(),
            call_id: "c".into(),
            fingerprint: fingerprint.map(str::to_string),
        }
    }

    #[test]
    fn a_grant_covers_its_tool_on_its_server_only() {
        let g = [
            grant("shell", None),
            grant("mcp__files__go", Some("sha256:a")),
        ];
        assert!(covered(&g, "shell", None));
        assert!(covered(&g, "mcp__files__go", Some("sha256:a")));
        // the same name on another program, or a grant not bound yet
        assert!(!covered(&g, "mcp__files__go", Some("sha256:b")));
        assert!(!covered(
            &[grant("mcp__files__go", None)],
            "mcp__files__go",
            Some("sha256:a")
        ));
        assert!(!covered(&g, "write_file", None));
        // an older file (no fingerprint field) still reads
        let old: PolicyFile = toml::from_str(
            "[[always]]\ntool = \"shell\"\ngranted_at = \"t\"\nby = \"cli\"\nsession = \"s\"\ncall_id = \"c\"\n",
        )
        .unwrap();
        assert_eq!(old.always, vec![grant("shell", None)]);
    }
}
