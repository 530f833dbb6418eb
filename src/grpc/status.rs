//! How a failure of the room path answers over gRPC: the API's [`ApiError`] (one
//! classification for both APIs) mapped onto a standard status code, with its stable snake_case
//! code in the `error-code` response metadata.
//!
//! | HTTP code | gRPC status |
//! |---|---|
//! | `invalid_argument` | `INVALID_ARGUMENT` (the message starts with the field) |
//! | `room_not_found` | `NOT_FOUND` |
//! | `command_conflict` | `ALREADY_EXISTS` |
//! | `version_conflict`, `room_exists`, `room_closed`, `not_member`, `banned` (with `until-ms` metadata), `too_many_admins`, `too_many_rooms`, `attribute_conflict`, the seat codes (`seats_disabled`, `seat_occupied`, `seats_full`, `already_seated`, `seat_locked`, `not_seated`, `no_such_request`, `request_pending`, `too_many_requests`, `wrong_seat_mode`), `heat_overflow`, `insufficient_balance`, `payment_refunded` | `FAILED_PRECONDITION` |
//! | `storage_unavailable`, `wallet_unavailable`, `draining`, `not_owner`, `owner_unavailable`, `request_timeout`, `overloaded` | `UNAVAILABLE` |
//! | `too_large`, `rate_limited`, `seat_rate_limited` (with `retry-after` metadata, in seconds) | `RESOURCE_EXHAUSTED` |
//! | `payment_mismatch` | `ABORTED` |
//! | `unauthenticated` | `UNAUTHENTICATED` |
//! | `forbidden` | `PERMISSION_DENIED` (the message starts with the field) |
//! | anything else | `INTERNAL` |

use tonic::{Code, Status};

use crate::api::ApiError;

/// The metadata key carrying the stable error code.
pub const ERROR_CODE: &str = "error-code";

/// The metadata key of a `FAILED_PRECONDITION` `banned`: when the ban ends (ms since the
/// epoch), as the HTTP error object's `until_ms`.
pub const UNTIL_MS: &str = "until-ms";

/// The metadata key of a `RESOURCE_EXHAUSTED` `rate_limited`: seconds to wait, as HTTP's
/// `Retry-After`.
pub const RETRY_AFTER: &str = "retry-after";

/// The gRPC code of an HTTP API error code.
pub fn code(error_code: &str) -> Code {
    match error_code {
        "invalid_argument" => Code::InvalidArgument,
        "room_not_found" => Code::NotFound,
        "command_conflict" => Code::AlreadyExists,
        "version_conflict"
        | "room_exists"
        | "room_closed"
        | "not_member"
        | "banned"
        | "too_many_admins"
        | "too_many_rooms"
        | "attribute_conflict"
        | "seats_disabled"
        | "seat_occupied"
        | "seats_full"
        | "already_seated"
        | "seat_locked"
        | "not_seated"
        | "no_such_request"
        | "request_pending"
        | "too_many_requests"
        | "wrong_seat_mode"
        | "heat_overflow"
        | "insufficient_balance"
        | "payment_refunded" => Code::FailedPrecondition,
        "storage_unavailable"
        | "wallet_unavailable"
        | "draining"
        | "not_owner"
        | "owner_unavailable"
        | "request_timeout"
        | "overloaded" => Code::Unavailable,
        "too_large" | "rate_limited" | "seat_rate_limited" => Code::ResourceExhausted,
        "payment_mismatch" => Code::Aborted,
        "unauthenticated" => Code::Unauthenticated,
        "forbidden" => Code::PermissionDenied,
        _ => Code::Internal,
    }
}

/// `error` as a gRPC status.
pub fn from_api(error: ApiError) -> Status {
    let (retry_after, until_ms) = (error.retry_after, error.until_ms);
    let mut status = status(&error.code, error.message);
    if let Some(seconds) = retry_after {
        with_retry_after(&mut status, seconds);
    }
    if let Some(until_ms) = until_ms {
        status.metadata_mut().insert(UNTIL_MS, until_ms.into());
    }
    status
}

/// Adds the `retry-after` metadata (seconds) to `status`.
pub fn with_retry_after(status: &mut Status, seconds: u64) {
    status.metadata_mut().insert(RETRY_AFTER, seconds.into());
}

/// The status of HTTP API error code `error_code`, with `message` and the code in the
/// `error-code` metadata.
pub fn status(error_code: &str, message: impl Into<String>) -> Status {
    let mut status = Status::new(code(error_code), message);
    if let Ok(value) = error_code.parse() {
        status.metadata_mut().insert(ERROR_CODE, value);
    }
    status
}

/// `INVALID_ARGUMENT` naming `field`.
pub fn invalid(field: &str, reason: impl std::fmt::Display) -> Status {
    from_api(ApiError::invalid(field, reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainError;
    use crate::room::RoomError;
    use crate::wallet::WalletError;

    fn status_of(error: RoomError) -> Status {
        from_api(ApiError::from(error))
    }

    #[test]
    fn room_errors_map_to_the_documented_codes() {
        assert_eq!(status_of(DomainError::RoomNotFound.into()).code(), Code::NotFound);
        assert_eq!(status_of(RoomError::CommandConflict("x".into())).code(), Code::AlreadyExists);
        assert_eq!(status_of(RoomError::VersionConflict("x".into())).code(), Code::FailedPrecondition);
        assert_eq!(status_of(WalletError::InsufficientBalance.into()).code(), Code::FailedPrecondition);
        assert_eq!(status_of(RoomError::NotOwner).code(), Code::Unavailable);
        assert_eq!(from_api(ApiError::draining()).code(), Code::Unavailable);
        let status = invalid("room_id", "must not be empty");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().starts_with("room_id:"), "{}", status.message());
        assert_eq!(status.metadata().get(ERROR_CODE).unwrap(), "invalid_argument");
    }

    #[test]
    fn auth_refusals_map_to_their_codes_with_the_retry_after() {
        use crate::auth::{AuthError, Reason};
        let unauthenticated = from_api(AuthError::Unauthenticated(Reason::Expired).into());
        assert_eq!(unauthenticated.code(), Code::Unauthenticated);
        assert_eq!(unauthenticated.metadata().get(ERROR_CODE).unwrap(), "unauthenticated");
        let forbidden = from_api(AuthError::Forbidden { field: "sender_id", why: "not yours" }.into());
        assert_eq!(forbidden.code(), Code::PermissionDenied);
        assert!(forbidden.message().starts_with("sender_id:"), "{}", forbidden.message());
        let retry_after = std::time::Duration::from_millis(1500);
        let limited = from_api(AuthError::RateLimited { per_sec: 2, retry_after }.into());
        assert_eq!(limited.code(), Code::ResourceExhausted);
        assert_eq!(limited.metadata().get(ERROR_CODE).unwrap(), "rate_limited");
        assert_eq!(limited.metadata().get(RETRY_AFTER).unwrap(), "2");
    }
}
