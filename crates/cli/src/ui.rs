//! `lazarus ui`: the web view over a store, read-only, without running agents. Wiring only;
//! the view lives in the `lazarus-web` crate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use lazarus_gateway::auth::{self, TokenSource};
use lazarus_web::{Auth, Mode, WebConfig};

use crate::args::{StoreArgs, StoreChoice};

/// Arguments of `lazarus ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// Address to listen on (port 0 picks a free port; the URL is printed).
    #[arg(long, default_value = "127.0.0.1:7078")]
    pub listen: SocketAddr,
    /// Allow listening on a non-loopback address (a token is then required).
    #[arg(long)]
    pub allow_remote: bool,
    /// Answer requests for this host name too (repeatable; `.example.com` allows every name
    /// under it). By default only an IP address the view is reached by and `localhost` are
    /// answered: any other `Host` gets 421, so a web page whose name is pointed at this
    /// machine (DNS rebinding) reads nothing, `--no-auth` or not.
    #[arg(long, value_name = "NAME")]
    pub allowed_host: Vec<String>,
    /// Serve without a token. Accepted on a loopback address only (a single-user machine);
    /// the page says so in its header.
    #[arg(long)]
    pub no_auth: bool,
    /// Bearer token file, the gateway's by default (created with mode 0600 if missing)
    /// [default: $XDG_STATE_HOME/lazarus/gateway.token; env LAZARUS_TOKEN wins]
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Sessions in local files (`--session-dir`, the default) or PostgreSQL (`--store`).
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn run(args: UiArgs) -> Result<i32> {
    // Arguments first: nothing is written for a command that will refuse.
    let probe = if args.no_auth {
        Auth::None
    } else {
        Auth::Token("x".into())
    };
    lazarus_web::check_listen(&probe, args.listen, args.allow_remote)?;
    let choice = args.store.choice()?;
    let local = match &choice {
        StoreChoice::Local(dir) => {
            if !dir.is_dir() {
                anyhow::bail!(
                    "no session directory at {} (give --session-dir DIR of an existing store)",
                    dir.display()
                );
            }
            Some(args.store.local("lazarus ui")?)
        }
        StoreChoice::Postgres(_) => None,
    };
    let auth = if args.no_auth {
        Auth::None
    } else {
        let token_file = args
            .token_file
            .clone()
            .unwrap_or_else(|| auth::default_token_file(&crate::paths::state_dir()));
        let (token, source) =
            auth::load_or_create_token(std::env::var("LAZARUS_TOKEN").ok(), &token_file)?;
        match source {
            TokenSource::Env => eprintln!("token: from LAZARUS_TOKEN"),
            TokenSource::File(p) => eprintln!("token: {}", p.display()),
            TokenSource::Created(p) => eprintln!("token: created {} (mode 0600)", p.display()),
        }
        if !args.listen.ip().is_loopback() {
            auth::check_remote_token(&token)?;
        }
        Auth::Token(Arc::from(token.as_str()))
    };
    let store: lazarus_session::SharedStore = match &local {
        Some(l) => Arc::new(l.clone()),
        None => Arc::from(args.store.open()?),
    };
    eprintln!("store: {} (read-only)", store.location());
    let mut cfg = WebConfig::new(store, auth, Mode::ReadOnly);
    cfg.local = local;
    cfg.allowed_hosts = args.allowed_host.clone();
    let no_auth = args.no_auth;
    lazarus_web::serve_blocking(cfg, args.listen, args.allow_remote, |addr| {
        println!("lazarus ui: http://{addr}/");
        if no_auth {
            eprintln!("no auth: anyone on this machine can read these sessions");
        }
    })?;
    Ok(0)
}
