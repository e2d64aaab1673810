//! A real Claude Code session (captured from 2.1.332) imported and continued with
//! `lazarus run --session NEW`: on every provider Lazarus speaks (chat, Responses, Anthropic;
//! the scripted server records the requests) the first request carries the imported history
//! in that wire format — the user message, the tool call with its arguments and the same id
//! on its result, the result text byte for byte, the answer — and the source's tools are not
//! offered. A call the source holds no result for reaches the model as in doubt. With the
//! real local model (ignored; scripts/test.sh runs it): the continued request is larger than
//! the same prompt alone by the history, and the session goes on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lazarus_agent::provider::Api;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn capture(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures/real/claude")
        .join(name)
        .join("home/.claude/projects/-home-dev-capture-work");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap()
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn import(dir: &Path, source: &Path, id: &str) {
    ok(
        Command::new(BIN)
            .args([
                "sessions",
                "import",
                "--from",
                "claude-code",
                "--id",
                id,
                "--session-dir",
            ])
            .arg(dir)
            .arg(source)
            .output()
            .unwrap(),
        "import",
    );
}

fn run(dir: &Path, ws: &Path, api: Api, url: &str, model: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["run", "--session", "cc", "-p", "carry on"])
        .args(["--api", api.as_str(), "--base-url", url, "--model", model])
        .arg("--session-dir")
        .arg(dir)
        .arg("--workspace")
        .arg(ws)
        .args(extra)
        .env("ANTHROPIC_API_KEY", "k")
        .env("OPENAI_API_KEY", "k")
        .output()
        .unwrap()
}

/// What a request carries, protocol by protocol: user texts, (call id, tool, arguments),
/// (result id, text), assistant texts, offered tool names.
#[derive(Debug, Default)]
struct Carried {
    users: Vec<String>,
    calls: Vec<(String, String, Value)>,
    results: Vec<(String, String)>,
    answers: Vec<String>,
    tools: Vec<String>,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn carried(api: Api, req: &Value) -> Carried {
    let mut c = Carried::default();
    match api {
        Api::Chat => {
            for m in req["messages"].as_array().unwrap() {
                match m["role"].as_str().unwrap() {
                    "user" => c.users.push(text(&m["content"])),
                    "assistant" => {
                        let t = text(&m["content"]);
                        if !t.is_empty() {
                            c.answers.push(t);
                        }
                        for tc in m["tool_calls"].as_array().into_iter().flatten() {
                            c.calls.push((
                                tc["id"].as_str().unwrap().into(),
                                tc["function"]["name"].as_str().unwrap().into(),
                                serde_json::from_str(tc["function"]["arguments"].as_str().unwrap())
                                    .unwrap(),
                            ));
                        }
                    }
                    "tool" => c.results.push((
                        m["tool_call_id"].as_str().unwrap().into(),
                        text(&m["content"]),
                    )),
                    _ => {}
                }
            }
            for t in req["tools"].as_array().into_iter().flatten() {
                c.tools.push(t["function"]["name"].as_str().unwrap().into());
            }
        }
        Api::Responses => {
            for i in req["input"].as_array().unwrap() {
                match (i["type"].as_str(), i["role"].as_str()) {
                    (Some("function_call"), _) => c.calls.push((
                        i["call_id"].as_str().unwrap().into(),
                        i["name"].as_str().unwrap().into(),
                        serde_json::from_str(i["arguments"].as_str().unwrap()).unwrap(),
                    )),
                    (Some("function_call_output"), _) => c
                        .results
                        .push((i["call_id"].as_str().unwrap().into(), text(&i["output"]))),
                    (_, Some("user")) => c.users.push(text(&i["content"])),
                    (_, Some("assistant")) => c.answers.push(text(&i["content"])),
                    _ => {}
                }
            }
            for t in req["tools"].as_array().into_iter().flatten() {
                c.tools.push(t["name"].as_str().unwrap().into());
            }
        }
        Api::Anthropic => {
            for m in req["messages"].as_array().unwrap() {
                let role = m["role"].as_str().unwrap();
                let blocks = match &m["content"] {
                    Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
                    Value::Array(a) => a.clone(),
                    _ => vec![],
                };
                for b in blocks {
                    match (role, b["type"].as_str().unwrap()) {
                        ("user", "text") => c.users.push(b["text"].as_str().unwrap().into()),
                        ("assistant", "text") => c.answers.push(b["text"].as_str().unwrap().into()),
                        (_, "tool_use") => c.calls.push((
                            b["id"].as_str().unwrap().into(),
                            b["name"].as_str().unwrap().into(),
                            b["input"].clone(),
                        )),
                        (_, "tool_result") => c.results.push((
                            b["tool_use_id"].as_str().unwrap().into(),
                            text(&b["content"]),
                        )),
                        _ => {}
                    }
                }
            }
            for t in req["tools"].as_array().into_iter().flatten() {
                c.tools.push(t["name"].as_str().unwrap().into());
            }
        }
    }
    c
}

#[test]
fn an_imported_claude_code_session_continues_on_every_provider_with_its_history() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for api in [Api::Chat, Api::Responses, Api::Anthropic] {
        for (capture_name, command, result) in [
            (
                "finished",
                "echo hi > out.txt",
                "(Bash completed with no output)",
            ),
            (
                "killed-in-tool",
                "touch /home/dev/capture/tool.started; sleep 120",
                lazarus_session::IN_DOUBT_NOTICE,
            ),
        ] {
            let server = rt
                .block_on(ScriptedServer::start(Script::new([Step::reply(
                    ScriptedResponse::text("Carrying on."),
                )
                .repeat()])))
                .unwrap();
            let dir = tempfile::tempdir().unwrap();
            let ws = tempfile::tempdir().unwrap();
            import(dir.path(), &capture(capture_name), "cc");
            ok(
                run(dir.path(), ws.path(), api, &server.base_url(), "m", &[]),
                "run",
            );
            let reqs = server.requests();
            assert_eq!(
                reqs.len(),
                1,
                "{api} {capture_name}: one request, then idle"
            );
            let c = carried(api, &reqs[0]);
            let what = format!("{api} {capture_name}: {c:#?}");
            assert_eq!(
                c.users.first().map(String::as_str),
                Some("please make the file"),
                "{what}"
            );
            assert_eq!(
                c.users.last().map(String::as_str),
                Some("carry on"),
                "{what}"
            );
            assert_eq!(c.calls.len(), 1, "{what}");
            let (id, name, args) = &c.calls[0];
            assert_eq!(name, "Bash", "{what}");
            assert_eq!(args["command"], command, "{what}");
            // the result is paired with its call by the same id, its text byte for byte
            assert_eq!(c.results, [(id.clone(), result.to_string())], "{what}");
            if capture_name == "finished" {
                assert_eq!(c.answers, ["Done: wrote out.txt."], "{what}");
            }
            // the source's tool is history, not offered
            assert!(!c.tools.iter().any(|t| t == "Bash"), "{what}");
            assert!(!c.tools.is_empty(), "{what}: today's tools are offered");
        }
    }
}

