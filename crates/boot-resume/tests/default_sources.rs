//! Where each program's sessions are looked for without `--source`: its default under
//! `$HOME`, and each documented variable that moves it (docs/boot-resume.md, "Where sessions
//! are found").
use lazarus_boot_resume::Format;
use lazarus_boot_resume::discover::{Env, SourceFormat, default_sources};
use std::collections::HashMap;
use std::path::PathBuf;

struct Vars(HashMap<&'static str, &'static str>);

impl Env for Vars {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.to_string())
    }
}

fn paths(vars: &[(&'static str, &'static str)], f: Format) -> Vec<PathBuf> {
    let env = Vars(vars.iter().copied().collect());
    default_sources(&env)
        .into_iter()
        .filter(|s| s.format == SourceFormat::Known(f))
        .map(|s| s.path)
        .collect()
}

#[test]
fn each_program_is_looked_for_in_its_home_or_where_its_variable_says() {
    let home = [("HOME", "/h")];
    let one = |vars: &[(&'static str, &'static str)], f| {
        let mut p = paths(vars, f);
        assert_eq!(p.len(), 1, "{f:?}: {p:?}");
        p.remove(0)
    };
    for (f, default) in [
        (Format::Lazarus, "/h/.local/state/lazarus/sessions"),
        (Format::Pi, "/h/.pi/agent/sessions"),
        (Format::ClaudeCode, "/h/.claude/projects"),
        (Format::Codex, "/h/.codex/sessions"),
        (Format::GeminiCli, "/h/.gemini"),
        (Format::Opencode, "/h/.local/share/opencode"),
    ] {
        assert_eq!(one(&home, f), PathBuf::from(default), "{f:?}");
    }
    assert_eq!(
        paths(&home, Format::Openclaw),
        ["/h/.openclaw", "/h/.openclaw-dev", "/h/.clawdbot"].map(PathBuf::from)
    );
    for (var, value, f, want) in [
        ("LAZARUS_SESSION_DIR", "/s", Format::Lazarus, "/s"),
        (
            "XDG_STATE_HOME",
            "/st",
            Format::Lazarus,
            "/st/lazarus/sessions",
        ),
        ("PI_CODING_AGENT_SESSION_DIR", "/p", Format::Pi, "/p"),
        ("PI_CODING_AGENT_DIR", "/pa", Format::Pi, "/pa/sessions"),
        ("CLAUDE_CONFIG_DIR", "/c", Format::ClaudeCode, "/c/projects"),
        ("CODEX_HOME", "/x", Format::Codex, "/x/sessions"),
        // Gemini CLI's variable stands for the home directory
        ("GEMINI_CLI_HOME", "/g", Format::GeminiCli, "/g/.gemini"),
        ("XDG_DATA_HOME", "/d", Format::Opencode, "/d/opencode"),
        // OpenCode's database, absolute or under its data directory
        ("OPENCODE_DB", "/db/oc.db", Format::Opencode, "/db/oc.db"),
        (
            "OPENCODE_DB",
            "oc-dev.db",
            Format::Opencode,
            "/h/.local/share/opencode/oc-dev.db",
        ),
    ] {
        assert_eq!(
            one(&[("HOME", "/h"), (var, value)], f),
            PathBuf::from(want),
            "{var}={value}"
        );
    }
    assert_eq!(
        paths(
            &[("HOME", "/h"), ("OPENCLAW_STATE_DIR", "/o")],
            Format::Openclaw
        ),
        [PathBuf::from("/o")]
    );
}
