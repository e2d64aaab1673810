//! How times, paths and cells are written for people: shared by `sessions list`, `sessions
//! show` and `resume`'s picker.

/// `3 min ago` from an RFC 3339 time (`-` when unknown).
pub(crate) fn ago(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return "-".into();
    };
    let secs = jiff::Timestamp::now().duration_since(t).as_secs();
    match secs {
        i64::MIN..=9 => "just now".into(),
        10..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        86_400..=2_591_999 => format!("{} days ago", secs / 86_400),
        _ => t.strftime("%Y-%m-%d").to_string(),
    }
}

/// `~/src/app` for a path under $HOME.
pub(crate) fn short_path(p: &str) -> String {
    if let Some(home) = std::env::var_os("HOME").and_then(|h| h.into_string().ok())
        && !home.is_empty()
        && home != "/"
        && let Some(rest) = p.strip_prefix(&home)
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return format!("~{rest}");
    }
    p.to_string()
}

/// At most `n` characters, `…` when cut (from the left when `keep_end`: paths end in what
/// tells them apart).
pub(crate) fn fit(s: &str, n: usize, keep_end: bool) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    if keep_end {
        let tail: String = s.chars().skip(count - (n - 1)).collect();
        format!("…{tail}")
    } else {
        let head: String = s.chars().take(n - 1).collect();
        format!("{head}…")
    }
}

/// The existing ids closest to a mistyped one (at most three, closest first).
pub(crate) fn nearest_ids<'a>(
    wanted: &str,
    ids: impl Iterator<Item = &'a lazarus_session::SessionId>,
) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = ids
        .map(|id| {
            (
                strsim::normalized_damerau_levenshtein(wanted, id),
                id.as_str(),
            )
        })
        .filter(|(score, _)| *score >= 0.6)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, id)| id.to_string())
        .collect()
}

/// "did you mean a, b? " for a session id that does not exist (empty when nothing is close).
pub(crate) fn did_you_mean(store: &dyn lazarus_session::Store, wanted: &str) -> String {
    let ids = store.ids().unwrap_or_default();
    match nearest_ids(wanted, ids.iter()).as_slice() {
        [] => String::new(),
        near => format!(
            "did you mean {}? ",
            near.iter()
                .map(|i| crate::term::escape(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
