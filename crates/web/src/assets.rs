//! The view's assets, embedded in the binary (nothing is fetched from anywhere at run time),
//! served with a content hash in their URL so a browser may keep them.

use std::sync::LazyLock;

use axum::extract::{Path, RawQuery};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("assets/app.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("assets/app.js"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        bytes: include_bytes!("assets/icon.svg"),
    },
];

/// CRC-32C of each asset, hex: changes whenever the asset does.
static VERSIONS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| format!("{:08x}", crc32c::crc32c(a.bytes)))
        .collect()
});

/// The URL of asset `name` with its version.
pub fn url(name: &str) -> String {
    match ASSETS.iter().position(|a| a.name == name) {
        Some(i) => format!("/assets/{name}?v={}", VERSIONS[i]),
        None => format!("/assets/{name}"),
    }
}

pub async fn serve(Path(name): Path<String>, RawQuery(q): RawQuery) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such asset\n").into_response();
    };
    let a = &ASSETS[i];
    let current = q.as_deref() == Some(&format!("v={}", VERSIONS[i]));
    let cache = if current {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(a.content_type),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static(cache)),
        ],
        a.bytes,
    )
        .into_response()
}
