//! HTTP routes (axum).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use lazarus_session::state::COMPACT_ACTION;
use lazarus_session::{CallState, InboxMessage, SessionId, SessionState, Status, StoredRecord};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::auth;
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;
use crate::metrics::{self, Snapshot};

/// Shared by the handlers.
#[derive(Clone)]
pub struct AppState {
    pub hub: Arc<Hub>,
    pub token: Arc<str>,
    /// Cancelled when the server stops accepting: live tails end.
    pub stop: CancellationToken,
}

/// The whole application.
pub fn router(state: AppState) -> Router {
    let limit = state.hub.cfg.limits.max_body_bytes;
    let v1 = Router::new()
        .route("/sessions", get(list_sessions).post(create_session))
        .route("/sessions/{id}", get(show_session))
        .route("/sessions/{id}/records", get(records))
        .route("/sessions/{id}/stream", get(stream))
        .route("/sessions/{id}/messages", post(post_message))
        .route("/sessions/{id}/events", post(post_event))
        .route("/sessions/{id}/fork", post(fork))
        .route("/sessions/{id}/compact", post(compact))
        .layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .nest("/v1", v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("method not allowed on this route")
}

async fn count_requests(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let resp = next.run(req).await;
    st.hub.metrics.http_request(&route, resp.status().as_u16());
    resp
}

async fn require_token(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let h = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if !auth::check_bearer(h, &st.token) {
        let mut r = ApiError::unauthorized("missing or wrong bearer token (Authorization: Bearer <token from the token file or LAZARUS_TOKEN>)",
        )
        .into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    next.run(req).await
}

fn body_json<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
    empty_ok: bool,
) -> ApiResult<T> {
    let b = body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(
                "body_too_large",
                format!("request body larger than {limit} bytes (limit --max-body-bytes)"),
            )
        } else {
            ApiError::new(r.status(), "bad_body", r.body_text())
        }
    })?;
    let b: &[u8] = if b.iter().all(u8::is_ascii_whitespace) && empty_ok {
        b"{}"
    } else {
        &b
    };
    serde_json::from_slice(b)
        .map_err(|e| ApiError::bad_request("malformed_json", format!("request body: {e}")))
}

/// The session id of a request path: where an id enters the gateway, checked once.
fn path_id(p: Result<Path<String>, PathRejection>) -> ApiResult<SessionId> {
    let Path(id) = p.map_err(|e| ApiError::bad_request("invalid_id", e.body_text()))?;
    Ok(SessionId::parse(&id)?)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
}

pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn readyz(State(st): State<AppState>) -> Response {
    if st.hub.is_ready() {
        Json(json!({"ready": true})).into_response()
    } else {
        ApiError::unavailable("startup recovery scan still running").into_response()
    }
}

