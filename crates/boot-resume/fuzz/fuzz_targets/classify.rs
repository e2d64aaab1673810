//! `cargo +nightly fuzz run classify` (from crates/boot-resume): every classifier and the
//! format detector on arbitrary bytes, with every window flag combination.
#![no_main]
use lazarus_boot_resume::{Format, SessionMeta, classify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte picks the flags; the rest is the tail window (and, split at the first
    // newline, a header line).
    let (flags, body) = data.split_first().map_or((0, data), |(f, b)| (*f, b));
    let header = memchr_first_line(body);
    for f in Format::ALL {
        let meta = SessionMeta {
            header: if flags & 4 != 0 { header } else { None },
            at_start: flags & 1 != 0,
            at_cap: flags & 2 != 0,
            file_name: "rollout-2026-01-01T00-00-00-0199a3c2-7e10-7d3a-9b42-1e6c0d8f2a71.jsonl",
            subagent_path: flags & 8 != 0,
            index: None,
            has_subagents: flags & 16 != 0,
        };
        let c = f.classify(body, &meta);
        assert!(!(c.need_more && (meta.at_start || meta.at_cap)));
    }
    let _ = classify::detect(header, body, "fuzz");
});

fn memchr_first_line(b: &[u8]) -> Option<&[u8]> {
    b.iter().position(|&c| c == b'\n').map(|i| &b[..i])
}
