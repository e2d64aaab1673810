//! The same bearer token as the gateway's API. A browser gets it once from the person (the
//! token page), keeps it in the tab's session storage and sends it as `Authorization:
//! Bearer …` on every request the script makes; a token is never read from a URL, a cookie
//! or a form field the server sees.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maud::html;
use subtle::ConstantTimeEq;

use crate::page::{self, Kind};
use crate::{Auth, WebState};

/// True when `value` is `Bearer <token>`; constant-time in the token's content.
pub fn bearer_matches(value: Option<&[u8]>, token: &str) -> bool {
    let Some(v) = value else { return false };
    let Some(given) = v
        .strip_prefix(b"Bearer ")
        .or_else(|| v.strip_prefix(b"bearer "))
    else {
        return false;
    };
    given.trim_ascii().ct_eq(token.as_bytes()).into()
}

/// Lets a request through when it carries the token (or none is required). Pages answer a
/// missing token with the token page (401); the parts the script fetches answer 401 text.
pub async fn require(State(web): State<WebState>, req: Request, next: Next) -> Response {
    let Auth::Token(token) = &web.cfg.auth else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if bearer_matches(given, token) {
        return next.run(req).await;
    }
    let path = req.uri().path();
    let is_page = path == "/"
        || (path.starts_with("/sessions/")
            && !path.ends_with("/timeline")
            && !path.ends_with("/live")
            && !path.ends_with("/export.jsonl"));
    let mut resp = if is_page {
        token_page(&web, given.is_some())
    } else {
        (
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token (Authorization: Bearer <token from the token file or LAZARUS_TOKEN>)\n",
        )
            .into_response()
    };
    *resp.status_mut() = StatusCode::UNAUTHORIZED;
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

/// The page that asks for the token. The form is hidden until the script shows it: without
/// the script nothing could send the token in a header, and a plain form would put it in a
/// URL or a request body.
fn token_page(web: &crate::Web, wrong: bool) -> Response {
    let body = page::layout(
        web,
        "Token needed",
        Kind::Token,
        html! {
            section.token-page {
                h1 { "This view needs the gateway's token" }
                @if wrong {
                    p.warn { "The Authorization header did not carry the right token." }
                }
                p {
                    "It is in the token file (" code { "$XDG_STATE_HOME/lazarus/gateway.token" }
                    " unless " code { "--token-file" } " says otherwise) or in "
                    code { "LAZARUS_TOKEN" } ". It is kept in this tab's session storage only and "
                    "sent in an " code { "Authorization" } " header; it never appears in a URL."
                }
                form #token-form hidden autocomplete="off" {
                    label for="token-input" { "Token" }
                    input #token-input type="password" autocomplete="off" spellcheck="false" required;
                    button type="submit" { "Open" }
                    p #token-error .warn hidden {}
                }
                noscript {
                    p.warn {
                        "Without JavaScript, send the token yourself: "
                        code { "curl -H 'Authorization: Bearer TOKEN' URL" } "."
                    }
                }
            }
        },
    );
    (StatusCode::UNAUTHORIZED, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        assert!(bearer_matches(Some(b"Bearer abc"), "abc"));
        assert!(bearer_matches(Some(b"bearer abc "), "abc"));
        assert!(!bearer_matches(Some(b"Bearer abd"), "abc"));
        assert!(!bearer_matches(Some(b"Bearer ab"), "abc"));
        assert!(!bearer_matches(Some(b"Basic abc"), "abc"));
        assert!(!bearer_matches(None, "abc"));
    }
}
