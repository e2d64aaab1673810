//! A listing of a big directory takes each unchanged session's line from the cache it keeps
//! (`.status-cache`), by a stat of the ledger, without opening it. It must list exactly what
//! reading every file lists, and see every change: an append, a file replaced by one of the
//! same size, a writer that holds the session, a title given, a writer killed mid-write.

use std::path::Path;

use lazarus_ledger::Durability;
use lazarus_session::record::*;
use lazarus_session::{CreateOptions, LocalStore, SessionId, SessionSummary, Status, Store};

const SESSIONS: usize = 80; // above the count from which a directory keeps a cache

fn id(k: usize) -> SessionId {
    SessionId::parse(&format!("s{k:03}")).unwrap()
}

fn fill(dir: &Path) -> LocalStore {
    let store = LocalStore::with_durability(dir, Durability::None).unwrap();
    for k in 0..SESSIONS {
        let mut s = store
            .create(CreateOptions {
                id: Some(id(k)),
                meta: Some(serde_json::json!({"workspace": format!("/w/{k}"), "n": k})),
            })
            .unwrap();
        s.append_input(&format!("m{k}"), "user", &format!("task {k}"))
            .unwrap();
        if k % 3 == 0 {
            s.append(Record::TurnStart(TurnStart {
                turn: 1,
                prev_seq: None,
                inputs: vec![1],
            }))
            .unwrap();
        }
    }
    store
}

/// What a listing shows, without the cache: every file read.
fn list_reading_every_file(store: &LocalStore) -> Vec<SessionSummary> {
    let _ = std::fs::remove_file(store.dir().join(".status-cache"));
    let list = store.list().unwrap();
    assert!(
        store.dir().join(".status-cache").exists(),
        "the directory kept no cache: this test tests nothing"
    );
    list
}

#[test]
fn the_cached_lines_are_the_lines_read_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = fill(dir.path());
    let read = list_reading_every_file(&store);
    assert_eq!(read.len(), SESSIONS);
    let cached = store.list().unwrap();
    assert_eq!(read, cached);
    // and again, from a fresh store (another process)
    let other = LocalStore::open(dir.path()).unwrap();
    assert_eq!(other.list().unwrap(), read);
}

#[test]
fn every_change_to_a_session_is_seen_by_the_next_listing() {
    let dir = tempfile::tempdir().unwrap();
    let store = fill(dir.path());
    let before = list_reading_every_file(&store);
    let line = |list: &[SessionSummary], k: usize| {
        list.iter()
            .find(|s| s.id == id(k))
            .unwrap_or_else(|| {
                panic!(
                    "{k} not in {:?}",
                    list.iter()
                        .map(|s| (s.id.to_string(), s.status))
                        .collect::<Vec<_>>()
                )
            })
            .clone()
    };

    // an append
    let mut s = store.open(&id(1)).unwrap();
    s.append_input("again", "user", "more").unwrap();
    drop(s);
    let after = store.list().unwrap();
    assert_eq!(line(&after, 1).records, line(&before, 1).records + 1);
    assert_eq!(after, list_reading_every_file(&store));

    // a writer holding the session: running, named
    let held = store.open(&id(2)).unwrap();
    let now = store.list().unwrap();
    assert_eq!(line(&now, 2).status, Status::Running);
    assert!(line(&now, 2).holder.is_some());
    drop(held);
    assert_ne!(line(&store.list().unwrap(), 2).status, Status::Running);

    // a title given
    store.rename(&id(4), Some("named by hand")).unwrap();
    assert_eq!(
        line(&store.list().unwrap(), 4).title.as_deref(),
        Some("named by hand")
    );

    // a ledger replaced by another of exactly the same size (another inode)
    let a = store.dir().join(format!("{}.jsonl", id(5)));
    let b = store.dir().join(format!("{}.jsonl", id(8)));
    let (len_a, len_b) = (
        std::fs::metadata(&a).unwrap().len(),
        std::fs::metadata(&b).unwrap().len(),
    );
    assert_eq!(len_a, len_b, "pick two sessions of one size");
    let copy = store.dir().join("copy.tmp");
    std::fs::copy(&b, &copy).unwrap();
    std::fs::rename(&copy, &a).unwrap();
    let listed = store.list().unwrap();
    // the file now holds session 8's header, and is listed by it: not the line kept for 5
    assert!(listed.iter().all(|s| s.id != id(5)), "a stale line for 5");
    assert_eq!(listed.iter().filter(|s| s.id == id(8)).count(), 2);
    assert_eq!(listed, list_reading_every_file(&store));
}

/// A writer killed in the middle of a line leaves a torn tail: the file changed, so the
/// listing reads it again and shows what the tail rule says, not the line it kept.
#[test]
fn a_torn_tail_after_a_listing_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = fill(dir.path());
    let before = list_reading_every_file(&store);
    let path = store.dir().join(format!("{}.jsonl", id(7)));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(
        &mut f,
        br#"{"seq":3,"ts":"2026-12-06T10:00:00.000Z","kind":"inp"#,
    )
    .unwrap();
    drop(f);
    let after = store.list().unwrap();
    let line = after.iter().find(|s| s.id == id(7)).unwrap();
    let was = before.iter().find(|s| s.id == id(7)).unwrap();
    assert_ne!(
        line.bytes, was.bytes,
        "the torn bytes are not counted: stale line"
    );
    assert_eq!(after, list_reading_every_file(&store));
}

