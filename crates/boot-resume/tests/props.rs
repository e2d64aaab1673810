//! Property tests: no classifier panics on arbitrary bytes or on mutated fixtures, and
//! cutting a fixture anywhere never yields a verdict from a torn line.
use lazarus_boot_resume::{Format, SessionMeta};
use proptest::prelude::*;

fn fixtures() -> Vec<(Format, Vec<u8>)> {
    static ONCE: std::sync::OnceLock<Vec<(Format, Vec<u8>)>> = std::sync::OnceLock::new();
    ONCE.get_or_init(load_fixtures).clone()
}

fn load_fixtures() -> Vec<(Format, Vec<u8>)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let mut v = Vec::new();
    for (dir, f) in [
        ("openclaw", Format::Openclaw),
        ("pi", Format::Pi),
        ("claude-code", Format::ClaudeCode),
        ("codex", Format::Codex),
        ("lazarus", Format::Lazarus),
    ] {
        let mut names: Vec<_> = std::fs::read_dir(format!("{root}/{dir}"))
            .expect("dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        names.sort();
        for p in names {
            v.push((f, std::fs::read(p).expect("read")));
        }
    }
    // Gemini CLI and OpenCode: the real captures (OpenCode's as the export its classifier
    // reads).
    let real = format!("{root}/real");
    let mut chats = Vec::new();
    lazarus_boot_resume::discover::walk_gemini(
        std::path::Path::new(&format!("{real}/gemini-cli")),
        &mut chats,
    );
    for p in chats {
        v.push((Format::GeminiCli, std::fs::read(p).expect("read")));
    }
    for scenario in [
        "finished",
        "killed-in-tool",
        "killed-waiting-after-tool",
        "api-error-context-overflow",
    ] {
        let dir = format!("{real}/opencode/{scenario}/home/.local/share/opencode");
        let tmp = tempfile::tempdir().expect("tempdir");
        for f in ["opencode.db", "opencode.db-wal"] {
            let z = std::fs::File::open(format!("{dir}/{f}.zst")).expect("open");
            std::fs::write(tmp.path().join(f), zstd::decode_all(z).expect("zstd")).expect("write");
        }
        let db = tmp.path().join("opencode.db");
        let budget = lazarus_boot_resume::sqlite::WaitBudget::per_database();
        for s in lazarus_boot_resume::formats::opencode::sessions(&db, &budget).expect("sessions") {
            let (bytes, _) =
                lazarus_boot_resume::formats::opencode::export_tail(&db, &s, 1000, &budget)
                    .expect("export");
            v.push((Format::Opencode, bytes));
        }
    }
    v
}

fn classify_all(bytes: &[u8], at_start: bool, at_cap: bool) {
    for f in Format::ALL {
        let meta = SessionMeta {
            at_start,
            at_cap,
            file_name: "x_0199a3c2-7e10-7d3a-9b42-1e6c0d8f2a71.jsonl",
            ..Default::default()
        };
        let c = f.classify(bytes, &meta);
        // need_more only when the window may still grow.
        assert!(
            !(c.need_more && (at_start || at_cap)),
            "{f:?} asked for more with a full window"
        );
        let _ = lazarus_boot_resume::classify::detect(None, bytes, "p");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), at_start: bool, at_cap: bool) {
        classify_all(&bytes, at_start, at_cap);
    }

    #[test]
    fn json_ish_lines_never_panic(lines in proptest::collection::vec(
        prop_oneof![
            Just(r#"{"type":"message","id":"a","parentId":"a","message":{"role":"assistant","content":[{"type":"toolCall","id":"x"}]}}"#.to_string()),
            Just(r#"{"type":"leaf","id":"b","parentId":"b","targetId":"b"}"#.to_string()),
            Just(r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t"}]}}"#.to_string()),
            Just(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t"}]}}"#.to_string()),
            Just(r#"{"type":"event_msg","payload":{"type":"task_started"}}"#.to_string()),
            Just(r#"{"type":"response_item","payload":{"type":"function_call","call_id":"c"}}"#.to_string()),
            Just(r#"{"seq":1,"kind":"response","data":{"items":[{"type":"tool_call","call_id":"c"}]}}"#.to_string()),
            Just(r#"{"seq":2,"kind":"tool_outcome","data":{"call_id":"c"}}"#.to_string()),
            Just(r#"{"seq":0,"kind":"header","data":{"format":"lazarus.session"}}"#.to_string()),
            Just(r#"{"sessionId":"s","projectHash":"h","kind":"main"}"#.to_string()),
            Just(r#"{"$set":{"messages":[{"id":"c","type":"user","content":[{"text":"<session_context>"}]}]}}"#.to_string()),
            Just(r#"{"$rewindTo":"g"}"#.to_string()),
            Just(r#"{"id":"g","type":"gemini","content":"","toolCalls":[{"id":"t","name":"x","status":"success","result":[]}]}"#.to_string()),
            Just(r#"{"type":"session","id":"ses_1","version":"1.18.33"}"#.to_string()),
            Just(r#"{"type":"message","id":"m","info":{"role":"assistant","finish":"tool-calls","time":{"completed":1}},"parts":[{"type":"tool","state":{"status":"running"}}]}"#.to_string()),
            "[ -~]{0,40}",
        ],
        0..30), at_start: bool) {
        let bytes = lines.join("\n").into_bytes();
        classify_all(&bytes, at_start, false);
    }

    #[test]
    fn mutated_fixtures_never_panic(idx in 0usize..1000, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8), cut in any::<usize>()) {
        let fx = fixtures();
        let (_, mut bytes) = fx[idx % fx.len()].clone();
        for (pos, b) in flips {
            if !bytes.is_empty() {
                let n = bytes.len();
                bytes[pos % n] = b;
            }
        }
        let cut = cut % (bytes.len() + 1);
        classify_all(&bytes[..cut], true, false);
        classify_all(&bytes[cut..], false, false);
        classify_all(&bytes[cut..], false, true);
    }

    /// Cutting a fixture mid-line marks it torn; the verdict equals the one of the file
    /// truncated to its last complete line.
    #[test]
    fn cut_mid_line_is_torn_and_ignores_the_fragment(idx in 0usize..1000, cut in any::<usize>()) {
        let fx = fixtures();
        let (f, bytes) = &fx[idx % fx.len()];
        let cut = cut % (bytes.len() + 1);
        let head = &bytes[..cut];
        let meta = SessionMeta { at_start: true, file_name: "s.jsonl", ..Default::default() };
        let whole_lines = match memchr::memrchr(b'\n', head) { Some(i) => &head[..=i], None => &head[..0] };
        let a = f.classify(head, &meta);
        let b = f.classify(whole_lines, &meta);
        prop_assert_eq!(a.verdict, b.verdict, "{:?} cut at {}", f, cut);
        if cut > whole_lines.len() && !head[whole_lines.len()..].iter().all(|c| c.is_ascii_whitespace()) {
            prop_assert!(a.torn);
        }
    }
}
