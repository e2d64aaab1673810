//! Finding 7 / config: `config.toml` under XDG_CONFIG_HOME; flags > environment > file >
//! default; `config show` says where each setting comes from; a bad file is a clear error.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use lazarus_testkit::{Script, ScriptedResponse, ScriptedServer, Step};

const BIN: &str = env!("CARGO_BIN_EXE_lazarus");

fn lazarus(home: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("HOME", home)
        .env_remove("LAZARUS_CONFIG")
        .env_remove("LAZARUS_SESSION_DIR")
        .env_remove("LAZARUS_STORE")
        .env_remove("LAZARUS_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("LAZARUS_LOG")
        .envs(envs.iter().copied())
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn flags_beat_environment_beat_the_file_beats_defaults() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([Step::reply(
            ScriptedResponse::text("ok"),
        )
        .repeat()])))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    std::fs::create_dir_all(home.join("config/lazarus")).unwrap();
    std::fs::write(
        home.join("config/lazarus/config.toml"),
        format!(
            "model = \"file-model\"\nbase_url = \"{}\"\ntools = [\"read_file\"]\nsession_dir = \"~/from-file\"\n",
            server.base_url()
        ),
    )
    .unwrap();

    // the file alone: its model, server, tools and session directory
    ok(&lazarus(home, &["run", "-p", "one"], &[]));
    let ledgers = std::fs::read_dir(home.join("from-file"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .count();
    assert_eq!(ledgers, 1);
    // the environment beats the file
    ok(&lazarus(
        home,
        &["run", "-p", "two"],
        &[("LAZARUS_MODEL", "env-model")],
    ));
    // a flag beats both
    ok(&lazarus(
        home,
        &["run", "-p", "three", "--model", "flag-model"],
        &[("LAZARUS_MODEL", "env-model")],
    ));
    let reqs = server.requests();
    let models: Vec<&str> = reqs.iter().map(|r| r["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["file-model", "env-model", "flag-model"]);
    let tools: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read_file"]);

    let out = ok(&lazarus(
        home,
        &["config", "show", "--json"],
        &[("LAZARUS_MODEL", "env-model")],
    ));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["config_file_exists"], true);
    let s = &v["settings"];
    assert_eq!(s["model"]["value"], "env-model");
    assert_eq!(s["model"]["source"], "env LAZARUS_MODEL");
    assert!(
        s["base_url"]["source"]
            .as_str()
            .unwrap()
            .starts_with("file "),
        "{v}"
    );
    assert_eq!(s["sandbox"]["source"], "default");
    assert_eq!(
        s["store"]["value"],
        home.join("from-file").to_str().unwrap()
    );
    let text = ok(&lazarus(home, &["config", "show"], &[]));
    assert!(
        text.contains("file-model") && text.contains("[default]"),
        "{text}"
    );
}

#[test]
fn a_bad_config_file_is_a_clear_error_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    std::fs::create_dir_all(home.join("config/lazarus")).unwrap();
    let file = home.join("config/lazarus/config.toml");
    std::fs::write(&file, "model = \"m\"\nmodle = \"typo\"\n").unwrap();
    let o = lazarus(home, &["sessions", "list"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("config.toml line 2") && err.contains("modle"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::write(&file, "session_dir = \"a\"\nstore = \"postgres://h/db\"\n").unwrap();
    let o = lazarus(home, &["sessions", "list"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("both session_dir and store"));
}

/// `config show` says what a shell call's environment would hold: names only, the
/// credentials among them withheld, never a value; `[shell_environment_policy]` changes it
/// for `run` (the shell sees `set`, not the withheld key), and a wrong key in it is an error
/// naming the file.
#[test]
fn config_show_names_what_a_shell_call_gets_and_never_a_secret() {
    let home = tempfile::tempdir().unwrap();
    let env = [
        ("OPENAI_API_KEY", "sk-canary-config-1"),
        ("DATABASE_URL", "postgres://u:canarypw@db/x"),
        ("LAZARUS_PLAIN_SETTING", "plain-value"),
    ];
    let out = ok(&lazarus(home.path(), &["config", "show"], &env));
    let line = out
        .lines()
        .find(|l| l.starts_with("a shell call's environment"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("PATH") && line.contains("HOME"), "{line}");
    assert!(
        !line.contains("LAZARUS_PLAIN_SETTING"),
        "inherit core: {line}"
    );
    assert!(line.contains("TMPDIR"), "{line}");
    // the core set holds no credential, so nothing is withheld from it
    assert!(
        !out.contains("sk-canary") && !out.contains("canarypw"),
        "{out}"
    );
    assert!(
        out.contains("shell_environment_policy inherit core"),
        "{out}"
    );

    let dir = home.path().join("config/lazarus");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[shell_environment_policy]\ninherit = \"all\"\nset = { CI = \"1\" }\nexclude = [\"lazarus_plain_*\"]\n",
    )
    .unwrap();
    let out = ok(&lazarus(home.path(), &["config", "show"], &env));
    assert!(
        !out.contains("sk-canary") && !out.contains("canarypw"),
        "{out}"
    );
    let withheld = out
        .lines()
        .find(|l| l.starts_with("withheld as credentials:"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        withheld.contains("OPENAI_API_KEY") && withheld.contains("DATABASE_URL"),
        "{withheld}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("a shell call's environment"))
        .unwrap();
    assert!(line.contains(" CI ") || line.contains(" CI;"), "{line}");
    assert!(!line.contains("LAZARUS_PLAIN_SETTING"), "excluded: {line}");
    let json = ok(&lazarus(home.path(), &["config", "show", "--json"], &env));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["shell_env"]["withheld_as_credentials"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "OPENAI_API_KEY"),
        "{v}"
    );
    assert!(!json.contains("sk-canary"));

    // what `run` gives a shell call under that file
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(Script::new([
            Step::reply(ScriptedResponse::tool_call(
                "e",
                "shell",
                serde_json::json!({"command": "env"}),
            )),
            Step::after_tool_result("e", ScriptedResponse::text("done")).repeat(),
        ])))
        .unwrap();
    let sessions = home.path().join("sessions");
    let o = lazarus(
        home.path(),
        &[
            "run",
            "-p",
            "go",
            "--session",
            "s",
            "--session-dir",
            sessions.to_str().unwrap(),
            "--base-url",
            &server.base_url(),
        ],
        &env,
    );
    ok(&o);
    use lazarus_session::Store;
    let st = lazarus_session::LocalStore::open(&sessions)
        .unwrap()
        .load(&lazarus_session::SessionId::literal("s"))
        .unwrap();
    let text = st.tool_result_text("e");
    assert!(text.contains("CI=1"), "{text}");
    assert!(
        !text.contains("sk-canary") && !text.contains("canarypw"),
        "{text}"
    );
    assert!(!text.contains("LAZARUS_PLAIN_SETTING"), "{text}");

    // a key the policy does not know is an error naming the file
    std::fs::write(
        dir.join("config.toml"),
        "[shell_environment_policy]\ninherits = \"all\"\n",
    )
    .unwrap();
    let o = lazarus(home.path(), &["config", "show"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("config.toml") && err.contains("inherits"),
        "{err}"
    );
}
