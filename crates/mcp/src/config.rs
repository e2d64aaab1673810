//! Which MCP servers to start, written the way users already write them:
//!
//! * `config.toml` tables in Codex's shape, `[mcp_servers.NAME]` with `command`, `args`,
//!   `env`, `cwd` (a server started as a child process, spoken to over stdio) or `url`,
//!   `bearer_token_env_var`, `http_headers` (Streamable HTTP); `enabled_tools`,
//!   `disabled_tools`, `startup_timeout_sec` (default 10), `tool_timeout_sec` (default 60;
//!   for a call the server made a task, how long it is waited for), `cancel_task_on_timeout`;
//!   and Lazarus's own `trusted` (default false: its annotations are never acted on) and
//!   `sandbox` (default false: a stdio server runs under the shell's workspace sandbox).
//! * Claude Code's and Cursor's `.mcp.json`: `{"mcpServers": {NAME: {command, args, env} |
//!   {type: "http", url, headers}}}` (`--mcp-config FILE`, repeatable).
//!
//! Everything is checked when read; a mistake is an error naming the file, the server and
//! what to fix, before anything starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::McpError;

/// Seconds a server has to start and answer `initialize`, by default.
pub const STARTUP_TIMEOUT_SECS_DEFAULT: u64 = 10;

/// Seconds one tool call may take, by default.
pub const TOOL_TIMEOUT_SECS_DEFAULT: u64 = 60;

/// Longest server name, in bytes (it becomes part of tool names).
pub const SERVER_NAME_BYTES_MAX: usize = 32;

/// Largest `.mcp.json` read, in bytes.
pub const MCP_JSON_BYTES_MAX: u64 = 1024 * 1024;

/// One server as written in `config.toml` (`[mcp_servers.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// A program to start, spoken to over its stdin and stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables set for the program (on top of a minimal inherited set).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// A Streamable HTTP endpoint instead of a program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The environment variable holding the bearer token sent to `url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub http_headers: BTreeMap<String, String>,
    /// Only these tools are offered (by their names on the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_sec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_sec: Option<u64>,
    /// For a call the server made a task: send `tasks/cancel` when `tool_timeout_sec`
    /// passes (default: stop waiting and leave the task running).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_task_on_timeout: bool,
    /// Whether the server's tool annotations are believed: only a trusted server's
    /// `readOnlyHint` / `idempotentHint` may let an interrupted call run again.
    #[serde(default)]
    pub trusted: bool,
    /// Run a stdio server under the workspace sandbox of the shell.
    #[serde(default)]
    pub sandbox: bool,
    /// Whether the server is used at all (Codex's `enabled`).
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        bearer_token_env_var: Option<String>,
        headers: BTreeMap<String, String>,
    },
}

/// A server ready to start: its name, how to reach it, and the rules for its tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub transport: Transport,
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
    pub startup_timeout: Duration,
    /// One call's bound: how long a `tools/call` may take, and how long a task it became
    /// is waited for.
    pub tool_timeout: Duration,
    /// When a task's wait passes `tool_timeout`: `tasks/cancel` it (else it is left running).
    pub cancel_task_on_timeout: bool,
    pub trusted: bool,
    pub sandbox: bool,
    /// Where it was configured (a file, or `config.toml`), for messages.
    pub source: String,
}

impl Server {
    /// Whether the server's tool `name` is offered (`enabled_tools`, `disabled_tools`).
    pub fn offers(&self, name: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == name))
            && !self.disabled_tools.iter().any(|t| t == name)
    }
}

impl Server {
    /// What identifies the program behind this server, whatever it is called: `sha256:` and
    /// 64 hex digits over the transport and, for stdio, the command, its arguments and its
    /// directory, for HTTP the URL. Names of environment variables and headers count; their
    /// values never do (they may be secrets, and are never recorded). A session's world
    /// records it, and an `always` grant for one of the server's tools holds it: the same
    /// name on another program is another server.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let mut part = |p: &[u8]| {
            h.update((p.len() as u64).to_be_bytes());
            h.update(p);
        };
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                part(b"stdio");
                part(command.as_bytes());
                part(&(args.len() as u64).to_be_bytes());
                for a in args {
                    part(a.as_bytes());
                }
                part(&(env.len() as u64).to_be_bytes());
                for k in env.keys() {
                    part(k.as_bytes());
                }
                part(
                    cwd.as_deref()
                        .map(|c| c.as_os_str().as_encoded_bytes())
                        .unwrap_or(b""),
                );
            }
            Transport::Http {
                url,
                bearer_token_env_var,
                headers,
            } => {
                part(b"http");
                part(url.as_bytes());
                part(bearer_token_env_var.as_deref().unwrap_or("").as_bytes());
                part(&(headers.len() as u64).to_be_bytes());
                for k in headers.keys() {
                    part(k.as_bytes());
                }
            }
        }
        let digest = h.finalize();
        let mut out = String::with_capacity(7 + 64);
        out.push_str("sha256:");
        for b in digest {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }
}

