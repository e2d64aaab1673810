//! The fast decoder (simd-json, used by the parallel replay) against the reference
//! (serde_json, used everywhere else): on every input both give the same value, or both
//! refuse it with the same words. A ledger must never read differently by its size.

use std::path::{Path, PathBuf};

use lazarus_ledger::frame::{Envelope, FastDecoder, decode_envelope, simd_agrees};
use proptest::prelude::*;
use serde_json::Value;

/// `(seq, kind, data)` or the error's words, from the reference decoder.
fn reference(line: &[u8]) -> Result<(u64, String, Value), String> {
    decode_envelope::<Value>(line)
        .map(|e: Envelope<Value>| (e.seq, e.kind.to_string(), e.data))
        .map_err(|p| p.to_string())
}

fn fast(line: &[u8]) -> Result<(u64, String, Value), String> {
    let mut d = FastDecoder::default();
    d.decode::<Value>(line)
        .map(|e| (e.seq, e.kind.to_string(), e.data))
        .map_err(|p| p.to_string())
}

fn assert_same(line: &[u8]) {
    let (r, f) = (reference(line), fast(line));
    assert_eq!(
        r,
        f,
        "the decoders differ on {:?}",
        String::from_utf8_lossy(&line[..line.len().min(300)])
    );
}

/// An envelope around `data` as it stands (no checksum is checked here).
fn line_with(data: &str) -> Vec<u8> {
    format!(r#"{{"seq":7,"ts":"2026-12-06T10:00:00.000Z","kind":"note","data":{data},"crc":"00000000"}}"#)
        .into_bytes()
}

/// One decoder reused over many lines, as a worker does: a line must not see the last one's
/// buffers.
#[test]
fn a_reused_decoder_gives_each_line_its_own_value() {
    let mut d = FastDecoder::default();
    let lines = [
        line_with(r#"{"text":"a long string\nwith escapes \"and quotes\""}"#),
        line_with(r#"{"n":1}"#),
        line_with(r#"{"text":"é ü 漢字 😀"}"#),
    ];
    for line in &lines {
        let got = d
            .decode::<Value>(line)
            .map(|e| e.data)
            .map_err(|p| p.to_string());
        assert_eq!(got, reference(line).map(|(_, _, v)| v));
    }
}

/// Where the two parsers were read to differ, line by line: serde_json's answer wins. Each
/// case fails when its guard in `simd_agrees` is taken out.
#[test]
fn where_simd_json_differs_serde_json_decides() {
    // a lone high surrogate: simd-json reads U+0000, serde_json refuses
    for data in [
        r#"{"t":"\ud800"}"#,
        r#"{"t":"\ud800x"}"#,
        r#"{"t":"\uD83D"}"#,
        r#"{"t":"\udc00"}"#,
    ] {
        let line = line_with(data);
        assert!(!simd_agrees(&line), "{data}");
        assert!(reference(&line).is_err(), "serde_json refuses {data}");
        assert_same(&line);
    }
    // a valid pair goes to serde_json too (the guard looks for `\u` + `d`): the same value
    assert_same(&line_with(r#"{"t":"\ud83d\ude00"}"#));
    // nesting: serde_json stops at 128 levels
    for depth in [1usize, 50, 99, 100, 101, 126, 127, 128, 129, 200, 5000] {
        let data = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let line = line_with(&format!(r#"{{"a":{data}}}"#));
        assert_same(&line);
    }
    let deep = line_with(&format!(
        r#"{{"a":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    ));
    assert!(reference(&deep).unwrap_err().contains("recursion limit"));
}

/// Inputs each parser has its own code for.
#[test]
fn edge_inputs_read_alike() {
    let cases: &[&str] = &[
        // numbers
        r#"{"n":-0}"#,
        r#"{"n":-0.0}"#,
        r#"{"n":0.1}"#,
        r#"{"n":1e400}"#,
        r#"{"n":-1e400}"#,
        r#"{"n":1e-400}"#,
        r#"{"n":5e-324}"#,
        r#"{"n":2.2250738585072011e-308}"#,
        r#"{"n":1.7976931348623157e308}"#,
        r#"{"n":1.7976931348623159e308}"#,
        r#"{"n":18446744073709551615}"#,
        r#"{"n":18446744073709551616}"#,
        r#"{"n":-9223372036854775808}"#,
        r#"{"n":-9223372036854775809}"#,
        r#"{"n":123456789012345678901234567890}"#,
        r#"{"n":0.30000000000000004}"#,
        r#"{"n":9007199254740993}"#,
        r#"{"n":1E5}"#,
        r#"{"n":1e+5}"#,
        r#"{"n":01}"#,
        r#"{"n":1.}"#,
        r#"{"n":.5}"#,
        r#"{"n":+1}"#,
        r#"{"n":-}"#,
        r#"{"n":1e}"#,
        r#"{"n":NaN}"#,
        r#"{"n":Infinity}"#,
        // strings
        r#"{"t":"\u0000"}"#,
        r#"{"t":"\u001b[31m"}"#,
        r#"{"t":"\uzzzz"}"#,
        r#"{"t":"\u12"}"#,
        r#"{"t":"\x41"}"#,
        r#"{"t":"\/"}"#,
        r#"{"t":"\b\f\n\r\t\"\\"}"#,
        "{\"t\":\"raw\ttab\"}",
        "{\"t\":\"raw\u{1}byte\"}",
        "{\"t\":\"raw\u{7f}del\"}",
        r#"{"t":"unterminated}"#,
        // structure
        r#"{"a":1,"a":2}"#,
        r#"{"a":[1,2,]}"#,
        r#"{"a":{"b":1,}}"#,
        r#"{"a" : [ 1 , 2 ] }"#,
        "{\"a\":\t1}",
        "{\"a\":\r1}",
        "{\"a\":\u{c}1}",
        r#"{"a":true,"b":false,"c":null}"#,
        r#"{"a":tru}"#,
        r#"{"a":nul}"#,
        r#"{}"#,
        r#"[]"#,
        r#""a string""#,
        r#"12"#,
        r#"{"a":1}}"#,
        r#"{"a":1"#,
    ];
    for data in cases {
        assert_same(&line_with(data));
    }
    // the envelope itself
    for line in [
        &b"{\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"} x"[..],
        b"{\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"}{}",
        b" {\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"} ",
        b"\xef\xbb\xbf{\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"}",
        b"{\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{\"t\":\"\xff\"},\"crc\":\"0\"}",
        b"{\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{\"t\":\"\xed\xa0\x80\"},\"crc\":\"0\"}",
        b"{\"seq\":-1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"}",
        b"{\"seq\":1.0,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"}",
        b"{\"seq\":1,\"ts\":\"t\\n\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\"}",
        b"{\"seq\":1,\"ts\":\"t\",\"kind\":\"k\",\"data\":{},\"crc\":\"0\",\"x\":1}",
        b"{\"ts\":\"t\",\"seq\":1,\"kind\":\"k\",\"data\":{},\"crc\":\"0\"}",
        b"",
        b"{",
        b"null",
    ] {
        assert_same(line);
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[\\\\\"\u{0}-\u{1f}\u{7f}-\u{ff}a-z]{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec(("[a-z\"\\\\é]{0,6}", inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Anything serde_json writes reads back alike through both.
    #[test]
    fn written_values_read_alike(v in json_value()) {
        let data = serde_json::to_string(&serde_json::json!({ "v": v })).unwrap();
        let line = line_with(&data);
        prop_assert_eq!(reference(&line), fast(&line));
        prop_assert!(reference(&line).is_ok());
    }

    /// Damaged lines (a byte replaced, removed or inserted) are read alike: the same value,
    /// or the same refusal.
    #[test]
    fn damaged_lines_read_alike(
        v in json_value(),
        at in any::<prop::sample::Index>(),
        byte in prop_oneof![any::<u8>(), Just(b'\\'), Just(b'"'), Just(b'{'), Just(b'['), Just(b'u'), Just(b'd'), Just(b'e'), Just(b'0')],
        how in 0u8..3,
    ) {
        let data = serde_json::to_string(&serde_json::json!({ "v": v })).unwrap();
        let mut line = line_with(&data);
        let i = at.index(line.len());
        match how {
            0 => line[i] = byte,
            1 => { line.remove(i); }
            _ => line.insert(i, byte),
        }
        prop_assert_eq!(reference(&line), fast(&line));
    }

    /// Random text between the envelope's braces.
    #[test]
    fn arbitrary_data_reads_alike(data in "[ -~\u{80}-\u{10ffff}\t]{0,80}") {
        let line = line_with(&data);
        prop_assert_eq!(reference(&line), fast(&line));
    }
}

/// Lines other programs wrote (the real captures of Claude Code, Codex, pi, OpenClaw, Gemini
/// CLI, kept for boot-resume) and the fuzz seeds, as record data: read alike.
#[test]
fn real_captures_and_fuzz_seeds_read_alike() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect_jsonl(&root.join("../boot-resume/tests/fixtures"), &mut files);
    collect_jsonl(&root.join("fuzz/seeds"), &mut files);
    collect_jsonl(&root.join("../session/tests/golden"), &mut files);
    assert!(
        files.len() > 50,
        "the captures were not found ({} files)",
        files.len()
    );
    let mut lines = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        for raw in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            // the line itself (a ledger line, or another program's)...
            assert_same(raw);
            // ...and as a record's data
            let mut line = line_with("").into_iter().collect::<Vec<u8>>();
            let at = line.windows(8).position(|w| w == b",\"crc\":\"").unwrap();
            line.splice(at..at, raw.iter().copied());
            assert_same(&line);
            lines += 1;
        }
    }
    assert!(lines > 500, "only {lines} lines");
}

fn collect_jsonl(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_jsonl(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            out.push(p);
        }
    }
}

/// Every byte value, put in and put over every position of two lines (numbers of each
/// size, every literal, nesting): the same value or the same refusal. (This is what found
/// simd-json taking `1000000000000000000x` and a NUL between tokens.)
#[test]
fn every_byte_at_every_position_reads_alike() {
    for data in [
        r#"{"a":[1,12345,1000000000000000000,-5,true,false,null,"s",{"b":2},[3]]}"#,
        r#"{"a":[99999999999999999,100000000000000000,0000000000000000001,-100000000000000000,1e5,0.5,"
A"]}"#,
    ] {
        let base = line_with(data);
        for b in 0..=255u8 {
            for i in 0..=base.len() {
                let mut line = base.clone();
                line.insert(i, b);
                assert_same(&line);
                if i < base.len() {
                    let mut line = base.clone();
                    line[i] = b;
                    assert_same(&line);
                }
            }
        }
    }
}