async fn metrics(State(st): State<AppState>) -> ApiResult<Response> {
    let hub = st.hub.clone();
    let sessions = blocking(move || Ok(hub.store.list()?)).await?;
    let mut by_status = std::collections::BTreeMap::<String, i64>::new();
    for s in [
        "new",
        "idle",
        "pending",
        "running",
        "interrupted",
        "in_doubt",
        "stopped",
        "failed",
        "corrupt",
    ] {
        by_status.insert(s.to_string(), 0);
    }
    for s in &sessions {
        let status = st.hub.live_status(&s.id).unwrap_or(s.status);
        *by_status.entry(status.to_string()).or_default() += 1;
    }
    let hub = &st.hub;
    let text = hub.metrics.render(&Snapshot {
        sessions_by_status: by_status.into_iter().collect(),
        sessions_open: hub.open_count() as i64,
        runs_active: hub.running_count() as i64,
        runs_queued: hub.queued_count() as i64,
        ready: hub.is_ready(),
    });
    Ok(([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response())
}

async fn list_sessions(State(st): State<AppState>) -> ApiResult<Json<Value>> {
    let hub = st.hub.clone();
    let list = blocking(move || Ok(hub.store.list()?)).await?;
    let items: Vec<Value> = list
        .into_iter()
        .map(|mut s| {
            // the same fields as `lazarus sessions list --json` (docs/json.md); the status
            // is the live one for a session open here
            if let Some(live) = st.hub.live_status(&s.id) {
                s.status = live;
            }
            s.meta = None;
            serde_json::to_value(s).unwrap_or_default()
        })
        .collect();
    Ok(Json(json!({ "sessions": items })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    id: Option<String>,
    workspace: Option<String>,
    system_prompt: Option<String>,
}

async fn create_session(
    State(st): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let b: CreateBody = body_json(body, st.hub.cfg.limits.max_body_bytes, true)?;
    if b.system_prompt.as_ref().map_or(0, String::len) > st.hub.cfg.limits.max_text_bytes {
        return Err(ApiError::too_large(
            "text_too_large",
            "system_prompt is larger than --max-text-bytes",
        ));
    }
    let id = b.id.as_deref().map(SessionId::parse).transpose()?;
    let actor = st.hub.create(id, b.workspace, b.system_prompt).await?;
    let created = Hub::with_state(&actor, |s| s.header.created_at.clone());
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": actor.id,
            "status": "new",
            "created_at": created,
            "workspace": actor.workspace,
        })),
    )
        .into_response())
}

fn describe(st: &SessionState, running: bool, workspace: &std::path::Path) -> Value {
    let status = if running {
        Status::Running
    } else {
        st.status()
    };
    let open_calls: Vec<Value> = st
        .unresolved_calls()
        .map(|c| {
            json!({
                "call_id": c.call_id,
                "tool": c.name,
                "turn": c.turn,
                "state": match c.state() {
                    CallState::NotStarted => "not_started",
                    CallState::IntentOnly => "intent_only",
                    CallState::StartedNoOutcome => "started_no_outcome",
                    CallState::Finished => "finished",
                },
            })
        })
        .collect();
    let pending: Vec<Value> = st
        .pending_inputs
        .iter()
        .map(|p| json!({"seq": p.seq, "input_id": p.input_id}))
        .collect();
    json!({
        "id": st.id(),
        "status": status,
        "created_at": st.header.created_at,
        "parent": st.header.parent.as_ref().map(|p| json!({"id": p.id, "seq": p.seq})),
        "records": st.last_seq,
        "turns": st.turn,
        "open_turn": st.open_turn,
        "pending_inputs": pending,
        "open_tool_calls": open_calls,
        "in_doubt_calls": st.in_doubt_count(),
        "last_receipt": st.last_receipt,
        // the workspace in use (the operator's policy decides, not the header)
        "workspace": workspace,
        "work_owed": st.owes_work(),
    })
}

