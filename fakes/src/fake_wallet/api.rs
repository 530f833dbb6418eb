//! The wallet contract as the fake serves it: `POST /v1/debits` and `POST /v1/refunds`. Each
//! call first takes its queued fault, if any; requests are read strictly (unknown fields,
//! empty keys or ids and a zero amount answer 400 `invalid_request`).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::fault::{Call, Fault};
use super::state::{DebitOutcome, FakeWalletState};
use room_service::wallet::wire::{
    DebitRequest, ErrorAnswer, INSUFFICIENT_BALANCE, RefundAnswer, RefundRequest,
};

/// Longest idempotency key or user id the fake accepts, in bytes.
const MAX_ID_BYTES: usize = 256;

/// `POST /v1/debits`.
pub(crate) async fn debit(
    State(state): State<Arc<FakeWalletState>>,
    body: Result<Json<DebitRequest>, JsonRejection>,
) -> Response {
    serve_call(&state, Call::Debit, body, checked_debit, |state, request| {
        match state.debit(&request.idempotency_key, &request.user_id, request.amount) {
            DebitOutcome::Debited(answer) => Json(answer).into_response(),
            DebitOutcome::Insufficient => {
                let body = ErrorAnswer::new(INSUFFICIENT_BALANCE, "the balance is below the amount");
                (StatusCode::CONFLICT, Json(body)).into_response()
            }
        }
    })
    .await
}

/// `POST /v1/refunds`.
pub(crate) async fn refund(
    State(state): State<Arc<FakeWalletState>>,
    body: Result<Json<RefundRequest>, JsonRejection>,
) -> Response {
    serve_call(&state, Call::Refund, body, checked_refund, |state, request| {
        Json(RefundAnswer { refunded: state.refund(&request.idempotency_key) }).into_response()
    })
    .await
}

/// One call: its queued fault first (a 503 answers at once, a delay waits), then the request
/// read strictly (400 `invalid_request`), then `answer`, held back by an accept-then-delay fault.
async fn serve_call<R>(
    state: &FakeWalletState,
    call: Call,
    body: Result<Json<R>, JsonRejection>,
    checked: fn(R) -> Result<R, String>,
    answer: impl FnOnce(&FakeWalletState, R) -> Response,
) -> Response {
    let answer_after = match before_call(state.begin_call(call)).await {
        Ok(answer_after) => answer_after,
        Err(refused) => return refused,
    };
    let request = match body.map_err(|r| r.body_text()).and_then(|Json(r)| checked(r)) {
        Ok(request) => request,
        Err(reason) => return invalid(reason),
    };
    let answer = answer(state, request);
    if let Some(delay) = answer_after {
        tokio::time::sleep(delay).await;
    }
    answer
}

/// Serves the part of `fault` that comes before the call: the 503 answer (`Err`), or the
/// delay. `Ok` holds how long to wait after the call, before answering.
async fn before_call(fault: Option<Fault>) -> Result<Option<Duration>, Response> {
    match fault {
        None => Ok(None),
        Some(Fault::Http503) => {
            let body = ErrorAnswer::new("unavailable", "injected fault");
            Err((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response())
        }
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            Ok(None)
        }
        Some(Fault::AcceptThenDelay(delay)) => Ok(Some(delay)),
    }
}

fn checked_debit(request: DebitRequest) -> Result<DebitRequest, String> {
    check_id("idempotency_key", &request.idempotency_key)?;
    check_id("user_id", &request.user_id)?;
    if request.amount == 0 {
        return Err("amount: must be positive".into());
    }
    Ok(request)
}

fn checked_refund(request: RefundRequest) -> Result<RefundRequest, String> {
    check_id("idempotency_key", &request.idempotency_key)?;
    Ok(request)
}

fn check_id(field: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_ID_BYTES {
        return Err(format!("{field}: must be 1 to {MAX_ID_BYTES} bytes"));
    }
    Ok(())
}

/// 400 `invalid_request` naming what is wrong.
pub(crate) fn invalid(reason: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, Json(ErrorAnswer::new("invalid_request", reason))).into_response()
}
