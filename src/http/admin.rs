//! Outbox admin routes (`/admin/outbox...`, admin listener only): stats, the paged listing,
//! one row, and requeue (audited in the log like the CLI's).

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::extract::{Json, QueryParams, RoomPath, page_limit};
use crate::admin::ops::{self, OpsError, RequeueReport};
use crate::api::{ApiError, AppState};
use crate::cluster::Owner;
use crate::store::{OutboxQuery, OutboxRow, OutboxStats, OutboxStatus};

/// Largest page of `GET /admin/outbox`.
pub const MAX_LIMIT: u32 = 500;
const DEFAULT_LIMIT: u32 = 50;

/// `GET /admin/outbox/stats`.
pub async fn stats(State(state): State<AppState>) -> Result<axum::Json<OutboxStats>, ApiError> {
    Ok(axum::Json(state.repo.outbox_stats().await?))
}

/// A page of rows.
#[derive(Debug, Serialize)]
pub struct OutboxPage {
    /// The rows, by ascending id.
    pub rows: Vec<OutboxRow>,
    /// Pass as `after_id` for the next page; `null` when this page is shorter than `limit` (a
    /// full last page is followed by an empty one).
    pub next_after_id: Option<i64>,
}

/// `GET /admin/outbox?status=&limit=&after_id=`.
pub async fn list(
    State(state): State<AppState>,
    QueryParams(params): QueryParams,
) -> Result<axum::Json<OutboxPage>, ApiError> {
    let query = parse_query(&params)?;
    let rows = state.repo.list_outbox(&query).await?;
    let next_after_id = (rows.len() as u32 == query.limit).then(|| rows.last().map(|r| r.id)).flatten();
    Ok(axum::Json(OutboxPage { rows, next_after_id }))
}

fn parse_query(params: &[(String, String)]) -> Result<OutboxQuery, ApiError> {
    let mut query = OutboxQuery { status: None, after_id: 0, limit: DEFAULT_LIMIT };
    for (key, value) in params {
        match key.as_str() {
            "status" if value.is_empty() => {}
            "status" => {
                query.status =
                    Some(value.parse::<OutboxStatus>().map_err(|e| ApiError::invalid("status", e))?)
            }
            "limit" => query.limit = page_limit(value, MAX_LIMIT)?,
            "after_id" => {
                query.after_id = value
                    .parse::<i64>()
                    .ok()
                    .filter(|a| *a >= 0)
                    .ok_or_else(|| ApiError::invalid("after_id", "must be a non-negative integer"))?
            }
            other => {
                return Err(ApiError::invalid(
                    other,
                    "unknown query parameter (expected status, limit, after_id)",
                ));
            }
        }
    }
    Ok(query)
}

/// Most event ids one requeue names.
pub const MAX_REQUEUE_IDS: usize = 1000;

/// `POST /admin/outbox/requeue`: `{"event_ids": [...]}` or `{"status": "failed" | "retryable"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequeueBody {
    event_ids: Option<Vec<String>>,
    status: Option<String>,
}

/// Moves `failed` (with a fresh attempt budget) or `retryable` rows back to `pending`,
/// claimable at once — named rows, or every row of a status. Unknown event ids change nothing
/// (404 naming them); rows in another status are listed as skipped.
pub async fn requeue(
    State(state): State<AppState>,
    Json(body): Json<RequeueBody>,
) -> Result<axum::Json<RequeueReport>, ApiError> {
    let repo = state.repo.as_ref();
    let report = match (body.event_ids, body.status) {
        (Some(ids), None) => {
            if ids.is_empty() || ids.len() > MAX_REQUEUE_IDS {
                return Err(ApiError::invalid(
                    "event_ids",
                    format!("must name 1 to {MAX_REQUEUE_IDS} events"),
                ));
            }
            if let Some(bad) = ids.iter().find(|id| id.is_empty() || id.len() > 64) {
                return Err(ApiError::invalid("event_ids", format!("{bad:?} is not an event id")));
            }
            ops::requeue_event_ids(repo, &ids).await
        }
        (None, Some(status)) => {
            let status = status.parse::<OutboxStatus>().map_err(|e| ApiError::invalid("status", e))?;
            ops::requeue_status(repo, status).await
        }
        (Some(_), Some(_)) => return Err(ApiError::invalid("body", "give event_ids or status, not both")),
        (None, None) => return Err(ApiError::invalid("body", "give event_ids (a list) or status")),
    };
    report.map(axum::Json).map_err(|e| match e {
        OpsError::UnknownEventIds(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "event_not_found", e.to_string())
        }
        OpsError::NotRequeueable(_) => ApiError::invalid("status", e),
        OpsError::Store(e) => e.into(),
    })
}

/// `GET /admin/outbox/{event_id}`: one row, envelope included; 404 `event_not_found`.
pub async fn show(
    State(state): State<AppState>,
    axum::extract::Path(event_id): axum::extract::Path<String>,
) -> Result<axum::Json<OutboxRow>, ApiError> {
    if event_id.is_empty() || event_id.len() > 64 {
        return Err(ApiError::invalid("event_id", format!("{event_id:?} is not an event id")));
    }
    match state.repo.find_outbox(&event_id).await? {
        Some(row) => Ok(axum::Json(row)),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "event_not_found",
            format!("no outbox row has event id {event_id}"),
        )),
    }
}

/// `GET /admin/rooms/{room_id}/owner`: the node serving the room, by the lease table (this
/// node, epoch 0, without a cluster); 503 `not_owner` while its shard is between owners.
pub async fn owner(
    State(state): State<AppState>,
    RoomPath(room_id): RoomPath,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let owner = match &state.forwarder {
        None => Owner { node_id: state.node.node_id.clone(), url: state.node.url.clone(), epoch: 0 },
        Some(forwarder) => {
            forwarder.cluster().owner(room_id.as_str()).await?.ok_or_else(ApiError::not_owner)?
        }
    };
    let shard = crate::cluster::shard_of(room_id.as_str());
    Ok(axum::Json(json!({"node_id": owner.node_id, "url": owner.url, "epoch": owner.epoch, "shard": shard})))
}
