//! The web view in a real headless Chromium (Debian's `chromium` driven through
//! `chromedriver` with fantoccini), against the real `lazarus serve` and `lazarus ui`
//! binaries and a scripted model:
//!
//! - a session killed (SIGKILL of the gateway) inside a non-idempotent shell call is listed
//!   as cut off by `lazarus ui`, and its card says so;
//! - after a restart resumes it, its page shows the resume receipt and the in-doubt card with
//!   the notice the model received;
//! - a message sent from the page (a double click) is recorded once and appears live, once;
//! - the live page survives a gateway restart (Last-Event-ID): records appended after it are
//!   shown, none twice, none missing;
//! - a fork made from the page appears in the fork tree;
//! - a tool result holding `<script>alert(1)</script>` renders as text and runs nothing.
//!
//! Screenshots go to `target/web-screenshots/`. Chromium and chromedriver are found on
//! `PATH` (or `LAZARUS_CHROMIUM` / `LAZARUS_CHROMEDRIVER`); when they are missing the test
//! fails and says what to install.

mod serve_common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use lazarus_session::{LocalStore, SessionId, Store};
use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step, When};
use serde_json::{Value, json};
use serve_common::*;

fn sid(id: &str) -> SessionId {
    SessionId::parse(id).expect("a valid session id")
}

const XSS: &str = "<script>alert(1)</script>";

fn script() -> Script {
    Script::new([
        Step::reply(
            ScriptedResponse::tool_call(
                "c1",
                "shell",
                json!({"command": "echo ran >> side.txt; sleep 30"}),
            )
            .with_text("Running it."),
        )
        .when(When::LastUserContains {
            text: "use the tool".into(),
        })
        .repeat(),
        Step::after_tool_result(
            "c1",
            ScriptedResponse::text("The call was in doubt; I will not run it again."),
        )
        .repeat(),
        Step::reply(ScriptedResponse::tool_call(
            "x1",
            "shell",
            json!({"command": format!("printf '%s' '{XSS}'")}),
        ))
        .when(When::LastUserContains {
            text: "hostile output".into(),
        })
        .repeat(),
        Step::after_tool_result("x1", ScriptedResponse::text("Printed it.")).repeat(),
        Step::reply(ScriptedResponse::text("Hello from the model.")).repeat(),
    ])
}

fn find_program(env: &str, names: &[&str]) -> PathBuf {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "{} not found on PATH (set {env}): install Debian's `chromium` and `chromium-driver` packages \
         (apt-get install chromium chromium-driver); the web view's browser tests need them",
        names.join(" or ")
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// chromedriver on a free port; killed on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        let bin = find_program("LAZARUS_CHROMEDRIVER", &["chromedriver"]);
        let port = free_port();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let t0 = Instant::now();
        while get(&url, "/status", None).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, url }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver, profile: &Path) -> Client {
    let chromium = find_program("LAZARUS_CHROMIUM", &["chromium", "chromium-browser"]);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                "--window-size=1280,1000",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session through chromedriver")
}

