//! Control endpoints of the fake, for tests and demos driving it over HTTP:
//! `GET /fake/messages?group=`, `POST /fake/faults`, `POST /fake/latency`,
//! `POST /fake/sensitive`, `POST /fake/require_groups` (`{"on": true}`),
//! `GET /fake/journal?group=`, `GET /fake/groups` (`POST /fake/reset`
//! and `GET /fake/stats` are every fake's, see [`controls`](super::server::controls)).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::fault::FaultSpec;
use super::groups::{GroupState, JournalEntry};
use super::state::{FakeState, RecordedMessage};

/// Query of `GET /fake/messages` and `GET /fake/journal`.
#[derive(Debug, Deserialize)]
pub(crate) struct MessagesQuery {
    group: Option<String>,
}

/// Recorded messages, of one `GroupId` or all.
pub(crate) async fn messages(
    State(state): State<Arc<FakeState>>,
    Query(query): Query<MessagesQuery>,
) -> Json<Vec<RecordedMessage>> {
    Json(state.recorded(query.group.as_deref()))
}

/// Queues a fault for the next calls.
pub(crate) async fn faults(State(state): State<Arc<FakeState>>, Json(spec): Json<FaultSpec>) -> Response {
    let admin = spec.admin;
    match spec.into_fault() {
        Ok((fault, count)) if admin => {
            state.inject_admin(fault, count);
            StatusCode::NO_CONTENT.into_response()
        }
        Ok((fault, count)) => {
            state.inject(fault, count);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(reason) => (StatusCode::BAD_REQUEST, reason).into_response(),
    }
}

/// Body of `POST /fake/sensitive`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SensitiveBody {
    words: Vec<String>,
}

/// Sets the sensitive words: a message with one in any element is refused with 80001.
pub(crate) async fn sensitive(
    State(state): State<Arc<FakeState>>,
    Json(body): Json<SensitiveBody>,
) -> StatusCode {
    state.set_sensitive_words(body.words);
    StatusCode::NO_CONTENT
}

/// Body of `POST /fake/latency`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LatencyBody {
    ms: u64,
    /// Up to this many more milliseconds, drawn anew for each call (default 0).
    #[serde(default)]
    jitter_ms: u64,
}

/// Sets the latency (and its jitter) of every later call.
pub(crate) async fn latency(
    State(state): State<Arc<FakeState>>,
    Json(body): Json<LatencyBody>,
) -> StatusCode {
    state.set_latency(Duration::from_millis(body.ms));
    state.set_jitter(Duration::from_millis(body.jitter_ms));
    StatusCode::NO_CONTENT
}

/// Body of `POST /fake/require_groups`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequireGroupsBody {
    on: bool,
}

/// Switches `require_groups` mode: a message to a group that does not exist is refused (10010).
pub(crate) async fn require_groups(
    State(state): State<Arc<FakeState>>,
    Json(body): Json<RequireGroupsBody>,
) -> StatusCode {
    state.set_require_groups(body.on);
    StatusCode::NO_CONTENT
}

/// The journal: every call, of one `GroupId` or all, in arrival order.
pub(crate) async fn journal(
    State(state): State<Arc<FakeState>>,
    Query(query): Query<MessagesQuery>,
) -> Json<Vec<JournalEntry>> {
    Json(match query.group.as_deref() {
        Some(group) => state.journal_of(group),
        None => state.journal(),
    })
}

/// Every group ever created and its state.
pub(crate) async fn groups(State(state): State<Arc<FakeState>>) -> Json<BTreeMap<String, GroupState>> {
    Json(state.groups())
}
