//! Argument groups shared by several commands: where sessions live ([`StoreArgs`]), the model
//! and tools ([`ModelArgs`]), and the one syntax every duration flag takes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use lazarus_agent::model::{Message, ToolCall};
use lazarus_agent::provider::{Api, ProviderConfig, ProviderLimits};
use lazarus_agent::runner::{ApprovalMode, ApprovalPolicy, RunnerConfig};
use lazarus_agent::sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use lazarus_agent::tools::Toolbox;
use lazarus_session::{LocalStore, Store};

/// A duration flag: `500ms`, `30s`, `2m`, `1h30m` (humantime syntax); a bare number is in the
/// flag's old unit, so `--drain-timeout 30` still means 30 seconds.
fn parse_duration(s: &str, bare_unit: Duration) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return bare_unit
            .checked_mul(u32::try_from(n).map_err(|_| format!("{s} is too large"))?)
            .ok_or_else(|| format!("{s} is too large"));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write e.g. 500ms, 30s, 2m or 1h30m"))
}

/// [`parse_duration`] where a bare number is seconds.
pub fn parse_secs(s: &str) -> Result<Duration, String> {
    parse_duration(s, Duration::from_secs(1))
}

/// [`parse_duration`] where a bare number is milliseconds.
pub fn parse_millis(s: &str) -> Result<Duration, String> {
    parse_duration(s, Duration::from_millis(1))
}

/// The arguments of the command being run that were given on its command line (not
/// defaults, environment variables or the configuration file), by clap id.
static GIVEN: std::sync::OnceLock<std::collections::BTreeSet<String>> = std::sync::OnceLock::new();

/// Notes which arguments of the chosen subcommand (`matches`, its own) came from the
/// command line. Called once, by `main`.
pub fn note_given(matches: &clap::ArgMatches) {
    let given = matches
        .ids()
        .filter(|id| {
            matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|id| id.as_str().to_string())
        .collect();
    let _ = GIVEN.set(given);
}

/// Whether the argument `id` (clap's id: the field name) was given on the command line. A
/// session's recorded world gives what the command line does not (see `run::world`).
pub fn given(id: &str) -> bool {
    GIVEN.get().is_some_and(|g| g.contains(id))
}

/// Where sessions live. The flags beat the environment (`LAZARUS_SESSION_DIR`,
/// `LAZARUS_STORE`); naming two stores at the same level is a usage error that says how to
/// choose.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Session directory (env LAZARUS_SESSION_DIR) [default: $XDG_STATE_HOME/lazarus/sessions]
    #[arg(long, global = true, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// A PostgreSQL store instead of local files (env LAZARUS_STORE):
    /// `postgres://user@host:port/db[?schema=NAME&sslmode=MODE]`
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
}

