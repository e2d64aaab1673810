//! What the local store promises beyond the conformance suite: its directory is private, its
//! ledgers carry the durability and format it was opened with, unreadable files are listed
//! (not hidden), exports are counted exactly, and errors name the file.

use lazarus_ledger::Durability;
use lazarus_session::record::FORMAT;
use lazarus_session::store::{CreateOptions, Store};
use lazarus_session::{LocalStore, SessionId, Status};
use std::os::unix::fs::PermissionsExt;

fn id(s: &str) -> SessionId {
    SessionId::parse(s).expect("a valid id")
}

#[test]
fn the_session_directory_is_created_private() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("a/b/sessions");
    let store = LocalStore::open(&dir).expect("open");
    let mode = std::fs::metadata(&dir)
        .expect("created")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "session directory mode {mode:o}");
    assert_eq!(store.dir(), dir.as_path());
    assert_eq!(store.location(), dir.display().to_string());
}

#[test]
fn ledgers_carry_the_stores_durability_and_format() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::with_durability(tmp.path(), Durability::Grouped).expect("open");
    assert_eq!(store.ledger_options().durability, Durability::Grouped);
    assert_eq!(store.ledger_options().format.as_deref(), Some(FORMAT));
    let s = store
        .create(CreateOptions {
            id: Some(id("g1")),
            meta: None,
        })
        .expect("create");
    assert_eq!(s.location(), store.path_of(&id("g1")).display().to_string());
    drop(s);
    let bytes = std::fs::read(store.path_of(&id("g1"))).expect("ledger");
    let header: serde_json::Value =
        serde_json::from_slice(bytes.split(|&b| b == b'\n').next().unwrap_or_default())
            .expect("header line is JSON");
    assert_eq!(header["data"]["format"], FORMAT, "header {header}");
    assert!(
        header["data"]["unsynced_bytes_max"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "a grouped ledger names its crash window: {header}"
    );
}

#[test]
fn a_file_that_is_not_a_session_is_listed_as_corrupt_under_its_name() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("open");
    drop(
        store
            .create(CreateOptions {
                id: Some(id("good")),
                meta: None,
            })
            .expect("create"),
    );
    std::fs::write(tmp.path().join("broken.jsonl"), b"not a ledger\n").expect("write");
    let list = store.list().expect("list");
    let broken = list
        .iter()
        .find(|s| s.id.as_str() == "broken")
        .unwrap_or_else(|| panic!("the broken file is listed: {list:?}"));
    assert_eq!(broken.status, Status::Corrupt);
    assert!(broken.error.is_some(), "with why");
    assert!(list.iter().any(|s| s.id.as_str() == "good"));
}

#[test]
fn the_title_is_the_first_input_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("open");
    let mut s = store
        .create(CreateOptions {
            id: Some(id("t1")),
            meta: None,
        })
        .expect("create");
    s.append_input("m1", "user", "fix the flaky test")
        .expect("input");
    drop(s);
    let summary = store.summary(&id("t1")).expect("summary");
    assert_eq!(summary.title.as_deref(), Some("fix the flaky test"));
}

#[test]
fn an_export_reports_exactly_the_bytes_it_wrote() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("open");
    let mut s = store
        .create(CreateOptions {
            id: Some(id("e1")),
            meta: None,
        })
        .expect("create");
    for t in ["one", "two", "three"] {
        s.append_input(&format!("m-{t}"), "user", t).expect("input");
    }
    drop(s);
    let mut out = Vec::new();
    let n = store.export_to(&id("e1"), &mut out).expect("export");
    assert_eq!(n, out.len() as u64);
    assert_eq!(
        out,
        std::fs::read(store.path_of(&id("e1"))).expect("ledger")
    );
}

#[test]
fn a_title_is_the_first_non_empty_line_cut_at_its_limit() {
    use lazarus_session::store::{TITLE_CHARS_MAX, title_of};
    assert_eq!(title_of("\n  \n  fix it \nmore"), "fix it");
    assert_eq!(
        title_of("a\tb\u{1b}[31m"),
        "a b [31m",
        "control characters replaced"
    );
    let exact = "é".repeat(TITLE_CHARS_MAX);
    assert_eq!(title_of(&exact), exact, "exactly at the limit: kept whole");
    let long = "x".repeat(TITLE_CHARS_MAX + 1);
    let t = title_of(&long);
    assert_eq!(t.chars().count(), TITLE_CHARS_MAX);
    assert!(t.ends_with('…'), "{t}");
    assert_eq!(title_of(""), "");
}

#[test]
fn a_session_handle_names_its_id() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = LocalStore::open(tmp.path()).expect("open");
    let s = store
        .create(CreateOptions {
            id: Some(id("h1")),
            meta: None,
        })
        .expect("create");
    assert_eq!(s.id(), "h1");
}
