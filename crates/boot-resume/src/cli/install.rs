//! `install`, `uninstall` (systemd units) and `watch` (wake detection).
use super::args::{InstallArgs, Trigger, UninstallArgs, WatchArgs};
use super::scan_cmd::run_scan;
use crate::discover::ProcessEnv;
use crate::systemd::{self, InstallOptions, Mode};
use crate::watch;
use anyhow::Context;

pub(super) fn install(a: InstallArgs) -> anyhow::Result<i32> {
    let mode = if a.system { Mode::System } else { Mode::User };
    let dir = a
        .dir
        .unwrap_or_else(|| systemd::default_dir(mode, &ProcessEnv));
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("cannot find the absolute path of the running lazarus binary")?;
    let o = InstallOptions {
        mode,
        dir: dir.clone(),
        gateway_unit: a.gateway_unit,
        exe,
        extra_args: a.extra,
        run_as: a.run_as,
    };
    let m = systemd::install(&o)?;
    for f in &m.files {
        println!("wrote {}", f.display());
    }
    let ctl = if mode == Mode::User {
        "systemctl --user"
    } else {
        "systemctl"
    };
    println!(
        "next: {ctl} daemon-reload && {ctl} enable --now {}",
        m.enable.join(" ")
    );
    Ok(0)
}

pub(super) fn uninstall(a: UninstallArgs) -> anyhow::Result<i32> {
    let mode = if a.system { Mode::System } else { Mode::User };
    let dir = a
        .dir
        .unwrap_or_else(|| systemd::default_dir(mode, &ProcessEnv));
    for p in systemd::uninstall(&dir)? {
        println!("removed {}", p.display());
    }
    Ok(0)
}

pub(super) fn watch(w: WatchArgs) -> anyhow::Result<i32> {
    let mut scan = w.scan;
    scan.trigger = Trigger::SystemWake;
    eprintln!(
        "lazarus boot-resume watch: sampling clocks every {}, wake threshold {}",
        humantime::format_duration(w.interval),
        humantime::format_duration(w.threshold)
    );
    watch::watch(
        &mut watch::SystemClock,
        w.interval,
        w.threshold,
        &mut std::thread::sleep,
        &mut || true,
        &mut |slept| {
            eprintln!("woke after ~{}s asleep: scanning", slept.as_secs());
            if let Err(e) = run_scan(&scan, &ProcessEnv) {
                eprintln!("boot-resume scan failed: {e:#}");
            }
            true
        },
    );
    Ok(0)
}
