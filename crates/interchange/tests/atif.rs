//! `sessions export --format atif` of imported real captures validates against the ATIF
//! schema of the Harbor project (vendored in `tests/atif/`, with its licence), and keeps the
//! rules of Harbor's models that a JSON Schema cannot say.

use std::path::PathBuf;

use lazarus_boot_resume::Format;
use lazarus_boot_resume::formats::{self, ReadOptions};
use lazarus_session::{LocalStore, SessionId};
use serde_json::Value;

fn schema() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/atif/atif.schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn capture(rel: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../boot-resume/tests/fixtures/real")
        .join(rel);
    let mut found = Vec::new();
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("subagents") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                found.push(p);
            }
        }
    }
    assert_eq!(found.len(), 1, "one transcript under {rel}: {found:?}");
    found.remove(0)
}

/// The rules of Harbor's pydantic validators that the schema does not hold.
fn model_rules(t: &Value) -> Result<(), String> {
    let steps = t["steps"].as_array().ok_or("no steps")?;
    for (i, s) in steps.iter().enumerate() {
        if s["step_id"] != i + 1 {
            return Err(format!("step {i} has step_id {}", s["step_id"]));
        }
        if s["source"] != "agent" {
            for f in ["model_name", "reasoning_content", "tool_calls", "metrics"] {
                if s.get(f).is_some() {
                    return Err(format!("{f} on a {} step", s["source"]));
                }
            }
        }
        let calls: Vec<&Value> = s["tool_calls"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["tool_call_id"]).collect())
            .unwrap_or_default();
        for r in s["observation"]["results"].as_array().into_iter().flatten() {
            if !calls.contains(&&r["source_call_id"]) {
                return Err(format!(
                    "observation for {} not called in its step",
                    r["source_call_id"]
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn atif_exports_of_real_captures_validate_against_the_harbor_schema() {
    let validator = jsonschema::validator_for(&schema()).expect("the vendored schema compiles");
    let cases = [
        (Format::ClaudeCode, capture("claude/finished")),
        (
            Format::ClaudeCode,
            capture("claude/resumed-by-print-killed-in-tool"),
        ),
        (Format::Codex, capture("codex/finished")),
        (Format::Codex, capture("codex/killed-in-tool")),
        (Format::Pi, capture("pi/finished")),
    ];
    for (format, source) in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let conv = formats::read(format, &source, &ReadOptions::default()).unwrap();
        let got = lazarus_interchange::import(&store, &conv, None).unwrap();
        let t = lazarus_interchange::atif::trajectory(&store, &SessionId::parse(&got.id).unwrap())
            .unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&t)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{}: {errors:#?}\n{t:#}",
            source.display()
        );
        model_rules(&t).unwrap_or_else(|e| panic!("{}: {e}\n{t:#}", source.display()));
        // the tool calls and their observations are there, results byte for byte
        let steps = t["steps"].as_array().unwrap();
        let calls: usize = steps
            .iter()
            .map(|s| s["tool_calls"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(calls, got.counts.tool_calls, "{t:#}");
        let observed: usize = steps
            .iter()
            .map(|s| s["observation"]["results"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(
            observed,
            got.counts.tool_results + got.counts.in_doubt,
            "{t:#}"
        );
        assert_eq!(t["session_id"], got.id.as_str());
    }
}

#[test]
fn the_validator_refuses_what_is_not_atif() {
    // a control: the schema is in force (a wrong step source and a missing agent fail)
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let bad = serde_json::json!({"schema_version": "ATIF-v1.6", "steps": [
        {"step_id": 1, "source": "robot", "message": "hi"}]});
    assert!(validator.iter_errors(&bad).count() >= 2);
    let also_bad = serde_json::json!({"schema_version": "ATIF-v1.6",
        "agent": {"name": "x", "version": "1"},
        "steps": [{"step_id": 1, "source": "user", "message": "hi", "tool_calls": []}]});
    assert!(model_rules(&also_bad).is_err());
}
