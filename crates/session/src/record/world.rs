//! What a session runs with — its *world*: the workspace, the tools (built-in and every MCP
//! server), the approval policy, the shell's sandbox and the model provider. Recorded with
//! the session when it is made (the header's `meta.world`) and as a `world` record whenever it
//! changes, so whoever resumes the session (a `lazarus run` elsewhere, a gateway, an editor)
//! resumes it in that world, or leaves it alone and says why ([`World::differences`]).
//!
//! Nothing secret is written: environment variables and HTTP headers by name only, never the
//! API key, and the values of arguments and URL parameters that name a secret are replaced
//! (see [`redact_args`], [`redact_url`]); an MCP server's `fingerprint` covers the program
//! exactly without holding any of it.

use serde::{Deserialize, Serialize};

/// Why a world was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorldReason {
    /// With the session (the header's `meta.world`).
    Created,
    /// The first world of a session that had none (imported from another agent, or written
    /// before worlds were recorded): whoever resumed it first recorded the one it ran in.
    Adopted,
    /// A person changed it explicitly (`lazarus run --change-world`).
    Changed,
}

/// What a session runs with. Compared facet by facet by [`World::differences`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    pub reason: WorldReason,
    /// Who recorded it: `run`, `serve`, `acp`, `python`, …
    pub by: String,
    /// The directory the tools work in: absolute, symbolic links resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    pub tools: WorldTools,
    pub approval: WorldApproval,
    pub sandbox: WorldSandbox,
    /// The model. Absent for a host program's session (it talks to its model itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<WorldProvider>,
    /// The facets a `changed` world changed (`workspace`, `tools`, `mcp`, `approval`,
    /// `sandbox`, `provider`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
}

/// The tools offered to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldTools {
    /// The built-in tools, by name, sorted.
    pub builtin: Vec<String>,
    /// Every MCP server, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<WorldMcpServer>,
}

/// One MCP server as the session used it. Its `fingerprint` identifies the program; the
/// rest says, for people, what it was and how it was trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldMcpServer {
    pub name: String,
    /// `sha256:` and 64 hex digits over the transport, command, arguments, directory and
    /// variable names, or the URL (`lazarus_mcp::config::Server::fingerprint`).
    pub fingerprint: String,
    /// `stdio` or `http`.
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The arguments, with the values of those that name a secret replaced by `…`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Names of the environment variables set for it (never their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// The URL, with any user info and query values replaced by `…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    /// Names of the HTTP headers sent (never their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// Whether its tool annotations were believed (an interrupted call of a trusted server's
    /// read-only or idempotent tool may run again).
    pub trusted: bool,
    /// Whether it ran under the shell's sandbox.
    pub sandbox: bool,
    /// Where it was configured: a `.mcp.json` file's path, or `config.toml`.
    pub source: String,
    /// The MCP protocol version the server and Lazarus agreed on when the world was recorded
    /// (`2026-07-28`, `2025-11-25`, …; revision 5, absent before and where no server was
    /// started). Not compared: it is what a start negotiated, not a choice, and a server
    /// upgraded in place is the same program; a task recorded under a version the server no
    /// longer speaks is judged when it is polled (unknown to the server: in doubt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
}

/// When a person must allow a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldApproval {
    /// `never`, `untrusted` or `on-request`.
    pub mode: String,
    /// The `always` grants in force when the world was recorded (tool names, sorted): a
    /// person's standing decisions, kept in `approvals.toml` and read again at every ask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

/// How `shell` commands (and sandboxed MCP servers) are confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldSandbox {
    /// `workspace-write`, `read-only` or `off`.
    pub mode: String,
    pub network: bool,
    /// Processes and threads one call may have at once.
    pub max_processes: u32,
    /// Unix sockets outside the workspace a call may connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_unix_sockets: Vec<String>,
    /// The environment a call gets (`[shell_environment_policy]`), as configured.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub environment: serde_json::Value,
    /// Calls may write the workspace's version-control metadata (`--sandbox-allow-vcs-write`;
    /// absent: read-only to them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_vcs_write: bool,
}

/// The model a session talks to. Never the key: only the name of the variable holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldProvider {
    /// `chat`, `responses` or `anthropic`.
    pub api: String,
    pub base_url: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

