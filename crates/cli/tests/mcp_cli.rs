//! MCP from the command line, as a new user meets it: `lazarus mcp list|check`, a
//! `.mcp.json` next to `lazarus run`, mistakes in the configuration, a server that does not
//! start (nothing written), progress on the terminal, `sandbox = true`, and the gateway
//! serving sessions with MCP tools. Real servers, installed by `scripts/mcp-servers/setup.sh`.

mod serve_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use lazarus_session::record::OutcomeStatus;
use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::mcp_servers;
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `.mcp.json` with the counter server (its effects in `counter`) and, if `bad`, a server that
/// exits at start.
fn mcp_json(dir: &Path, counter: &Path, bad: bool) -> PathBuf {
    let py = mcp_servers::python().display().to_string();
    let mut servers = json!({
        "counter": {
            "command": py,
            "args": [mcp_servers::script("counter_server.py"), "stdio"],
            "env": {"COUNTER_FILE": counter},
        }
    });
    if bad {
        servers["broken"] = json!({
            "command": py,
            "args": [mcp_servers::script("hostile_server.py"), "exit-at-start"],
        });
    }
    let path = dir.join(".mcp.json");
    std::fs::write(&path, json!({"mcpServers": servers}).to_string()).unwrap();
    path
}

/// `lazarus` with an empty configuration file (the tests never read the user's).
fn lazarus(config_dir: &Path) -> Command {
    let mut c = Command::new(BIN);
    let config = config_dir.join("config.toml");
    if !config.exists() {
        std::fs::write(&config, "").unwrap();
    }
    c.env("LAZARUS_CONFIG", config)
        .env("OPENAI_API_KEY", "test")
        .env_remove("LAZARUS_FAILPOINTS");
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn mcp_list_starts_every_server_and_says_what_each_offers() {
    let tmp = tempfile::tempdir().unwrap();
    let file = mcp_json(tmp.path(), &tmp.path().join("counter.txt"), true);
    let out = lazarus(tmp.path())
        .args(["mcp", "list", "--json", "--mcp-config"])
        .arg(&file)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let broken = lines.iter().find(|l| l["name"] == "broken").unwrap();
    assert_eq!(broken["started"], false);
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .contains("cannot find my configuration file"),
        "{broken}"
    );
    let counter = lines.iter().find(|l| l["name"] == "counter").unwrap();
    assert_eq!(counter["started"], true);
    assert_eq!(counter["trusted"], false);
    assert_eq!(counter["server_info"]["name"], "lazarus-counter");
    let tools = counter["tools"].as_array().unwrap();
    let set_flag = tools
        .iter()
        .find(|t| t["model_name"] == "mcp__counter__set_flag")
        .unwrap();
    assert_eq!(set_flag["annotations"]["idempotentHint"], true);
    // untrusted: its hints are shown, never acted on, and that is the reason given
    assert_eq!(set_flag["rerun_after_crash"], false);
    let why = set_flag["rerun_refused_why"].as_str().unwrap();
    assert!(
        why.contains("MCP server counter is not trusted: the tool says it is idempotent"),
        "{why}"
    );

    // check: exit 1 for a server that does not start, 2 for one not configured
    let out = lazarus(tmp.path())
        .args(["mcp", "check", "broken", "--mcp-config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("did not start"), "{}", text(&out));
    let out = lazarus(tmp.path())
        .args(["mcp", "check", "nope", "--mcp-config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("configured: broken, counter"),
        "{}",
        text(&out)
    );
    // a trusted server in config.toml: the idempotent tool would run again
    std::fs::write(
        tmp.path().join("config.toml"),
        format!(
            "[mcp_servers.tcounter]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\ntrusted = true\n",
            mcp_servers::python().display().to_string(),
            mcp_servers::script("counter_server.py")
                .display()
                .to_string()
        ),
    )
    .unwrap();
    let out = lazarus(tmp.path())
        .args(["mcp", "check", "tcounter"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    let line = t
        .lines()
        .find(|l| l.contains("mcp__tcounter__set_flag"))
        .unwrap();
    assert!(line.contains("runs again"), "{line}");
    let line = t
        .lines()
        .find(|l| l.contains("mcp__tcounter__bump"))
        .unwrap();
    assert!(line.contains("in doubt"), "{line}");
    // trusted, and the tool says it is neither: that is the reason
    assert!(line.contains("neither read-only nor idempotent"), "{line}");
}

#[test]
fn a_mistake_in_the_configuration_names_the_file_and_the_server_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    // `config` as config.toml, then `lazarus run` (with `extra`): a usage error, its words
    let refused = |config: &str, extra: &[&std::ffi::OsStr]| {
        std::fs::write(tmp.path().join("config.toml"), config).unwrap();
        let out = lazarus(tmp.path())
            .args(["run", "-p", "hi", "--session-dir"])
            .arg(&sessions)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        text(&out)
    };
    let t = refused("[mcp_servers.files]\ncomand = \"npx\"\n", &[]);
    assert!(
        t.contains("config.toml") && t.contains("comand") && t.contains("line"),
        "{t}"
    );
    let t = refused("[mcp_servers.files]\nurl = \"ftp://x\"\n", &[]);
    assert!(t.contains("\"files\"") && t.contains("http://"), "{t}");
    // a .mcp.json that is not JSON
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"mcpServers\": {").unwrap();
    let t = refused("", &["--mcp-config".as_ref(), bad.as_os_str()]);
    assert!(t.contains("bad.json"), "{t}");
    assert!(
        !sessions.exists() || std::fs::read_dir(&sessions).unwrap().next().is_none(),
        "a refused run wrote a session"
    );
}

#[test]
fn a_server_that_does_not_start_stops_the_run_before_anything_is_written() {
    let rt = rt();
    let model = rt
        .block_on(ScriptedServer::start(Script::in_order([
            ScriptedResponse::text("never asked").into(),
        ])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    let file = mcp_json(tmp.path(), &tmp.path().join("counter.txt"), true);
    let out = lazarus(tmp.path())
        .args(["run", "-p", "hi", "--session", "s", "--session-dir"])
        .arg(&sessions)
        .args(["--base-url", &model.base_url(), "--mcp-config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("\"broken\"") && t.contains("cannot find my configuration file"),
        "{t}"
    );
    assert!(t.contains("--no-mcp"), "{t}");
    let store = LocalStore::open(&sessions).unwrap();
    assert!(store.list().unwrap().is_empty(), "a session was written");
    assert_eq!(rt.block_on(async { model.request_count() }), 0);
}

/// A `.mcp.json` next to `lazarus run`: the model calls a tool, its progress shows, its
/// effect carries the idempotency key, and a native call made twice runs twice.
#[test]
fn a_run_with_the_mcp_json_next_to_it() {
    let rt = rt();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(
                ScriptedResponse::tool_call("p1", "mcp__counter__slow", json!({"steps": 3}))
                    .with_call("p2", "mcp__counter__bump", json!({}))
                    .with_call("p3", "mcp__counter__bump", json!({})),
            )
            .when(When::LastUserContains { text: "go".into() }),
            Step::after_tool_result("p3", ScriptedResponse::text("All done.")),
        ])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let counter = tmp.path().join("counter.txt");
    mcp_json(&ws, &counter, false);
    let out = lazarus(tmp.path())
        .args(["run", "-p", "go", "--session", "s", "--session-dir"])
        .arg(tmp.path().join("sessions"))
        .args(["--base-url", &model.base_url(), "--mcp-config", ".mcp.json"])
        .current_dir(&ws)
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("mcp: counter: lazarus-counter 1.2.3, 8 tools"),
        "{t}"
    );
    assert!(t.contains("… step 2 (2/3)"), "progress not shown: {t}");
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap(),
        "bump s/p2\nbump s/p3\n"
    );
    let st = LocalStore::open(&tmp.path().join("sessions"))
        .unwrap()
        .load(&SessionId::literal("s"))
        .unwrap();
    for id in ["p1", "p2", "p3"] {
        assert_eq!(
            st.call(id).unwrap().outcome.as_ref().unwrap().status,
            OutcomeStatus::Ok,
            "{id}"
        );
    }
}

/// A `.mcp.json` in the workspace that was not passed is not started, and the run says so
/// (with the flag that starts it); passed, or with `--no-mcp`, nothing is said.
#[test]
fn an_mcp_json_in_the_workspace_is_not_started_unless_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let counter = tmp.path().join("counter.txt");
    mcp_json(&ws, &counter, true);
    let run = |extra: &[&str]| {
        let out = lazarus(tmp.path())
            .args(["run", "--session-dir"])
            .arg(tmp.path().join("sessions"))
            .arg("--workspace")
            .arg(&ws)
            .args(extra)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        // no prompt: refused as "nothing to do" before any server starts
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        text(&out)
    };
    let t = run(&[]);
    assert!(
        t.contains(".mcp.json is not started; pass --mcp-config"),
        "{t}"
    );
    assert!(!counter.exists(), "a server of the unpassed file ran");
    assert!(!run(&["--no-mcp"]).contains("is not started"));
}

