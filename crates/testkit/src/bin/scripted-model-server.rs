//! Standalone scripted model server, for tests whose client process gets killed (and for
//! shell scripts such as scripts/capture-real).
//!
//! Usage: scripted-model-server --script FILE [--requests-log FILE] [--port N]
//! Prints `listening on http://127.0.0.1:PORT` and serves until SIGTERM or SIGINT:
//! `/v1/chat/completions` (OpenAI), `/v1/messages` (Anthropic: point `ANTHROPIC_BASE_URL` at
//! the printed URL) and `/v1/responses` (OpenAI Responses), all from the one script. Every
//! request body is appended to the log as one JSON line.

use std::path::PathBuf;
use std::process::ExitCode;

use lazarus_testkit::{Script, ScriptedServer, ServerOptions};
use tokio::signal::unix::{SignalKind, signal};

fn usage() -> ExitCode {
    eprintln!("usage: scripted-model-server --script FILE [--requests-log FILE] [--port N]");
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut script: Option<PathBuf> = None;
    let mut options = ServerOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--script" => script = args.next().map(PathBuf::from),
            "--requests-log" => options.request_log = args.next().map(PathBuf::from),
            "--port" => match args.next().and_then(|p| p.parse().ok()) {
                Some(p) => options.port = p,
                None => return usage(),
            },
            _ => return usage(),
        }
    }
    let Some(script_path) = script else {
        return usage();
    };
    let text = match std::fs::read_to_string(&script_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "scripted-model-server: cannot read {}: {e}",
                script_path.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let script = match Script::from_json(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "scripted-model-server: invalid script {}: {e}",
                script_path.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let server = match ScriptedServer::start_with(script, options).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scripted-model-server: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening on http://{}", server.addr());
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("scripted-model-server: cannot install signal handlers");
        return ExitCode::FAILURE;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
