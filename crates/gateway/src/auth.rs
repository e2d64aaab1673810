//! Bearer-token auth: the token comes from `LAZARUS_TOKEN` or a token file created with mode
//! 0600 on first start; every `/v1` request must carry it. Compared in constant time.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use subtle::ConstantTimeEq;

/// Where the token came from (for the startup message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Env,
    /// Read from an existing file.
    File(PathBuf),
    /// Created now with a fresh random token.
    Created(PathBuf),
}

/// The default token file: `$XDG_STATE_HOME/lazarus/gateway.token` (the path
/// `lazarus boot-resume` reads too).
pub fn default_token_file(state_dir: &Path) -> PathBuf {
    state_dir.join("gateway.token")
}

/// Returns the token: `env_token` when set and non-empty, else the file's content, else a new
/// random token written to `path` with mode 0600 (the directory is created 0700).
pub fn load_or_create_token(
    env_token: Option<String>,
    path: &Path,
) -> Result<(String, TokenSource)> {
    if let Some(t) = env_token.map(|t| t.trim().to_string())
        && !t.is_empty()
    {
        return Ok((t, TokenSource::Env));
    }
    match read_private(path) {
        Ok(s) => {
            let t = s.trim().to_string();
            anyhow::ensure!(
                !t.is_empty(),
                "token file {} is empty; delete it to have a new token created",
                path.display()
            );
            return Ok((t, TokenSource::File(path.to_path_buf())));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading token file {}", path.display())),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let token = random_token();
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating token file {}", path.display()))?;
    f.write_all(format!("{token}\n").as_bytes())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("writing token file {}", path.display()))?;
    Ok((token, TokenSource::Created(path.to_path_buf())))
}

/// Reads an existing token file, refusing one that others can read (a token anyone on the
/// machine can read guards nothing) or that is not a regular file.
fn read_private(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let (mut f, meta) = lazarus_ledger::fs::open_regular_meta(path, false, false)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "token file {} can be read by others (mode {mode:04o}); run `chmod 600 {}` (and make a new token if others may have read it)",
                path.display(),
                path.display()
            ),
        ));
    }
    let mut s = String::new();
    Read::by_ref(&mut f).take(4096).read_to_string(&mut s)?;
    Ok(s)
}

/// Shortest token accepted for a gateway other hosts can reach: the length of 32 random bytes
/// written in base64.
pub const REMOTE_TOKEN_CHARS_MIN: usize = 43;

/// Refuses a token too short to guard a gateway reachable from other hosts.
pub fn check_remote_token(token: &str) -> Result<()> {
    anyhow::ensure!(
        token.chars().count() >= REMOTE_TOKEN_CHARS_MIN,
        "a gateway reachable from other hosts needs a token of at least 32 random bytes ({REMOTE_TOKEN_CHARS_MIN} characters); make one with `head -c 32 /dev/urandom | base64 > TOKENFILE; chmod 600 TOKENFILE` (or delete the token file to have one created)"
    );
    Ok(())
}

/// Refuses a non-loopback listen address unless `allow_remote`: checked before anything is
/// written (a token file, a session).
pub fn check_listen(listen: std::net::SocketAddr, allow_remote: bool) -> Result<()> {
    anyhow::ensure!(
        allow_remote || listen.ip().is_loopback(),
        "refusing to listen on {listen} (not loopback); pass --allow-remote to serve other hosts"
    );
    Ok(())
}

/// 32 random bytes, hex.
pub fn random_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// True when the `Authorization` header value is `Bearer <token>`; constant-time in the
/// token's content.
pub fn check_bearer(header: Option<&[u8]>, token: &str) -> bool {
    let Some(h) = header else { return false };
    let Some(given) = h
        .strip_prefix(b"Bearer ")
        .or_else(|| h.strip_prefix(b"bearer "))
    else {
        return false;
    };
    let given = given.trim_ascii();
    given.ct_eq(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        assert!(check_bearer(Some(b"Bearer abc"), "abc"));
        assert!(!check_bearer(Some(b"Bearer abd"), "abc"));
        assert!(!check_bearer(Some(b"Bearer ab"), "abc"));
        assert!(!check_bearer(Some(b"Basic abc"), "abc"));
        assert!(!check_bearer(None, "abc"));
    }

    #[test]
    fn token_file_created_private_then_reused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/gateway.token");
        let (t, src) = load_or_create_token(None, &p).unwrap();
        assert_eq!(src, TokenSource::Created(p.clone()));
        assert_eq!(t.len(), 64);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (t2, src2) = load_or_create_token(None, &p).unwrap();
        assert_eq!(t, t2);
        assert_eq!(src2, TokenSource::File(p.clone()));
        let (t3, src3) = load_or_create_token(Some("env-tok".into()), &p).unwrap();
        assert_eq!((t3.as_str(), src3), ("env-tok", TokenSource::Env));
    }
}