impl Server {
    /// The server as a session's world records it: its fingerprint, what it is (secret
    /// values left out: variables and headers by name, arguments and URL parameters that
    /// name a secret replaced), how it was trusted and where it was configured.
    pub fn world_entry(&self) -> lazarus_session::record::WorldMcpServer {
        use lazarus_session::record::{WorldMcpServer, redact_args, redact_url};
        let mut w = WorldMcpServer {
            name: self.name.clone(),
            fingerprint: self.fingerprint(),
            transport: String::new(),
            command: None,
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            url: None,
            bearer_token_env_var: None,
            headers: Vec::new(),
            enabled_tools: self.enabled_tools.clone(),
            disabled_tools: self.disabled_tools.clone(),
            trusted: self.trusted,
            sandbox: self.sandbox,
            source: self.source.clone(),
            protocol_version: None,
        };
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                w.transport = "stdio".into();
                w.command = Some(command.clone());
                w.args = redact_args(args);
                w.cwd = cwd.as_ref().map(|c| c.to_string_lossy().into_owned());
                w.env = env.keys().cloned().collect();
            }
            Transport::Http {
                url,
                bearer_token_env_var,
                headers,
            } => {
                w.transport = "http".into();
                w.url = Some(redact_url(url));
                w.bearer_token_env_var = bearer_token_env_var.clone();
                w.headers = headers.keys().cloned().collect();
            }
        }
        w
    }
}

/// Checks a server name: 1 to [`SERVER_NAME_BYTES_MAX`] bytes of `[A-Za-z0-9_-]` (it becomes
/// part of the tool names the model sees, `mcp__<server>__<tool>`).
pub fn check_server_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > SERVER_NAME_BYTES_MAX
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        || name.contains("__")
    {
        return Err(format!(
            "an MCP server name is 1 to {SERVER_NAME_BYTES_MAX} characters of A-Z, a-z, 0-9, _ and - (no \"__\"): {name:?}"
        ));
    }
    Ok(())
}

impl ServerConfig {
    /// The server `name` as configured in `source`, checked.
    pub fn resolve(&self, name: &str, source: &str) -> Result<Server, McpError> {
        let bad = |why: String| McpError::Config {
            origin: source.to_string(),
            server: name.to_string(),
            why,
        };
        check_server_name(name).map_err(bad)?;
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(bad("`command` is empty".into()));
                }
                if self.bearer_token_env_var.is_some() || !self.http_headers.is_empty() {
                    return Err(bad(
                        "`bearer_token_env_var` and `http_headers` go with `url`, not `command`"
                            .into(),
                    ));
                }
                Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                    cwd: self.cwd.clone(),
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(format!(
                        "`url` must start with http:// or https://: {url:?}"
                    )));
                }
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err(bad(
                        "`args`, `env` and `cwd` go with `command`, not `url`".into()
                    ));
                }
                if self.sandbox {
                    return Err(bad(
                        "`sandbox = true` confines a server Lazarus starts (`command`); a `url` server runs elsewhere".into(),
                    ));
                }
                Transport::Http {
                    url: url.clone(),
                    bearer_token_env_var: self.bearer_token_env_var.clone(),
                    headers: self.http_headers.clone(),
                }
            }
            (Some(_), Some(_)) => {
                return Err(bad(
                    "give either `command` (stdio) or `url` (HTTP), not both".into(),
                ));
            }
            (None, None) => {
                return Err(bad(
                    "give `command` (a program to start) or `url` (an HTTP endpoint)".into(),
                ));
            }
        };
        let secs = |v: Option<u64>, default: u64, what: &str| match v.unwrap_or(default) {
            0 => Err(bad(format!("`{what}` must be at least 1"))),
            n if n > 24 * 3600 => Err(bad(format!("`{what}` is at most 86400 (a day)"))),
            n => Ok(Duration::from_secs(n)),
        };
        Ok(Server {
            name: name.to_string(),
            transport,
            enabled_tools: self.enabled_tools.clone(),
            disabled_tools: self.disabled_tools.clone(),
            startup_timeout: secs(
                self.startup_timeout_sec,
                STARTUP_TIMEOUT_SECS_DEFAULT,
                "startup_timeout_sec",
            )?,
            tool_timeout: secs(
                self.tool_timeout_sec,
                TOOL_TIMEOUT_SECS_DEFAULT,
                "tool_timeout_sec",
            )?,
            cancel_task_on_timeout: self.cancel_task_on_timeout,
            trusted: self.trusted,
            sandbox: self.sandbox,
            source: source.to_string(),
        })
    }
}