/// Polls a JavaScript expression until it is true.
async fn wait_js(c: &Client, expr: &str, what: &str) {
    let t0 = Instant::now();
    loop {
        let v = c
            .execute(&format!("return !!({expr});"), vec![])
            .await
            .unwrap_or(Value::Bool(false));
        if v == Value::Bool(true) {
            return;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let body = c
                .execute(
                    "return document.body ? document.body.innerText : ''",
                    vec![],
                )
                .await
                .unwrap_or_default();
            panic!("waited 30 s for {what} ({expr}); the page says:\n{body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn js(c: &Client, expr: &str) -> Value {
    c.execute(&format!("return ({expr});"), vec![])
        .await
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// Types `text` into the element `css` selects.
async fn type_into(c: &Client, css: &str, text: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .send_keys(text)
        .await
        .unwrap();
}

/// Clicks the element `css` selects.
async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap();
}

/// On the token page: types the token once (kept in the tab's session storage) and waits for
/// the page it stood in for.
async fn sign_in(c: &Client, page: &str) {
    wait_js(
        c,
        "document.body.dataset.page === 'token'",
        "the token page",
    )
    .await;
    type_into(c, "#token-input", TOKEN).await;
    click(c, "#token-form button").await;
    wait_js(
        c,
        &format!("document.body.dataset.page === '{page}'"),
        "the page behind the token page",
    )
    .await;
}

fn shots_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("web-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(shots_dir().join(format!("{name}.png")), png).unwrap();
}

/// `lazarus ui` over `dir`, no auth, on a free loopback port; returns its URL.
fn start_ui(sessions: &Path, state: &Path) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["ui", "--no-auth", "--listen", "127.0.0.1:0"])
        .arg("--session-dir")
        .arg(sessions)
        .env("XDG_STATE_HOME", state.join("xdg"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn lazarus ui");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("lazarus ui: ")
        .unwrap_or_else(|| panic!("lazarus ui said {line:?}"))
        .trim_end_matches('/')
        .to_string();
    (child, url)
}

fn inputs_with_text(store: &LocalStore, id: &str, text: &str) -> usize {
    store
        .records(&sid(id), 0, usize::MAX)
        .unwrap()
        .iter()
        .filter(|r| r.kind == "input" && r.data["text"] == text)
        .count()
}

#[test]
fn the_web_view_in_a_real_browser() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(ScriptedServer::start(script())).unwrap();
    let dir = tempdir();
    let sessions = dir.path().join("sessions");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let serve = |d: &Path| {
        let mut c = serve_cmd(d, &server.base_url(), &[]);
        // a fixed port, so the open page reconnects to the restarted gateway
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .map(|a| {
                if a == "127.0.0.1:0" {
                    listen.clone()
                } else {
                    a
                }
            })
            .collect();
        let mut fixed = Command::new(BIN);
        fixed.args(args);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => fixed.env(k, v),
                None => fixed.env_remove(k),
            };
        }
        c = fixed;
        Gateway::start(&mut c)
    };

    // 1. a session killed inside a non-idempotent shell call
    let mut g = serve(dir.path());
    let url = g.url.clone();
    let (st, v) = call(&url, "POST", "/v1/sessions", Some(json!({"id": "crash"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        &url,
        "POST",
        "/v1/sessions/crash/messages",
        Some(json!({"message_id": "m-crash", "text": "please use the tool"})),
    );
    assert_eq!(st, 202, "{v}");
    let store = LocalStore::open(&sessions).unwrap();
    let t0 = Instant::now();
    while store
        .load(&sid("crash"))
        .unwrap()
        .calls
        .first()
        .is_none_or(|c| c.start.is_none())
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the shell call never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    g.kill9();

    let driver = Driver::start();
    let profile = tempdir();
    let c = rt.block_on(browser(&driver, profile.path()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(scenarios(&c, &url, &sessions, dir.path(), &store, &serve))
    }));
    let _ = rt.block_on(c.close());
    drop(driver);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

async fn scenarios(
    c: &Client,
    url: &str,
    sessions: &Path,
    state: &Path,
    store: &LocalStore,
    serve: &dyn Fn(&Path) -> Gateway,
) {
    // 2. `lazarus ui` (read-only, no auth) lists it as cut off; its card says so
    let (mut ui, ui_url) = start_ui(sessions, state);
    c.goto(&format!("{ui_url}/")).await.unwrap();
    wait_js(
        c,
        "document.querySelector('tr[data-id=crash]')",
        "the crashed session's row",
    )
    .await;
    let status = js(
        c,
        "document.querySelector('tr[data-id=crash]').dataset.status",
    )
    .await;
    assert!(
        status == "in_doubt" || status == "interrupted",
        "a session killed mid-tool is listed as {status}"
    );
    let header = js(c, "document.querySelector('header.top').innerText").await;
    assert!(
        header.as_str().unwrap().contains("no auth"),
        "the header says there is no auth: {header}"
    );
    shot(c, "ui-sessions-killed").await;
    c.goto(&format!("{ui_url}/sessions/crash")).await.unwrap();
    wait_js(
        c,
        "document.querySelector('.call.cut-off')",
        "the cut-off card",
    )
    .await;
    shot(c, "ui-session-killed").await;
    let _ = ui.kill();
    let _ = ui.wait();

    // 3. restart: the gateway resumes it; the page shows the receipt and the in-doubt card
    let mut g = serve(state);
    wait_session(url, "crash", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    c.goto(&format!("{url}/sessions/crash")).await.unwrap();
    // the token page: typed once, kept in this tab's session storage
    sign_in(c, "session").await;
    let current = c.current_url().await.unwrap();
    assert!(
        !current.as_str().contains(TOKEN),
        "the token is in the URL: {current}"
    );
    wait_js(
        c,
        "document.querySelector('li.entry.receipt')",
        "the resume receipt",
    )
    .await;
    let receipt = js(c, "document.querySelector('li.entry.receipt').innerText").await;
    let receipt = receipt.as_str().unwrap();
    assert!(receipt.contains("gateway-start"), "{receipt}");
    assert!(
        receipt.to_lowercase().contains("calls in doubt"),
        "{receipt}"
    );
    let doubt = js(
        c,
        "document.querySelector('.call.in-doubt .notice.doubt').innerText",
    )
    .await;
    assert!(doubt.as_str().unwrap().contains("In doubt"), "{doubt}");
    // the run ended without a new record after the page loaded: the head follows anyway
    wait_js(
        c,
        "document.querySelector('#session-head .status.st-idle')",
        "the head saying idle",
    )
    .await;
    shot(c, "session-receipt-in-doubt").await;

    // 4. a message sent from the page (double click) is recorded once and appears live once
    wait_js(
        c,
        "document.body.dataset.live === 'live'",
        "the live stream",
    )
    .await;
    c.find(Locator::Id("composer-text"))
        .await
        .unwrap()
        .send_keys("hello from the page")
        .await
        .unwrap();
    js(
        c,
        "(function(){var b=document.querySelector('#composer button[type=submit]'); b.click(); b.click(); return 1;})()",
    )
    .await;
    let entries_with = |text: &str| {
        format!(
            "Array.from(document.querySelectorAll('li.entry.input')).filter(function(li){{return li.innerText.indexOf('{text}')>=0;}}).length"
        )
    };
    wait_js(
        c,
        &format!("{} === 1", entries_with("hello from the page")),
        "the sent message",
    )
    .await;
    wait_js(
        c,
        "document.body.innerText.split('Hello from the model.').length >= 2",
        "the model's answer, live",
    )
    .await;
    assert_eq!(inputs_with_text(store, "crash", "hello from the page"), 1);
    assert_eq!(
        js(c, &entries_with("hello from the page")).await,
        json!(1),
        "shown once"
    );

    // 5. the gateway restarts under the open page: it reconnects (Last-Event-ID) and shows
    // what was appended meanwhile, nothing twice
    g.kill9();
    wait_js(
        c,
        "document.body.dataset.live === 'reconnecting'",
        "the page noticing",
    )
    .await;
    let g2 = serve(state);
    wait_js(
        c,
        "document.body.dataset.live === 'live'",
        "the page reconnected",
    )
    .await;
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/crash/messages",
        Some(json!({"message_id": "m-after-restart", "text": "sent after the restart"})),
    );
    assert_eq!(st, 202, "{v}");
    wait_js(
        c,
        &format!("{} === 1", entries_with("sent after the restart")),
        "the message sent after the restart",
    )
    .await;
    wait_session(url, "crash", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    let last = store
        .records(&sid("crash"), 0, usize::MAX)
        .unwrap()
        .last()
        .unwrap()
        .seq;
    wait_js(
        c,
        &format!("Number(document.getElementById('session').dataset.lastSeq) === {last}"),
        "every record shown",
    )
    .await;
    // every record on the page once: entry ids unique, and every input of the store shown
    let ids = js(
        c,
        "Array.from(document.querySelectorAll('#timeline > li')).map(function(li){return li.id;})",
    )
    .await;
    let ids: Vec<String> = serde_json::from_value(ids).unwrap();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "an entry shown twice: {ids:?}");
    for r in store.records(&sid("crash"), 0, usize::MAX).unwrap() {
        if r.kind == "input" || r.kind == "resume" {
            assert!(
                ids.contains(&format!("r{}", r.seq)),
                "record {} missing: {ids:?}",
                r.seq
            );
        }
    }
    // the same page loaded afresh shows the same entries
    c.refresh().await.unwrap();
    wait_js(
        c,
        "document.body.dataset.page === 'session'",
        "the reloaded page",
    )
    .await;
    let again = js(
        c,
        "Array.from(document.querySelectorAll('#timeline > li')).map(function(li){return li.id;})",
    )
    .await;
    let again: Vec<String> = serde_json::from_value(again).unwrap();
    assert_eq!(again, ids, "the live page and a fresh load differ");
    shot(c, "session-live").await;

    // 6. fork at turn 1 from the page: the child opens, and the tree shows both
    let fork = c
        .find(Locator::Css("form.fork-form[data-turn='1']"))
        .await
        .unwrap();
    js(
        c,
        "document.querySelector('form.fork-form[data-turn=\"1\"]').closest('details').open = true",
    )
    .await;
    fork.find(Locator::Css("input[name=id]"))
        .await
        .unwrap()
        .send_keys("crash-fork")
        .await
        .unwrap();
    fork.find(Locator::Css("button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        c,
        "location.pathname === '/sessions/crash-fork'",
        "the fork's page",
    )
    .await;
    c.goto(&format!("{url}/sessions/crash-fork/tree"))
        .await
        .unwrap();
    wait_js(
        c,
        "document.querySelector('#tree li.node[data-id=crash] li.node[data-id=crash-fork]')",
        "the fork in the tree",
    )
    .await;
    let tree = js(c, "document.getElementById('tree').innerText").await;
    assert!(
        tree.as_str().unwrap().contains("forked at turn 1"),
        "{tree}"
    );
    shot(c, "fork-tree").await;

    // 7. a tool result with <script>alert(1)</script> renders as text and runs nothing
    let (st, v) = call(url, "POST", "/v1/sessions", Some(json!({"id": "hostile"})));
    assert_eq!(st, 201, "{v}");
    let (st, v) = call(
        url,
        "POST",
        "/v1/sessions/hostile/messages",
        Some(json!({"message_id": "m-x", "text": format!("print hostile output {XSS}")})),
    );
    assert_eq!(st, 202, "{v}");
    wait_session(url, "hostile", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    let result = &store.load(&sid("hostile")).unwrap();
    assert!(
        result.tool_result_text("x1").contains(XSS),
        "the tool did not print the script: {:?}",
        result.tool_result_text("x1")
    );
    c.goto(&format!("{url}/sessions/hostile")).await.unwrap();
    wait_js(
        c,
        "document.body.dataset.page === 'session'",
        "the hostile session's page",
    )
    .await;
    wait_js(
        c,
        "document.querySelector('.call .result')",
        "the tool result",
    )
    .await;
    let text = js(c, "document.querySelector('.call .result').innerText").await;
    assert!(
        text.as_str().unwrap().contains(XSS),
        "shown as text: {text}"
    );
    assert!(
        c.get_alert_text().await.is_err(),
        "an alert is open: the script ran"
    );
    assert_eq!(
        js(c, "document.scripts.length").await,
        json!(1),
        "only the view's own script is on the page"
    );
    // the list page too (the title holds the script text)
    c.goto(&format!("{url}/")).await.unwrap();
    wait_js(
        c,
        "document.querySelector('tr[data-id=hostile]')",
        "the hostile row",
    )
    .await;
    assert!(
        c.get_alert_text().await.is_err(),
        "an alert is open: the script ran"
    );
    assert_eq!(js(c, "document.scripts.length").await, json!(1));
    shot(c, "sessions").await;
    drop(g2);
}

/// Approvals in the browser: a session waiting for a person shows its call with Allow and
/// Deny buttons (gateway, same token as the API); Allow clicked twice records one decision
/// (by `web`) and the call runs once, live on the page; Deny with a reason closes the call
/// without running it and says so. A request without the token (what another site's form
/// could send: no cookie carries it) is refused and changes nothing.
#[test]
fn approvals_in_a_real_browser() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::after_tool_result("a1", ScriptedResponse::text("Appended, once.")).repeat(),
            Step::reply(ScriptedResponse::tool_call(
                "a1",
                "shell",
                json!({"command": "echo ran >> effect"}),
            ))
            .when(When::LastUserContains {
                text: "append".into(),
            })
            .repeat(),
        ])))
        .unwrap();
    let dir = tempdir();
    let mut cmd = serve_cmd(
        dir.path(),
        &server.base_url(),
        &["--ask-for-approval", "untrusted"],
    );
    cmd.env("XDG_CONFIG_HOME", dir.path().join("config"));
    let g = Gateway::start(&mut cmd);
    for id in ["yes", "no"] {
        let (st, v) = call(&g.url, "POST", "/v1/sessions", Some(json!({"id": id})));
        assert_eq!(st, 201, "{v}");
        let (st, v) = call(
            &g.url,
            "POST",
            &format!("/v1/sessions/{id}/messages"),
            Some(json!({"message_id": "m1", "text": "append a line"})),
        );
        assert_eq!(st, 202, "{v}");
        wait_session(&g.url, id, Duration::from_secs(30), |v| {
            v["status"] == "awaiting_approval"
        });
    }
    // no token (a cross-site form cannot add the header): refused, nothing written
    let ledger = session_path(dir.path(), "no");
    let before = std::fs::read(&ledger).unwrap();
    let (st, _) = request(
        &g.url,
        "POST",
        "/v1/sessions/no/approvals/a1",
        None,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        Some(b"decision=allow"),
    )
    .unwrap();
    assert_eq!(st, 401);
    assert_eq!(std::fs::read(&ledger).unwrap(), before);

    let effect = |id: &str| {
        std::fs::read_to_string(dir.path().join("workspaces").join(id).join("effect"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let driver = Driver::start();
    let profile = tempdir();
    let c = rt.block_on(browser(&driver, profile.path()));
    let url = g.url.clone();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            c.goto(&format!("{url}/")).await.unwrap();
            sign_in(&c, "list").await;
            wait_js(
                &c,
                "document.querySelector('tr[data-id=yes]') && document.querySelector('tr[data-id=yes]').dataset.status === 'awaiting_approval'",
                "the list saying awaiting approval",
            )
            .await;
            shot(&c, "approvals-list").await;
            c.goto(&format!("{url}/sessions/yes")).await.unwrap();
            wait_js(&c, "document.querySelector('form.approval-form')", "the buttons").await;
            wait_js(&c, "document.body.dataset.live === 'live'", "the live stream").await;
            shot(&c, "approval-waiting").await;
            // Allow, clicked twice
            js(
                &c,
                "(function(){var b=document.querySelector('form.approval-form button[value=allow][data-scope=once]'); b.click(); b.click(); return 1;})()",
            )
            .await;
            wait_js(
                &c,
                "document.body.innerText.indexOf('Appended, once.') >= 0",
                "the call's run and the model's answer, live",
            )
            .await;
            wait_js(
                &c,
                "document.querySelector('.approval-step') && document.querySelector('.approval-step').innerText.indexOf('allowed by web') >= 0",
                "the card saying who allowed it",
            )
            .await;
            shot(&c, "approval-allowed").await;
            // Deny, with a reason
            c.goto(&format!("{url}/sessions/no")).await.unwrap();
            wait_js(&c, "document.querySelector('form.approval-form')", "the buttons").await;
            type_into(&c, "form.approval-form input[name=reason]", "not from the browser").await;
            click(&c, "form.approval-form button[value=deny]").await;
            wait_js(
                &c,
                "document.querySelector('.notice.denied') && document.querySelector('.notice.denied').innerText.indexOf('not from the browser') >= 0",
                "the card saying it was denied, and why",
            )
            .await;
            wait_js(
                &c,
                "document.querySelector('li.entry.receipt') && document.querySelector('li.entry.receipt').innerText.indexOf('denied by web') >= 0",
                "the receipt saying who decided",
            )
            .await;
            // a live update replaces entries, and only entries: no stray list items
            assert_eq!(
                js(&c, "document.querySelectorAll('#timeline > li:not(.entry)').length").await,
                json!(0),
                "stray items in the timeline"
            );
            shot(&c, "approval-denied").await;
        })
    }));
    let _ = rt.block_on(c.close());
    drop(driver);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    wait_session(&g.url, "yes", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    wait_session(&g.url, "no", Duration::from_secs(30), |v| {
        v["status"] == "idle"
    });
    assert_eq!(effect("yes"), 1, "allowed (twice clicked): ran once");
    assert_eq!(effect("no"), 0, "denied: never ran");
    let yes = std::fs::read_to_string(session_path(dir.path(), "yes")).unwrap();
    assert_eq!(yes.matches(r#""kind":"approval""#).count(), 1, "{yes}");
    assert!(yes.contains(r#""by":"web""#), "{yes}");
}