#[test]
#[ignore = "needs scripts/local-model/setup.sh (the real local model); scripts/test.sh runs it"]
fn an_imported_claude_code_session_continues_on_the_real_local_model() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(
        repo.join(".venv/bin/python").exists()
            && repo.join(".model/gemma-3-270m-q4_k_m.gguf").exists(),
        "run scripts/local-model/setup.sh first"
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new("bash")
        .arg(repo.join("scripts/local-model/serve.sh"))
        .arg(port.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
    let _server = Kill(pid);
    let url = format!("http://127.0.0.1:{port}/v1");
    let cheap = [
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--max-turns",
        "1",
    ];
    let prompt_tokens = |dir: &Path| -> u64 {
        let export = ok(
            Command::new(BIN)
                .args(["sessions", "export", "cc", "--session-dir"])
                .arg(dir)
                .output()
                .unwrap(),
            "export",
        );
        export
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "response")
            .filter_map(|r| r["data"]["usage"]["prompt_tokens"].as_u64())
            .next_back()
            .expect("the model's response, with its usage")
    };
    // the same prompt in a fresh session: the baseline
    let fresh = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let o = run(
        fresh.path(),
        ws.path(),
        Api::Chat,
        &url,
        "gemma-3-270m",
        &cheap,
    );
    assert!(
        matches!(o.status.code(), Some(0) | Some(4)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let base = prompt_tokens(fresh.path());
    // the imported session, continued
    let dir = tempfile::tempdir().unwrap();
    import(dir.path(), &capture("finished"), "cc");
    let o = run(
        dir.path(),
        ws.path(),
        Api::Chat,
        &url,
        "gemma-3-270m",
        &cheap,
    );
    assert!(
        matches!(o.status.code(), Some(0) | Some(4)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let continued = prompt_tokens(dir.path());
    // the history went with it: the user message, the call, its result and the answer
    assert!(
        continued > base + 20,
        "the continued request ({continued} prompt tokens) is not larger than the prompt alone ({base}) by the history"
    );
    let export = ok(
        Command::new(BIN)
            .args(["sessions", "export", "cc", "--session-dir"])
            .arg(dir.path())
            .output()
            .unwrap(),
        "export",
    );
    let kinds: Vec<String> = export
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds[1], "import");
    assert_eq!(
        kinds.iter().filter(|k| *k == "response").count(),
        3,
        "{kinds:?}"
    );
}
