//! The configuration file, `$XDG_CONFIG_HOME/lazarus/config.toml` (or
//! `~/.config/lazarus/config.toml`; `LAZARUS_CONFIG` names another). A setting comes from
//! the command line first, then the environment, then this file, then the built-in default;
//! `lazarus config show` prints each one's value and source.
//!
//! ```toml
//! model = "qwen2.5-coder"
//! api = "chat"                         # or "responses", "anthropic"
//! base_url = "http://127.0.0.1:8080/v1"
//! tools = ["read_file", "list_dir"]
//! sandbox = "workspace-write"
//! approval = "untrusted"               # or "never" (default), "on-request"
//! sandbox_max_processes = 1024
//! sandbox_allow_unix_sockets = ["/run/postgresql"]
//! sandbox_allow_vcs_write = false      # true: calls may write .git, .hg, .jj
//! session_dir = "~/sessions"           # or: store = "postgres://…"
//!
//! [shell_environment_policy]           # what a shell call's environment holds
//! inherit = "core"                     # or "all", "none"
//! exclude = ["AWS_*"]                  # globs, any case
//! set = { CI = "1" }
//! include_only = []                    # if given: only these names
//! ignore_default_excludes = false      # true: keep credential-like variables
//!
//! [mcp_servers.files]                  # an MCP server (docs/mcp.md)
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
//! trusted = true                       # believe its readOnlyHint / idempotentHint
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use serde::Deserialize;

/// The settings the file may hold; any other key is an error naming it.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub model: Option<String>,
    /// `chat`, `responses` or `anthropic` (see `--api`).
    pub api: Option<String>,
    pub base_url: Option<String>,
    pub tools: Option<Vec<String>>,
    pub sandbox: Option<String>,
    /// See `--sandbox-max-processes`.
    pub sandbox_max_processes: Option<u32>,
    /// See `--sandbox-allow-unix-socket`.
    pub sandbox_allow_unix_sockets: Option<Vec<PathBuf>>,
    /// See `--sandbox-allow-vcs-write`.
    pub sandbox_allow_vcs_write: Option<bool>,
    /// What a shell call's environment holds (Codex's `shell_environment_policy`).
    pub shell_environment_policy: Option<lazarus_agent::sandbox::EnvPolicy>,
    pub session_dir: Option<PathBuf>,
    pub store: Option<String>,
    /// `never`, `untrusted` or `on-request` (see `--ask-for-approval`).
    pub approval: Option<String>,
    /// MCP servers whose tools `run` and `serve` offer (`[mcp_servers.NAME]`, Codex's shape;
    /// see docs/mcp.md).
    #[serde(default)]
    pub mcp_servers: std::collections::BTreeMap<String, lazarus_mcp::config::ServerConfig>,
}

/// The file read at start (none: an empty one).
static LOADED: OnceLock<(Option<PathBuf>, FileConfig)> = OnceLock::new();

/// Where the configuration file is looked for.
pub fn path() -> PathBuf {
    if let Some(p) = std::env::var_os("LAZARUS_CONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".config"));
    base.join("lazarus").join("config.toml")
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `~/x` → `$HOME/x`.
fn expand_home(p: &Path) -> PathBuf {
    match p.strip_prefix("~") {
        Ok(rest) => home().join(rest),
        Err(_) => p.to_path_buf(),
    }
}

/// Reads the file (once). A missing file is an empty configuration; an unreadable or
/// invalid one is an error naming the file, the place and what to fix.
pub fn load() -> Result<&'static FileConfig> {
    if let Some((_, c)) = LOADED.get() {
        return Ok(c);
    }
    let path = path();
    // A file that cannot even be looked up (missing, or under a directory this user may not
    // enter, such as another user's home) is no configuration; one that exists must be read.
    let exists = match std::fs::metadata(&path) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "configuration file not looked at");
            false
        }
    };
    let read = if exists {
        Some(
            std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?,
        )
    } else {
        None
    };
    let (found, cfg) = match read {
        None => (None, FileConfig::default()),
        Some(text) => {
            let mut cfg: FileConfig = toml::from_str(&text).map_err(|e| {
                let line = e
                    .span()
                    .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
                crate::Usage(format!(
                    "config file {}{}: {}; fix or remove it (`lazarus config show` prints what is in effect)",
                    path.display(),
                    line.map(|l| format!(" line {l}")).unwrap_or_default(),
                    e.message()
                ))
            })?;
            if cfg.session_dir.is_some() && cfg.store.is_some() {
                return Err(crate::Usage(format!(
                    "config file {} sets both session_dir and store; keep one",
                    path.display()
                ))
                .into());
            }
            cfg.session_dir = cfg.session_dir.as_deref().map(expand_home);
            if let Some(paths) = cfg.sandbox_allow_unix_sockets.as_mut() {
                for p in paths.iter_mut() {
                    *p = expand_home(p);
                }
            }
            (Some(path), cfg)
        }
    };
    Ok(&LOADED.get_or_init(|| (found, cfg)).1)
}

