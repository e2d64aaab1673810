//! `lazarus boot-resume install|uninstall`: systemd units for the two triggers.
//!
//! - gateway (re)start: a drop-in `NAME.service.d/lazarus-boot-resume.conf` with
//!   `ExecStartPost=-<exe> boot-resume --trigger gateway-restart`;
//! - wake, `--system`: a oneshot `lazarus-boot-resume-wake.service` ordered after and wanted
//!   by the suspend/hibernate targets (they exist for the system manager only);
//! - wake, `--user`: `sleep.target` does not exist for user managers, so a long-running
//!   `lazarus-boot-resume-watch.service` runs `lazarus boot-resume watch`, which detects
//!   wake itself.
//!
//! A manifest beside the units records exactly what was written, for `uninstall`.
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Name of the drop-in file.
pub const DROPIN: &str = "lazarus-boot-resume.conf";
/// System wake unit.
pub const WAKE_UNIT: &str = "lazarus-boot-resume-wake.service";
/// User watch unit.
pub const WATCH_UNIT: &str = "lazarus-boot-resume-watch.service";
/// Manifest file name.
pub const MANIFEST: &str = ".lazarus-boot-resume.manifest.json";
/// The sleep targets the wake unit hooks into.
pub const SLEEP_TARGETS: &str =
    "suspend.target hibernate.target hybrid-sleep.target suspend-then-hibernate.target";

/// Install / uninstall errors.
#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    /// File system error.
    #[error("{what} {path}: {source}")]
    Io {
        /// What.
        what: &'static str,
        /// Path.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// Bad unit name.
    #[error(
        "bad --gateway-unit {0:?}: give a unit name like openclaw-gateway(.service), without '/'"
    )]
    BadUnit(String),
    /// Nothing installed.
    #[error(
        "nothing to uninstall: no manifest {0} (was `lazarus boot-resume install` run with this --dir / mode?)"
    )]
    NoManifest(PathBuf),
    /// Manifest unreadable.
    #[error("manifest {path} is corrupt: {source}")]
    BadManifest {
        /// Path.
        path: PathBuf,
        /// Error.
        source: serde_json::Error,
    },
}

/// User or system manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `systemctl --user`.
    User,
    /// `systemctl` (system manager).
    System,
}

/// What install writes.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// User or system.
    pub mode: Mode,
    /// Unit directory.
    pub dir: PathBuf,
    /// The gateway unit to hook into (drop-in), if any.
    pub gateway_unit: Option<String>,
    /// Absolute path of the `lazarus` binary.
    pub exe: PathBuf,
    /// Extra `boot-resume` arguments (e.g. `--preset openclaw`).
    pub extra_args: Vec<String>,
    /// For `--system`: the user the wake scan runs as.
    pub run_as: Option<String>,
}

/// What was written, for uninstall.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Directories created (removed if empty on uninstall).
    pub dirs: Vec<PathBuf>,
    /// Units to enable.
    pub enable: Vec<String>,
    /// Mode.
    pub mode: Option<Mode>,
}

/// The default unit directory of a mode.
pub fn default_dir(mode: Mode, env: &dyn crate::discover::Env) -> PathBuf {
    match mode {
        Mode::System => PathBuf::from("/etc/systemd/system"),
        Mode::User => env
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env.var("HOME").unwrap_or_else(|| "/".into())).join(".config")
            })
            .join("systemd/user"),
    }
}

