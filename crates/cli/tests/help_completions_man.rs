//! Finding 8: help names every command and its exit codes; completions and the manual page
//! come from the same definition (checked by the shells and `man` themselves where present).

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn out(args: &[&str]) -> String {
    let o = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "lazarus {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn help_lists_every_sessions_command_examples_and_exit_codes() {
    let h = out(&["sessions", "--help"]);
    for c in ["export", "import", "rm", "prune", "list", "verify"] {
        assert!(
            h.contains(&format!("\n  {c} ")),
            "sessions --help lacks {c}: {h}"
        );
    }
    let h = out(&["--help"]);
    assert!(
        h.contains("Exit codes:") && h.contains("130") && h.contains("Examples:"),
        "{h}"
    );
    let h = out(&["run", "--help"]);
    assert!(
        h.contains("Exit codes:")
            && h.contains("read_file, write_file, list_dir, edit_file, shell"),
        "{h}"
    );
}

#[test]
fn completions_parse_in_their_shells() {
    for shell in ["bash", "zsh", "fish"] {
        let script = out(&["completions", shell]);
        assert!(
            script.contains("prune") && script.contains("session-dir"),
            "{shell}"
        );
        if !have(shell) {
            // bash is everywhere this runs; zsh and fish are checked where installed
            assert_ne!(
                shell, "bash",
                "bash is needed to check the bash completions"
            );
            eprintln!("{shell} not installed: its completion script's syntax not checked");
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lazarus.completion");
        std::fs::write(&file, &script).unwrap();
        let check = match shell {
            "fish" => vec!["--no-execute".to_string()],
            _ => vec!["-n".to_string()],
        };
        let st = Command::new(shell)
            .args(&check)
            .arg(&file)
            .status()
            .unwrap();
        assert!(st.success(), "{shell} rejects its completion script");
    }
    let o = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn man_pages_render() {
    let page = out(&["man"]);
    assert!(
        page.starts_with(".ie") || page.contains(".TH lazarus 1"),
        "{page}"
    );
    assert!(page.contains("sessions"), "{page}");
    let page = out(&["man", "sessions"]);
    assert!(page.contains(".TH lazarus-sessions"), "{page}");
    assert!(page.contains("prune"), "{page}");
    let o = Command::new(BIN).args(["man", "nope"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    if have("groff") {
        let mut child = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), out(&["man"]).as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}
