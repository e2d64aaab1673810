//! Prometheus metrics through `prometheus-client` (OpenMetrics text): typed counter
//! families, the append latency histogram, and gauges set at scrape time.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds (seconds) of the append latency buckets.
const BUCKETS: [f64; 12] = [
    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TriggerLabel {
    trigger: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HowLabel {
    how: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// What the gateway knows only when asked: set on every scrape.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Sessions in the store, by status (every status listed, zeros included).
    pub sessions_by_status: Vec<(String, i64)>,
    pub sessions_open: i64,
    pub runs_active: i64,
    pub runs_queued: i64,
    pub ready: bool,
}

/// Process-wide metrics.
pub struct Metrics {
    registry: Registry,
    appends: Family<KindLabel, Counter>,
    resumes: Family<TriggerLabel, Counter>,
    takeovers: Counter,
    inbox_wakeups: Counter,
    model_requests: Family<ResultLabel, Counter>,
    model_retries: Counter,
    tool_calls: Family<OutcomeLabel, Counter>,
    http_requests: Family<HttpLabels, Counter>,
    runs: Family<OutcomeLabel, Counter>,
    append_fsync: Histogram,
    sessions: Family<StatusLabel, Gauge>,
    sessions_open: Gauge,
    runs_active: Gauge,
    runs_queued: Gauge,
    ready: Gauge,
    connections_open: Gauge,
    connections_refused: Family<HowLabel, Counter>,
    connections_idle_closed: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            appends: Family::default(),
            resumes: Family::default(),
            takeovers: Counter::default(),
            inbox_wakeups: Counter::default(),
            model_requests: Family::default(),
            model_retries: Counter::default(),
            tool_calls: Family::default(),
            http_requests: Family::default(),
            runs: Family::default(),
            append_fsync: Histogram::new(BUCKETS),
            sessions: Family::default(),
            sessions_open: Gauge::default(),
            runs_active: Gauge::default(),
            runs_queued: Gauge::default(),
            ready: Gauge::default(),
            connections_open: Gauge::default(),
            connections_refused: Family::default(),
            connections_idle_closed: Counter::default(),
        };
        let mut r = Registry::default();
        r.register(
            "lazarus_appends",
            "Durable records appended, by kind",
            m.appends.clone(),
        );
        r.register(
            "lazarus_resumes",
            "Resume receipts written, by trigger",
            m.resumes.clone(),
        );
        r.register(
            "lazarus_takeovers",
            "Sessions taken over from a gateway that is gone (shared store only)",
            m.takeovers.clone(),
        );
        r.register(
            "lazarus_inbox_wakeups",
            "Inbox passes run at once on the store's mail signal (PostgreSQL LISTEN/NOTIFY), not at the poll",
            m.inbox_wakeups.clone(),
        );
        r.register(
            "lazarus_model_requests",
            "Model requests recorded, by result (ok or failed after retries)",
            m.model_requests.clone(),
        );
        r.register(
            "lazarus_model_retries",
            "Model attempts that failed and were retried",
            m.model_retries.clone(),
        );
        r.register(
            "lazarus_tool_calls",
            "Tool call outcomes, by outcome (ok, error, timeout, cancelled, in_doubt)",
            m.tool_calls.clone(),
        );
        r.register(
            "lazarus_http_requests",
            "HTTP requests, by route and status",
            m.http_requests.clone(),
        );
        r.register(
            "lazarus_runs",
            "Session runs (drive calls) finished, by outcome",
            m.runs.clone(),
        );
        r.register(
            "lazarus_append_fsync_seconds",
            "Latency of durable appends made by the gateway (write + fdatasync, lock wait included)",
            m.append_fsync.clone(),
        );
        r.register(
            "lazarus_sessions",
            "Sessions in the store, by status",
            m.sessions.clone(),
        );
        r.register(
            "lazarus_sessions_open",
            "Sessions open (writer lock held) in this gateway",
            m.sessions_open.clone(),
        );
        r.register(
            "lazarus_runs_active",
            "Sessions being driven now",
            m.runs_active.clone(),
        );
        r.register(
            "lazarus_runs_queued",
            "Sessions waiting for a run slot",
            m.runs_queued.clone(),
        );
        r.register(
            "lazarus_ready",
            "1 once the startup recovery scan is done",
            m.ready.clone(),
        );
        r.register(
            "lazarus_connections_open",
            "HTTP connections being served (at most --max-connections)",
            m.connections_open.clone(),
        );
        r.register(
            "lazarus_connections_refused",
            "Connections over --max-connections, by how they were refused (answered: 429 too_many_connections, /healthz still answered; closed: closed at once)",
            m.connections_refused.clone(),
        );
        r.register(
            "lazarus_connections_idle_closed",
            "Connections closed after --idle-timeout without a byte moving either way",
            m.connections_idle_closed.clone(),
        );
        for h in ["answered", "closed"] {
            m.connections_refused
                .get_or_create(&HowLabel { how: h.into() })
                .inc_by(0);
        }
        // Known label values start at zero, so a dashboard sees every series from the start.
        for t in ["gateway-start", "gateway-takeover", "event", "message"] {
            m.resumes
                .get_or_create(&TriggerLabel { trigger: t.into() })
                .inc_by(0);
        }
        for o in ["ok", "error", "timeout", "cancelled", "in_doubt"] {
            m.tool_calls
                .get_or_create(&OutcomeLabel { outcome: o.into() })
                .inc_by(0);
        }
        for r in ["ok", "failed"] {
            m.model_requests
                .get_or_create(&ResultLabel { result: r.into() })
                .inc_by(0);
        }
        for o in ["idle", "max_turns", "cancelled", "failed", "error"] {
            m.runs
                .get_or_create(&OutcomeLabel { outcome: o.into() })
                .inc_by(0);
        }
        Metrics { registry: r, ..m }
    }
}