async fn show_session(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let id = path_id(id)?;
    let (s, running) = st.hub.state(&id).await?;
    let workspace = match st.hub.session_if_open(&id) {
        Some(open) => open.workspace.clone(),
        None => st
            .hub
            .workspaces()
            .path_for_existing(s.header.meta.as_ref(), &id),
    };
    Ok(Json(describe(&s, running, &workspace)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordsQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

async fn records(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<RecordsQuery>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let id = path_id(id)?;
    let Query(q) = q.map_err(|e| ApiError::bad_query(e.body_text()))?;
    let max = st.hub.cfg.limits.max_page;
    let limit = match q.limit {
        None => 100.min(max),
        Some(0) => {
            return Err(ApiError::bad_query(format!(
                "limit must be 1 to {max} (records per page)"
            )));
        }
        Some(n) => n.min(max),
    };
    let after = q.after.unwrap_or(0);
    let hub = st.hub.clone();
    let idc = id.clone();
    let recs = blocking(move || Ok(hub.store.records(&idc, after, limit)?)).await?;
    if recs.is_empty() && after > 0 {
        // An empty page: the end of the session, or a cursor past it (which no answer of
        // this server ever gave, so it is refused rather than answered with nothing forever).
        let last = st.hub.summary(&id).await?.records;
        check_cursor(after, last, "after")?;
    }
    let next = recs.last().map(|r| r.seq);
    Ok(Json(json!({"records": recs, "next_after": next})))
}

/// A cursor (`after`, `Last-Event-ID`) must name a record the session has, or 0: anything
/// beyond its last record (u64::MAX included) is a client's mistake, answered `400
/// bad_cursor`, never an empty page or a stream that waits forever.
fn check_cursor(after: u64, last: u64, what: &str) -> ApiResult<()> {
    if after > last {
        return Err(ApiError::bad_cursor(format!(
            "{what} {after} is beyond the session's last record ({last}); resume from a seq this server sent, or 0 for the beginning"
        )));
    }
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamQuery {
    after: Option<u64>,
}

struct Tail {
    hub: Arc<Hub>,
    id: SessionId,
    rx: broadcast::Receiver<Arc<StoredRecord>>,
    last: u64,
    buf: VecDeque<Arc<StoredRecord>>,
    /// The store may hold more than the last catch-up page.
    more: bool,
    stop: CancellationToken,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Tail {
    async fn catch_up(&mut self) -> ApiResult<()> {
        let hub = self.hub.clone();
        let id = self.id.clone();
        let after = self.last;
        let page = hub.cfg.limits.max_page;
        let recs = blocking(move || Ok(hub.store.records(&id, after, page)?)).await?;
        self.more = recs.len() == page;
        self.buf.extend(recs.into_iter().map(Arc::new));
        Ok(())
    }

    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(r) = self.buf.pop_front() {
                if r.seq <= self.last {
                    continue;
                }
                self.last = r.seq;
                let ev = Event::default()
                    .id(r.seq.to_string())
                    .event("record")
                    .data(serde_json::to_string(&*r).unwrap_or_default());
                return Some((Ok(ev), self));
            }
            if self.more {
                self.catch_up().await.ok()?;
                continue;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return None,
                m = self.rx.recv() => match m {
                    Ok(r) if Some(r.seq) == self.last.checked_add(1) => self.buf.push_back(r),
                    Ok(r) if r.seq <= self.last => {}
                    // a gap (records reported out of order, or before we subscribed): read
                    // the durable records from the store
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.catch_up().await.ok()?;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    }
}

async fn stream(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<StreamQuery>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let Query(q) = q.map_err(|e| ApiError::bad_query(e.body_text()))?;
    let (after, what) = match headers.get("last-event-id") {
        Some(v) => (
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "bad_last_event_id",
                        "Last-Event-ID must be a record seq (a decimal number below 2^64)",
                    )
                })?,
            "Last-Event-ID",
        ),
        None => (q.after.unwrap_or(0), "after"),
    };
    // Not found, unreadable, or the check failed: each says so (404, 422, 5xx).
    let last = st.hub.summary(&id).await?.records;
    check_cursor(after, last, what)?;
    let permit = st.hub.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::busy(
            "too_many_streams",
            "too many live tails are open (limit --max-streams)",
            5,
        )
    })?;
    let rx = st.hub.channel(&id).subscribe();
    let mut tail = Tail {
        hub: st.hub.clone(),
        id,
        rx,
        last: after,
        buf: VecDeque::new(),
        more: false,
        stop: st.stop.clone(),
        _permit: permit,
    };
    tail.catch_up().await?;
    let s = futures_util::stream::unfold(tail, |t| t.next());
    Ok(sse(s, st.hub.cfg.limits.idle_timeout).into_response())
}

/// A live tail; its keep-alive comments come well within the idle timeout, so a client that
/// reads is never taken for idle.
fn sse<S: Stream<Item = Result<Event, Infallible>> + Send + 'static>(
    s: S,
    idle_timeout: Duration,
) -> impl IntoResponse {
    let every = Duration::from_secs(15)
        .min(idle_timeout / 3)
        .max(Duration::from_millis(100));
    Sse::new(s).keep_alive(KeepAlive::new().interval(every))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    message_id: Option<String>,
    text: String,
}