/// Quotes one argument for an `Exec*=` line.
pub fn exec_quote(arg: &str) -> String {
    let escaped = arg.replace('%', "%%").replace('$', "$$");
    if !escaped.is_empty()
        && !escaped
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\' || c == ';')
    {
        return escaped;
    }
    let mut s = String::from("\"");
    for c in escaped.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

fn exec_line(exe: &Path, args: &[&str], extra: &[String]) -> String {
    let mut parts = vec![exec_quote(&exe.to_string_lossy())];
    parts.extend(args.iter().map(|a| exec_quote(a)));
    parts.extend(extra.iter().map(|a| exec_quote(a)));
    parts.join(" ")
}

/// The drop-in text.
pub fn dropin_text(o: &InstallOptions) -> String {
    format!(
        "# Written by `lazarus boot-resume install`; removed by `lazarus boot-resume uninstall`.\n\
         # After the gateway has started, resume the agent sessions its restart cut off.\n\
         # The leading '-' keeps a boot-resume failure from failing the gateway.\n\
         [Service]\nExecStartPost=-{}\n",
        exec_line(
            &o.exe,
            &["boot-resume", "--trigger", "gateway-restart"],
            &o.extra_args
        )
    )
}

/// The system wake unit text.
pub fn wake_unit_text(o: &InstallOptions) -> String {
    let user = o
        .run_as
        .as_ref()
        .map(|u| format!("User={u}\n"))
        .unwrap_or_default();
    format!(
        "# Written by `lazarus boot-resume install --system`.\n\
         [Unit]\nDescription=Resume agent sessions cut off by a system sleep (lazarus boot-resume)\n\
         After={SLEEP_TARGETS}\n\n\
         [Service]\nType=oneshot\n{user}ExecStart={}\n\n\
         [Install]\nWantedBy={SLEEP_TARGETS}\n",
        exec_line(
            &o.exe,
            &["boot-resume", "--trigger", "system-wake"],
            &o.extra_args
        )
    )
}

/// The user watch unit text.
pub fn watch_unit_text(o: &InstallOptions) -> String {
    format!(
        "# Written by `lazarus boot-resume install --user`.\n\
         # User managers have no sleep.target: this service detects wake itself\n\
         # (CLOCK_BOOTTIME advancing more than CLOCK_MONOTONIC) and then scans.\n\
         [Unit]\nDescription=Resume agent sessions after system wake (lazarus boot-resume watch)\n\n\
         [Service]\nType=simple\nExecStart={}\nRestart=on-failure\nRestartSec=5\n\n\
         [Install]\nWantedBy=default.target\n",
        exec_line(&o.exe, &["boot-resume", "watch"], &o.extra_args)
    )
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SystemdError {
    let path = path.to_path_buf();
    move |source| SystemdError::Io { what, path, source }
}

fn load_manifest(dir: &Path) -> Result<Option<Manifest>, SystemdError> {
    let p = dir.join(MANIFEST);
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|source| SystemdError::BadManifest { path: p, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("cannot read manifest", &p)(e)),
    }
}

/// Writes the units; returns the manifest (also saved in the unit directory).
pub fn install(o: &InstallOptions) -> Result<Manifest, SystemdError> {
    let mut m = load_manifest(&o.dir)?.unwrap_or_default();
    m.mode = Some(o.mode);
    if !o.dir.exists() {
        std::fs::create_dir_all(&o.dir).map_err(io("cannot create unit directory", &o.dir))?;
        if !m.dirs.contains(&o.dir) {
            m.dirs.push(o.dir.clone());
        }
    }
    let write = |m: &mut Manifest, path: PathBuf, text: String| -> Result<(), SystemdError> {
        std::fs::write(&path, text).map_err(io("cannot write", &path))?;
        if !m.files.contains(&path) {
            m.files.push(path);
        }
        Ok(())
    };
    if let Some(unit) = &o.gateway_unit {
        let name = unit.strip_suffix(".service").unwrap_or(unit);
        if name.is_empty() || name.contains('/') || name.contains('\0') || name.starts_with('.') {
            return Err(SystemdError::BadUnit(unit.clone()));
        }
        let d = o.dir.join(format!("{name}.service.d"));
        if !d.exists() {
            std::fs::create_dir_all(&d).map_err(io("cannot create drop-in directory", &d))?;
            if !m.dirs.contains(&d) {
                m.dirs.push(d.clone());
            }
        }
        write(&mut m, d.join(DROPIN), dropin_text(o))?;
    }
    match o.mode {
        Mode::System => {
            write(&mut m, o.dir.join(WAKE_UNIT), wake_unit_text(o))?;
            if !m.enable.iter().any(|u| u == WAKE_UNIT) {
                m.enable.push(WAKE_UNIT.into());
            }
        }
        Mode::User => {
            write(&mut m, o.dir.join(WATCH_UNIT), watch_unit_text(o))?;
            if !m.enable.iter().any(|u| u == WATCH_UNIT) {
                m.enable.push(WATCH_UNIT.into());
            }
        }
    }
    let mp = o.dir.join(MANIFEST);
    let body = serde_json::to_vec_pretty(&m)
        .map_err(|e| io("cannot encode manifest", &mp)(std::io::Error::other(e)))?;
    std::fs::write(&mp, body).map_err(io("cannot write manifest", &mp))?;
    Ok(m)
}

/// Removes exactly what install wrote (files, then the directories it created if empty,
/// then the manifest). Returns the removed paths.
pub fn uninstall(dir: &Path) -> Result<Vec<PathBuf>, SystemdError> {
    let m = load_manifest(dir)?.ok_or_else(|| SystemdError::NoManifest(dir.join(MANIFEST)))?;
    let mut removed = Vec::new();
    for f in &m.files {
        match std::fs::remove_file(f) {
            Ok(()) => removed.push(f.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot remove", f)(e)),
        }
    }
    let mp = dir.join(MANIFEST);
    std::fs::remove_file(&mp).map_err(io("cannot remove manifest", &mp))?;
    removed.push(mp);
    let mut dirs = m.dirs.clone();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        if std::fs::remove_dir(&d).is_ok() {
            removed.push(d);
        }
    }
    Ok(removed)
}