/// A cache an older build wrote — the JSON rows of the layout before this one, every status
/// `idle`, under this very status rule — is never taken: every session is read and replayed
/// again, so the listing says what this build reads.
#[test]
fn a_cache_of_an_older_layout_is_never_taken() {
    let dir = tempfile::tempdir().unwrap();
    let store = fill(dir.path());
    let read = list_reading_every_file(&store);
    let cache = dir.path().join(".status-cache");
    let old: String = read
        .iter()
        .map(|s| {
            serde_json::json!([
                2,
                s.id,
                s.created_at,
                s.bytes,
                s.records,
                "idle",
                null,
                null
            ])
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&cache, old).unwrap();
    let listed = store.list().unwrap();
    assert_eq!(listed, read, "a row of the old layout was taken");
    assert!(listed.iter().any(|s| s.status != Status::Idle));
}

/// A cache file damaged anywhere (a byte changed, cut short, emptied) is ignored whole: the
/// listing is what reading every file gives, and the next listing writes a good one.
#[test]
fn a_damaged_cache_is_ignored_and_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = fill(dir.path());
    let read = list_reading_every_file(&store);
    let cache = dir.path().join(".status-cache");
    let good = std::fs::read(&cache).unwrap();
    let mut damaged = Vec::new();
    for at in [0, 9, 13, 17, 21, 30, 200, good.len() / 2, good.len() - 1] {
        let mut b = good.clone();
        b[at] ^= 0x04;
        damaged.push(b);
    }
    damaged.push(good[..good.len() / 3].to_vec());
    damaged.push(Vec::new());
    for (n, bytes) in damaged.iter().enumerate() {
        std::fs::write(&cache, bytes).unwrap();
        assert_eq!(store.list().unwrap(), read, "damage {n}");
        assert_eq!(
            std::fs::read(&cache).unwrap(),
            good,
            "damage {n}: not rewritten as it was"
        );
    }
}

/// A page of a listing (filters, order, offset, limit) holds exactly the rows of the whole
/// listing the same query selects, in its order, each the same in JSON — whether the rows
/// come from the cache (read in place) or from the files.
#[test]
fn a_page_is_the_same_rows_as_the_whole_listing() {
    use lazarus_session::{ListOrder, ListQuery};
    let dir = tempfile::tempdir().unwrap();
    let store = fill(dir.path());
    store.rename(&id(12), Some("Renamed Task")).unwrap();
    let json = |s: &SessionSummary| serde_json::to_string(s).unwrap();
    for from_cache in [false, true] {
        let all = if from_cache {
            store.list().unwrap()
        } else {
            list_reading_every_file(&store)
        };
        let queries = [
            ListQuery::default(),
            ListQuery {
                order: ListOrder::Activity,
                limit: Some(7),
                offset: 3,
                ..ListQuery::default()
            },
            ListQuery {
                statuses: vec![Status::Pending],
                order: ListOrder::Activity,
                ..ListQuery::default()
            },
            ListQuery {
                search: Some("renamed task".into()),
                ..ListQuery::default()
            },
            ListQuery {
                workspace: Some("/w/5".into()),
                ..ListQuery::default()
            },
            ListQuery {
                offset: 1000,
                ..ListQuery::default()
            },
        ];
        for q in queries {
            if from_cache {
                // the listing below reads the cache, not the files
                assert!(store.dir().join(".status-cache").exists());
            }
            let mut rows: Vec<String> = Vec::new();
            let counts = store
                .list_rows(&q, &mut |v| rows.push(serde_json::to_string(v).unwrap()))
                .unwrap();
            // the same through the owned rows
            let expect: Vec<String> = {
                let mut owned = Vec::new();
                let c = lazarus_session::store::list_rows_of(&all, &q, &mut |v| {
                    owned.push(v.to_summary().unwrap())
                });
                assert_eq!(c, counts, "{q:?}");
                owned.iter().map(json).collect()
            };
            assert_eq!(rows, expect, "{q:?}");
            assert_eq!(counts.total, SESSIONS);
        }
    }
    // what the filters select, by hand
    let mut n = 0;
    store
        .list_rows(
            &ListQuery {
                statuses: vec![Status::Pending],
                ..ListQuery::default()
            },
            &mut |v| {
                assert_eq!(v.status, Status::Pending);
                n += 1;
            },
        )
        .unwrap();
    assert!(n > 0 && n < SESSIONS, "{n}");
    let mut titles = Vec::new();
    store
        .list_rows(
            &ListQuery {
                search: Some("RENAMED".into()),
                ..ListQuery::default()
            },
            &mut |v| titles.push(v.title.as_deref().map(str::to_string)),
        )
        .unwrap();
    assert_eq!(titles, vec![Some("Renamed Task".to_string())]);
    // newest activity first
    let mut times = Vec::new();
    store
        .list_rows(
            &ListQuery {
                order: ListOrder::Activity,
                ..ListQuery::default()
            },
            &mut |v| times.push(v.updated_at.to_string()),
        )
        .unwrap();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
}
