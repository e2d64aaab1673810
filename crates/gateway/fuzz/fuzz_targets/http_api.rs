//! Arbitrary requests (method, path and query, headers, body; with or without the token) to
//! the real router over a temporary session directory, in process: no panic, and every
//! answer keeps `harness::check` — a documented status, never 500, error objects,
//! `Retry-After` on 429/503. The byte format is described in `lazarus_gateway::harness`;
//! `seeds/` holds one request per route.
#![no_main]

use std::sync::LazyLock;

use lazarus_gateway::harness::{InProcess, request_from_bytes};
use libfuzzer_sys::fuzz_target;

struct Gateway {
    rt: tokio::runtime::Runtime,
    gw: InProcess,
}

static GATEWAY: LazyLock<Gateway> = LazyLock::new(|| {
    let dir = std::env::temp_dir().join(format!("lazarus-gateway-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let gw = rt.block_on(InProcess::start(&dir)).expect("the in-process gateway");
    Gateway { rt, gw }
});

fuzz_target!(|data: &[u8]| {
    let Some(req) = request_from_bytes(data) else {
        return;
    };
    let g = &*GATEWAY;
    if let Err(e) = g.rt.block_on(g.gw.send(req)) {
        panic!("{e}");
    }
});
