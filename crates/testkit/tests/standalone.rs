//! The standalone binary: prints its address, serves the script, logs each request.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use lazarus_testkit::{Script, ScriptedResponse, Step, When};
use serde_json::{Value, json};

#[test]
fn standalone_server_serves_script_and_logs_requests() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let script = Script::new([
        Step::reply(ScriptedResponse::tool_call(
            "c1",
            "shell",
            json!({"command": "ls"}),
        )),
        Step::after_tool_result("c1", ScriptedResponse::text("done")).repeat(),
        Step::reply(ScriptedResponse::text("fallback"))
            .when(When::Always)
            .repeat(),
    ]);
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, serde_json::to_string(&script)?)?;
    let log = dir.path().join("requests.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_scripted-model-server"))
        .arg("--script")
        .arg(&script_path)
        .arg("--requests-log")
        .arg(&log)
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line)?;
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .expect("listening line")
        .to_string();
    let http = reqwest::blocking::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let r1: Value = http
        .post(&url)
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()?
        .json()?;
    assert_eq!(r1["choices"][0]["message"]["tool_calls"][0]["id"], "c1");
    let sse = http
        .post(format!("{base}/chat/completions"))
        .json(&json!({"model": "m", "stream": true, "messages": [
            {"role": "tool", "tool_call_id": "c1", "content": "x"}]}))
        .send()?;
    assert!(
        sse.headers()["content-type"]
            .to_str()?
            .starts_with("text/event-stream")
    );
    let text = sse.text()?;
    assert!(text.contains("\"content\":\"done\""), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"));
    let logged = std::fs::read_to_string(&log)?;
    assert_eq!(logged.lines().count(), 2);
    let second: Value = serde_json::from_str(logged.lines().nth(1).unwrap_or_default())?;
    assert_eq!(second["stream"], true);
    stop_server(&mut child);
    Ok(())
}

fn stop_server(child: &mut std::process::Child) {
    // SIGTERM via `kill` so the server shuts down cleanly.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

#[tokio::test]
async fn unmatched_requests_get_422_and_are_counted() -> anyhow::Result<()> {
    let server = lazarus_testkit::ScriptedServer::start(Script::new([Step::reply(
        ScriptedResponse::text("only once"),
    )]))
    .await?;
    let http = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.base_url());
    let body = json!({"model": "m", "messages": []});
    assert_eq!(http.post(&url).json(&body).send().await?.status(), 200);
    assert_eq!(http.post(&url).json(&body).send().await?.status(), 422);
    assert_eq!(http.post(&url).body("nope").send().await?.status(), 400);
    assert_eq!(server.request_count(), 2);
    assert_eq!(server.unmatched_count(), 1);
    assert_eq!(server.remaining_steps(), 0);
    server.shutdown().await;
    Ok(())
}