pub use crate::paths::StoreChoice;

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl StoreArgs {
    /// Which store: `--session-dir` or `--store`, else `LAZARUS_SESSION_DIR` or
    /// `LAZARUS_STORE`, else the default directory. Nothing is opened or created.
    pub fn choice(&self) -> Result<StoreChoice> {
        let choice = match (&self.session_dir, &self.store) {
            (Some(_), Some(_)) => {
                return Err(crate::Usage(
                    "--session-dir and --store name two stores; give one of them".into(),
                )
                .into());
            }
            (Some(dir), None) => StoreChoice::Local(dir.clone()),
            (None, Some(url)) => StoreChoice::Postgres(url.clone()),
            (None, None) => match (
                env_nonempty("LAZARUS_SESSION_DIR"),
                env_nonempty("LAZARUS_STORE"),
            ) {
                (Some(_), Some(_)) => {
                    return Err(crate::Usage(
                        "LAZARUS_SESSION_DIR and LAZARUS_STORE are both set in the environment; \
                         unset one, or choose for this command with --session-dir DIR or --store URL"
                            .into(),
                    )
                    .into());
                }
                (Some(dir), None) => StoreChoice::Local(PathBuf::from(dir)),
                (None, Some(url)) => StoreChoice::Postgres(url),
                (None, None) => crate::config::file_store()
                    .unwrap_or_else(|| StoreChoice::Local(crate::paths::default_session_dir())),
            },
        };
        if let StoreChoice::Postgres(url) = &choice
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            let scheme = url.split("://").next().unwrap_or("");
            return Err(crate::Usage(format!(
                "unsupported store URL (scheme {:?}): give a postgres:// URL, or use --session-dir \
                 for local files",
                crate::term::escape(scheme)
            ))
            .into());
        }
        Ok(choice)
    }

    /// Checks the store's address without connecting or creating anything.
    pub fn check(&self) -> Result<()> {
        self.choice().map(|_| ())
    }

    /// The session directory, when sessions live in local files.
    pub fn local_dir(&self) -> Result<Option<PathBuf>> {
        Ok(match self.choice()? {
            StoreChoice::Local(d) => Some(d),
            StoreChoice::Postgres(_) => None,
        })
    }

    /// Whether sessions live in PostgreSQL (shared by several gateways).
    pub fn is_postgres(&self) -> Result<bool> {
        Ok(matches!(self.choice()?, StoreChoice::Postgres(_)))
    }

    /// The configured store: PostgreSQL with `--store`, local files otherwise.
    pub fn open(&self) -> Result<Box<dyn Store>> {
        match self.choice()? {
            StoreChoice::Postgres(url) => {
                let pg = lazarus_store_postgres::PgStore::connect(&url)
                    .with_context(|| "connecting to the PostgreSQL store".to_string())?;
                Ok(Box::new(pg))
            }
            StoreChoice::Local(dir) => Ok(Box::new(open_local(&dir)?)),
        }
    }

    /// The local store; an error naming what to do for a PostgreSQL one.
    pub fn local(&self, what: &str) -> Result<LocalStore> {
        match self.choice()? {
            StoreChoice::Local(dir) => open_local(&dir),
            StoreChoice::Postgres(_) => anyhow::bail!(
                "{what} works on local session files, and the store is PostgreSQL; give --session-dir DIR"
            ),
        }
    }
}

fn open_local(dir: &std::path::Path) -> Result<LocalStore> {
    LocalStore::open(dir).with_context(|| format!("opening session directory {}", dir.display()))
}

/// The model server asked when nothing else is configured (llama.cpp's default port).
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";