impl Metrics {
    /// A durable record of `kind` was appended.
    pub fn appended(&self, kind: &str) {
        self.appends
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }

    /// A resume receipt was written.
    pub fn resumed(&self, trigger: &str) {
        self.resumes
            .get_or_create(&TriggerLabel {
                trigger: trigger.into(),
            })
            .inc();
    }

    /// A session whose gateway is gone was taken over.
    pub fn took_over(&self) {
        self.takeovers.inc();
    }

    /// The store signalled mail, and an inbox pass runs at once.
    pub fn inbox_woken(&self) {
        self.inbox_wakeups.inc();
    }

    /// A model request was recorded (`ok`, or `failed` after retries).
    pub fn model_request(&self, result: &str) {
        self.model_requests
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }

    /// A model attempt failed and is retried.
    pub fn model_retry(&self) {
        self.model_retries.inc();
    }

    /// A tool call ended with `outcome`.
    pub fn tool_call(&self, outcome: &str) {
        self.tool_calls
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// An HTTP request on `route` (the matched pattern) was answered with `status`.
    pub fn http_request(&self, route: &str, status: u16) {
        self.http_requests
            .get_or_create(&HttpLabels {
                route: route.into(),
                status: status.to_string(),
            })
            .inc();
    }

    /// A run (drive call) finished with `outcome`.
    pub fn run_finished(&self, outcome: &str) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc();
    }

    /// A connection is served (+1) or done (-1).
    pub fn connection_open(&self, delta: i64) {
        self.connections_open.inc_by(delta);
    }

    /// A connection over the cap was refused: `answered` (429, /healthz answered) or `closed`.
    pub fn connection_refused(&self, how: &str) {
        self.connections_refused
            .get_or_create(&HowLabel { how: how.into() })
            .inc();
    }

    /// A connection was closed for being idle.
    pub fn connection_idle_closed(&self) {
        self.connections_idle_closed.inc();
    }

    /// Records the latency of one durable append (write + fdatasync).
    pub fn observe_append(&self, took: Duration) {
        self.append_fsync.observe(took.as_secs_f64());
    }

    /// The exposition text (OpenMetrics, [`CONTENT_TYPE`]), with the gauges set from `now`.
    pub fn render(&self, now: &Snapshot) -> String {
        for (status, n) in &now.sessions_by_status {
            self.sessions
                .get_or_create(&StatusLabel {
                    status: status.clone(),
                })
                .set(*n);
        }
        self.sessions_open.set(now.sessions_open);
        self.runs_active.set(now.runs_active);
        self.runs_queued.set(now.runs_queued);
        self.ready.set(i64::from(now.ready));
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families() {
        let m = Metrics::default();
        m.tool_call("in_doubt");
        m.tool_call("in_doubt");
        m.http_request("/v1/sessions", 202);
        m.observe_append(Duration::from_millis(3));
        let t = m.render(&Snapshot {
            sessions_by_status: vec![("idle".into(), 2)],
            ready: true,
            ..Snapshot::default()
        });
        assert!(
            t.contains("lazarus_tool_calls_total{outcome=\"in_doubt\"} 2"),
            "{t}"
        );
        assert!(t.contains("lazarus_http_requests_total{route=\"/v1/sessions\",status=\"202\"} 1"));
        assert!(t.contains("lazarus_append_fsync_seconds_bucket{le=\"0.005\"} 1"));
        assert!(t.contains("lazarus_append_fsync_seconds_bucket{le=\"0.002\"} 0"));
        assert!(t.contains("lazarus_sessions{status=\"idle\"} 2"));
        assert!(t.contains("lazarus_ready 1"));
        assert!(t.ends_with("# EOF\n"));
    }
}
