//! The two cases that once deleted acknowledged records without a trace, through every
//! command a user runs: one flipped bit turning a space of a middle record into a NUL byte,
//! and a bad checksum in the last acknowledged record. Neither may lose a byte: the first is
//! refused (nothing changes) until `repair`, which saves what it removes; the second is cut as
//! crash debris only after every cut byte is saved beside the file, and reported.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn lazarus(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("LAZARUS_SESSION_DIR", dir)
        .env_remove("LAZARUS_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run lazarus")
}

#[track_caller]
fn expect(dir: &Path, args: &[&str], code: i32) -> (String, String) {
    let o = lazarus(dir, args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(
        o.status.code(),
        Some(code),
        "lazarus {args:?}\nstdout: {out}\nstderr: {err}"
    );
    (out, err)
}

/// A session of 12 records (inputs), and its bytes.
fn twelve_records(dir: &Path) -> (PathBuf, Vec<u8>) {
    expect(dir, &["sessions", "create", "--id", "s"], 0);
    for i in 1..=12 {
        let text = format!("message number {i} with some words");
        expect(
            dir,
            &[
                "sessions",
                "send",
                "s",
                "--message-id",
                &format!("m{i}"),
                &text,
            ],
            0,
        );
    }
    let path = dir.join("s.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 13);
    (path, bytes)
}

fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(
        bytes
            .iter()
            .enumerate()
            .filter(|(i, b)| **b == b'\n' && i + 1 < bytes.len())
            .map(|(i, _)| i + 1),
    );
    v
}

fn saved_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".cut-"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_nul_in_a_middle_record_is_refused_by_every_command_until_repair_saves_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (path, good) = twelve_records(dir);
    let starts = line_starts(&good);
    // Record 2 is line 3: one bit turns a space into a NUL byte.
    let at = starts[2] + good[starts[2]..].iter().position(|&b| b == b' ').unwrap();
    let mut bad = good.clone();
    bad[at] ^= b' ';
    assert_eq!(bad[at], 0);
    std::fs::write(&path, &bad).unwrap();

    let where_ = format!("line 3 (byte offset {})", starts[2]);
    for args in [
        &["sessions", "send", "s", "--message-id", "m13", "more"][..],
        &[
            "run",
            "--session",
            "s",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ][..],
        &["sessions", "verify", "s"][..],
    ] {
        let (out, err) = expect(dir, args, 1);
        let said = format!("{out}{err}");
        assert!(said.contains(&where_), "{args:?}: {said}");
        assert!(said.contains("NUL"), "{args:?}: {said}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bad,
            "{args:?} changed the file"
        );
        assert!(saved_files(dir).is_empty(), "{args:?} cut something");
    }
    let (err_out, err) = expect(dir, &["sessions", "send", "s", "x"], 1);
    assert!(
        format!("{err_out}{err}").contains("valid record follows"),
        "the refusal says why it is not crash debris: {err}"
    );

    let (out, _) = expect(dir, &["sessions", "repair", "s"], 0);
    let saved = saved_files(dir);
    assert_eq!(saved.len(), 1, "{out}");
    assert_eq!(std::fs::read(&saved[0]).unwrap(), &bad[starts[2]..]);
    assert_eq!(std::fs::read(&path).unwrap(), &bad[..starts[2]]);
    expect(dir, &["sessions", "verify", "s"], 0);
}

#[test]
fn a_bad_checksum_in_the_last_record_is_saved_before_it_is_cut_by_every_command() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("noted"),
        )
        .repeat()])))
        .unwrap();
    let url = server.base_url();
    for command in ["send", "run", "repair"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (path, good) = twelve_records(dir);
        let starts = line_starts(&good);
        let last = *starts.last().unwrap();
        let mut bad = good.clone();
        let crc_digit = bad.len() - 4;
        bad[crc_digit] = if bad[crc_digit] == b'0' { b'1' } else { b'0' };
        std::fs::write(&path, &bad).unwrap();

        // verify diagnoses without changing anything: the last line, cut on the next open
        let (out, _) = expect(dir, &["sessions", "verify", "s"], 1);
        assert!(
            out.contains(&format!("line 13 (byte offset {last})")),
            "{out}"
        );
        assert!(out.contains("checksum mismatch"), "{out}");
        assert_eq!(std::fs::read(&path).unwrap(), bad);

        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let (out, err) = match command {
            "send" => expect(
                dir,
                &["sessions", "send", "s", "--message-id", "m13", "more"],
                0,
            ),
            "run" => expect(
                dir,
                &[
                    "run",
                    "--session",
                    "s",
                    "--base-url",
                    &url,
                    "--model",
                    "m",
                    "--workspace",
                    ws.to_str().unwrap(),
                ],
                0,
            ),
            _ => expect(dir, &["sessions", "repair", "s"], 0),
        };
        let saved = saved_files(dir);
        assert_eq!(saved.len(), 1, "{command}: {out}{err}");
        assert_eq!(
            std::fs::read(&saved[0]).unwrap(),
            &bad[last..],
            "{command}: the saved file holds exactly the cut record"
        );
        let name = saved[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            format!("{out}{err}").contains(&name),
            "{command}: the user is told where the bytes went: {out}{err}"
        );
        let now = std::fs::read(&path).unwrap();
        assert_eq!(
            &now[..last],
            &bad[..last],
            "{command}: every good record kept"
        );
        expect(dir, &["sessions", "verify", "s"], 0);
    }
}