/// The file's values become the defaults of the flags they stand for, so the command line
/// and the environment (read by clap) still win over them.
pub fn apply_defaults(mut cmd: clap::Command, cfg: &'static FileConfig) -> clap::Command {
    // the model settings of `sessions compact` (it asks the model for a summary)
    cmd = cmd.mut_subcommand("sessions", |s| {
        s.mut_subcommand("compact", |mut c| {
            if let Some(m) = &cfg.model {
                c = c.mut_arg("model", |a| a.default_value(m.as_str()));
            }
            if let Some(a) = &cfg.api {
                c = c.mut_arg("api", |arg| arg.default_value(a.as_str()));
            }
            c
        })
    });
    for sub in ["run", "resume", "serve", "acp"] {
        cmd = cmd.mut_subcommand(sub, |mut c| {
            if let Some(m) = &cfg.model {
                c = c.mut_arg("model", |a| a.default_value(m.as_str()));
            }
            if let Some(a) = &cfg.api {
                c = c.mut_arg("api", |arg| arg.default_value(a.as_str()));
            }
            // base_url is not a flag default: the API's environment variable
            // (OPENAI_BASE_URL or ANTHROPIC_BASE_URL) beats the file, see ModelArgs::base_url.
            if let Some(t) = &cfg.tools {
                c = c.mut_arg("tools", |a| a.default_values(t.iter().map(String::as_str)));
            }
            if let Some(s) = &cfg.sandbox {
                c = c.mut_arg("sandbox", |a| a.default_value(s.as_str()));
            }
            if let Some(m) = &cfg.approval {
                c = c.mut_arg("ask_for_approval", |a| a.default_value(m.as_str()));
            }
            if let Some(n) = cfg.sandbox_max_processes {
                let n: &'static str = Box::leak(n.to_string().into_boxed_str());
                c = c.mut_arg("sandbox_max_processes", |a| a.default_value(n));
            }
            if let Some(paths) = &cfg.sandbox_allow_unix_sockets {
                c = c.mut_arg("sandbox_allow_unix_socket", |a| {
                    a.default_values(paths.iter().map(|p| p.as_os_str()))
                });
            }
            if cfg.sandbox_allow_vcs_write == Some(true) {
                c = c.mut_arg("sandbox_allow_vcs_write", |a| a.default_value("true"));
            }
            c
        });
    }
    cmd
}

/// The file's store setting, for `args::StoreArgs` (after flags and environment).
pub fn file_store() -> Option<crate::paths::StoreChoice> {
    let (_, cfg) = LOADED.get()?;
    if let Some(d) = &cfg.session_dir {
        return Some(crate::paths::StoreChoice::Local(d.clone()));
    }
    cfg.store.clone().map(crate::paths::StoreChoice::Postgres)
}

/// The file's `[shell_environment_policy]` (the default policy without one).
pub fn file_env_policy() -> lazarus_agent::sandbox::EnvPolicy {
    LOADED
        .get()
        .and_then(|(_, c)| c.shell_environment_policy.clone())
        .unwrap_or_default()
}

/// The file's `[mcp_servers]` tables (empty without a file).
pub fn file_mcp_servers()
-> &'static std::collections::BTreeMap<String, lazarus_mcp::config::ServerConfig> {
    static EMPTY: std::collections::BTreeMap<String, lazarus_mcp::config::ServerConfig> =
        std::collections::BTreeMap::new();
    LOADED.get().map(|(_, c)| &c.mcp_servers).unwrap_or(&EMPTY)
}

/// The file the settings were read from, if there was one.
pub fn loaded_from() -> Option<PathBuf> {
    LOADED.get().and_then(|(p, _)| p.clone())
}
