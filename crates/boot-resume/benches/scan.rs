//! Criterion benchmarks: the pure classifiers on every fixture, and a scan of generated
//! files through the tail reader (the end-to-end comparison with the seed's shell loop is
//! `bench/compare-shell.sh`).
use criterion::{Criterion, criterion_group, criterion_main};
use lazarus_boot_resume::discover::{self, Source, SourceFormat};
use lazarus_boot_resume::scan::{self, ScanOptions};
use lazarus_boot_resume::{Format, SessionMeta};
use std::hint::black_box;

fn fixtures() -> Vec<(Format, Vec<u8>)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let mut v = Vec::new();
    for (dir, f) in [
        ("openclaw", Format::Openclaw),
        ("pi", Format::Pi),
        ("claude-code", Format::ClaudeCode),
        ("codex", Format::Codex),
        ("lazarus", Format::Lazarus),
    ] {
        if let Ok(rd) = std::fs::read_dir(format!("{root}/{dir}")) {
            for e in rd.flatten() {
                if let Ok(b) = std::fs::read(e.path()) {
                    v.push((f, b));
                }
            }
        }
    }
    v
}

fn classify(c: &mut Criterion) {
    let fx = fixtures();
    c.bench_function("classify every fixture once", |b| {
        b.iter(|| {
            for (f, bytes) in &fx {
                let meta = SessionMeta {
                    at_start: true,
                    file_name: "s.jsonl",
                    ..Default::default()
                };
                black_box(f.classify(black_box(bytes), &meta));
            }
        })
    });
}

fn scan_files(c: &mut Criterion) {
    let fx = fixtures();
    let Ok(dir) = tempfile::tempdir() else { return };
    for i in 0..2000 {
        let (_, bytes) = &fx[i % fx.len()];
        let _ = std::fs::write(dir.path().join(format!("s{i}.jsonl")), bytes);
    }
    let (cands, _) = discover::candidates(
        &[Source {
            format: SourceFormat::Auto,
            path: dir.path().to_path_buf(),
        }],
        true,
    );
    let opts = ScanOptions {
        window: None,
        ..Default::default()
    };
    c.bench_function("scan 2000 small files (auto-detect)", |b| {
        b.iter(|| black_box(scan::scan(&cands, &opts, None)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = classify, scan_files
}
criterion_main!(benches);