/// The Anthropic API, for `--api anthropic` when nothing else is configured.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// Model settings shared by `run` and `serve`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model name sent to the server [default: the only model the server lists at
    /// GET /models; with several, pick one with --model]
    #[arg(long, env = "LAZARUS_MODEL")]
    pub model: Option<String>,
    /// Wire protocol of the model server: `chat` (OpenAI-compatible chat completions:
    /// OpenAI, Ollama, vLLM, llama.cpp, LM Studio), `responses` (the OpenAI Responses API)
    /// or `anthropic` (the Anthropic Messages API).
    #[arg(long, env = "LAZARUS_API", default_value = "chat", value_parser = parse_api)]
    pub api: Api,
    /// Base URL of the model API [default: env OPENAI_BASE_URL (chat, responses) or
    /// ANTHROPIC_BASE_URL (anthropic), else the config file's base_url, else
    /// http://127.0.0.1:8080/v1 (chat, responses) or https://api.anthropic.com (anthropic)]
    #[arg(long)]
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key [default: OPENAI_API_KEY, or
    /// ANTHROPIC_API_KEY with --api anthropic]
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// System prompt for new sessions.
    #[arg(long)]
    pub system_prompt: Option<String>,
    /// Model requests per run at most.
    #[arg(long, default_value_t = 20)]
    pub max_turns: u32,
    /// Tokens per model answer at most.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Sampling temperature sent to the server (0 = most deterministic) [default: the
    /// server's]
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Largest model response body, in bytes (streamed or not).
    #[arg(long, default_value_t = ProviderLimits::default().max_response_bytes)]
    pub max_response_bytes: usize,
    /// Largest line of a streamed (SSE) model response, in bytes.
    #[arg(long, default_value_t = ProviderLimits::default().max_sse_line_bytes)]
    pub max_sse_line_bytes: usize,
    /// Ask for whole responses instead of a stream.
    #[arg(long)]
    pub no_stream: bool,
    /// Extra top-level fields for every model request, as a JSON object; never replaces a
    /// field Lazarus sets. E.g. `{"thinking":{"type":"enabled","budget_tokens":4096}}`
    /// (anthropic) or `{"reasoning":{"effort":"high","summary":"auto"}}` (responses).
    #[arg(long, value_name = "JSON", value_parser = parse_json_object)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Put a one-shot tool-call example (a `list_dir` call) before the transcript; small base
    /// models need one to call tools at all.
    #[arg(long)]
    pub tool_example: bool,
    /// Put these example messages before the transcript: a JSON array of
    /// `{"role":"user","content":…}`, `{"role":"assistant","text":…,"tool_calls":[{"call_id",
    /// "name","arguments"}]}`, `{"role":"tool","call_id":…,"content":…}`.
    #[arg(long, conflicts_with = "tool_example")]
    pub examples: Option<PathBuf>,
    /// Default shell timeout (`90s`, `2m`; a bare number is seconds).
    #[arg(long, default_value = "120s", value_parser = parse_secs)]
    pub shell_timeout: Duration,
    /// Offer only these tools (comma-separated) [default: all: read_file, write_file,
    /// list_dir, edit_file, shell]
    #[arg(long, value_delimiter = ',')]
    pub tools: Vec<String>,
    /// How shell commands are confined: `workspace-write` (read anywhere except credential
    /// stores such as ~/.ssh; write only in the workspace and a private $TMPDIR; no network;
    /// nothing outlives the call), `read-only` (write only in the private $TMPDIR), or `off`
    /// (unconfined). Where the kernel cannot enforce it, shell calls are refused.
    #[arg(long, default_value = "workspace-write", value_parser = parse_sandbox_mode)]
    pub sandbox: SandboxMode,
    /// The model's context window, in tokens: a request estimated above it (request bytes /
    /// 4) is never sent, and the context is compacted at 80% of it unless --compact-at says
    /// otherwise [default: no limit]
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(256..))]
    pub context_window: Option<u64>,
    /// Compact the context (the model summarises the earlier turns; the summary replaces them
    /// in later requests, the ledger keeps everything) when the next request's estimate
    /// passes this many tokens [default: 80% of --context-window; off without it]
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(128..))]
    pub compact_at: Option<u64>,
    /// Let sandboxed shell commands use the network.
    #[arg(long)]
    pub sandbox_network: bool,
    /// The most processes and threads one shell call may have at once, its sandbox's own
    /// init included (a pids cgroup where one can be made, else RLIMIT_NPROC in the call's
    /// user namespace).
    #[arg(long, value_name = "N", default_value_t = lazarus_agent::sandbox::DEFAULT_MAX_PROCESSES,
          value_parser = clap::value_parser!(u32).range(8..))]
    pub sandbox_max_processes: u32,
    /// Let tool calls write the workspace's version-control metadata (`.git`, `.hg`, `.jj`,
    /// and a worktree's git directory). By default it is read-only to them: git, hg or jj
    /// run later by a person (or a prompt theme) would run what a call wrote there (hooks,
    /// `core.fsmonitor`) outside the sandbox. Also `sandbox_allow_vcs_write = true` in
    /// config.toml.
    #[arg(long)]
    pub sandbox_allow_vcs_write: bool,
    /// Let sandboxed shell commands connect to this Unix socket outside the workspace (a
    /// socket file, or a directory of them; repeatable). By default they may connect only to
    /// sockets in the workspace and their own $TMPDIR.
    #[arg(long, value_name = "PATH")]
    pub sandbox_allow_unix_socket: Vec<PathBuf>,
    /// Start the MCP servers of this `.mcp.json` file (Claude Code's and Cursor's format;
    /// repeatable) besides the config file's `[mcp_servers]`; their tools are offered as
    /// `mcp__<server>__<tool>` (docs/mcp.md).
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
    /// Start no MCP server, not even the config file's.
    #[arg(long, conflicts_with = "mcp_config")]
    pub no_mcp: bool,
    /// When a person must allow a tool call before it runs: `never` (the default),
    /// `untrusted` (every call that is not read-only: shell, write_file, edit_file, MCP tools
    /// without a trusted `readOnlyHint`), `on-request` (when the model asks, with
    /// `"escalate": true`). Also `approval = …` in config.toml. See docs/approvals.md.
    #[arg(long, value_name = "MODE", default_value = "never", value_parser = parse_approval_mode)]
    pub ask_for_approval: ApprovalMode,
}

