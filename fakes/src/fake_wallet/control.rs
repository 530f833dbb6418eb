//! Control endpoints of the fake wallet, for tests and demos driving it over HTTP:
//! `GET /fake/balances`, `PUT /fake/balances/{user_id}`, `GET /fake/debits`,
//! `POST /fake/faults` (`POST /fake/reset` and `GET /fake/stats` are every fake's, see
//! [`controls`](crate::fake_im::server::controls)).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::api::invalid;
use super::fault::FaultSpec;
use super::state::{FakeWalletState, RecordedDebit};

/// Body of `PUT /fake/balances/{user_id}`, and one user's balance as answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BalanceBody {
    /// The balance.
    pub balance: u64,
}

/// Every known user's balance.
pub(crate) async fn balances(State(state): State<Arc<FakeWalletState>>) -> Json<BTreeMap<String, u64>> {
    Json(state.balances())
}

/// Sets one user's balance.
pub(crate) async fn set_balance(
    State(state): State<Arc<FakeWalletState>>,
    Path(user_id): Path<String>,
    body: Result<Json<BalanceBody>, JsonRejection>,
) -> Response {
    match body {
        Ok(Json(body)) => {
            state.set_balance(&user_id, body.balance);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(rejection) => invalid(rejection.body_text()),
    }
}

/// Every debit taken, oldest first.
pub(crate) async fn debits(State(state): State<Arc<FakeWalletState>>) -> Json<Vec<RecordedDebit>> {
    Json(state.debits())
}

/// Queues a fault for the next calls.
pub(crate) async fn faults(
    State(state): State<Arc<FakeWalletState>>,
    spec: Result<Json<FaultSpec>, JsonRejection>,
) -> Response {
    let spec = match spec {
        Ok(Json(spec)) => spec,
        Err(rejection) => return invalid(rejection.body_text()),
    };
    match spec.into_fault() {
        Ok((fault, call, count)) => {
            state.inject(fault, call, count);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(reason) => invalid(reason),
    }
}
