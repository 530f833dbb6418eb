//! Read-only outbox admin routes (`/admin/outbox...`).

use std::collections::HashMap;

use axum::extract::State;
use serde::Serialize;

use super::AppState;
use super::error::ApiError;
use crate::store::{OutboxQuery, OutboxRow, OutboxStats, OutboxStatus};

/// Largest page of `GET /admin/outbox`.
pub const MAX_LIMIT: u32 = 500;
const DEFAULT_LIMIT: u32 = 50;

/// `GET /admin/outbox/stats`.
pub async fn stats(State(state): State<AppState>) -> Result<axum::Json<OutboxStats>, ApiError> {
    Ok(axum::Json(state.repo.outbox_stats().await.map_err(crate::room::RoomError::from)?))
}

/// A page of rows.
#[derive(Debug, Serialize)]
pub struct OutboxPage {
    /// The rows, by ascending id.
    pub rows: Vec<OutboxRow>,
    /// Pass as `after_id` for the next page; absent on the last page.
    pub next_after_id: Option<i64>,
}

/// `GET /admin/outbox?status=&limit=&after_id=`.
pub async fn list(
    State(state): State<AppState>,
    axum::extract::Query(params): axum::extract::Query<HashMap<String, String>>,
) -> Result<axum::Json<OutboxPage>, ApiError> {
    let query = parse_query(&params)?;
    let rows = state.repo.list_outbox(&query).await.map_err(crate::room::RoomError::from)?;
    let next_after_id = (rows.len() as u32 == query.limit).then(|| rows.last().map(|r| r.id)).flatten();
    Ok(axum::Json(OutboxPage { rows, next_after_id }))
}

fn parse_query(params: &HashMap<String, String>) -> Result<OutboxQuery, ApiError> {
    let mut query = OutboxQuery { status: None, after_id: 0, limit: DEFAULT_LIMIT };
    for (key, value) in params {
        match key.as_str() {
            "status" if value.is_empty() => {}
            "status" => {
                query.status =
                    Some(value.parse::<OutboxStatus>().map_err(|e| ApiError::invalid("status", e))?)
            }
            "limit" => {
                query.limit =
                    value.parse::<u32>().ok().filter(|l| (1..=MAX_LIMIT).contains(l)).ok_or_else(|| {
                        ApiError::invalid("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
                    })?
            }
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