fn parse_approval_mode(s: &str) -> Result<ApprovalMode, String> {
    ApprovalMode::parse(s)
}

fn parse_sandbox_mode(s: &str) -> Result<SandboxMode, String> {
    s.parse()
}

fn parse_api(s: &str) -> Result<Api, String> {
    s.parse()
}

fn parse_json_object(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err("give a JSON object, e.g. '{\"top_k\": 1}'".into()),
        Err(e) => Err(format!(
            "not JSON ({e}); give a JSON object, e.g. '{{\"top_k\": 1}}'"
        )),
    }
}

/// The base URL for `api`: the flag, else the API's environment variable, else the
/// configuration file's `base_url`, else the API's default. (`env` is the environment
/// lookup, a parameter so it can be tested without touching the process environment.)
fn resolve_base_url(
    api: Api,
    flag: Option<&str>,
    file: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> String {
    let var = match api {
        Api::Anthropic => "ANTHROPIC_BASE_URL",
        Api::Chat | Api::Responses => "OPENAI_BASE_URL",
    };
    flag.filter(|f| !f.is_empty())
        .map(str::to_string)
        .or_else(|| env(var))
        .or_else(|| file.map(str::to_string))
        .unwrap_or_else(|| {
            match api {
                Api::Anthropic => DEFAULT_ANTHROPIC_BASE_URL,
                Api::Chat | Api::Responses => DEFAULT_BASE_URL,
            }
            .to_string()
        })
}

impl ModelArgs {
    /// Lazarus's own files, denied to every call (read or written, existing or not, inside
    /// the workspace too): the state directory (sessions, a gateway's token and
    /// workspaces), the configuration file (`LAZARUS_CONFIG` or the default; it names the
    /// sandbox mode and MCP servers lazarus starts unsandboxed), the approvals policy beside
    /// it (a command must not grant itself `always`) and its lock, and the MCP configuration
    /// files of this command (`--mcp-config`: they name programs lazarus starts too).
    pub fn own_files(&self) -> Vec<PathBuf> {
        let policy = crate::approvals::policy_path();
        let mut out = vec![
            crate::paths::state_dir(),
            crate::config::path(),
            crate::approvals::lock_path(),
            policy,
        ];
        out.extend(self.mcp_config.iter().cloned());
        out
    }

    /// The tools offered to the model.
    pub fn toolbox(&self) -> Result<Toolbox> {
        let all = Toolbox::standard();
        if self.tools.is_empty() {
            return Ok(all);
        }
        let mut t = Toolbox::empty();
        for name in &self.tools {
            let tool = all.get(name).with_context(|| {
                format!(
                    "unknown tool {name:?}; available: {}",
                    all.names().join(", ")
                )
            })?;
            t.register(tool.clone());
        }
        Ok(t)
    }

    /// The variable holding the API key.
    pub fn api_key_var(&self) -> &str {
        match (&self.api_key_env, self.api) {
            (Some(v), _) => v,
            (None, Api::Anthropic) => "ANTHROPIC_API_KEY",
            (None, Api::Chat | Api::Responses) => "OPENAI_API_KEY",
        }
    }

    fn api_key(&self) -> Option<String> {
        env_nonempty(self.api_key_var())
    }

    /// The model API's base URL (see `--base-url`).
    pub fn base_url(&self) -> String {
        let file = crate::config::load()
            .ok()
            .and_then(|c| c.base_url.as_deref());
        resolve_base_url(self.api, self.base_url.as_deref(), file, env_nonempty)
    }

    /// The model: `--model` (or `LAZARUS_MODEL`), else the only one the server lists. Never a
    /// silent placeholder name the server would answer with a 404.
    pub fn model_name(&self) -> Result<String> {
        if let Some(m) = self.model.as_ref().filter(|m| !m.is_empty()) {
            return Ok(m.clone());
        }
        let base = self.base_url();
        let base = base.trim_end_matches('/');
        let url = match self.api {
            Api::Anthropic if !base.ends_with("/v1") => format!("{base}/v1/models"),
            _ => format!("{base}/models"),
        };
        let client = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .context("building the HTTP client")?;
        let mut req = client.get(&url);
        if let Some(key) = self.api_key() {
            req = match self.api {
                Api::Anthropic => req.header("x-api-key", key).header(
                    "anthropic-version",
                    lazarus_agent::provider::anthropic::VERSION,
                ),
                Api::Chat | Api::Responses => req.bearer_auth(key),
            };
        }
        let listed: Result<Vec<String>, String> = req
            .send()
            .map_err(|e| root_cause(&e))
            .and_then(|r| r.error_for_status().map_err(|e| root_cause(&e)))
            .and_then(|r| r.json::<serde_json::Value>().map_err(|e| root_cause(&e)))
            .map(|v| {
                v["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["id"].as_str().map(str::to_string))
                    .collect()
            });
        match listed {
            Err(e) => Err(crate::Usage(format!(
                "no --model given, and asking {url} for the server's models failed ({e}); \
                 start the model server, fix --base-url, or give --model NAME (or LAZARUS_MODEL)"
            ))
            .into()),
            Ok(models) => match models.as_slice() {
                [one] => {
                    eprintln!("model: {} (the only model {url} lists)", crate::term::escape(one));
                    Ok(one.clone())
                }
                [] => Err(crate::Usage(format!(
                    "no --model given, and {url} lists no models; give --model NAME (or LAZARUS_MODEL)"
                ))
                .into()),
                many => Err(crate::Usage(format!(
                    "no --model given, and {url} lists {} models ({}); pick one with --model NAME (or LAZARUS_MODEL)",
                    many.len(),
                    crate::term::escape(&many.iter().take(8).cloned().collect::<Vec<_>>().join(", "))
                ))
                .into()),
            },
        }
    }

    /// The runner's configuration. `ask_model`: without `--model`, ask the server for its
    /// only model (false for a gateway that never runs sessions: `serve --no-run`).
    pub fn runner_config(&self, workspace: PathBuf, ask_model: bool) -> Result<RunnerConfig> {
        let mut provider = ProviderConfig::new(self.base_url());
        provider.api = self.api;
        provider.api_key = self.api_key();
        provider.limits.max_response_bytes = self.max_response_bytes;
        provider.limits.max_sse_line_bytes = self.max_sse_line_bytes;
        provider.extra_body = self.extra_body.clone().unwrap_or_default();
        let model = if ask_model {
            self.model_name()?
        } else {
            self.model.clone().unwrap_or_default()
        };
        if let (Some(at), Some(w)) = (self.compact_at, self.context_window)
            && at > w
        {
            return Err(crate::Usage(format!(
                "--compact-at {at} is above --context-window {w}; give a smaller --compact-at"
            ))
            .into());
        }
        let mut cfg = RunnerConfig::new(provider, model, workspace);
        cfg.compaction.compact_at = self.compact_at;
        cfg.compaction.context_window = self.context_window;
        cfg.system_prompt = self.system_prompt.clone();
        cfg.max_turns = self.max_turns;
        cfg.max_tokens = self.max_tokens;
        cfg.temperature = self.temperature;
        cfg.stream = !self.no_stream;
        cfg.tool_limits.shell_default_timeout_secs = self.shell_timeout.as_secs().max(1);
        let env = crate::config::file_env_policy();
        env.validate().map_err(crate::Usage)?;
        cfg.sandbox = Arc::new(
            Sandbox::probe(SandboxPolicy {
                mode: self.sandbox,
                network: self.sandbox_network,
                max_processes: self.sandbox_max_processes,
            })
            .allow_unix_sockets(self.sandbox_allow_unix_socket.iter().cloned())
            .with_env(env)
            .allow_vcs_writes(self.sandbox_allow_vcs_write)
            .deny(self.own_files()),
        );
        cfg.approval = ApprovalPolicy {
            mode: self.ask_for_approval,
            always: Some(Arc::new(crate::approvals::FileGrants)),
        };
        if self.tool_example {
            cfg.examples = tool_example();
        }
        if let Some(path) = &self.examples {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading examples {}", path.display()))?;
            cfg.examples = serde_json::from_str(&text).with_context(|| {
                format!(
                    "examples {} is not a JSON array of messages",
                    path.display()
                )
            })?;
        }
        Ok(cfg)
    }
}

/// The innermost cause of an error (reqwest wraps "Connection refused" in three layers).
fn root_cause(e: &dyn std::error::Error) -> String {
    let mut last = e;
    while let Some(c) = last.source() {
        last = c;
    }
    last.to_string()
}

/// One example exchange: ask → tool call → result → answer.
fn tool_example() -> Vec<Message> {
    vec![
        Message::user("What files are in the notes folder?"),
        Message::Assistant {
            provider_items: vec![],
            text: None,
            tool_calls: vec![ToolCall {
                call_id: "example_1".into(),
                name: "list_dir".into(),
                arguments: r#"{"path":"notes"}"#.into(),
            }],
        },
        Message::tool_result("example_1", "todo.md\nideas.md"),
        Message::Assistant {
            provider_items: vec![],
            text: Some("The notes folder has todo.md and ideas.md.".into()),
            tool_calls: vec![],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_one_syntax_bare_numbers_in_the_old_unit() {
        assert_eq!(parse_secs("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_secs("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_secs("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_secs("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_millis("500"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_millis("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_millis("0"), Ok(Duration::ZERO));
        let err = parse_secs("ten").unwrap_err();
        assert!(err.contains("30s"), "{err}");
        assert!(parse_secs("99999999999999").is_err());
    }

    #[test]
    fn base_url_flag_then_the_apis_env_then_file_then_default() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = env(&[
            ("OPENAI_BASE_URL", "http://o/v1"),
            ("ANTHROPIC_BASE_URL", "http://a"),
        ]);
        assert_eq!(
            resolve_base_url(Api::Chat, Some("http://f/v1"), None, both),
            "http://f/v1"
        );
        assert_eq!(
            resolve_base_url(Api::Chat, None, Some("http://c/v1"), both),
            "http://o/v1"
        );
        assert_eq!(
            resolve_base_url(Api::Responses, None, None, both),
            "http://o/v1"
        );
        assert_eq!(
            resolve_base_url(Api::Anthropic, None, None, both),
            "http://a"
        );
        let none = env(&[]);
        assert_eq!(
            resolve_base_url(Api::Anthropic, None, Some("http://c"), none),
            "http://c"
        );
        assert_eq!(
            resolve_base_url(Api::Chat, None, None, none),
            DEFAULT_BASE_URL
        );
        assert_eq!(
            resolve_base_url(Api::Anthropic, None, None, none),
            DEFAULT_ANTHROPIC_BASE_URL
        );
        // OPENAI_BASE_URL never leaks into an Anthropic client
        let openai_only = env(&[("OPENAI_BASE_URL", "http://o/v1")]);
        assert_eq!(
            resolve_base_url(Api::Anthropic, None, None, openai_only),
            DEFAULT_ANTHROPIC_BASE_URL
        );
    }
}
