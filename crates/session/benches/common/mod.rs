//! Replay workloads shared by the criterion bench (`benches/replay.rs`) and the side-by-side
//! comparison (`examples/replay_compare.rs`): a realistic session ledger generated once and
//! cached, the Lazarus replay, and the plain serde_json baselines over the same file.
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lazarus_ledger::{Durability, Header, Options, Reader, Writer};
use lazarus_session::record::{Compaction, Control, OutcomeStatus};
use lazarus_session::record::{
    ForkPoint, Input, Interrupted, Item, ProcessRef, Record, Response, ResumeReceipt, ToolIntent,
    ToolOutcome, ToolStart, TurnStart, Usage,
};
use lazarus_session::{FORMAT, LocalStore, Store};
use serde::Deserialize;

/// `$LAZARUS_BENCH_DIR/replay`, else `<target>/bench-data/replay`.
pub fn bench_dir() -> PathBuf {
    let base = match std::env::var_os("LAZARUS_BENCH_DIR") {
        Some(d) => PathBuf::from(d),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
            .join("bench-data"),
    };
    let dir = base.join("replay");
    std::fs::create_dir_all(&dir).expect("create bench dir");
    dir
}

/// Size from `LAZARUS_BENCH_MB` (default 200).
pub fn size_mb_from_env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn session_id(mb: u64) -> String {
    format!("replay-{mb}mb")
}

/// The id of the same ledger with compactions (see [`ensure_ledger_with`]).
pub fn compacted_session_id(mb: u64) -> String {
    format!("replay-{mb}mb-compacted")
}

/// Deterministic pseudo-random numbers (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    /// Roughly log-uniform in [lo, hi]: many short, some long.
    fn log_range(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        (l + u * (h - l)).exp() as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "file",
    "function",
    "returns",
    "error",
    "config",
    "test",
    "build",
    "session",
    "ledger",
    "résumé",
    "value",
    "path",
    "src/main.rs",
    "cargo",
    "line",
    "struct",
    "impl",
    "async",
    "request",
    "response",
    "tool",
    "call",
    "shell",
    "output",
    "and",
    "of",
    "to",
    "in",
    "is",
    "for",
    "with",
    "a",
    "we",
    "need",
    "check",
    "first",
    "then",
    "日本語",
    "done",
];

/// Prose of about `n` bytes, with the occasional quote and newline (JSON escapes).
fn prose(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n + 16);
    while s.len() < n {
        s.push_str(WORDS[rng.range(0, WORDS.len() - 1)]);
        match rng.range(0, 30) {
            0 => s.push_str(".\n"),
            1 => s.push_str(", \""),
            2 => s.push_str("\" "),
            3 => s.push_str(". "),
            _ => s.push(' '),
        }
    }
    s
}

/// Tool output of about `n` bytes: lines of code or command output.
fn tool_output(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n + 80);
    let mut line = 1;
    while s.len() < n {
        match rng.range(0, 3) {
            0 => s.push_str(&format!(
                "{line:>4}\t    let {} = \"{}\"; // {}\n",
                WORDS[rng.range(0, 10)],
                WORDS[rng.range(0, WORDS.len() - 1)],
                prose(rng, 20)
            )),
            1 => s.push_str(&format!(
                "-rw-r--r-- 1 dana dana {:>6} Dec  2 10:{:02} {}.rs\n",
                rng.range(100, 99999),
                rng.range(0, 59),
                WORDS[rng.range(0, WORDS.len() - 1)]
            )),
            _ => s.push_str(&format!("{}\tC:\\\\path\\\\to\\\\{line}\n", prose(rng, 40))),
        }
        line += 1;
    }
    s
}

/// Generates (once; cached with a `.complete` marker) a session ledger of about `mb` MB of
/// realistic records: inputs, turn starts, responses with reasoning, text and tool calls,
/// intents, starts and outcomes with results of a few hundred bytes to a few KB.
pub fn ensure_ledger(mb: u64) -> (PathBuf, String) {
    ensure_ledger_with(mb, false)
}

