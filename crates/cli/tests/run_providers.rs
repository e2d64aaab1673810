//! `lazarus run --api responses|anthropic` end to end against the scripted server: the
//! reasoning each API issued (an encrypted Responses reasoning item, a signed Anthropic
//! thinking block) is recorded verbatim and sent back byte-identical by a fork at every turn
//! boundary; `sessions show` shows it and `sessions verify` is clean. (Resume after kill -9
//! on every API: `run_crash.rs`.)

use std::path::Path;
use std::process::{Command, Output};

use lazarus_agent::provider::Api;
use lazarus_testkit::{Protocol, Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn lazarus(api: Api, dir: &Path, ws: &Path, url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--api", api.as_str(), "--base-url", url, "--model", "m"])
        .arg("--session-dir")
        .arg(dir)
        .arg("--workspace")
        .arg(ws)
        .env("ANTHROPIC_API_KEY", "k")
        .env("OPENAI_API_KEY", "k")
        .output()
        .unwrap()
}

fn sessions(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("sessions")
        .args(args)
        .arg("--session-dir")
        .arg(dir)
        .output()
        .unwrap()
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn script() -> Script {
    Script::new([
        Step::reply(
            ScriptedResponse::tool_call("toolu_list", "list_dir", json!({"path": "."}))
                .with_reasoning("Look at the folder first.")
                .with_opaque("R1-EqQBCkYIBxgCKkB+/=")
                .with_text("Looking."),
        )
        .when(When::LastUserContains { text: "go".into() }),
        Step::after_tool_result(
            "toolu_list",
            ScriptedResponse::text("It is empty.")
                .with_reasoning("Nothing there.")
                .with_opaque("R2-gAAAAABo+/x=="),
        ),
        Step::reply(ScriptedResponse::text("Again.")).repeat(),
    ])
}

/// The opaque values a request carries, in order.
fn opaque_in(api: Api, req: &Value) -> Vec<String> {
    match api {
        Api::Anthropic => lazarus_testkit::anthropic::opaque_in_request(req),
        _ => lazarus_testkit::responses::opaque_in_request(req),
    }
}

#[test]
fn provider_reasoning_goes_back_verbatim_from_forks_at_every_turn() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for api in [Api::Responses, Api::Anthropic] {
        let server = rt.block_on(ScriptedServer::start(script())).unwrap();
        let url = server.base_url();
        let dir = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        ok(
            &lazarus(
                api,
                dir.path(),
                ws.path(),
                &url,
                &["run", "--session", "s", "-p", "go"],
            ),
            "run",
        );
        let reqs = rt.block_on(async { server.requests() });
        assert_eq!(reqs.len(), 2, "{api}");
        assert_eq!(opaque_in(api, &reqs[1]), ["R1-EqQBCkYIBxgCKkB+/="], "{api}");
        // the record holds the provider's item verbatim
        let export = ok(&sessions(dir.path(), &["export", "s"]), "export");
        let items: Vec<Value> = export
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "response")
            .flat_map(|r| r["data"]["items"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["type"] == "provider_reasoning")
            .collect();
        assert_eq!(items.len(), 2, "{api}");
        match api {
            Api::Anthropic => assert_eq!(
                items[0]["item"],
                json!({"type": "thinking", "thinking": "Look at the folder first.",
                    "signature": "R1-EqQBCkYIBxgCKkB+/="})
            ),
            _ => {
                assert_eq!(items[0]["item"]["type"], "reasoning");
                assert_eq!(
                    items[0]["item"]["encrypted_content"],
                    "R1-EqQBCkYIBxgCKkB+/="
                );
                assert_eq!(
                    items[0]["item"]["summary"][0]["text"],
                    "Look at the folder first."
                );
            }
        }
        let shown = ok(&sessions(dir.path(), &["show", "s"]), "show");
        assert!(
            shown.contains("(thinking) Look at the folder first."),
            "{shown}"
        );

        // A fork at each turn boundary sends back exactly the reasoning of the turns it kept.
        for (at, expected) in [
            (0, vec![]),
            (1, vec!["R1-EqQBCkYIBxgCKkB+/="]),
            (2, vec!["R1-EqQBCkYIBxgCKkB+/=", "R2-gAAAAABo+/x=="]),
        ] {
            let id = format!("f{at}");
            ok(
                &sessions(
                    dir.path(),
                    &["fork", "s", "--at-turn", &at.to_string(), "--id", &id],
                ),
                "fork",
            );
            let before = rt.block_on(async { server.request_count() });
            ok(
                &lazarus(
                    api,
                    dir.path(),
                    ws.path(),
                    &url,
                    &["run", "--session", &id, "-p", "and again"],
                ),
                "run the fork",
            );
            let reqs = rt.block_on(async { server.requests() });
            assert!(reqs.len() > before, "{api} fork at {at}: no request");
            for r in &reqs[before..] {
                assert_eq!(opaque_in(api, r), expected, "{api} fork at {at}");
            }
            let verify = sessions(dir.path(), &["verify", &id]);
            ok(&verify, "verify");
        }
        assert!(rt.block_on(async { server.unknown_opaque() }).is_empty());
        assert!(
            rt.block_on(async { server.protocols() }).iter().all(|p| *p
                == if api == Api::Anthropic {
                    Protocol::Anthropic
                } else {
                    Protocol::Responses
                }),
            "{api}"
        );
        assert_eq!(rt.block_on(async { server.unmatched_count() }), 0, "{api}");
        ok(&sessions(dir.path(), &["verify", "s"]), "verify");
    }
}

/// `--api` is checked before anything runs, and names the choices.
#[test]
fn an_unknown_api_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args(["run", "--api", "gemini", "-p", "hi", "--session-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("chat, responses or anthropic"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
}

/// `--extra-body` adds the API's own fields (here: Anthropic extended thinking) to every
/// request without replacing Lazarus's; anything but a JSON object is a usage error.
#[test]
fn extra_body_reaches_every_request() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let extra = r#"{"thinking":{"type":"enabled","budget_tokens":1024},"stream":"no"}"#;
    ok(
        &lazarus(
            Api::Anthropic,
            dir.path(),
            ws.path(),
            &server.base_url(),
            &["run", "--session", "s", "-p", "go", "--extra-body", extra],
        ),
        "run",
    );
    let reqs = rt.block_on(async { server.requests() });
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(
            r["thinking"],
            json!({"type": "enabled", "budget_tokens": 1024})
        );
        assert_eq!(r["stream"], json!(true), "Lazarus's own field is kept");
    }
    for bad in ["[1]", "{nope"] {
        let o = Command::new(BIN)
            .args(["run", "-p", "hi", "--extra-body", bad, "--session-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("JSON object"),
            "{bad}"
        );
    }
}

/// `api = "anthropic"` in the configuration file chooses the protocol (a flag still wins),
/// and `config show` says where the setting came from.
#[test]
fn the_config_file_chooses_the_api() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("hi"),
        )
        .repeat()])))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "api = \"anthropic\"\nmodel = \"m\"\n").unwrap();
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .args(["run", "-p", "hi", "--base-url", &server.base_url()])
            .args(extra)
            .arg("--session-dir")
            .arg(dir.path().join("s"))
            .arg("--workspace")
            .arg(dir.path())
            .env("LAZARUS_CONFIG", &cfg)
            .env_remove("LAZARUS_API")
            .env("ANTHROPIC_API_KEY", "k")
            .output()
            .unwrap()
    };
    ok(&run(&[]), "run");
    ok(&run(&["--api", "responses"]), "run --api responses");
    assert_eq!(
        rt.block_on(async { server.protocols() }),
        [Protocol::Anthropic, Protocol::Responses]
    );
    let o = Command::new(BIN)
        .args(["config", "show", "--json"])
        .env("LAZARUS_CONFIG", &cfg)
        .env_remove("LAZARUS_API")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["settings"]["api"]["value"], "anthropic");
    assert!(
        v["settings"]["api"]["source"]
            .as_str()
            .unwrap()
            .starts_with("file ")
    );
}
