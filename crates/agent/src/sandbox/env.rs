//! What environment a `shell` call gets: `[shell_environment_policy]`, as Codex users know it.
//!
//! 1. Start from `inherit`: `core` (the default: [`CORE_VARS`] and `LC_*`), `all` (the whole
//!    environment of the runner) or `none`.
//! 2. Unless `ignore_default_excludes`, drop what looks like a credential: a name with a word
//!    of [`SECRET_NAME_WORDS`] or containing one of [`SECRET_NAME_PARTS`], and a value that
//!    looks like one ([`secret_value`]: a URL with a password, a known token prefix, a
//!    private key).
//! 3. Drop names matching any `exclude` pattern.
//! 4. Apply `set` (added or replaced, never filtered by 2 or 3).
//! 5. If `include_only` is not empty, keep only names matching one of its patterns.
//!
//! Patterns are globs (`*`, `?`), matched without regard to case. The shell tool then sets
//! the call's own variables: `TMPDIR` (the call's private directory when sandboxed), `PAGER`
//! and `GIT_PAGER` (`cat`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use serde::{Deserialize, Serialize};

/// Which variables of the runner's environment a shell call starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Inherit {
    /// [`CORE_VARS`] and `LC_*` only.
    #[default]
    Core,
    /// Everything (still filtered by the default excludes).
    All,
    /// Nothing.
    None,
}

impl Inherit {
    pub fn as_str(self) -> &'static str {
        match self {
            Inherit::Core => "core",
            Inherit::All => "all",
            Inherit::None => "none",
        }
    }
}

/// `[shell_environment_policy]` of the configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvPolicy {
    pub inherit: Inherit,
    /// Keep variables that look like credentials (names and values); off by default.
    pub ignore_default_excludes: bool,
    /// Globs of names to drop.
    pub exclude: Vec<String>,
    /// Variables to set (after the filters).
    pub set: BTreeMap<String, String>,
    /// If not empty: globs of the only names kept (applied last).
    pub include_only: Vec<String>,
}

/// The variables `inherit = "core"` keeps (besides every `LC_*`).
pub const CORE_VARS: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR", "TZ",
];

/// Name parts that mark a credential wherever they appear (Codex's `*KEY*`, `*SECRET*`,
/// `*TOKEN*`, and a few more), any case.
pub const SECRET_NAME_PARTS: &[&str] =
    &["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Words of a name (split at `_`, `-` and `.`) that mark a credential: `GITHUB_PAT`,
/// `HF_AUTH`, `DB_PASS`, `SENTRY_DSN`.
pub const SECRET_NAME_WORDS: &[&str] = &[
    "PAT",
    "AUTH",
    "PASS",
    "CREDS",
    "COOKIE",
    "DSN",
    "PRIVATE",
    "SIGNATURE",
];

/// Value prefixes of well-known credentials (API keys and tokens of common services).
pub const SECRET_VALUE_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "hf_",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "npm_",
    "pypi-",
    "dop_v1_",
    "-----BEGIN",
];

/// Whether a variable's name says it holds a credential.
pub fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_NAME_PARTS.iter().any(|p| upper.contains(p)) {
        return true;
    }
    upper
        .split(['_', '-', '.'])
        .any(|w| SECRET_NAME_WORDS.contains(&w))
}

/// Whether a value looks like a credential: a URL with a password (`scheme://user:pw@host`),
/// a known token prefix ([`SECRET_VALUE_PREFIXES`]), or a JSON Web Token.
pub fn secret_value(value: &str) -> bool {
    let v = value.trim();
    if SECRET_VALUE_PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    if v.starts_with("eyJ") && v.matches('.').count() == 2 {
        return true;
    }
    // a password in any URL of the value (DATABASE_URL, a proxy, a list of URLs)
    v.match_indices("://").any(|(i, _)| {
        let rest = &v[i + 3..];
        let end = rest
            .find(['/', ' ', ',', ';', '?', '#'])
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}

/// `*` and `?` glob, without regard to ASCII case.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some((b'?', rest)) => !n.is_empty() && go(rest, &n[1..]),
            Some((c, rest)) => n
                .first()
                .is_some_and(|d| d.eq_ignore_ascii_case(c) && go(rest, &n[1..])),
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// What a shell call gets, and what was held back as a credential (names only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellEnv {
    pub vars: Vec<(OsString, OsString)>,
    /// Names dropped because they or their values look like credentials.
    pub withheld: Vec<String>,
}

impl EnvPolicy {
    /// The environment of a shell call, from `vars` (the runner's environment).
    pub fn compute(&self, vars: impl IntoIterator<Item = (OsString, OsString)>) -> ShellEnv {
        let mut out = ShellEnv::default();
        let mut kept: BTreeMap<OsString, OsString> = BTreeMap::new();
        for (name, value) in vars {
            let n = name.to_string_lossy();
            let inherited = match self.inherit {
                Inherit::All => true,
                Inherit::None => false,
                Inherit::Core => CORE_VARS.contains(&n.as_ref()) || n.starts_with("LC_"),
            };
            if !inherited {
                continue;
            }
            if !self.ignore_default_excludes
                && (secret_name(&n) || secret_value(&value.to_string_lossy()))
            {
                out.withheld.push(n.into_owned());
                continue;
            }
            if self.exclude.iter().any(|p| glob_match(p, &n)) {
                continue;
            }
            kept.insert(name, value);
        }
        for (k, v) in &self.set {
            kept.insert(k.into(), v.into());
        }
        if !self.include_only.is_empty() {
            kept.retain(|k, _| {
                let k = k.to_string_lossy();
                self.include_only.iter().any(|p| glob_match(p, &k))
            });
        }
        out.vars = kept.into_iter().collect();
        out.withheld.sort();
        out
    }

    /// [`EnvPolicy::compute`] over this process's environment.
    pub fn compute_current(&self) -> ShellEnv {
        self.compute(std::env::vars_os())
    }

    /// One line: the policy in words.
    pub fn describe(&self) -> String {
        let mut s = format!("inherit {}", self.inherit.as_str());
        if self.ignore_default_excludes {
            s.push_str(", credentials NOT filtered (ignore_default_excludes)");
        } else {
            s.push_str(", credential-like names and values dropped");
        }
        if !self.exclude.is_empty() {
            s.push_str(&format!(", exclude {}", self.exclude.join(" ")));
        }
        if !self.set.is_empty() {
            let names: Vec<&str> = self.set.keys().map(String::as_str).collect();
            s.push_str(&format!(", set {}", names.join(" ")));
        }
        if !self.include_only.is_empty() {
            s.push_str(&format!(", include_only {}", self.include_only.join(" ")));
        }
        s
    }

    /// Checks the patterns and names; an error says which one is wrong.
    pub fn validate(&self) -> Result<(), String> {
        for k in self.set.keys() {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(format!(
                    "shell_environment_policy.set: {k:?} is not a variable name (no '=' or NUL, not empty)"
                ));
            }
        }
        for v in self.set.values() {
            if v.contains('\0') {
                return Err("shell_environment_policy.set: a value holds a NUL byte".into());
            }
        }
        Ok(())
    }
}

/// `name` as shown: the name alone (values are never printed).
pub fn names(vars: &[(OsString, OsString)]) -> Vec<String> {
    vars.iter()
        .map(|(k, _)| OsStr::to_string_lossy(k).into_owned())
        .collect()
}
