//! What every API of the fake IM does before its own checks, in Tencent's order: journal the
//! call, serve a queued fault, add the latency, check the query and the usersig (70001/70003/
//! 70009/70013/70014), then take a slot of the API's own app-wide call limit (60007).

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{Extensions, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use super::fault::Fault;
use super::groups::JournalEntry;
use super::server::DropConnection;
use super::state::FakeState;
use room_service::publish::tencent::usersig::{self, UserSigError};
use room_service::publish::tencent::wire::Answer;

/// A refusal: `ErrorCode` and `ErrorInfo`.
pub(crate) type Refusal = (i64, &'static str);

/// A call that passed the gate.
#[derive(Debug)]
pub(crate) struct Entered {
    /// When it passed.
    pub(crate) now: Instant,
    /// How long to wait after doing its work before answering (the `accept_then_delay` fault).
    pub(crate) answer_after: Option<Duration>,
}

/// Passes a call of `api` through the gate; `Err` is the answer it gets instead. A
/// `send_group_msg` counts its events' sends (`event_ids`).
pub(crate) async fn enter(
    state: &FakeState,
    entry: JournalEntry,
    api: &'static str,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    extensions: &Extensions,
) -> Result<Entered, Response> {
    let fault =
        if api == "send_group_msg" { state.begin_call(&entry.event_ids) } else { state.begin_admin_call() };
    state.journal_call(entry);
    let latency = state.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let answer_after = serve(state, fault, extensions).await?;
    let Ok(Query(query)) = query else {
        return Err(refuse(state, (10004, "invalid query string")));
    };
    authenticate(state, &query).map_err(|refusal| refuse(state, refusal))?;
    let now = Instant::now();
    if !state.take_api_slot(api, now) {
        return Err(refuse(state, (60007, "api call frequency limit exceeded")));
    }
    Ok(Entered { now, answer_after })
}

/// Serves `fault`: `Err` is the answer instead of the call's; `Ok` carries how long to wait
/// before answering after the work is done.
async fn serve(
    state: &FakeState,
    fault: Option<Fault>,
    extensions: &Extensions,
) -> Result<Option<Duration>, Response> {
    match fault {
        Some(Fault::AcceptThenDelay(delay)) => return Ok(Some(delay)),
        Some(Fault::ErrorCode(code)) => return Err(refuse(state, (code, "injected fault"))),
        Some(Fault::Http502) => {
            let html = "<html><body><h1>502 Bad Gateway</h1></body></html>";
            let page = (StatusCode::BAD_GATEWAY, [(header::CONTENT_TYPE, "text/html")], html);
            return Err(page.into_response());
        }
        Some(Fault::NonJson) => {
            let page = (StatusCode::OK, [(header::CONTENT_TYPE, "text/html")], "<html>OK</html>");
            return Err(page.into_response());
        }
        Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Fault::DropConnection) => {
            if let Some(drop) = extensions.get::<DropConnection>() {
                drop.now();
                // The connection task drops this future together with the connection.
                std::future::pending::<()>().await;
            }
            // Served outside our own accept loop: the closest we can do.
            return Err(StatusCode::BAD_GATEWAY.into_response());
        }
        None => {}
    }
    Ok(None)
}

/// Answers `ActionStatus: FAIL` with the refusal's code, and counts it.
pub(crate) fn refuse(state: &FakeState, (code, info): Refusal) -> Response {
    state.count_rejection();
    Json(Answer::fail(code, info)).into_response()
}

/// Checks the query parameters and the usersig like Tencent.
fn authenticate(state: &FakeState, query: &HashMap<String, String>) -> Result<(), Refusal> {
    let opts = &state.options;
    let param = |name| query.get(name).ok_or((10004, "missing query parameter"));
    let sdk_app_id: u64 = param("sdkappid")?.parse().map_err(|_| (10004, "bad sdkappid"))?;
    let identifier = param("identifier")?;
    let sig = query.get("usersig").ok_or((70003, "usersig missing"))?;
    if sdk_app_id != opts.sdk_app_id {
        return Err((70014, "sdkappid mismatch"));
    }
    if *identifier != opts.admin_identifier {
        return Err((70013, "identifier is not the app admin"));
    }
    let now = usersig::system_now_secs();
    usersig::verify(sig, &opts.secret_key, sdk_app_id, identifier, now).map_err(|e| match e {
        UserSigError::Expired => (70001, "usersig expired"),
        UserSigError::Undecodable => (70003, "usersig invalid"),
        UserSigError::BadSignature => (70009, "usersig verification failed"),
        UserSigError::IdentifierMismatch => (70013, "usersig identifier mismatch"),
        UserSigError::AppIdMismatch => (70014, "usersig sdkappid mismatch"),
    })?;
    Ok(())
}
