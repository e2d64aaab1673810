//! The file tools under attack: a symlink planted at the temporary file's name, a directory
//! swapped for a symlink to outside while the tools work (thousands of times), hard links to
//! outside files, a FIFO, `/dev/zero` and a device node as `read_file` targets, and a 3 GB
//! sparse file read with `limit: 1` (bytes read counted from `/proc/self/io`).
//!
//! `LAZARUS_SWAP_ITERATIONS` (default 3000) sets the number of tool calls per tool in the
//! swap race.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lazarus_agent::tools::{NoHooks, ToolContext, ToolOutput, ToolStatus, Toolbox};
use serde_json::{Value, json};

async fn call(c: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    let mut hooks = NoHooks::default();
    let tb = Toolbox::standard();
    let text = args.to_string();
    let run = tb.run(c, tool, &text, &mut hooks);
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .unwrap_or_else(|_| panic!("{tool} {args} hung"))
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_symlink_at_the_temporary_name_is_never_followed() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "untouched").unwrap();
    std::fs::write(ws.path().join("a.txt"), "old").unwrap();
    // the temporary name the tools used to pick (`.NAME.lazarus-tmp-PID`; the tools run in
    // this process)
    for name in ["a.txt", "b.txt"] {
        symlink(
            &victim,
            ws.path()
                .join(format!(".{name}.lazarus-tmp-{}", std::process::id())),
        )
        .unwrap();
    }
    let c = ToolContext::new(ws.path());
    let o = call(
        &c,
        "write_file",
        json!({"path": "b.txt", "content": "new b"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    let o = call(
        &c,
        "edit_file",
        json!({"path": "a.txt", "old_string": "old", "new_string": "new a"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    for (name, content) in [("a.txt", "new a"), ("b.txt", "new b")] {
        let p = ws.path().join(name);
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file(), "{name}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), content);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_never_lets_a_tool_out() {
    let iterations: usize = std::env::var("LAZARUS_SWAP_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("d")).unwrap();
    std::fs::write(ws.path().join("d/f"), "inside\n").unwrap();
    std::fs::write(outside.path().join("f"), "OUTSIDE-SECRET\n").unwrap();
    std::fs::write(outside.path().join("outside-only-name"), "").unwrap();
    symlink(outside.path(), ws.path().join("x")).unwrap();
    let before = entries(outside.path());

    // `d` and `x` trade places atomically, over and over: `d` is a real directory one
    // moment and a symlink to outside the next.
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let (d, x) = (ws.path().join("d"), ws.path().join("x"));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &d,
                    rustix::fs::CWD,
                    &x,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .expect("RENAME_EXCHANGE");
                swaps.fetch_add(1, Ordering::Relaxed);
                // let each state last about as long as a tool call's path walk
                std::thread::sleep(Duration::from_micros(20));
            }
        })
    };

    let c = ToolContext::new(ws.path());
    let (mut reads_ok, mut writes_ok, mut lists_ok) = (0, 0, 0);
    let mut escapes = Vec::new();
    // At least `iterations` rounds; on a loaded machine the swapper can stall (its short
    // sleeps become long), so go on, up to ten times as long, until each tool has both
    // succeeded and been refused often enough for the race to have really run.
    let enough = |ok: usize, done: usize| ok > done / 100 && done - ok > done / 100;
    let mut done = 0;
    for i in 0..iterations * 10 {
        if i >= iterations
            && enough(reads_ok, done)
            && enough(writes_ok, done)
            && enough(lists_ok, done)
        {
            break;
        }
        done = i + 1;
        let o = call(&c, "read_file", json!({"path": "d/f"})).await;
        if o.text.contains("OUTSIDE-SECRET") {
            escapes.push(format!("read {i}: {}", o.text));
        }
        reads_ok += usize::from(o.status == ToolStatus::Ok);
        if i < 5 && o.status != ToolStatus::Ok {
            eprintln!("refused read: {}", o.text);
        }
        let o = call(
            &c,
            "write_file",
            json!({"path": format!("d/w{i}"), "content": "x"}),
        )
        .await;
        writes_ok += usize::from(o.status == ToolStatus::Ok);
        let o = call(&c, "list_dir", json!({"path": "d"})).await;
        if o.text.contains("outside-only-name") {
            escapes.push(format!("list {i}: {}", o.text));
        }
        lists_ok += usize::from(o.status == ToolStatus::Ok);
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let after = entries(outside.path());
    assert_eq!(before, after, "files were written outside the workspace");
    assert!(
        escapes.is_empty(),
        "{} escapes: {:?}",
        escapes.len(),
        &escapes[..escapes.len().min(3)]
    );
    // the race really ran: both outcomes happened many times
    let swaps = swaps.load(Ordering::Relaxed);
    eprintln!(
        "{done} calls per tool, {swaps} swaps: {reads_ok} reads, {writes_ok} writes, {lists_ok} listings succeeded inside; 0 escapes"
    );
    assert!(swaps >= 100, "the swapper barely ran ({swaps} swaps)");
    for (what, ok) in [
        ("reads", reads_ok),
        ("writes", writes_ok),
        ("listings", lists_ok),
    ] {
        assert!(
            enough(ok, done),
            "{what}: {ok} of {done} succeeded; the race did not alternate"
        );
    }
}

#[tokio::test]
async fn hard_links_to_outside_files_are_not_written() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "victim text").unwrap();
    std::fs::hard_link(&victim, ws.path().join("hl")).unwrap();
    let c = ToolContext::new(ws.path());
    for (tool, args) in [
        ("write_file", json!({"path": "hl", "content": "replaced"})),
        (
            "edit_file",
            json!({"path": "hl", "old_string": "victim", "new_string": "edited"}),
        ),
    ] {
        let o = call(&c, tool, args).await;
        assert_eq!(o.status, ToolStatus::Error, "{tool}: {}", o.text);
        assert!(!o.effect_started, "{tool}");
        assert!(o.text.contains("hard links"), "{tool}: {}", o.text);
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim text");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("hl")).unwrap(),
        "victim text"
    );
}

#[tokio::test]
async fn fifos_and_devices_are_not_read() {
    let ws = tempfile::tempdir().unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.path().join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    symlink("/dev/zero", ws.path().join("zero")).unwrap();
    let c = ToolContext::new(ws.path());
    let o = call(&c, "read_file", json!({"path": "fifo"})).await;
    assert_eq!(o.status, ToolStatus::Error);
    assert!(o.text.contains("a FIFO"), "{}", o.text);
    let o = call(&c, "read_file", json!({"path": "zero", "limit": 1})).await;
    assert_eq!(o.status, ToolStatus::Error);
    assert!(o.text.contains("leaves the workspace"), "{}", o.text);
    let o = call(
        &c,
        "edit_file",
        json!({"path": "fifo", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Error, "{}", o.text);
    let o = call(&c, "write_file", json!({"path": "fifo", "content": "x"})).await;
    assert_eq!(o.status, ToolStatus::Error, "{}", o.text);
    assert!(o.text.contains("FIFO"), "{}", o.text);
    if rustix::process::geteuid().is_root() {
        // a device node inside the workspace (only root can make one)
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.path().join("zdev"),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o600),
            rustix::fs::makedev(1, 5),
        )
        .unwrap();
        let o = call(&c, "read_file", json!({"path": "zdev", "limit": 1})).await;
        assert_eq!(o.status, ToolStatus::Error);
        assert!(o.text.contains("character device"), "{}", o.text);
    } else {
        eprintln!("not root: the device-node case of this test was not run");
    }
}

/// Bytes this process has read with read(2) and friends so far.
fn rchar() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_huge_sparse_file_is_read_in_bounded_chunks() {
    let ws = tempfile::tempdir().unwrap();
    let big = ws.path().join("big.log");
    {
        let f = std::fs::File::create(&big).unwrap();
        use std::io::Write;
        (&f).write_all(b"first line\nsecond line\n").unwrap();
        f.set_len(3 << 30).unwrap();
    }
    let c = ToolContext::new(ws.path());
    let before = rchar();
    let o = call(&c, "read_file", json!({"path": "big.log", "limit": 1})).await;
    let read = rchar() - before;
    assert_eq!(o.status, ToolStatus::Ok, "{}", o.text);
    assert!(
        o.text
            .starts_with("first line\n[lines 1-1; the file goes on"),
        "{}",
        o.text
    );
    eprintln!("read_file limit 1 on a 3 GiB sparse file: {read} bytes read");
    assert!(
        read < 1 << 20,
        "read {read} bytes for one line of a 3 GiB file"
    );

    // no limit: the output cap stops the reading
    let before = rchar();
    let o = call(&c, "read_file", json!({"path": "big.log"})).await;
    let read = rchar() - before;
    assert!(
        o.text.contains("output cut at"),
        "{}",
        &o.text[o.text.len() - 200..]
    );
    eprintln!("read_file without limit on it: {read} bytes read");
    assert!(read < 4 << 20, "read {read} bytes with the output capped");

    // an offset far beyond what read_file scans is refused, not searched for ever
    let mut c2 = c.clone();
    c2.limits.read_scan_max_bytes = 8 << 20;
    let before = rchar();
    let o = call(
        &c2,
        "read_file",
        json!({"path": "big.log", "offset": 5, "limit": 1}),
    )
    .await;
    let read = rchar() - before;
    assert_eq!(
        o.status,
        ToolStatus::Error,
        "{}",
        &o.text[..o.text.len().min(300)]
    );
    assert!(o.text.contains("as far as read_file looks"), "{}", o.text);
    assert!(read < 16 << 20, "read {read} bytes");
    // edit_file refuses files above its cap without reading them
    let o = call(
        &c,
        "edit_file",
        json!({"path": "big.log", "old_string": "first", "new_string": "1st"}),
    )
    .await;
    assert_eq!(o.status, ToolStatus::Error);
    assert!(
        o.text.contains("edit_file handles files up to"),
        "{}",
        o.text
    );
}

/// A workspace that holds denied paths (it is the home directory, or holds Lazarus's config):
/// the file tools refuse the denied set there as the shell's sandbox does, also through a
/// symlink inside the workspace, and create nothing in it; a workspace that lies inside a
/// denied directory (a gateway's workspace root) keeps working.
#[tokio::test]
async fn the_denied_set_inside_the_workspace_is_refused_to_the_file_tools() {
    let ws = tempfile::tempdir().unwrap();
    let home = ws.path();
    std::fs::create_dir(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "SECRET").unwrap();
    symlink(".ssh", home.join("keys")).unwrap();
    let policy = home.join(".config/lazarus/approvals.toml");
    let mut sandbox = (*lazarus_agent::sandbox::default_probed()).clone();
    sandbox.home = Some(home.to_path_buf());
    let sandbox = sandbox.deny([policy.clone()]);
    let c = ToolContext {
        sandbox: Arc::new(sandbox),
        ..ToolContext::new(home)
    };
    for (tool, args) in [
        ("read_file", json!({"path": ".ssh/id_ed25519"})),
        ("read_file", json!({"path": "keys/id_ed25519"})),
        ("list_dir", json!({"path": ".ssh"})),
        ("list_dir", json!({"path": "keys"})),
        (
            "write_file",
            json!({"path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}),
        ),
        (
            "write_file",
            json!({"path": "keys/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}),
        ),
        (
            "edit_file",
            json!({"path": ".ssh/id_ed25519", "old_string": "SECRET", "new_string": "x"}),
        ),
        (
            "write_file",
            json!({"path": ".config/lazarus/approvals.toml", "content": "[[always]]\ntool = \"shell\"\n"}),
        ),
    ] {
        let out = call(&c, tool, args.clone()).await;
        assert!(
            out.text.contains("denied location"),
            "{tool} {args}: {}",
            out.text
        );
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".ssh/id_ed25519")).unwrap(),
        "SECRET"
    );
    assert_eq!(entries(&home.join(".ssh")), vec!["id_ed25519"]);
    assert!(!policy.exists(), "the policy file was written");
    // the rest of the workspace as usual
    let out = call(
        &c,
        "write_file",
        json!({"path": "notes.txt", "content": "ok"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.text);
    // a workspace inside a denied directory (a gateway's workspace root) keeps working
    let root = tempfile::tempdir().unwrap();
    let own = root.path().join("session-a");
    std::fs::create_dir(&own).unwrap();
    let sandbox = (*lazarus_agent::sandbox::default_probed())
        .clone()
        .deny([root.path().to_path_buf()]);
    let c = ToolContext {
        sandbox: Arc::new(sandbox),
        ..ToolContext::new(&own)
    };
    let out = call(
        &c,
        "write_file",
        json!({"path": "a.txt", "content": "mine"}),
    )
    .await;
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.text);
    let out = call(&c, "read_file", json!({"path": "a.txt"})).await;
    assert!(out.text.contains("mine"), "{}", out.text);
}
