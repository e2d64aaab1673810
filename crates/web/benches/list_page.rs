//! The sessions page over 10,000 sessions (`LAZARUS_BENCH_SESSIONS`), through the router as a
//! request: list the store (each file's first line and tail), sort newest activity first,
//! render page 1 of 100 rows; and the same with a search by id/title. The sessions are created
//! once under `<target>/bench-data/web-list-N/` (no fsync: this measures reading).
//!
//! `cargo bench -p lazarus-web --bench list_page`

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt;
use lazarus_ledger::Durability;
use lazarus_session::{CreateOptions, LocalStore, Store};
use lazarus_web::{Auth, Mode, WebConfig};
use tower::ServiceExt;

fn sessions(n: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/bench-data")
        .join(format!("web-list-{n}"));
    let done = dir.join(".complete");
    if done.exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let store = LocalStore::with_durability(&dir, Durability::None).expect("bench store");
    for i in 0..n {
        let mut s = store
            .create(CreateOptions {
                id: Some(format!("bench-{i:05}").parse().unwrap()),
                meta: Some(serde_json::json!({"workspace": format!("/srv/projects/p-{}", i % 50)})),
            })
            .expect("create");
        s.append_input("m1", "user", &format!("make the tests of module {i} pass"))
            .expect("input");
    }
    std::fs::write(&done, b"").unwrap();
    dir
}

fn list_page(c: &mut Criterion) {
    let n: usize = std::env::var("LAZARUS_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = sessions(n);
    let store = LocalStore::open(&dir).unwrap();
    let app = lazarus_web::router(WebConfig::new(Arc::new(store), Auth::None, Mode::ReadOnly));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let get = |path: &'static str| {
        let app = app.clone();
        rt.block_on(async move {
            let resp = app
                .oneshot(Request::get(path).body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            resp.into_body().collect().await.unwrap().to_bytes().len()
        })
    };
    let mut g = c.benchmark_group(format!("sessions_page_{n}"));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(15));
    g.bench_function("page_1", |b| b.iter(|| get("/")));
    g.bench_function("page_50", |b| b.iter(|| get("/?page=50")));
    g.bench_function("search_title", |b| b.iter(|| get("/?q=module+777")));
    g.finish();
}

criterion_group!(benches, list_page);
criterion_main!(benches);
