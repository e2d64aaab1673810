use super::env::{self, EnvPolicy, Inherit};
use super::*;

use landlock::AccessFs;

#[test]
fn rules_carve_around_denied_paths_and_skip_symlinks() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    std::fs::create_dir_all(r.join("home/.ssh")).unwrap();
    std::fs::create_dir_all(r.join("home/src")).unwrap();
    std::fs::write(r.join("home/.bashrc"), "").unwrap();
    std::os::unix::fs::symlink(r.join("home/.ssh"), r.join("home/keys")).unwrap();
    let denied = fs::denied_paths(Some(&r.join("home")), &[]);
    let plan = fs::plan(6, &denied, &[r.join("home")], None);
    let rights = fs::rights(6);
    let has = |p: &Path, a: fs::FsRights| plan.rules.iter().any(|(q, h)| q == p && *h == a);
    let list: fs::FsRights = AccessFs::ReadDir.into();
    assert!(has(Path::new("/"), list));
    assert!(has(&r.join("home"), list), "{:?}", plan.rules);
    assert!(has(&r.join("home/src"), rights.read));
    assert!(has(&r.join("home/src"), rights.write));
    // a file gets the file rights of the grant only
    let file = AccessFs::from_file(landlock::ABI::V6);
    assert!(has(&r.join("home/.bashrc"), rights.read & file));
    assert!(has(&r.join("home/.bashrc"), rights.write & file));
    assert!(
        !plan
            .rules
            .iter()
            .any(|(q, _)| q.starts_with(r.join("home/.ssh")))
    );
    assert!(!plan.rules.iter().any(|(q, _)| q == &r.join("home/keys")));
    // /dev: listing, and only the devices of the list
    assert!(has(Path::new("/dev"), list));
    assert!(has(Path::new("/dev/null"), rights.device));
    assert!(!plan.rules.iter().any(|(q, _)| q == Path::new("/dev/kmsg")));
    // no device nodes may be made, even where everything else may be written
    assert!(!rights.write.contains(AccessFs::MakeChar));
    assert!(!rights.write.contains(AccessFs::MakeBlock));
}

#[test]
fn denied_paths_are_what_they_resolve_to() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    let home = r.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(r.join("elsewhere/kube")).unwrap();
    std::os::unix::fs::symlink(r.join("elsewhere/kube"), home.join(".kube")).unwrap();
    // a relative link, and a dangling one (its target may appear later)
    std::os::unix::fs::symlink("../elsewhere/pgpass", home.join(".pgpass")).unwrap();
    std::os::unix::fs::symlink(r.join("later/netrc"), home.join(".netrc")).unwrap();
    let denied = fs::denied_paths(Some(&home), &[]);
    assert!(denied.contains(&r.join("elsewhere/kube")), "{denied:?}");
    assert!(denied.contains(&r.join("elsewhere/pgpass")), "{denied:?}");
    assert!(denied.contains(&r.join("later/netrc")), "{denied:?}");
    assert!(denied.contains(&home.join(".ssh")));
    assert!(fs::system_secrets().iter().all(|p| p.is_file()));
    assert_eq!(resolve(&r.join("home/.kube/../x")), r.join("elsewhere/x"));
}

#[test]
fn modes_parse_and_print() {
    for m in ["workspace-write", "read-only", "off"] {
        assert_eq!(m.parse::<SandboxMode>().unwrap().as_str(), m);
    }
    assert!(
        "none"
            .parse::<SandboxMode>()
            .unwrap_err()
            .contains("workspace-write")
    );
    let off = Sandbox::off();
    assert!(off.describe().contains("sandbox: off"));
    assert_eq!(off.note().detail, "unconfined");
}

#[test]
fn stale_private_tmp_dirs_of_dead_runners_are_swept() {
    let base = tempfile::tempdir().unwrap();
    // a pid that cannot exist (above pid_max's ceiling), and this process's own
    let dead = base.path().join("lazarus-shell-4194305-00000000000000aa");
    let alive = base.path().join(format!(
        "lazarus-shell-{}-00000000000000bb",
        std::process::id()
    ));
    let other = base.path().join("unrelated-4194305");
    for d in [&dead, &alive, &other] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(dead.join("leftover"), "x").unwrap();
    tmp::sweep_stale_tmp(base.path());
    assert!(!dead.exists());
    assert!(alive.exists());
    assert!(other.exists());
}

