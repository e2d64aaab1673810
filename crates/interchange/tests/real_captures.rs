//! Every real capture (files Claude Code 2.1.332, Codex 0.171.0, pi 0.73.1, OpenClaw
//! 2026.9.6, Gemini CLI 0.61.0 and OpenCode 1.18.33 wrote; `scripts/capture-real/`) imported: in the source (counted here by a
//! separate, plain reading of its JSON) and in the imported session, the user messages, tool
//! calls and tool results match, and each call's result text is byte-equal.

use std::path::{Path, PathBuf};

use lazarus_boot_resume::Format;
use lazarus_boot_resume::formats::{self, ReadOptions};
use lazarus_ledger::Payload;
use lazarus_session::record::{OutcomeStatus, Record};
use lazarus_session::{LocalStore, SessionId, Store};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../boot-resume/tests/fixtures/real")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// What a source holds, counted without the readers.
#[derive(Debug, Default, PartialEq)]
struct Tally {
    users: usize,
    calls: Vec<String>,
    /// (call id, result text), in order.
    results: Vec<(String, String)>,
}

/// Text blocks joined by `\n`; a `tool_reference` block (ToolSearch's result) names its tool.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| match b.get("text").and_then(Value::as_str) {
                Some(t) => Some(t.to_string()),
                None if b["type"] == "tool_reference" => {
                    Some(format!("[tool reference: {}]", b["tool_name"].as_str()?))
                }
                None => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn tally_claude(p: &Path) -> Tally {
    let mut t = Tally::default();
    for v in lines(p) {
        let m = &v["message"]["content"];
        match v["type"].as_str() {
            Some("user")
                if v["isMeta"] != Value::Bool(true)
                    && v["isCompactSummary"] != Value::Bool(true) =>
            {
                if let Some(s) = m.as_str() {
                    if !s.starts_with("<command-name>") && !s.starts_with("<local-command-") {
                        t.users += 1;
                    }
                    continue;
                }
                let blocks = m.as_array().cloned().unwrap_or_default();
                if blocks.iter().any(|b| b["type"] == "text") {
                    t.users += 1;
                }
                for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                    t.results.push((
                        b["tool_use_id"].as_str().unwrap().into(),
                        text_of(&b["content"]),
                    ));
                }
            }
            Some("assistant") if v["isApiErrorMessage"] != Value::Bool(true) => {
                for b in m.as_array().into_iter().flatten() {
                    if b["type"] == "tool_use" {
                        t.calls.push(b["id"].as_str().unwrap().into());
                    }
                }
            }
            _ => {}
        }
    }
    t
}

