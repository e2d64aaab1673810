//! Timestamps as the ledger writes them.

/// RFC 3339 in UTC with milliseconds, e.g. `2026-12-02T10:00:00.000Z`.
pub fn format_ts(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Now, as [`format_ts`] writes it.
pub fn now_ts() -> String {
    format_ts(jiff::Timestamp::now())
}

/// Milliseconds from one record time to a later one (`None` when either does not parse; 0
/// when `to` is earlier).
pub fn millis_between(from: &str, to: &str) -> Option<u64> {
    let from: jiff::Timestamp = from.parse().ok()?;
    let to: jiff::Timestamp = to.parse().ok()?;
    Some(to.duration_since(from).as_millis().max(0) as u64)
}