#[test]
fn a_sandboxed_server_writes_only_in_the_workspace() {
    let rt = rt();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "c1",
                "mcp__counter__bump",
                json!({}),
            ))
            .when(When::LastUserContains { text: "go".into() })
            .repeat(),
            Step::after_tool_result("c1", ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    for inside in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let counter = if inside { &ws } else { &outside }.join("counter.txt");
        std::fs::write(
            tmp.path().join("config.toml"),
            format!(
                "[mcp_servers.counter]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\nenv = {{ COUNTER_FILE = {:?} }}\nsandbox = true\n",
                mcp_servers::python().display().to_string(),
                mcp_servers::script("counter_server.py").display().to_string(),
                counter.display().to_string()
            ),
        )
        .unwrap();
        let out = lazarus(tmp.path())
            .args(["run", "-p", "go", "--session", "s", "--session-dir"])
            .arg(tmp.path().join("sessions"))
            .args(["--base-url", &model.base_url(), "--workspace"])
            .arg(&ws)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(text(&out).contains("sandboxed"), "{}", text(&out));
        let st = LocalStore::open(&tmp.path().join("sessions"))
            .unwrap()
            .load(&SessionId::literal("s"))
            .unwrap();
        let status = st.call("c1").unwrap().outcome.as_ref().unwrap().status;
        if inside {
            assert_eq!(status, OutcomeStatus::Ok, "{}", text(&out));
            assert_eq!(std::fs::read_to_string(&counter).unwrap(), "bump s/c1\n");
        } else {
            assert_eq!(status, OutcomeStatus::Error, "{}", text(&out));
            assert!(
                !counter.exists(),
                "the sandboxed server wrote outside the workspace"
            );
        }
    }
}