/// [`ensure_ledger`], and with `compacted` a `compaction` record after every tenth finished
/// message (manual: no work owed), summarising everything before the last two turns, as a
/// long session in a small context window has.
pub fn ensure_ledger_with(mb: u64, compacted: bool) -> (PathBuf, String) {
    let dir = bench_dir();
    let id = if compacted {
        compacted_session_id(mb)
    } else {
        session_id(mb)
    };
    let path = dir.join(format!("{id}.jsonl"));
    let marker = dir.join(format!("{id}.complete"));
    if marker.exists() && path.exists() {
        return (dir, id);
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&marker);
    let target = mb * 1_000_000;
    let t = Instant::now();
    let opts = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let w = Writer::create(&dir, Header::new(FORMAT, &id), b"", opts).expect("create");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let put = |rec: Record| -> u64 {
        w.append_json(rec.kind(), &rec.data_json().expect("encode"))
            .expect("append")
            .seq
    };
    let (mut turn, mut prev_turn_seq, mut msg, mut call) = (0u64, None, 0u64, 0u64);
    let mut turn_start_seqs: Vec<u64> = Vec::new();
    let mut next_from = 1u64;
    while w.len() < target {
        msg += 1;
        let input_seq = put(Record::Input(Input {
            input_id: format!("msg-{msg}"),
            source: "user".into(),
            text: prose_log(&mut rng, 40, 600),
        }));
        if msg % 50 == 0 {
            put(Record::Control(Control {
                input_id: format!("ctl-{msg}"),
                action: "resume".into(),
                reason: Some("gateway-restart".into()),
            }));
        }
        let mut inputs = vec![input_seq];
        // A few tool rounds, then a final answer.
        let rounds = rng.range(1, 4);
        for round in 0..=rounds {
            turn += 1;
            let ts = put(Record::TurnStart(TurnStart {
                turn,
                prev_seq: prev_turn_seq,
                inputs: std::mem::take(&mut inputs),
            }));
            prev_turn_seq = Some(ts);
            turn_start_seqs.push(ts);
            let mut items = Vec::new();
            if rng.range(0, 2) == 0 {
                items.push(Item::Reasoning {
                    text: prose_log(&mut rng, 60, 1500),
                });
            }
            items.push(Item::Text {
                text: prose_log(&mut rng, 40, 2000),
            });
            let final_round = round == rounds;
            let mut calls = Vec::new();
            if !final_round {
                for _ in 0..rng.range(1, 3) {
                    call += 1;
                    let call_id = format!("call_{call:08x}");
                    let (name, arguments) = match rng.range(0, 2) {
                        0 => (
                            "shell",
                            format!(
                                r#"{{"command":"grep -rn \"{}\" src | head -50"}}"#,
                                WORDS[rng.range(0, 20)]
                            ),
                        ),
                        1 => (
                            "read_file",
                            format!(r#"{{"path":"src/{}.rs"}}"#, WORDS[rng.range(0, 20)]),
                        ),
                        _ => (
                            "edit_file",
                            format!(
                                r#"{{"path":"src/lib.rs","old":"{}","new":"{}"}}"#,
                                prose(&mut rng, 60),
                                prose(&mut rng, 80).replace('"', "'")
                            ),
                        ),
                    };
                    items.push(Item::ToolCall {
                        call_id: call_id.clone(),
                        name: name.into(),
                        arguments: arguments.clone(),
                    });
                    calls.push((call_id, name, arguments));
                }
            }
            let provider_extra = (rng.range(0, 3) == 0).then(|| {
                let mut m = serde_json::Map::new();
                m.insert(
                    "system_fingerprint".into(),
                    format!("fp_{:x}", rng.next()).into(),
                );
                m
            });
            put(Record::Response(Response {
                turn,
                items,
                usage: Some(Usage {
                    prompt_tokens: Some(rng.range(500, 60000) as u64),
                    completion_tokens: Some(rng.range(10, 2000) as u64),
                    total_tokens: Some(rng.range(600, 62000) as u64),
                    cached_tokens: None,
                }),
                stop_reason: Some(if final_round { "stop" } else { "tool_calls" }.into()),
                failure: None,
                model: Some("qwen2.5-coder-7b-instruct".into()),
                provider_extra,
                attempts: Vec::new(),
            }));
            for (call_id, name, arguments) in calls {
                let idempotent = name == "read_file";
                put(Record::ToolIntent(ToolIntent {
                    call_id: call_id.clone(),
                    turn,
                    tool: name.into(),
                    arguments,
                    idempotent,
                    idempotency_key: format!("{id}:{call_id}"),
                    rerun_basis: None,
                }));
                put(Record::ToolStart(ToolStart {
                    call_id: call_id.clone(),
                    process: (name == "shell").then(|| ProcessRef {
                        pgid: rng.range(1000, 60000) as i32,
                        start_time_ticks: rng.next() % 10_000_000,
                    }),
                }));
                put(Record::ToolOutcome(ToolOutcome {
                    call_id,
                    status: if rng.range(0, 9) == 0 {
                        OutcomeStatus::Error
                    } else {
                        OutcomeStatus::Ok
                    },
                    result: tool_log(&mut rng, 200, 6000),
                    exit_code: (name == "shell").then_some(0),
                    duration_ms: Some(rng.range(1, 5000) as u64),
                }));
            }
        }
        if compacted && msg % 10 == 0 && turn >= 2 {
            // keep the last two turns: cut before the previous turn's turn_start
            let through = turn_start_seqs[turn as usize - 2] - 1;
            if through >= next_from {
                put(Record::Compaction(Compaction {
                    trigger: "manual".into(),
                    from_seq: next_from,
                    through_seq: through,
                    summary: prose_log(&mut rng, 500, 3000),
                    tokens_before: rng.range(20000, 120000) as u64,
                    tokens_after: rng.range(2000, 8000) as u64,
                    model: Some("qwen2.5-coder-7b-instruct".into()),
                    usage: None,
                    attempts: Vec::new(),
                }));
                next_from = through + 1;
            }
        }
        if msg % 200 == 0 {
            put(Record::Interrupted(Interrupted {
                reason: "sigterm".into(),
                turn: None,
            }));
            put(Record::Resume(ResumeReceipt {
                trigger: "run".into(),
                records_replayed: w.next_seq() - 1,
                every_call_has_one_result: true,
                ..ResumeReceipt::default()
            }));
        }
    }
    let _ = ForkPoint {
        parent: String::new(),
        parent_seq: 0,
        at_turn: 0,
    };
    let len = w.len();
    drop(w);
    File::open(&path).and_then(|f| f.sync_all()).expect("sync");
    std::fs::write(&marker, b"").expect("marker");
    eprintln!(
        "generated {} ({:.0} MB, {turn} turns, {call} tool calls) in {:.1?}",
        path.display(),
        len as f64 / 1e6,
        t.elapsed()
    );
    (dir, id)
}

fn prose_log(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let n = rng.log_range(lo, hi);
    prose(rng, n)
}

fn tool_log(rng: &mut Rng, lo: usize, hi: usize) -> String {
    let n = rng.log_range(lo, hi);
    tool_output(rng, n)
}

/// (a) The Lazarus replay: CRC + framing + typed parse + meaning checks into the state.
pub fn lazarus_load(dir: &Path, id: &str) -> u64 {
    lazarus_load_state(dir, id).last_seq
}

/// [`lazarus_load`] returning the state, so a caller can time the replay without the drop.
pub fn lazarus_load_state(dir: &Path, id: &str) -> lazarus_session::SessionState {
    let store = LocalStore::open(dir).expect("store");
    store
        .load(&lazarus_session::SessionId::parse(id).expect("id"))
        .expect("load")
}

/// What a resume does: [`Store::open`] — the writer's recovery scan with the replay in the
/// same pass, the lock taken — then the writer closed.
pub fn lazarus_open(dir: &Path, id: &str) -> u64 {
    let store = LocalStore::open(dir).expect("store");
    let s = store
        .open(&lazarus_session::SessionId::parse(id).expect("id"))
        .expect("open");
    s.state().last_seq
}

/// The ledger reader alone (CRC + framing + typed parse, no state): splits the cost.
pub fn ledger_read_typed(path: &Path) -> u64 {
    let opts = Options {
        format: Some(FORMAT.into()),
        ..Options::default()
    };
    let mut r = Reader::open(path, &opts).expect("open");
    let mut n = 0;
    while let Some((_, env)) = r.next_record::<Record>().expect("record") {
        std::hint::black_box(&env.data);
        n += 1;
    }
    n
}

/// Line split + CRC-32C only (the framing floor).
pub fn crc_only(path: &Path) -> u64 {
    let mut r = BufReader::with_capacity(256 * 1024, File::open(path).expect("open"));
    let mut line = Vec::with_capacity(8192);
    let mut n = 0;
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).expect("read") == 0 {
            return n;
        }
        lazarus_ledger::frame::check_crc(&line[..line.len() - 1]).expect("crc");
        n += 1;
    }
}

