//! The pages of sessions the real frameworks wrote through the `lazarus` package
//! (`crates/session/tests/fixtures/host`, made by `scripts/python-fixtures.py`): a LangGraph
//! thread reads as its steps with their values decoded, an Agents SDK session as a
//! conversation with its call in doubt; a value outside the allowlist is labelled, as it is.

use std::path::PathBuf;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use lazarus_session::LocalStore;
use lazarus_web::{Auth, Mode, WebConfig};
use tower::ServiceExt;

const THREAD: &str = "h.user_42_weather.fa0736964c72c6c2605d483556f23d98";

fn store() -> (tempfile::TempDir, LocalStore) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../session/tests/fixtures/host");
    let d = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
    }
    let s = LocalStore::open(d.path()).unwrap();
    (d, s)
}

fn app(store: &LocalStore) -> Router {
    let mut cfg = WebConfig::new(
        std::sync::Arc::new(store.clone()),
        Auth::None,
        Mode::ReadOnly,
    );
    cfg.local = Some(store.clone());
    lazarus_web::router(cfg)
}

async fn get(app: &Router, path: &str) -> (StatusCode, String) {
    let resp = app
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_langgraph_thread_shows_its_steps_nodes_values_writes_and_interrupts() {
    let (_d, store) = store();
    let app = app(&store);
    let (st, html) = get(&app, &format!("/sessions/{THREAD}")).await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(
        html.contains("Thread <code>user:42/weather</code> now: 10 checkpoints"),
        "{html}"
    );
    // each step with the node that made it
    for node in ["agent", "search", "lookup", "approve", "send 000000000"] {
        assert!(
            html.contains(&format!("after <strong class=\"node\">{node}")),
            "{node}: {html}"
        );
    }
    // channel values as JSON: the messages' text, a date, a UUID
    for value in [
        "Is it sunny in Paris?",
        "Let me look that up.",
        "Sent (yes).",
        "&quot;2026-12-02&quot;",
        "01234567-89ab-cdef-0123-456789abcdef",
    ] {
        assert!(html.contains(value), "{value}: {html}");
    }
    // the interrupt, where the graph asked
    assert!(
        html.contains("Interrupted, waiting for an answer"),
        "{html}"
    );
    assert!(html.contains("Send the answer?"), "{html}");
    // pending writes, and the values outside the allowlist labelled, as they are
    assert!(html.contains("Writes of the next step"), "{html}");
    assert!(
        html.contains(
            "Not decoded (shown as stored): it constructs os.system, which is outside the allowlist"
        ),
        "{html}"
    );
    assert!(
        html.contains("touch /tmp/pwned"),
        "the stored value, shown: {html}"
    );
    assert!(html.contains("it constructs __main__.Reading"), "{html}");
    assert!(!html.contains("entry unreadable"), "{html}");
    assert!(!html.contains("\"b64\""), "a raw blob on the page: {html}");
}

#[tokio::test]
async fn an_agents_session_shows_a_conversation_and_its_call_in_doubt() {
    let (_d, store) = store();
    let app = app(&store);
    let (st, html) = get(&app, "/sessions/chat-paris").await;
    assert_eq!(st, StatusCode::OK, "{html}");
    assert!(html.contains("Conversation now: 5 items"), "{html}");
    for (class, text) in [
        ("chat-item user", "What is the weather in Paris?"),
        ("chat-item call", "get_weather"),
        ("chat-item output", "sunny, 21 C"),
        ("chat-item assistant", "It is sunny, 21 C."),
    ] {
        let at = html
            .find(class)
            .unwrap_or_else(|| panic!("{class}: {html}"));
        assert!(html[at..].contains(text), "{text}: {html}");
    }
    // the user's own markup, escaped
    assert!(
        html.contains("outside &lt;b&gt;tonight&lt;/b&gt;"),
        "{html}"
    );
    // the call its program announced and never finished: in doubt, in the card and the badge
    assert!(
        html.contains("host-in-doubt") && html.contains("book_table"),
        "{html}"
    );
    assert!(html.contains("1 in doubt"), "{html}");
}
