//! The `Host` a request names, checked before anything else answers it (`lazarus ui` and
//! `lazarus serve`, every route, `/metrics` too).
//!
//! A page on another site cannot read a loopback server's answers, unless its own name is
//! made to point at 127.0.0.1 (DNS rebinding): then the browser sends the requests there as
//! same-origin ones, with the attacker's name in `Host`. A server that answers only the
//! names it is known by closes that door: an IP address (a rebinding page never has one:
//! its origin is a name), `localhost`, and the names the operator gives (`--allowed-host`).
//! An IP address is accepted when it is a loopback address, the address the server listens
//! on, or any address when it listens on all of them (`0.0.0.0`, `::`: remote clients name
//! it by one of the machine's own). Anything else is answered `421 Misdirected Request`; a
//! request without `Host` (HTTP/1.0) `400`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The names a server answers (besides IP addresses and `localhost`).
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    listen: IpAddr,
    names: Vec<String>,
}

impl AllowedHosts {
    /// For a server listening on `listen`, also answering `names` (host names, any case, no
    /// port; a leading `.` allows every name under it: `.example.com`).
    pub fn new(listen: SocketAddr, names: impl IntoIterator<Item = String>) -> Self {
        AllowedHosts {
            listen: listen.ip(),
            names: names
                .into_iter()
                .map(|n| n.trim().trim_end_matches('.').to_ascii_lowercase())
                .filter(|n| !n.is_empty())
                .collect(),
        }
    }

    /// Whether a request naming `host` (a `Host` header's value: `name`, `name:port`,
    /// `1.2.3.4:port`, `[::1]:port`) is answered.
    pub fn allows(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return ip.is_loopback() || ip == self.listen || self.listen.is_unspecified();
        }
        if name == "localhost" {
            return true;
        }
        self.names.iter().any(|n| match n.strip_prefix('.') {
            Some(domain) => name == domain || name.ends_with(n.as_str()),
            None => name == *n,
        })
    }
}

/// The name part of a `Host` value, lowercased, without port or trailing dot; `None` when it
/// is not a plausible host (empty, a user part, spaces).
fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    if host.is_empty() || host.contains(['@', ' ', '/', '\\']) {
        return None;
    }
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6] or [v6]:port
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        if !(after.is_empty() || (after.starts_with(':') && port_ok(&after[1..]))) {
            return None;
        }
        &host[..end + 2]
    } else {
        match host.rsplit_once(':') {
            Some((n, port)) if port_ok(port) => n,
            Some(_) => return None,
            None => host,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

fn port_ok(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

async fn check(State(allowed): State<Arc<AllowedHosts>>, req: Request, next: Next) -> Response {
    // HTTP/2 carries the authority in the URI; HTTP/1.1 in Host
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()));
    match host {
        None => refuse(
            StatusCode::BAD_REQUEST,
            "missing_host",
            "the request names no Host; this server answers only requests that say which host they are for",
        ),
        Some(h) if allowed.allows(&h) => next.run(req).await,
        Some(_) => refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_host",
            "this server does not answer that Host: only an IP address it is reached by, localhost, or a name given with --allowed-host (a page whose name was pointed at this machine must not read it)",
        ),
    }
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({"error": {"code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

/// `app` answering only requests whose `Host` `allowed` allows (checked before every route,
/// the fallback included).
pub fn guard(app: Router, allowed: AllowedHosts) -> Router {
    app.layer(axum::middleware::from_fn_with_state(
        Arc::new(allowed),
        check,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_addresses_localhost_and_given_names_are_answered() {
        let lo: SocketAddr = "127.0.0.1:7077".parse().unwrap();
        let a = AllowedHosts::new(lo, ["Box.Example".to_string(), ".corp.test".to_string()]);
        for ok in [
            "127.0.0.1:7077",
            "127.0.0.1",
            "127.9.9.9:1",
            "[::1]:7077",
            "[::1]",
            "localhost:7077",
            "LOCALHOST",
            "localhost.",
            "box.example:80",
            "corp.test",
            "a.corp.test:1",
        ] {
            assert!(a.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:7077",
            "evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1:7077",
            "localhost.evil.example",
            "xcorp.test",
            "",
            "user@127.0.0.1",
            "127.0.0.1:port",
            "[::1]x",
            "evil.example:7077:1",
        ] {
            assert!(!a.allows(bad), "{bad}");
        }
        // listening on every address: any IP address names this machine
        let any = AllowedHosts::new("0.0.0.0:7077".parse().unwrap(), Vec::new());
        assert!(any.allows("10.0.0.1:7077"));
        assert!(!any.allows("evil.example:7077"));
        let one = AllowedHosts::new("192.168.1.5:7077".parse().unwrap(), Vec::new());
        assert!(one.allows("192.168.1.5:7077"));
        assert!(!one.allows("192.168.1.6:7077"));
    }
}
