//! The error both APIs answer with, and how every failure of the room path maps onto it: one
//! classification for HTTP and gRPC. HTTP renders it as its status and the JSON body
//! `{"error":{"code","message"}}` (`http::error`); gRPC maps its code onto a standard status
//! code (`grpc::status`).

use std::borrow::Cow;

use ::http::StatusCode;

use crate::auth::AuthError;
use crate::domain::DomainError;
use crate::room::RoomError;
use crate::store::StoreError;
use crate::wallet::WalletError;

/// The `WWW-Authenticate` of a 401 without a token.
pub const CHALLENGE: &str = "Bearer";

/// The `WWW-Authenticate` of a 401 whose token did not verify.
pub const INVALID_TOKEN_CHALLENGE: &str = r#"Bearer error="invalid_token""#;

/// An error answer of either API: the HTTP status it answers with (gRPC maps its `code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable snake_case code (one of this node's, or the one a room's owner answered).
    pub code: Cow<'static, str>,
    /// Human text naming what is wrong.
    pub message: String,
    /// `WWW-Authenticate` of a 401 (`Bearer`, or `Bearer error="invalid_token"`).
    pub challenge: Option<&'static str>,
    /// `Retry-After` of a 429, in whole seconds.
    pub retry_after: Option<u64>,
    /// When a ban ends, for a `banned` refusal (the error object's `until_ms`).
    pub until_ms: Option<i64>,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: Cow::Borrowed(code),
            message: message.into(),
            challenge: None,
            retry_after: None,
            until_ms: None,
        }
    }

    /// 400 naming the field at fault.
    pub fn invalid(field: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", format!("{field}: {reason}"))
    }

    /// 503 while the service shuts down.
    pub fn draining() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "service is shutting down; retry on another instance",
        )
    }

    /// 503 `not_owner`: the room's shard is moving between nodes; a retry is routed to its
    /// new owner.
    pub fn not_owner() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_owner",
            "the room is moving between nodes; retry the request as it is",
        )
    }

    /// 503 `request_timeout`: the request was not answered in time (`http.request_timeout`,
    /// or the deadline a hop carried).
    pub fn request_timeout() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "request_timeout",
            "the request was not answered in time; retry (a command is idempotent by command_id)",
        )
    }

    /// 429 `rate_limited` with `Retry-After`: `retry_after`, rounded up to whole seconds (at
    /// least 1).
    pub fn rate_limited(message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        let error = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        ApiError { retry_after: Some(seconds.max(1)), ..error }
    }

    /// 413 `too_large`: the request body is over its limit.
    pub fn too_large() -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", "request body is too large")
    }

    /// 503 `owner_unavailable`: the node serving the room did not answer.
    pub fn owner_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "owner_unavailable",
            "the node serving this room did not answer; retry the request as it is",
        )
    }
}

impl ApiError {
    /// 503 `storage_unavailable`, logging why.
    fn unavailable(error: &StoreError) -> Self {
        tracing::warn!(%error, "Storage unavailable");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "storage_unavailable", "storage is unavailable; retry")
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::unavailable(&e)
    }
}

impl From<std::sync::Arc<StoreError>> for ApiError {
    fn from(e: std::sync::Arc<StoreError>) -> Self {
        ApiError::unavailable(&e)
    }
}

impl From<RoomError> for ApiError {
    fn from(e: RoomError) -> Self {
        match e {
            RoomError::Domain(d) => d.into(),
            RoomError::CommandConflict(m) => ApiError::new(StatusCode::CONFLICT, "command_conflict", m),
            RoomError::VersionConflict(m) => ApiError::new(StatusCode::CONFLICT, "version_conflict", m),
            RoomError::Unavailable(error) | RoomError::NotCommitted(error) => ApiError::unavailable(&error),
            RoomError::NotOwner => ApiError::not_owner(),
            RoomError::PaymentRefunded => ApiError::new(
                StatusCode::CONFLICT,
                "payment_refunded",
                "this gift did not commit and its payment was refunded; send it again with a new command_id",
            ),
            RoomError::PaymentMismatch => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "payment_mismatch",
                "the wallet answered with another debit (user or amount) under this command's key; nothing \
                 was written; do not reuse a command_id for another gift",
            ),
            RoomError::Wallet(error) => error.into(),
            RoomError::Corrupt(detail) => {
                tracing::error!(%detail, "Stored data is corrupt");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "stored data could not be read")
            }
        }
    }
}