/// A gateway (or another resumer) could not honour a session's world, and left it alone:
/// written once per reason, so `sessions list`, the web view and the HTTP API show the
/// session as `needs_owner` with `resume_with` until someone who can honour it resumes it
/// (any record of a run, or a `world` record, answers it). Inputs and decisions recorded
/// after it wait for that owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeedsOwner {
    /// Who left it: `serve`, and where (e.g. `serve host:pid`).
    pub by: String,
    /// Why, naming the recorded value and what this resumer has instead, e.g. `workspace
    /// /home/me/app is outside this gateway's roots (/srv/lazarus)`.
    pub reason: String,
    /// The command that resumes it in its world.
    pub resume_with: String,
}

/// One facet where two worlds disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// `workspace`, `tools`, `mcp`, `approval`, `sandbox` or `provider`.
    pub facet: &'static str,
    /// What differs, naming the recorded value first: "sandbox mode: recorded
    /// workspace-write, here off".
    pub what: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

impl World {
    /// Where `here` (what a resumer would run with) differs from `self` (what the session
    /// recorded), facet by facet. The approval grants are not compared: they are a person's
    /// standing decisions, read again at every ask; nor are an MCP server's `source` and the
    /// redacted text (its fingerprint is compared).
    pub fn differences(&self, here: &World) -> Vec<Difference> {
        let mut out = Vec::new();
        let mut differ = |facet: &'static str, what: String| out.push(Difference { facet, what });
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        if self.workspace != here.workspace {
            differ(
                "workspace",
                format!(
                    "workspace: recorded {}, here {}",
                    opt(&self.workspace),
                    opt(&here.workspace)
                ),
            );
        }
        if self.tools.builtin != here.tools.builtin {
            differ(
                "tools",
                format!(
                    "built-in tools: recorded [{}], here [{}]",
                    self.tools.builtin.join(", "),
                    here.tools.builtin.join(", ")
                ),
            );
        }
        for rec in &self.tools.mcp {
            match here.tools.mcp.iter().find(|s| s.name == rec.name) {
                None => differ(
                    "mcp",
                    format!(
                        "MCP server {}: recorded ({}, from {}), not configured here",
                        rec.name,
                        rec.describe(),
                        rec.source
                    ),
                ),
                Some(h) if h.fingerprint != rec.fingerprint => differ(
                    "mcp",
                    format!(
                        "MCP server {}: recorded {}, here {} (another program under the same name)",
                        rec.name,
                        rec.describe(),
                        h.describe()
                    ),
                ),
                Some(h) => {
                    for (what, a, b) in [
                        ("trusted", rec.trusted, h.trusted),
                        ("sandbox", rec.sandbox, h.sandbox),
                    ] {
                        if a != b {
                            differ(
                                "mcp",
                                format!("MCP server {}: recorded {what} = {a}, here {b}", rec.name),
                            );
                        }
                    }
                    if (&rec.enabled_tools, &rec.disabled_tools)
                        != (&h.enabled_tools, &h.disabled_tools)
                    {
                        differ(
                            "mcp",
                            format!(
                                "MCP server {}: the tools it offers (enabled_tools, disabled_tools) differ",
                                rec.name
                            ),
                        );
                    }
                }
            }
        }
        for h in &here.tools.mcp {
            if !self.tools.mcp.iter().any(|s| s.name == h.name) {
                differ(
                    "mcp",
                    format!(
                        "MCP server {}: not in the session's world, configured here ({}, from {})",
                        h.name,
                        h.describe(),
                        h.source
                    ),
                );
            }
        }
        if self.approval.mode != here.approval.mode {
            differ(
                "approval",
                format!(
                    "approval mode: recorded {}, here {}",
                    self.approval.mode, here.approval.mode
                ),
            );
        }
        let (a, b) = (&self.sandbox, &here.sandbox);
        if a.mode != b.mode {
            differ(
                "sandbox",
                format!("sandbox mode: recorded {}, here {}", a.mode, b.mode),
            );
        }
        if a.network != b.network {
            differ(
                "sandbox",
                format!(
                    "sandbox network: recorded {}, here {}",
                    a.network, b.network
                ),
            );
        }
        if a.allow_vcs_write != b.allow_vcs_write {
            differ(
                "sandbox",
                format!(
                    "version-control metadata writable by calls: recorded {}, here {}",
                    a.allow_vcs_write, b.allow_vcs_write
                ),
            );
        }
        if a.max_processes != b.max_processes {
            differ(
                "sandbox",
                format!(
                    "sandbox process bound: recorded {}, here {}",
                    a.max_processes, b.max_processes
                ),
            );
        }
        if a.allow_unix_sockets != b.allow_unix_sockets {
            differ(
                "sandbox",
                format!(
                    "sandbox Unix sockets allowed: recorded [{}], here [{}]",
                    a.allow_unix_sockets.join(", "),
                    b.allow_unix_sockets.join(", ")
                ),
            );
        }
        if a.environment != b.environment {
            differ(
                "sandbox",
                "sandbox environment policy ([shell_environment_policy]) differs".into(),
            );
        }
        match (&self.provider, &here.provider) {
            (Some(a), Some(b)) => {
                for (what, x, y) in [
                    ("API", &a.api, &b.api),
                    ("base URL", &a.base_url, &b.base_url),
                    ("model", &a.model, &b.model),
                ] {
                    if x != y {
                        differ("provider", format!("{what}: recorded {x}, here {y}"));
                    }
                }
                if a.context_window != b.context_window {
                    let w = |v: Option<u64>| v.map_or_else(|| "none".into(), |n| n.to_string());
                    differ(
                        "provider",
                        format!(
                            "context window: recorded {}, here {}",
                            w(a.context_window),
                            w(b.context_window)
                        ),
                    );
                }
            }
            (None, None) => {}
            (a, b) => differ(
                "provider",
                format!(
                    "provider: recorded {}, here {}",
                    a.as_ref().map_or("none".into(), WorldProvider::describe),
                    b.as_ref().map_or("none".into(), WorldProvider::describe)
                ),
            ),
        }
        out
    }
}