fn tally_codex(p: &Path) -> Tally {
    let mut t = Tally::default();
    for v in lines(p) {
        if v["type"] != "response_item" {
            continue;
        }
        let pl = &v["payload"];
        match pl["type"].as_str().unwrap_or_default() {
            "message" if pl["role"] == "user" => {
                let text = text_of(&pl["content"]);
                if !text.starts_with('<') && !text.starts_with("# AGENTS.md") {
                    t.users += 1;
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                t.calls.push(pl["call_id"].as_str().unwrap().into())
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                t.results.push((
                    pl["call_id"].as_str().unwrap().into(),
                    text_of(&pl["output"]),
                ))
            }
            _ => {}
        }
    }
    t
}

fn tally_pi_entries(entries: impl IntoIterator<Item = Value>) -> Tally {
    let mut t = Tally::default();
    for v in entries {
        let m = &v["message"];
        match m["role"].as_str() {
            Some("user") => t.users += 1,
            Some("assistant") => {
                for b in m["content"].as_array().into_iter().flatten() {
                    if b["type"] == "toolCall" {
                        t.calls.push(b["id"].as_str().unwrap().into());
                    }
                }
            }
            Some("toolResult") => t.results.push((
                m["toolCallId"].as_str().unwrap().into(),
                text_of(&m["content"]),
            )),
            _ => {}
        }
    }
    t
}

fn tally_openclaw(db: &Path) -> Tally {
    // a plain read of the rows, not through the reader
    let c = rusqlite_rows(db);
    tally_pi_entries(c)
}

fn rusqlite_rows(db: &Path) -> Vec<Value> {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3,sys,json\n\
             c=sqlite3.connect('file:'+sys.argv[1]+'?mode=ro',uri=True)\n\
             for (e,) in c.execute('select event_json from transcript_events order by session_id, seq'): print(e)",
        )
        .arg(db)
        .output()
        .expect("python3 runs (it reads the OpenClaw rows independently of the reader)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Gemini CLI: a plain fold of the operations (`$set messages` replaces the list, a message
/// whose id was seen replaces it in place), then the counts.
fn tally_gemini(p: &Path) -> Tally {
    let mut msgs: Vec<Value> = Vec::new();
    for v in lines(p) {
        if let Some(list) = v.get("$set").and_then(|s| s.get("messages")) {
            msgs = list.as_array().cloned().unwrap_or_default();
        } else if v.get("type").is_some() {
            match msgs
                .iter_mut()
                .find(|m| m.get("id").is_some() && m["id"] == v["id"])
            {
                Some(m) => *m = v,
                None => msgs.push(v),
            }
        }
    }
    let mut t = Tally::default();
    let output = |r: &Value| r["response"]["output"].as_str().unwrap().to_string();
    for m in &msgs {
        let text = text_of(&m["content"]);
        let parts = m["content"].as_array().cloned().unwrap_or_default();
        match m["type"].as_str() {
            // results: with their call, or (in a resumed list) as responses, once per call
            Some("user") if m["content"].to_string().contains("functionResponse") => {
                for r in parts.iter().map(|p| &p["functionResponse"]) {
                    let id = r["id"].as_str().unwrap().to_string();
                    if !t.results.iter().any(|(c, _)| *c == id) {
                        t.results.push((id, output(r)));
                    }
                }
            }
            Some("user") if !text.starts_with("<session_context>") => t.users += 1,
            Some("gemini") => {
                for c in parts.iter().filter_map(|p| p.get("functionCall")) {
                    t.calls.push(c["id"].as_str().unwrap().to_string());
                }
                for c in m["toolCalls"].as_array().into_iter().flatten() {
                    let id = c["id"].as_str().unwrap().to_string();
                    t.calls.push(id.clone());
                    if let Some(r) = c["result"].as_array() {
                        t.results.push((id, output(&r[0]["functionResponse"])));
                    }
                }
            }
            _ => {}
        }
    }
    t
}

/// OpenCode: the rows read with Python's sqlite3 (not the reader): user messages with text,
/// tool parts as calls, completed / failed ones as results.
fn tally_opencode(db: &Path) -> Tally {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3,sys,json\n\
             c=sqlite3.connect('file:'+sys.argv[1]+'?mode=ro',uri=True)\n\
             for (i,d) in c.execute('select id, data from message order by time_created, id').fetchall():\n\
             \tparts=[json.loads(p) for (p,) in c.execute('select data from part where message_id=? order by id',(i,))]\n\
             \tprint(json.dumps({'info':json.loads(d),'parts':parts}))",
        )
        .arg(db)
        .output()
        .expect("python3 runs (it reads the OpenCode rows independently of the reader)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut t = Tally::default();
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        let m: Value = serde_json::from_str(l).unwrap();
        let parts = m["parts"].as_array().cloned().unwrap_or_default();
        if m["info"]["role"] == "user" {
            if parts.iter().any(|p| p["type"] == "text") {
                t.users += 1;
            }
            continue;
        }
        for p in parts.iter().filter(|p| p["type"] == "tool") {
            let id = p["callID"].as_str().unwrap().to_string();
            t.calls.push(id.clone());
            match p["state"]["status"].as_str() {
                Some("completed") => t
                    .results
                    .push((id, p["state"]["output"].as_str().unwrap().to_string())),
                Some("error") => t
                    .results
                    .push((id, p["state"]["error"].as_str().unwrap().to_string())),
                _ => {}
            }
        }
    }
    t
}

/// What the imported session holds, in the same terms.
fn imported(store: &LocalStore, id: &str) -> Tally {
    let id = SessionId::parse(id).unwrap();
    let mut t = Tally::default();
    let mut outcomes = Vec::new();
    for r in store.records(&id, 0, 100_000).unwrap() {
        match Record::deserialize_kind(&r.kind, r.data.clone()).unwrap() {
            Record::Input(i) => {
                assert_eq!(i.source, "import");
                t.users += 1
            }
            Record::Response(resp) => {
                t.calls
                    .extend(resp.tool_calls().map(|(id, _, _)| id.to_string()));
            }
            Record::ToolOutcome(o) if o.status != OutcomeStatus::InDoubt => {
                outcomes.push((o.call_id, o.result))
            }
            _ => {}
        }
    }
    t.results = outcomes;
    t
}

fn check(format: Format, source: &Path, label: &Path, expected: Tally) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let conv = formats::read(format, source, &ReadOptions::default()).unwrap();
    if expected == Tally::default() {
        // nothing to import (Gemini CLI rolled the only prompt back): refused, not an empty
        // session
        let e = lazarus_interchange::import(&store, &conv, None).unwrap_err();
        assert!(e.to_string().contains("nothing"), "{e}");
        return format!(
            "{:<11} {} (nothing to import: {e})",
            format.as_str(),
            label.display()
        );
    }
    let got = lazarus_interchange::import(&store, &conv, None).unwrap();
    let session = imported(&store, &got.id);
    assert_eq!(
        session,
        expected,
        "{}: source and imported session differ",
        source.display()
    );
    assert_eq!(got.counts.user_messages, expected.users);
    assert_eq!(got.counts.tool_calls, expected.calls.len());
    assert_eq!(got.counts.tool_results, expected.results.len());
    // importing the same source again is refused, naming the session
    let again = lazarus_interchange::import(&store, &conv, None).unwrap_err();
    assert!(again.to_string().contains(&got.id), "{again}");
    format!(
        "{:<11} {:<60} users {} calls {} results {} (in doubt {})",
        format.as_str(),
        label
            .strip_prefix(fixtures())
            .unwrap_or(label)
            .iter()
            .take(2)
            .map(|s| s.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        expected.users,
        expected.calls.len(),
        expected.results.len(),
        got.counts.in_doubt
    )
}

#[test]
fn every_real_capture_imports_with_matching_counts_and_byte_equal_results() {
    let mut all = Vec::new();
    files(&fixtures(), &mut all);
    all.sort();
    let mut report = Vec::new();
    let mut per_format = std::collections::BTreeMap::new();
    for p in &all {
        let s = p.to_string_lossy();
        // main transcripts and sub-agent ones alike
        let (format, expected) = if s.contains("/.claude/projects/") && s.ends_with(".jsonl") {
            (Format::ClaudeCode, tally_claude(p))
        } else if s.contains("/.codex/sessions/") {
            (Format::Codex, tally_codex(p))
        } else if s.contains("/.pi/agent/sessions/") {
            (Format::Pi, tally_pi_entries(lines(p)))
        } else if s.contains("/.gemini/tmp/") && s.ends_with(".jsonl") {
            (Format::GeminiCli, tally_gemini(p))
        } else if s.ends_with("opencode.db.zst") {
            let tmp = tempfile::tempdir().unwrap();
            let dir = p.parent().unwrap();
            for f in ["opencode.db", "opencode.db-wal"] {
                let z = dir.join(format!("{f}.zst"));
                let bytes = zstd::decode_all(std::fs::File::open(z).unwrap()).unwrap();
                std::fs::write(tmp.path().join(f), bytes).unwrap();
            }
            let db = tmp.path().join("opencode.db");
            let expected = tally_opencode(&db);
            report.push(check(Format::Opencode, &db, p, expected));
            *per_format.entry("opencode").or_insert(0) += 1;
            continue;
        } else if s.ends_with("openclaw-agent.sqlite") {
            // a copy: SQLite leaves a -shm file beside a WAL database it reads
            let tmp = tempfile::tempdir().unwrap();
            let dir = p.parent().unwrap();
            for f in ["openclaw-agent.sqlite", "openclaw-agent.sqlite-wal"] {
                if dir.join(f).exists() {
                    std::fs::copy(dir.join(f), tmp.path().join(f)).unwrap();
                }
            }
            let db = tmp.path().join("openclaw-agent.sqlite");
            let expected = tally_openclaw(&db);
            report.push(check(Format::Openclaw, &db, p, expected));
            *per_format.entry("openclaw").or_insert(0) += 1;
            continue;
        } else {
            continue;
        };
        report.push(check(format, p, p, expected));
        *per_format.entry(format.as_str()).or_insert(0) += 1;
    }
    println!("{}", report.join("\n"));
    for f in [
        "claude-code",
        "codex",
        "pi",
        "openclaw",
        "gemini-cli",
        "opencode",
    ] {
        assert!(
            per_format.get(f).copied().unwrap_or(0) >= 5,
            "too few {f} captures found under {}: {per_format:?}",
            fixtures().display()
        );
    }
}

/// The MCP captures: Codex's `namespace` is part of the imported call's name
/// (`mcp__side__bump`, not a bare `bump` a built-in tool could have), Claude Code's
/// ToolSearch result (a `tool_reference` block) becomes text naming the tool it loaded, and
/// the MCP call the kill cut off is closed in doubt under its full name.
#[test]
fn mcp_calls_keep_their_server_and_tool_search_results_name_their_tools() {
    let claude = fixtures().join(
        "claude/killed-in-mcp-tool/home/.claude/projects/-home-dev-capture-work/6205513d-8889-4e0d-85c9-406b28bf241e.jsonl",
    );
    let codex = fixtures().join(
        "codex/killed-in-mcp-tool/home/.codex/sessions/2026/12/07/rollout-2026-12-07T09-36-26-01a24fdc-9832-7342-a586-47f4ff22adf4.jsonl",
    );
    for (format, src) in [(Format::ClaudeCode, claude), (Format::Codex, codex)] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let conv = formats::read(format, &src, &ReadOptions::default()).unwrap();
        let got = lazarus_interchange::import(&store, &conv, None).unwrap();
        assert!(
            !got.dropped.iter().any(|d| d.what.contains("tool result")),
            "{:?}",
            got.dropped
        );
        let id = SessionId::parse(&got.id).unwrap();
        let mut names = std::collections::HashMap::new();
        let mut results = Vec::new();
        let mut in_doubt = Vec::new();
        for r in store.records(&id, 0, 100_000).unwrap() {
            match Record::deserialize_kind(&r.kind, r.data.clone()).unwrap() {
                Record::Response(resp) => {
                    for (cid, name, _) in resp.tool_calls() {
                        names.insert(cid.to_string(), name.to_string());
                    }
                }
                Record::ToolOutcome(o) if o.status == OutcomeStatus::InDoubt => {
                    in_doubt.push(names[&o.call_id].clone())
                }
                Record::ToolOutcome(o) => results.push((names[&o.call_id].clone(), o.result)),
                _ => {}
            }
        }
        assert_eq!(in_doubt, ["mcp__side__bump"], "{}", format.as_str());
        if format == Format::ClaudeCode {
            assert_eq!(
                results,
                [(
                    "ToolSearch".to_string(),
                    "[tool reference: mcp__side__bump]".to_string()
                )]
            );
        }
    }
}