/// 401 `unauthenticated` (with `WWW-Authenticate`), 403 `forbidden` naming the field, 429
/// `rate_limited` (with `Retry-After`). The refusal is counted where it is made, not here.
impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        let message = e.to_string();
        match e {
            AuthError::Unauthenticated(_) => {
                let challenge = if e.token_was_given() { INVALID_TOKEN_CHALLENGE } else { CHALLENGE };
                let error = ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", message);
                ApiError { challenge: Some(challenge), ..error }
            }
            AuthError::Forbidden { .. } => ApiError::new(StatusCode::FORBIDDEN, "forbidden", message),
            AuthError::RateLimited { retry_after, .. } => ApiError::rate_limited(message, retry_after),
        }
    }
}

impl From<WalletError> for ApiError {
    fn from(e: WalletError) -> Self {
        match e {
            WalletError::InsufficientBalance => ApiError::new(
                StatusCode::CONFLICT,
                "insufficient_balance",
                "the sender's balance is below the gift's value; nothing was written",
            ),
            WalletError::Unavailable { class, detail } => {
                tracing::warn!(class = class.as_str(), %detail, "Wallet unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "wallet_unavailable",
                    "the wallet did not answer; nothing was written; retry with the same command_id",
                )
            }
        }
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        let message = e.to_string();
        let (status, code) = match e {
            DomainError::InvalidArgument { .. } => (StatusCode::BAD_REQUEST, "invalid_argument"),
            DomainError::RoomNotFound => (StatusCode::NOT_FOUND, "room_not_found"),
            DomainError::RoomExists => (StatusCode::CONFLICT, "room_exists"),
            DomainError::RoomClosed => (StatusCode::CONFLICT, "room_closed"),
            DomainError::NotMember { .. } => (StatusCode::CONFLICT, "not_member"),
            DomainError::HeatOverflow => (StatusCode::CONFLICT, "heat_overflow"),
            DomainError::Forbidden { .. }
            | DomainError::SuspendedByBan { .. }
            | DomainError::LiftForbidden { .. } => (StatusCode::FORBIDDEN, "forbidden"),
            DomainError::Banned { until_ms } => {
                let error = ApiError::new(StatusCode::CONFLICT, "banned", message);
                return ApiError { until_ms: Some(until_ms), ..error };
            }
            DomainError::TooManyAdmins { .. } => (StatusCode::CONFLICT, "too_many_admins"),
            DomainError::AttributeConflict { .. } => (StatusCode::CONFLICT, "attribute_conflict"),
            DomainError::SeatsDisabled => (StatusCode::CONFLICT, "seats_disabled"),
            DomainError::SeatOccupied { .. } => (StatusCode::CONFLICT, "seat_occupied"),
            DomainError::SeatsFull => (StatusCode::CONFLICT, "seats_full"),
            DomainError::AlreadySeated { .. } => (StatusCode::CONFLICT, "already_seated"),
            DomainError::SeatLocked { .. } => (StatusCode::CONFLICT, "seat_locked"),
            DomainError::NotSeated { .. } | DomainError::SeatEmpty { .. } => {
                (StatusCode::CONFLICT, "not_seated")
            }
            DomainError::NoSuchRequest { .. } => (StatusCode::CONFLICT, "no_such_request"),
            DomainError::RequestPending { .. } => (StatusCode::CONFLICT, "request_pending"),
            DomainError::TooManyRequests { .. } => (StatusCode::CONFLICT, "too_many_requests"),
            DomainError::WrongSeatMode { .. } => (StatusCode::CONFLICT, "wrong_seat_mode"),
        };
        ApiError::new(status, code, message)
    }
}