/// The plain serde_json baseline's types: the same record structs as the ledger (so the data
/// is parsed into exactly the same typed values), selected by `kind` with serde's adjacently
/// tagged enum. The derive skips the envelope members it does not name (`seq`, `ts`, `crc`),
/// so this baseline does strictly less work than a replay: no CRC, no seq check, no ts.
#[derive(Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Rec {
    Header(serde::de::IgnoredAny),
    Input(Input),
    Control(Control),
    TurnStart(TurnStart),
    Response(Response),
    ToolIntent(ToolIntent),
    ToolStart(ToolStart),
    ToolOutcome(ToolOutcome),
    Fork(ForkPoint),
    Resume(ResumeReceipt),
    Interrupted(Interrupted),
    Compaction(Compaction),
}

/// The common idiom with the envelope typed too: `seq`, `ts` and `crc` read into a struct,
/// the record flattened in. (serde's `flatten` buffers, so this one is slower.)
#[derive(Deserialize)]
pub struct Line {
    pub seq: u64,
    pub ts: String,
    #[serde(flatten)]
    pub rec: Rec,
    pub crc: String,
}

/// (b) plain serde_json: BufReader, line by line, `from_slice` into [`Rec`]. No CRC, no
/// validation.
pub fn serde_typed(path: &Path) -> u64 {
    let mut r = BufReader::with_capacity(256 * 1024, File::open(path).expect("open"));
    let mut line = Vec::with_capacity(8192);
    let mut n = 0;
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).expect("read") == 0 {
            return n;
        }
        let rec: Rec = serde_json::from_slice(&line).expect("parse");
        std::hint::black_box(&rec);
        n += 1;
    }
}

/// (b') plain serde_json into [`Line`] (envelope typed, record flattened).
pub fn serde_typed_envelope(path: &Path) -> u64 {
    let mut r = BufReader::with_capacity(256 * 1024, File::open(path).expect("open"));
    let mut line = Vec::with_capacity(8192);
    let mut n = 0;
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).expect("read") == 0 {
            return n;
        }
        let l: Line = serde_json::from_slice(&line).expect("parse");
        std::hint::black_box(&l);
        n += 1;
    }
}

pub fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// Peak resident memory of this process so far (VmHWM), in bytes.
pub fn vm_hwm() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