#[test]
fn the_gateway_serves_sessions_with_mcp_tools() {
    use serve_common::*;
    let rt = rt();
    let model = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "g1",
                "mcp__counter__set_flag",
                json!({}),
            ))
            .when(When::LastUserContains {
                text: "flag".into(),
            })
            .repeat(),
            Step::after_tool_result("g1", ScriptedResponse::text("flag is set")).repeat(),
        ])))
        .unwrap();
    let state = tempdir();
    let counter = state.path().join("counter.txt");
    let file = mcp_json(state.path(), &counter, false);
    let gw = Gateway::start(
        serve_cmd(state.path(), &model.base_url(), &["--mcp-config"])
            .arg(&file)
            .env("LAZARUS_CONFIG", state.path().join("none.toml")),
    );
    let url = &gw.url;
    for id in ["a", "b"] {
        let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": id})));
        assert_eq!(st, 201, "{v}");
        let (st, v) = call(
            url,
            "POST",
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"text": "set the flag"})),
        );
        assert!(st == 200 || st == 202, "{st} {v}");
    }
    for id in ["a", "b"] {
        wait_session(url, id, Duration::from_secs(60), |v| {
            v["status"] == "idle" && v["turns"] == 2
        });
    }
    let mut lines: Vec<String> = std::fs::read_to_string(&counter)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines, ["set_flag a/g1", "set_flag b/g1"]);
}
