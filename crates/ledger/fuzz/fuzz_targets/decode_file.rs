//! Feeds arbitrary bytes to the recovery scan as a whole ledger file: it must never panic,
//! and whatever it accepts must verify cleanly after recovery.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use lazarus_ledger::fs::Fs;
use lazarus_ledger::sim::SimFs;
use lazarus_ledger::{Options, Writer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let fs = SimFs::new();
    let path = Path::new("/f/x.jsonl");
    if fs.write_new_durable(path, data).is_err() {
        return;
    }
    let opts = Options {
        fs: Arc::new(fs.clone()),
        lock: false,
        line_bytes_max: 4096,
        ..Options::default()
    };
    if let Ok((w, _)) = Writer::open_with::<serde_json::Value, _>(Path::new("/f"), "x", opts.clone(), |_, _| Ok(())) {
        drop(w);
        let (_, rec) = Writer::open(Path::new("/f"), "x", opts).expect("recovered file reopens");
        assert!(rec.cut.is_none(), "recovered file is clean");
    }
});
