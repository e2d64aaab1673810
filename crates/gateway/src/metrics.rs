//! Prometheus text exposition, written by hand: labelled counters, a latency histogram and
//! gauges computed at scrape time.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds (seconds) of the append latency buckets.
const BUCKETS: [f64; 12] = [
    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
];

struct Family {
    help: &'static str,
    kind: &'static str,
}

const FAMILIES: &[(&str, Family)] = &[
    (
        "lazarus_appends_total",
        Family {
            help: "Durable records appended, by kind.",
            kind: "counter",
        },
    ),
    (
        "lazarus_resumes_total",
        Family {
            help: "Resume receipts written, by trigger.",
            kind: "counter",
        },
    ),
    (
        "lazarus_takeovers_total",
        Family {
            help: "Sessions taken over from a gateway that is gone (shared store only).",
            kind: "counter",
        },
    ),
    (
        "lazarus_model_requests_total",
        Family {
            help: "Model requests recorded, by result (ok or failed after retries).",
            kind: "counter",
        },
    ),
    (
        "lazarus_model_retries_total",
        Family {
            help: "Model attempts that failed and were retried.",
            kind: "counter",
        },
    ),
    (
        "lazarus_tool_calls_total",
        Family {
            help: "Tool call outcomes, by outcome (ok, error, timeout, cancelled, in_doubt).",
            kind: "counter",
        },
    ),
    (
        "lazarus_http_requests_total",
        Family {
            help: "HTTP requests, by route and status.",
            kind: "counter",
        },
    ),
    (
        "lazarus_runs_total",
        Family {
            help: "Session runs (drive calls) finished, by outcome.",
            kind: "counter",
        },
    ),
];

/// A gauge family computed at scrape time: name, help, (labels, value) series.
pub type Gauge<'a> = (&'a str, &'a str, Vec<(String, f64)>);

/// Process-wide metrics.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<(&'static str, String), u64>>,
    hist: Mutex<Hist>,
}

#[derive(Default)]
struct Hist {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Adds 1 to `name{label="value"}` (labels given as pairs).
    pub fn inc(&self, name: &'static str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1);
    }

    pub fn add(&self, name: &'static str, labels: &[(&str, &str)], n: u64) {
        let l = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        *c.entry((name, l)).or_default() += n;
    }

    /// Records the latency of one durable append (write + fdatasync).
    pub fn observe_append(&self, took: Duration) {
        let s = took.as_secs_f64();
        let mut h = self.hist.lock().unwrap_or_else(|p| p.into_inner());
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += s;
        h.count += 1;
    }

    /// The exposition text; `gauges` are (name, help, [(labels, value)]).
    pub fn render(&self, gauges: &[Gauge<'_>]) -> String {
        let mut out = String::new();
        let c = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        for (name, fam) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {}", fam.help);
            let _ = writeln!(out, "# TYPE {name} {}", fam.kind);
            for ((n, labels), v) in c.iter() {
                if n == name {
                    if labels.is_empty() {
                        let _ = writeln!(out, "{name} {v}");
                    } else {
                        let _ = writeln!(out, "{name}{{{labels}}} {v}");
                    }
                }
            }
        }
        drop(c);
        let h = self.hist.lock().unwrap_or_else(|p| p.into_inner());
        let name = "lazarus_append_fsync_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Latency of durable appends made by the gateway (write + fdatasync, lock wait included)."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {}", h.counts[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}", h.sum);
        let _ = writeln!(out, "{name}_count {}", h.count);
        drop(h);
        for (name, help, series) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (labels, v) in series {
                if labels.is_empty() {
                    let _ = writeln!(out, "{name} {v}");
                } else {
                    let _ = writeln!(out, "{name}{{{labels}}} {v}");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families() {
        let m = Metrics::default();
        m.inc("lazarus_tool_calls_total", &[("outcome", "in_doubt")]);
        m.inc("lazarus_tool_calls_total", &[("outcome", "in_doubt")]);
        m.observe_append(Duration::from_millis(3));
        let t = m.render(&[(
            "lazarus_sessions",
            "x",
            vec![("status=\"idle\"".into(), 2.0)],
        )]);
        assert!(t.contains("lazarus_tool_calls_total{outcome=\"in_doubt\"} 2"));
        assert!(t.contains("lazarus_append_fsync_seconds_bucket{le=\"0.005\"} 1"));
        assert!(t.contains("lazarus_append_fsync_seconds_bucket{le=\"0.002\"} 0"));
        assert!(t.contains("lazarus_sessions{status=\"idle\"} 2"));
    }
}