#[test]
fn the_default_environment_carries_no_secret() {
    use std::ffi::OsString;
    let vars: Vec<(OsString, OsString)> = [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("LC_ALL", "C.UTF-8"),
        ("OPENAI_API_KEY", "sk-abc"),
        ("DATABASE_URL", "postgres://u:pw@db/x"),
        ("GITHUB_PAT", "x1"),
        ("HF_AUTH", "x2"),
        ("EDITOR", "vi"),
        ("GIT_AUTHOR_NAME", "A"),
        ("HTTP_PROXY", "http://user:secret@proxy:3128"),
        ("SOME_VALUE", "ghp_0123456789"),
    ]
    .iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)))
    .collect();
    let core = EnvPolicy::default().compute(vars.clone());
    let names = env::names(&core.vars);
    assert_eq!(names, ["HOME", "LC_ALL", "PATH"]);
    let all = EnvPolicy {
        inherit: Inherit::All,
        exclude: vec!["edit*".into()],
        set: [("CI".to_string(), "1".to_string())].into(),
        ..Default::default()
    }
    .compute(vars.clone());
    let names = env::names(&all.vars);
    assert_eq!(
        names,
        ["CI", "GIT_AUTHOR_NAME", "HOME", "LC_ALL", "PATH"],
        "withheld: {:?}",
        all.withheld
    );
    for secret in [
        "OPENAI_API_KEY",
        "DATABASE_URL",
        "GITHUB_PAT",
        "HF_AUTH",
        "HTTP_PROXY",
        "SOME_VALUE",
    ] {
        assert!(all.withheld.iter().any(|w| w == secret), "{secret}");
    }
    let only = EnvPolicy {
        inherit: Inherit::All,
        include_only: vec!["p?th".into()],
        ..Default::default()
    }
    .compute(vars.clone());
    assert_eq!(env::names(&only.vars), ["PATH"]);
    let none = EnvPolicy {
        inherit: Inherit::None,
        ..Default::default()
    }
    .compute(vars);
    assert!(none.vars.is_empty());
    assert!(env::secret_value("mysql://root:hunter2@localhost/db"));
    assert!(!env::secret_value("https://example.com/a@b"));
    assert!(!env::secret_name("GIT_AUTHOR_EMAIL"));
}

#[test]
fn a_workspaces_version_control_metadata_is_found_worktrees_included() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    // a main repository with a worktree inside the workspace, and a worktree whose git
    // directory lives elsewhere
    let ws = r.join("ws");
    std::fs::create_dir_all(ws.join("main/.git/worktrees/wt")).unwrap();
    std::fs::create_dir_all(ws.join("wt")).unwrap();
    std::fs::write(ws.join("main/.git/worktrees/wt/commondir"), "../..\n").unwrap();
    let found = fs::vcs_metadata(&ws);
    for d in [".git", ".hg", ".jj"] {
        assert!(found.contains(&ws.join(d)), "{found:?}");
    }
    // the workspace is the worktree: its .git file names the git directory, whose
    // commondir names the main repository's
    std::fs::write(ws.join("wt/.git"), "gitdir: ../main/.git/worktrees/wt\n").unwrap();
    let found = fs::vcs_metadata(&ws.join("wt"));
    assert!(found.contains(&ws.join("wt/.git")), "{found:?}");
    assert!(
        found.contains(&ws.join("main/.git/worktrees/wt")),
        "{found:?}"
    );
    assert!(found.contains(&ws.join("main/.git")), "{found:?}");
    // allowed: nothing is read-only
    let mut sb = Sandbox::off();
    sb.policy.mode = SandboxMode::WorkspaceWrite;
    assert!(sb.vcs_read_only(&ws).contains(&ws.join(".git")));
    assert!(
        sb.clone()
            .allow_vcs_writes(true)
            .vcs_read_only(&ws)
            .is_empty()
    );
    // `off` confines nothing
    assert!(Sandbox::off().vcs_read_only(&ws).is_empty());
}

#[test]
fn terminal_injection_is_refused_by_request_number() {
    let names: Vec<&str> = seccomp::TTY_IOCTLS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["TIOCSTI", "TIOCLINUX"]);
    assert!(
        seccomp::TTY_IOCTLS
            .iter()
            .all(|(_, r)| *r == 0x5412 || *r == 0x541C)
    );
    assert!(!DEVICES.contains(&"/dev/tty"));
}
