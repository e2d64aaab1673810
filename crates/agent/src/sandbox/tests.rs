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
