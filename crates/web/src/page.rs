//! The page chrome shared by every page, the security headers every response carries, and
//! error pages.

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::assets;
use crate::{Auth, Mode, Web};

/// Scripts and styles from this origin only, no inline code, no plugins, no framing, no
/// form posts elsewhere; fetches (live tail, actions) to this origin only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Adds the security headers to every response of the view.
pub async fn security_headers(req: Request, next: Next) -> Response {
    let is_asset = req.uri().path().starts_with("/assets/");
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !is_asset {
        // sessions hold user text: never kept by a cache
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// Which page this is (the script reads it from `<body data-page>`).
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    List,
    Session,
    Tree,
    Token,
    Error,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::List => "list",
            Kind::Session => "session",
            Kind::Tree => "tree",
            Kind::Token => "token",
            Kind::Error => "error",
        }
    }
}

/// A whole page: head (embedded assets only), the header with the mode (and a warning when
/// nothing asks for a token), and `main`.
pub fn layout(web: &Web, title: &str, kind: Kind, main: Markup) -> Markup {
    let auth = match web.cfg.auth {
        Auth::Token(_) => "token",
        Auth::None => "none",
    };
    let mode = match web.cfg.mode {
        Mode::Gateway(_) => "gateway",
        Mode::ReadOnly => "readonly",
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · Lazarus" }
                link rel="stylesheet" href=(assets::url("app.css"));
                link rel="icon" type="image/svg+xml" href=(assets::url("icon.svg"));
                script src=(assets::url("app.js")) defer {}
            }
            body data-page=(kind.as_str()) data-auth=(auth) data-mode=(mode) {
                header.top {
                    a.brand href="/" { img src=(assets::url("icon.svg")) alt="" width="20" height="20"; "Lazarus" }
                    nav { a href="/" { "Sessions" } }
                    span.mode {
                        @match &web.cfg.mode {
                            Mode::Gateway(_) => { "gateway" }
                            Mode::ReadOnly => { "read-only view of " code { (web.cfg.store.location()) } }
                        }
                    }
                    @if matches!(web.cfg.auth, Auth::None) {
                        span.noauth title="lazarus ui --no-auth: this address is loopback-only" {
                            "no auth: anyone on this machine can read these sessions"
                        }
                    }
                    span #live-state .live-state hidden {}
                    @if matches!(web.cfg.auth, Auth::Token(_)) {
                        button #forget-token type="button" hidden { "forget token" }
                    }
                }
                main #main { (main) }
            }
        }
    }
}

/// An error page with `status`.
pub fn error(web: &Web, status: StatusCode, title: &str, detail: &str) -> Response {
    let body = layout(
        web,
        title,
        Kind::Error,
        html! {
            section.error-page {
                h1 { (title) }
                p { (detail) }
                p { a href="/" { "All sessions" } }
            }
        },
    );
    (status, body).into_response()
}
