//! `lazarus config show` / `config path`: the effective settings and where each came from.

use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::json;

use lazarus_agent::sandbox::{EnvPolicy, env::names};

use crate::config::{file_env_policy, file_store, load, loaded_from, path};

/// Variables the shell tool sets itself in every call.
const CALL_VARS: &str =
    "TMPDIR (the call's private directory when sandboxed), PAGER=cat, GIT_PAGER=cat";

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
                    Some(crate::paths::StoreChoice::Local(d)) => (
                        Some(d.display().to_string()),
                        format!("file {}", path().display()),
                    ),
                    Some(crate::paths::StoreChoice::Postgres(u)) => {
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
                    "api",
                    Some("LAZARUS_API"),
                    cfg.api.clone(),
                    Some("chat".into()),
                ),
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
                setting("approval", None, cfg.approval.clone(), Some("never".into())),
                setting(
                    "sandbox_max_processes",
                    None,
                    cfg.sandbox_max_processes.map(|n| n.to_string()),
                    Some(lazarus_agent::sandbox::DEFAULT_MAX_PROCESSES.to_string()),
                ),
                setting(
                    "sandbox_allow_unix_sockets",
                    None,
                    cfg.sandbox_allow_unix_sockets.as_ref().map(|v| {
                        v.iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    }),
                    Some("none (only sockets in the workspace)".into()),
                ),
                setting(
                    "sandbox_allow_vcs_write",
                    None,
                    cfg.sandbox_allow_vcs_write.map(|b| b.to_string()),
                    Some("false (.git, .hg, .jj read-only to calls)".into()),
                ),
                setting(
                    "shell_environment_policy",
                    None,
                    cfg.shell_environment_policy.as_ref().map(|p| p.describe()),
                    Some(EnvPolicy::default().describe()),
                ),
                Setting {
                    name: "store",
                    value: store_value,
                    source: store_source,
                },
            ];
            let file = loaded_from();
            // what a shell call would get from this environment: names only, never values
            let shell_env = file_env_policy().compute_current();
            let shell_names = names(&shell_env.vars);
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
                    json!({"config_file": path(), "config_file_exists": file.is_some(), "settings": map,
                           "shell_env": {"names": shell_names, "withheld_as_credentials": shell_env.withheld, "set_by_the_call": ["TMPDIR", "PAGER", "GIT_PAGER"]}})
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
                println!(
                    "a shell call's environment (names only): {}; and {CALL_VARS}",
                    if shell_names.is_empty() {
                        "nothing inherited".to_string()
                    } else {
                        shell_names.join(" ")
                    }
                );
                if !shell_env.withheld.is_empty() {
                    println!("withheld as credentials: {}", shell_env.withheld.join(" "));
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
