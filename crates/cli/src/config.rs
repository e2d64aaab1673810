//! The configuration file, `$XDG_CONFIG_HOME/lazarus/config.toml` (or
//! `~/.config/lazarus/config.toml`; `LAZARUS_CONFIG` names another). A setting comes from
//! the command line first, then the environment, then this file, then the built-in default;
//! `lazarus config show` prints each one's value and source.
//!
//! ```toml
//! model = "qwen2.5-coder"
//! base_url = "http://127.0.0.1:8080/v1"
//! tools = ["read_file", "list_dir"]
//! sandbox = "workspace-write"
//! session_dir = "~/sessions"           # or: store = "postgres://…"
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::json;

/// The settings the file may hold; any other key is an error naming it.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub tools: Option<Vec<String>>,
    pub sandbox: Option<String>,
    pub session_dir: Option<PathBuf>,
    pub store: Option<String>,
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
            (Some(path), cfg)
        }
    };
    Ok(&LOADED.get_or_init(|| (found, cfg)).1)
}

/// The file's values become the defaults of the flags they stand for, so the command line
/// and the environment (read by clap) still win over them.
pub fn apply_defaults(mut cmd: clap::Command, cfg: &'static FileConfig) -> clap::Command {
    for sub in ["run", "resume", "serve"] {
        cmd = cmd.mut_subcommand(sub, |mut c| {
            if let Some(m) = &cfg.model {
                c = c.mut_arg("model", |a| a.default_value(m.as_str()));
            }
            if let Some(u) = &cfg.base_url {
                c = c.mut_arg("base_url", |a| a.default_value(u.as_str()));
            }
            if let Some(t) = &cfg.tools {
                c = c.mut_arg("tools", |a| a.default_values(t.iter().map(String::as_str)));
            }
            if let Some(s) = &cfg.sandbox {
                c = c.mut_arg("sandbox", |a| a.default_value(s.as_str()));
            }
            c
        });
    }
    cmd
}

/// The file's store setting, for [`crate::args::StoreArgs`] (after flags and environment).
pub fn file_store() -> Option<crate::args::StoreChoice> {
    let (_, cfg) = LOADED.get()?;
    if let Some(d) = &cfg.session_dir {
        return Some(crate::args::StoreChoice::Local(d.clone()));
    }
    cfg.store.clone().map(crate::args::StoreChoice::Postgres)
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every setting's effective value and where it comes from (environment, file,
    /// default); flags given to a command win over all of these.
    Show {
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the path of the configuration file (whether or not it exists).
    Path,
}

struct Setting {
    name: &'static str,
    value: Option<String>,
    source: String,
}

fn setting(
    name: &'static str,
    env: Option<&str>,
    file: Option<String>,
    default: Option<String>,
) -> Setting {
    let file_src = || format!("file {}", path().display());
    if let Some(var) = env
        && let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty())
    {
        return Setting {
            name,
            value: Some(v),
            source: format!("env {var}"),
        };
    }
    if let Some(v) = file {
        return Setting {
            name,
            value: Some(v),
            source: file_src(),
        };
    }
    Setting {
        name,
        value: default,
        source: "default".into(),
    }
}

pub fn run(args: ConfigArgs) -> Result<i32> {
    let cfg = load()?;
    match args.command {
        ConfigCommand::Path => {
            println!("{}", path().display());
            Ok(0)
        }
        ConfigCommand::Show { json } => {
            let store_args = crate::args::StoreArgs {
                session_dir: None,
                store: None,
            };
            // the store: one setting, judged as every command judges it
            let (store_value, store_source) = match (
                std::env::var("LAZARUS_SESSION_DIR")
                    .ok()
                    .filter(|v| !v.is_empty()),
                std::env::var("LAZARUS_STORE")
                    .ok()
                    .filter(|v| !v.is_empty()),
            ) {
                (Some(_), Some(_)) => (
                    store_args.choice().err().map(|e| format!("{e:#}")),
                    "error".to_string(),
                ),
                (Some(d), None) => (Some(d), "env LAZARUS_SESSION_DIR".into()),
                (None, Some(u)) => (Some(redact(&u)), "env LAZARUS_STORE".into()),
                (None, None) => match file_store() {
                    Some(crate::args::StoreChoice::Local(d)) => (
                        Some(d.display().to_string()),
                        format!("file {}", path().display()),
                    ),
                    Some(crate::args::StoreChoice::Postgres(u)) => {
                        (Some(redact(&u)), format!("file {}", path().display()))
                    }
                    None => (
                        Some(crate::paths::default_session_dir().display().to_string()),
                        "default".into(),
                    ),
                },
            };
            let settings = vec![
                setting("model", Some("LAZARUS_MODEL"), cfg.model.clone(), None),
                setting(
                    "base_url",
                    Some("OPENAI_BASE_URL"),
                    cfg.base_url.clone(),
                    Some(crate::args::DEFAULT_BASE_URL.into()),
                ),
                setting(
                    "tools",
                    None,
                    cfg.tools.as_ref().map(|t| t.join(",")),
                    Some("read_file,write_file,list_dir,edit_file,shell".into()),
                ),
                setting(
                    "sandbox",
                    None,
                    cfg.sandbox.clone(),
                    Some("workspace-write".into()),
                ),
                Setting {
                    name: "store",
                    value: store_value,
                    source: store_source,
                },
            ];
            let file = LOADED.get().and_then(|(p, _)| p.clone());
            if json {
                let mut map = serde_json::Map::new();
                for s in &settings {
                    map.insert(
                        s.name.to_string(),
                        json!({"value": s.value, "source": s.source}),
                    );
                }
                println!(
                    "{}",
                    json!({"config_file": path(), "config_file_exists": file.is_some(), "settings": map})
                );
            } else {
                println!(
                    "config file: {} ({})",
                    path().display(),
                    if file.is_some() {
                        "read"
                    } else {
                        "not present"
                    }
                );
                for s in &settings {
                    let value = s.value.as_deref().map_or_else(
                        || "(none: the server's only model is used)".to_string(),
                        |v| crate::term::escape(v).into_owned(),
                    );
                    println!("{:<9} {value}  [{}]", s.name, s.source);
                }
            }
            Ok(0)
        }
    }
}

/// A store URL without its password.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_string(),
    }
}