/// One server in a `.mcp.json` (Claude Code's and Cursor's shape).
#[derive(Debug, Deserialize)]
struct JsonServer {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct McpJson {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, JsonServer>,
}

/// Reads a `.mcp.json` file into server configurations (not yet checked: [`Servers`] does).
pub fn read_mcp_json(path: &Path) -> Result<BTreeMap<String, ServerConfig>, McpError> {
    let source = path.display().to_string();
    let read_err = |why: String| McpError::File {
        path: source.clone(),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| read_err(e.to_string()))?;
    if !meta.is_file() {
        return Err(read_err("not a regular file".into()));
    }
    if meta.len() > MCP_JSON_BYTES_MAX {
        return Err(read_err(format!(
            "larger than {MCP_JSON_BYTES_MAX} bytes; is it an .mcp.json?"
        )));
    }
    let text = std::fs::read(path).map_err(|e| read_err(e.to_string()))?;
    let parsed: McpJson = serde_json::from_slice(&text).map_err(|e| {
        read_err(format!(
            "not an .mcp.json ({{\"mcpServers\": {{NAME: {{command, args, env}} | {{type: \"http\", url, headers}}}}}}): {e}"
        ))
    })?;
    let mut out = BTreeMap::new();
    for (name, s) in parsed.mcp_servers {
        let http = matches!(s.kind.as_deref(), Some("http" | "streamable-http" | "sse"));
        if let Some(kind) = s
            .kind
            .as_deref()
            .filter(|k| !matches!(*k, "http" | "streamable-http" | "stdio" | "sse"))
        {
            return Err(McpError::Config {
                origin: source,
                server: name,
                why: format!("`type` {kind:?} is not one of stdio, http"),
            });
        }
        if s.kind.as_deref() == Some("sse") {
            return Err(McpError::Config {
                origin: source,
                server: name,
                why: "the old HTTP+SSE transport is not supported; use the server's Streamable HTTP endpoint (`type: \"http\"`)".into(),
            });
        }
        let cfg = if http || s.url.is_some() {
            ServerConfig {
                url: s.url,
                http_headers: s.headers,
                ..ServerConfig::default_enabled()
            }
        } else {
            ServerConfig {
                command: s.command,
                args: s.args,
                env: s.env,
                cwd: s.cwd,
                ..ServerConfig::default_enabled()
            }
        };
        out.insert(name, cfg);
    }
    Ok(out)
}

impl ServerConfig {
    fn default_enabled() -> Self {
        ServerConfig {
            enabled: true,
            ..ServerConfig::default()
        }
    }
}

/// The servers of a run, from every source, checked; a name given twice is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Servers {
    pub servers: Vec<Server>,
}

impl Servers {
    /// Servers from `config.toml`'s tables (`source` names the file) and from `.mcp.json`
    /// files, in that order. Disabled servers (`enabled = false`) are left out.
    pub fn gather(
        toml_tables: &BTreeMap<String, ServerConfig>,
        toml_source: &str,
        json_files: &[PathBuf],
    ) -> Result<Servers, McpError> {
        let mut all: Vec<Server> = Vec::new();
        let mut add = |name: &str, cfg: &ServerConfig, source: &str| -> Result<(), McpError> {
            if let Some(first) = all.iter().find(|s| s.name == name) {
                return Err(McpError::Config {
                    origin: source.to_string(),
                    server: name.to_string(),
                    why: format!(
                        "a server of this name is configured in {} already; rename one",
                        first.source
                    ),
                });
            }
            let server = cfg.resolve(name, source)?;
            if cfg.enabled {
                all.push(server);
            }
            Ok(())
        };
        for (name, cfg) in toml_tables {
            add(name, cfg, toml_source)?;
        }
        for file in json_files {
            let source = file.display().to_string();
            for (name, cfg) in read_mcp_json(file)? {
                add(&name, &cfg, &source)?;
            }
        }
        Ok(Servers { servers: all })
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(toml_text: &str) -> Server {
        let cfg: ServerConfig = toml::from_str(toml_text).expect("config");
        cfg.resolve("s", "test").expect("resolves")
    }

    #[test]
    fn a_fingerprint_follows_the_program_not_its_name_or_secret_values() {
        let base = server("command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"a\" }");
        let fp = base.fingerprint();
        assert!(fp.starts_with("sha256:") && fp.len() == 71, "{fp}");
        let mut renamed = base.clone();
        renamed.name = "other".into();
        renamed.trusted = true;
        assert_eq!(
            renamed.fingerprint(),
            fp,
            "name and trust are not the program"
        );
        let other_value =
            server("command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"b\" }");
        assert_eq!(
            other_value.fingerprint(),
            fp,
            "a secret's value never counts"
        );
        for different in [
            "command = \"npx\"\nargs = [\"-y\", \"evil\"]\nenv = { TOKEN = \"a\" }",
            "command = \"node\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"a\" }",
            "command = \"npx\"\nargs = [\"-y srv\"]\nenv = { TOKEN = \"a\" }",
            "command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"a\", NODE_OPTIONS = \"x\" }",
            "command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { TOKEN = \"a\" }\ncwd = \"/elsewhere\"",
            "url = \"http://127.0.0.1:1/mcp\"",
        ] {
            assert_ne!(server(different).fingerprint(), fp, "{different}");
        }
    }
}
