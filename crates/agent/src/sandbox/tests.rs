use super::*;

#[test]
fn read_grants_skip_hidden_paths_and_symlinks() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    std::fs::create_dir_all(r.join("home/.ssh")).unwrap();
    std::fs::create_dir_all(r.join("home/src")).unwrap();
    std::fs::write(r.join("home/.bashrc"), "").unwrap();
    std::os::unix::fs::symlink(r.join("home/.ssh"), r.join("home/keys")).unwrap();
    let grants = read_grants(&[r.join("home/.ssh")]);
    let has = |p: &Path, g: Grant| grants.iter().any(|(q, h)| q == p && *h == g);
    assert!(has(Path::new("/"), Grant::ListOnly));
    assert!(has(&r.join("home"), Grant::ListOnly));
    assert!(has(&r.join("home/src"), Grant::Read));
    assert!(has(&r.join("home/.bashrc"), Grant::Read));
    assert!(
        !grants
            .iter()
            .any(|(q, _)| q.starts_with(r.join("home/.ssh")))
    );
    assert!(!grants.iter().any(|(q, _)| q == &r.join("home/keys")));
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
    sweep_stale_tmp(base.path());
    assert!(!dead.exists());
    assert!(alive.exists());
    assert!(other.exists());
}
