//! The gateway takes a session's workspace only from the operator's `--workspace-root`:
//! an imported session whose header says `"workspace":"/"` or `"."` works in
//! `<root>/<id>` (it can neither see `/` nor another session's workspace), and a requested
//! workspace through a symlink is refused without creating anything outside the root.

mod serve_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lazarus_session::{CreateOptions, LocalStore, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::json;
use serve_common::*;

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn script() -> Script {
    Script::new([
        Step::reply(
            ScriptedResponse::tool_call("c1", "list_dir", json!({"path": "."})).with_call(
                "c2",
                "write_file",
                json!({"path": "marker.txt", "content": "m"}),
            ),
        )
        .when(When::LastUserContains {
            text: "look".into(),
        })
        .repeat(),
        Step::after_tool_result("c2", ScriptedResponse::text("done")).repeat(),
    ])
}

/// A session file made elsewhere with `meta`, exported and imported into `sessions`.
fn import(sessions: &Path, id: &str, meta: serde_json::Value) {
    let elsewhere = tempdir();
    let other = LocalStore::open(elsewhere.path()).unwrap();
    drop(
        other
            .create(CreateOptions {
                id: Some(id.into()),
                meta: Some(meta),
            })
            .unwrap(),
    );
    let file = elsewhere.path().join("export.jsonl");
    assert!(
        Command::new(BIN)
            .args(["sessions", "export", id, "-o"])
            .arg(&file)
            .arg("--session-dir")
            .arg(elsewhere.path())
            .status()
            .unwrap()
            .success()
    );
    assert!(
        Command::new(BIN)
            .args(["sessions", "import"])
            .arg(&file)
            .arg("--session-dir")
            .arg(sessions)
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn imported_workspaces_never_leave_the_root() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(ScriptedServer::start(script())).unwrap();
    let state = tempdir();
    let sessions = state.path().join("sessions");
    let root = state.path().join("workspaces");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::create_dir_all(root.join("alpha")).unwrap();
    std::fs::write(root.join("alpha/alpha-secret.txt"), "alpha's file").unwrap();
    import(&sessions, "slash", json!({"workspace": "/"}));
    import(&sessions, "dot", json!({"workspace": "."}));
    import(
        &sessions,
        "rootitself",
        json!({"workspace": root.canonicalize().unwrap()}),
    );
    let gw = Gateway::start(&mut serve_cmd(state.path(), &model.base_url(), &[]));
    let root = root.canonicalize().unwrap();
    for id in ["slash", "dot", "rootitself"] {
        let (st, v) = call(
            &gw.url,
            "POST",
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"text": "look", "message_id": format!("m-{id}")})),
        );
        assert!(st == 200 || st == 202, "{id}: {st} {v}");
        wait_session(&gw.url, id, Duration::from_secs(30), |v| {
            v["status"] == "idle" && v["turns"].as_u64() >= Some(2)
        });
        let store = LocalStore::open(&sessions).unwrap();
        let st = store.load(id).unwrap();
        let listing = st.tool_result_text("c1").to_string();
        assert!(!listing.contains("etc/"), "{id} listed /: {listing}");
        assert!(
            !listing.contains("alpha"),
            "{id} listed the root: {listing}"
        );
        assert!(
            root.join(id).join("marker.txt").exists(),
            "{id} did not work in <root>/{id}"
        );
        assert!(!root.join("marker.txt").exists(), "{id} wrote in the root");
    }
    assert!(!Path::new("/marker.txt").exists(), "a session wrote in /");
    drop(gw);
}

#[test]
fn a_refused_workspace_creates_nothing_outside_the_root() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = rt.block_on(ScriptedServer::start(script())).unwrap();
    let state = tempdir();
    let outside = tempdir();
    let root = state.path().join("workspaces");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    let gw = Gateway::start(&mut serve_cmd(state.path(), &model.base_url(), &[]));
    for ws in ["link/a/b", ".", "./", "link"] {
        let (st, v) = call(
            &gw.url,
            "POST",
            "/v1/sessions",
            Some(json!({"workspace": ws})),
        );
        assert_eq!(
            (st, v["error"]["code"].as_str()),
            (400, Some("bad_workspace")),
            "{ws}: {v}"
        );
    }
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "directories were created outside the root"
    );
    // two sessions cannot ask for the same workspace
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions",
        Some(json!({"workspace": "team"})),
    );
    assert_eq!(st, 201, "{v}");
    // the new session's header records the shell sandbox of this gateway
    let id = v["id"].as_str().unwrap().to_string();
    let header = LocalStore::open(&state.path().join("sessions"))
        .unwrap()
        .load(&id)
        .unwrap()
        .header;
    let meta = header.meta.unwrap();
    assert_eq!(meta["sandbox"]["mode"], "workspace-write", "{meta}");
    let (st, v) = call(
        &gw.url,
        "POST",
        "/v1/sessions",
        Some(json!({"workspace": "team"})),
    );
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("workspace_in_use")),
        "{v}"
    );
}