fn check_input_id(id: &str, what: &str) -> ApiResult<()> {
    if id.is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "bad_input_id",
            format!("{what} must be 1 to 256 bytes without control characters"),
        ));
    }
    Ok(())
}

async fn post_message(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let limits = &st.hub.cfg.limits;
    let b: MessageBody = body_json(body, limits.max_body_bytes, false)?;
    if b.text.len() > limits.max_text_bytes {
        return Err(ApiError::too_large(
            "text_too_large",
            format!(
                "text is {} bytes; the limit is {} (--max-text-bytes)",
                b.text.len(),
                limits.max_text_bytes
            ),
        ));
    }
    if b.text.trim().is_empty() {
        return Err(ApiError::bad_request("empty_text", "text is empty"));
    }
    let message_id = match b.message_id {
        Some(m) => {
            check_input_id(&m, "message_id")?;
            m
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    if st.hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let actor = match st.hub.session(&id).await {
        Ok(a) => a,
        // Another writer (a gateway, a `lazarus run`) holds the session, or this gateway has
        // all the sessions open it may: the session's inbox takes the message, durably, and
        // its writer (that one, or this gateway once a session closes) records and answers it.
        Err(e) if e.waits_in_inbox() => {
            let msg = InboxMessage::input(&message_id, "user", &b.text);
            let duplicate = st.hub.deliver(&id, msg).await?;
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({"queued": true, "duplicate": duplicate, "message_id": message_id})),
            )
                .into_response());
        }
        Err(e) => return Err(e),
    };
    st.hub.admit(&actor)?;
    let (seq, duplicate) = st
        .hub
        .append_input(&actor, message_id.clone(), b.text)
        .await?;
    if duplicate {
        return Ok((
            StatusCode::OK,
            Json(json!({"seq": seq, "duplicate": true, "message_id": message_id})),
        )
            .into_response());
    }
    st.hub.schedule(&actor, "message");
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"seq": seq, "duplicate": false, "message_id": message_id})),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventBody {
    #[serde(rename = "type")]
    kind: String,
    reason: Option<String>,
    idempotency_key: Option<String>,
}

