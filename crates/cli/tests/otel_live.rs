//! Live telemetry against a real OTLP/HTTP receiver (`scripts/otel-receiver/`: the official
//! OpenTelemetry protobuf bindings from PyPI decode what arrives): `lazarus run` with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set sends a `chat` span per model request and an
//! `execute_tool` span per call, with the GenAI attributes, and they are the spans
//! `sessions export --format otel` writes for the same session, ids included. Without the
//! variable nothing is sent.
//!
//! Needs the receiver's Python (`bash scripts/otel-receiver/setup.sh`; scripts/test.sh and
//! .ci/run install it). With CI=1 a missing receiver fails the test; elsewhere it is skipped
//! with a note.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The receiver's python, or why there is none.
fn receiver_python() -> Result<PathBuf, String> {
    let venv = std::env::var_os("LAZARUS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv"));
    let py = venv.join("bin/python");
    let ok = Command::new(&py)
        .args([
            "-c",
            "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(py)
    } else {
        Err(format!(
            "no OTLP receiver: {} cannot import opentelemetry.proto; run `bash scripts/otel-receiver/setup.sh`",
            py.display()
        ))
    }
}

struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_receiver(py: &Path, dir: &Path) -> Receiver {
    let out = dir.join("spans.jsonl");
    let mut child = Command::new(py)
        .arg(repo().join("scripts/otel-receiver/receiver.py"))
        .arg(&out)
        .args(["--timeout", "120"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("receiver said {line:?}"));
    Receiver { child, port, out }
}

fn run(dir: &Path, ws: &Path, url: &str, endpoint: Option<&str>) -> Output {
    let mut c = Command::new(BIN);
    c.args([
        "run",
        "--session",
        "tel",
        "-p",
        "go",
        "--base-url",
        url,
        "--model",
        "m",
    ])
    .arg("--session-dir")
    .arg(dir)
    .arg("--workspace")
    .arg(ws)
    .env("OPENAI_API_KEY", "k")
    .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
    .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    if let Some(e) = endpoint {
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", e);
    }
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // bounded: a run that hangs fails the test instead of holding it
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "lazarus run did not end within 60 s:\n{}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn script() -> Script {
    Script::new([
        Step::reply(ScriptedResponse::tool_call(
            "call_ls",
            "list_dir",
            json!({"path": "."}),
        ))
        .when(When::LastUserContains { text: "go".into() }),
        Step::after_tool_result("call_ls", ScriptedResponse::text("It is empty.")),
    ])
}

/// `key` -> value (string, int as string, or list of strings) of a span's attributes.
fn attrs(span: &Value) -> std::collections::BTreeMap<String, Value> {
    span["attributes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            let v = &a["value"];
            let v = if let Some(s) = v.get("stringValue") {
                s.clone()
            } else if let Some(i) = v.get("intValue") {
                json!(
                    i.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| i.to_string())
                )
            } else if let Some(l) = v.get("arrayValue") {
                json!(
                    l["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|x| x["stringValue"].clone())
                        .collect::<Vec<_>>()
                )
            } else {
                v.clone()
            };
            (a["key"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[test]
fn run_sends_the_exported_spans_to_a_real_otlp_receiver() {
    let py = match receiver_python() {
        Ok(p) => p,
        Err(why) if std::env::var_os("CI").is_some() => panic!("CI=1: {why}"),
        Err(why) => {
            eprintln!("SKIPPED (not CI): {why}");
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let rx = start_receiver(&py, tmp.path());
    let rt = tokio::runtime::Runtime::new().unwrap();

    // off: no endpoint, nothing sent
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let (dir0, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = run(dir0.path(), ws.path(), &server.base_url(), None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!rx.out.exists(), "spans arrived with telemetry off");

    // on
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", rx.port);
    let o = run(dir.path(), ws.path(), &server.base_url(), Some(&endpoint));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&rx.out).expect("the receiver got spans");
    let mut got: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    got.sort_by_key(|s| s["spanId"].as_str().unwrap().to_string());
    assert_eq!(
        got.len(),
        3,
        "two chat spans and one execute_tool span: {got:#?}"
    );
    let names: Vec<&str> = got.iter().map(|s| s["name"].as_str().unwrap()).collect();
    // named after the model that answered (the scripted server says `scripted-model`)
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "chat scripted-model")
            .count(),
        2,
        "{names:?}"
    );
    assert!(names.contains(&"execute_tool list_dir"), "{names:?}");
    for s in &got {
        let a = attrs(s);
        assert_eq!(a["gen_ai.conversation.id"], "tel");
        assert_eq!(attrs(&s["resource"])["service.name"], "lazarus");
        match a["gen_ai.operation.name"].as_str().unwrap() {
            "chat" => {
                assert_eq!(s["kind"], "SPAN_KIND_CLIENT");
                assert!(a.contains_key("gen_ai.usage.input_tokens"), "{a:?}");
                assert!(a.contains_key("gen_ai.usage.output_tokens"), "{a:?}");
                assert_eq!(a["gen_ai.request.model"], "scripted-model");
                assert_eq!(a["gen_ai.response.model"], "scripted-model");
            }
            "execute_tool" => {
                assert_eq!(a["gen_ai.tool.call.id"], "call_ls");
                assert_eq!(a["gen_ai.tool.name"], "list_dir");
            }
            other => panic!("operation {other}"),
        }
    }

    // the same spans as the export of the session
    let o = Command::new(BIN)
        .args([
            "sessions",
            "export",
            "tel",
            "--format",
            "otel",
            "--session-dir",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let export: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut exported: Vec<Value> = export["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .clone();
    exported.sort_by_key(|s| s["spanId"].as_str().unwrap().to_string());
    assert_eq!(exported.len(), got.len());
    for (e, g) in exported.iter().zip(&got) {
        for k in [
            "traceId",
            "spanId",
            "name",
            "startTimeUnixNano",
            "endTimeUnixNano",
        ] {
            assert_eq!(e[k], g[k], "{k} differs:\nexported {e:#}\nreceived {g:#}");
        }
        assert_eq!(attrs(e), attrs(g), "attributes differ");
    }
}
