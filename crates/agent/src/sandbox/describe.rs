//! What the sandbox in force says of itself: the banner line a run prints, and the note the
//! session header and every resume receipt record.

use super::{Sandbox, SandboxMode, SandboxNote, seccomp};

impl Sandbox {
    /// One line for the terminal: what the sandbox allows and what enforces it.
    pub fn describe(&self) -> String {
        let p = self.policy;
        if p.mode == SandboxMode::Off {
            return "sandbox: off — shell commands run unconfined (they can read, write and connect anywhere this user can, see every process, and may leave processes running)".to_string();
        }
        if let Some(why) = &self.unavailable {
            return format!(
                "sandbox: {} — UNAVAILABLE: {why}; shell calls will be refused (pass --sandbox off to run them unconfined)",
                p.mode
            );
        }
        let writes = match p.mode {
            SandboxMode::WorkspaceWrite => "write only in the workspace and a private $TMPDIR",
            _ => "write only in a private $TMPDIR",
        };
        let net = if p.network {
            "network allowed"
        } else {
            "no network"
        };
        let sockets = if self.unix_sockets.is_empty() {
            String::from("Unix sockets only in the workspace")
        } else {
            let list: Vec<String> = self
                .unix_sockets
                .iter()
                .map(|s| s.display().to_string())
                .collect();
            format!("Unix sockets only in the workspace and {}", list.join(", "))
        };
        let vcs = match (p.mode, self.vcs_writable) {
            (SandboxMode::WorkspaceWrite, false) => {
                " (its .git, .hg and .jj read-only; --sandbox-allow-vcs-write allows them)"
            }
            (SandboxMode::WorkspaceWrite, true) => {
                " (its .git, .hg and .jj WRITABLE: --sandbox-allow-vcs-write)"
            }
            _ => "",
        };
        format!(
            "sandbox: {} — shell commands read anywhere except credentials and lazarus's own state, {writes}{vcs}; {net}; {sockets}; no terminal; they see only their own processes, have no capabilities, at most {} processes, and nothing they start outlives the call ({})",
            p.mode,
            p.max_processes,
            self.enforcement()
        )
    }

    /// What the kernel enforces, in one line (the receipt's `detail`).
    fn enforcement(&self) -> String {
        let mut ns = Vec::new();
        if !self.privileged {
            ns.push("user");
        }
        ns.extend(["pid", "mount", "uts", "ipc", "cgroup"]);
        if !self.policy.network {
            ns.push("net");
        }
        let pids = self
            .pids
            .as_ref()
            .map(|p| p.describe(self.policy.max_processes))
            .unwrap_or_default();
        let vcs = match (self.policy.mode, self.vcs_writable) {
            (SandboxMode::WorkspaceWrite, false) => "; vcs metadata read-only",
            (SandboxMode::WorkspaceWrite, true) => "; vcs metadata writable",
            _ => "",
        };
        format!(
            "Landlock ABI {}; namespaces: {}; own /proc; own session, no terminal, only fds 0-2; all capabilities dropped, no_new_privs; seccomp: {} calls refused, ioctl TIOCSTI/TIOCLINUX refused, connect gated; {pids}{vcs}",
            self.landlock_abi,
            ns.join(","),
            seccomp::REFUSED.len() + seccomp::NOT_IMPLEMENTED.len() + 4,
        )
    }

    /// What the receipt and the session header record.
    pub fn note(&self) -> SandboxNote {
        let detail = match (&self.unavailable, self.policy.mode) {
            (_, SandboxMode::Off) => "unconfined".to_string(),
            (Some(why), _) => format!("unavailable: {why}; shell refused"),
            (None, _) => self.enforcement(),
        };
        SandboxNote {
            mode: self.policy.mode,
            network: self.policy.mode == SandboxMode::Off || self.policy.network,
            detail,
        }
    }
}