async fn post_event(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let b: EventBody = body_json(body, st.hub.cfg.limits.max_body_bytes, false)?;
    // `resume`: continue a cut-off session (answered by a receipt); `compact`: summarise
    // its history before the next turn (answered by a `compaction` record)
    let action = match b.kind.as_str() {
        "resume" => "resume",
        "compact" => COMPACT_ACTION,
        other => {
            return Err(ApiError::bad_request(
                "unsupported_event",
                format!("event type {other:?} is not supported (known: resume, compact)"),
            ));
        }
    };
    if let Some(k) = &b.idempotency_key {
        check_input_id(k, "idempotency_key")?;
    }
    if b.reason.as_ref().map_or(0, String::len) > 4096 {
        return Err(ApiError::too_large(
            "text_too_large",
            "reason is longer than 4096 bytes",
        ));
    }
    if st.hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let actor = match st.hub.session(&id).await {
        Ok(a) => a,
        // Another writer holds the session: the resume event waits in its inbox, once per
        // idempotency key, and that writer acts on it (its receipt says trigger `event`).
        Err(e) if e.waits_in_inbox() => {
            let key = b
                .idempotency_key
                .clone()
                .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
            let msg = InboxMessage::control(&key, action, b.reason.as_deref());
            let duplicate = st.hub.deliver(&id, msg).await?;
            return Ok((
                StatusCode::ACCEPTED,
                Json(json!({"result": "queued", "duplicate": duplicate, "idempotency_key": key})),
            )
                .into_response());
        }
        Err(e) => return Err(e),
    };
    let _g = actor.event_lock.lock().await;
    let (dup_seq, status, owed) = Hub::with_state(&actor, |s| {
        (
            b.idempotency_key
                .as_ref()
                .and_then(|k| s.input_ids.get(k).copied()),
            s.status(),
            s.owes_work(),
        )
    });
    let answer = |code: StatusCode, v: Value| Ok((code, Json(v)).into_response());
    if let Some(seq) = dup_seq {
        return answer(
            StatusCode::OK,
            json!({"result": "duplicate", "seq": seq, "status": if actor.is_running() { Status::Running } else { status }}),
        );
    }
    if action == COMPACT_ACTION {
        // recorded, then compacted by this run (or the one it starts) before its next turn
        st.hub.admit(&actor)?;
        let key = b
            .idempotency_key
            .unwrap_or_else(|| format!("compact-{}", uuid::Uuid::now_v7()));
        let (seq, duplicate) = st.hub.append_control(&actor, key, action, b.reason).await?;
        if duplicate {
            return answer(
                StatusCode::OK,
                json!({"result": "duplicate", "seq": seq, "status": status}),
            );
        }
        let scheduled = st.hub.schedule(&actor, "event");
        return answer(
            StatusCode::ACCEPTED,
            json!({"result": "compacting", "seq": seq, "scheduled": scheduled}),
        );
    }
    if actor.is_running() {
        return answer(
            StatusCode::OK,
            json!({"result": "already_running", "status": Status::Running}),
        );
    }
    if !owed {
        return answer(
            StatusCode::OK,
            json!({"result": "finished", "status": status}),
        );
    }
    st.hub.admit(&actor)?;
    let key = b
        .idempotency_key
        .unwrap_or_else(|| format!("resume-{}", uuid::Uuid::now_v7()));
    let (seq, duplicate) = st
        .hub
        .append_control(&actor, key, "resume", b.reason)
        .await?;
    if duplicate {
        return answer(
            StatusCode::OK,
            json!({"result": "duplicate", "seq": seq, "status": status}),
        );
    }
    let scheduled = st.hub.schedule(&actor, "event");
    answer(
        StatusCode::ACCEPTED,
        json!({"result": "resumed", "seq": seq, "status_before": status, "scheduled": scheduled}),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactBody {
    /// Complete turns kept verbatim after the summary (the gateway's setting when absent).
    keep_turns: Option<u64>,
}

/// Compacts a session's context now: summarises the history before its last turns into a
/// `compaction` record (what is sent to the model shrinks; every record stays). 200 with
/// `compacted` true or false (nothing to summarise); 409 while it runs or owes work.
async fn compact(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let b: CompactBody = body_json(body, st.hub.cfg.limits.max_body_bytes, true)?;
    if st.hub.is_draining() {
        return Err(ApiError::unavailable("the gateway is shutting down"));
    }
    let actor = st.hub.session(&id).await?;
    let v = match st.hub.compact(&actor, b.keep_turns).await? {
        Some((seq, d)) => json!({
            "id": id, "compacted": true, "seq": seq,
            "from_seq": d["from_seq"], "through_seq": d["through_seq"],
            "tokens_before": d["tokens_before"], "tokens_after": d["tokens_after"],
        }),
        None => json!({"id": id, "compacted": false}),
    };
    Ok(Json(v).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    at_turn: u64,
    id: Option<String>,
}

async fn fork(
    State(st): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = path_id(id)?;
    let b: ForkBody = body_json(body, st.hub.cfg.limits.max_body_bytes, false)?;
    let child = b.id.as_deref().map(SessionId::parse).transpose()?;
    let hub = st.hub.clone();
    let at = b.at_turn;
    let s = blocking(move || Ok(hub.store.fork(&id, at, child.as_ref())?)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": s.id,
            "parent": s.parent,
            "at_turn": at,
            "status": s.status,
            "records": s.records,
            "created_at": s.created_at,
        })),
    )
        .into_response())
}