impl WorldMcpServer {
    /// `npx -y server` or the URL, for messages.
    pub fn describe(&self) -> String {
        match (&self.command, &self.url) {
            (Some(c), _) => std::iter::once(c.as_str())
                .chain(self.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            (None, Some(u)) => u.clone(),
            (None, None) => self.transport.clone(),
        }
    }
}

impl WorldProvider {
    /// `chat gpt-4o at http://…`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {} at {}", self.api, self.model, self.base_url)
    }
}

/// Whether an argument or parameter name names a secret.
fn names_a_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "api-key",
        "api_key",
        "auth",
        "credential",
        "private-key",
        "private_key",
    ]
    .iter()
    .any(|w| n.contains(w))
        || n.ends_with("key")
}

/// Arguments with the values that name a secret replaced by `…`: `--api-key=X`, `--token X`,
/// `TOKEN=X`. (The server's fingerprint still covers them exactly.)
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next {
            out.push("…".into());
            hide_next = false;
            continue;
        }
        if let Some((name, _)) = a.split_once('=')
            && names_a_secret(name.trim_start_matches('-'))
        {
            out.push(format!("{name}=…"));
            continue;
        }
        if a.starts_with('-') && names_a_secret(a.trim_start_matches('-')) {
            hide_next = true;
        }
        out.push(a.clone());
    }
    out
}

/// A URL with its user info and every query value replaced by `…`.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let base = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://…@{host}{path}"),
                None => base.to_string(),
            }
        }
        None => base.to_string(),
    };
    match query {
        None => base,
        Some(q) => {
            let params: Vec<String> = q
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) => format!("{k}=…"),
                    None => p.to_string(),
                })
                .collect();
            format!("{base}?{}", params.join("&"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_arguments_and_urls_are_not_written() {
        let args: Vec<String> = [
            "-y",
            "server",
            "--api-key",
            "sk-1",
            "--token=abc",
            "GITHUB_TOKEN=ghp",
            "--port",
            "80",
        ]
        .map(String::from)
        .to_vec();
        let r = redact_args(&args);
        assert_eq!(
            r,
            [
                "-y",
                "server",
                "--api-key",
                "…",
                "--token=…",
                "GITHUB_TOKEN=…",
                "--port",
                "80"
            ]
        );
        assert_eq!(
            redact_url("https://u:p@h.example/mcp?key=1&x=2"),
            "https://…@h.example/mcp?key=…&x=…"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
    }
}
