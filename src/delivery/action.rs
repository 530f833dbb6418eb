//! What a message's outcome comes to ([`Action::of`]): delivered; refused for its content, so
//! split and its halves sent again ([`super::split`]); or failed — then a room's lane hands the
//! room to the worker, and the worker decides by error class what each row comes to
//! ([`on_failure`], SPEC §11.2):
//!
//! | class | row |
//! |---|---|
//! | timeout, transient, auth-refresh (the leaf already retried once with a fresh UserSig) | `retryable` after the strategy's delay |
//! | rate-limited | `retryable` after at least `rate_limit_pause` (the stack paused the group or app) |
//! | configuration | no attempt spent; publishing pauses `config_error_pause` |
//! | permanent | parked `failed` at once, with its reason |
//! | throttled (no local permit; the worker normally waits instead) | no attempt spent, back after `rate_limit_pause` |
//!
//! With `max_attempts` > 0, a retryable failure that reaches it parks the row (`max_attempts`).

use std::error::Error;

use crate::config::OutboxWorkerSettings;
use crate::publish::classify::{is_content_refusal, reason};
use crate::publish::{BoxError, ErrorClass, Outcome, classify};
use crate::store::{Mark, short_error};

/// Every `reason` a row is parked with (label of `room_outbox_parked_total`): a permanent
/// refusal's reason ([`reason`]: the class name, or the IM leaf's more precise one), running
/// out of attempts, or an envelope that cannot be decoded.
pub const PARK_REASONS: [&str; 5] =
    ["permanent", "group_id_too_long", "message_too_large", "max_attempts", UNDECODABLE];

/// The reason of a row parked because its envelope cannot be decoded.
pub const UNDECODABLE: &str = "undecodable";

/// What a message's outcome comes to, for every event it carried.
#[derive(Debug)]
pub enum Action {
    /// IM took it (or the filter answered it without a call).
    Delivered,
    /// IM refused it for its content: split it, in order ([`super::split::after_refusal`]).
    Split(BoxError),
    /// Failed otherwise: the lane hands the room to the worker; the worker decides each row's
    /// mark ([`on_failure`]).
    Failed(BoxError),
}

impl Action {
    /// The action for `result`, a message's answer.
    pub fn of(result: Result<Outcome, BoxError>) -> Self {
        match result {
            Ok(_) => Action::Delivered,
            Err(error) if is_content_refusal(error.as_ref()) => Action::Split(error),
            Err(error) => Action::Failed(error),
        }
    }
}

/// The decision for one failed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Write this mark.
    Mark(Mark),
    /// The deployment is misconfigured: stop publishing for `config_error_pause`; the row is
    /// handed back without spending an attempt.
    ConfigPause {
        /// Why, for the log line.
        error: String,
    },
}

/// Decides what a failed publish of a row with `retry_count` failures so far comes to;
/// `jitter` is a uniform draw from [0.5, 1.0].
pub fn on_failure(
    options: &OutboxWorkerSettings,
    retry_count: i32,
    error: &(dyn Error + 'static),
    jitter: f64,
) -> Failure {
    let class = classify(error);
    let text = short_error(&format!("{}: {error}", class.as_str()));
    let attempt = u32::try_from(retry_count).unwrap_or(0).saturating_add(1);
    let retry = |after| {
        if options.max_attempts > 0 && attempt >= options.max_attempts {
            Mark::Park { reason: "max_attempts", error: text.clone() }
        } else {
            Mark::Retry { error: text.clone(), after }
        }
    };
    let mark = match class {
        ErrorClass::Timeout | ErrorClass::Transient | ErrorClass::AuthRefresh => {
            retry(options.retry_after(attempt, jitter))
        }
        ErrorClass::RateLimited => retry(options.retry_after(attempt, jitter).max(options.rate_limit_pause)),
        ErrorClass::Permanent => Mark::Park { reason: reason(error), error: text },
        ErrorClass::Throttled => Mark::Defer { after: options.rate_limit_pause },
        ErrorClass::Configuration => return Failure::ConfigPause { error: text },
    };
    Failure::Mark(mark)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::RetryStrategy;
    use crate::publish::tencent::ImError;

    fn options(max_attempts: u32) -> OutboxWorkerSettings {
        OutboxWorkerSettings {
            retry_strategy: RetryStrategy::Exponential,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            rate_limit_pause: Duration::from_secs(2),
            max_attempts,
            ..OutboxWorkerSettings::default()
        }
    }

    fn decide(max_attempts: u32, retry_count: i32, error: ImError) -> Failure {
        on_failure(&options(max_attempts), retry_count, &error, 1.0)
    }

    #[test]
    fn transient_errors_retry_after_the_strategy_delay() {
        let Failure::Mark(Mark::Retry { error, after }) = decide(0, 2, ImError::im(90994, "busy")) else {
            panic!("retry expected")
        };
        assert_eq!(after, Duration::from_secs(4), "third attempt: base × 2²");
        assert!(error.starts_with("transient: ") && error.contains("90994"), "{error}");
    }

    #[test]
    fn rate_limited_errors_wait_at_least_the_pause() {
        let Failure::Mark(Mark::Retry { after, .. }) = decide(0, 0, ImError::im(60007, "freq")) else {
            panic!("retry expected")
        };
        assert_eq!(after, Duration::from_secs(2));
    }

    #[test]
    fn permanent_errors_park_at_once_with_their_reason() {
        let parked = decide(0, 0, ImError::im(10010, "group dissolved"));
        assert!(
            matches!(&parked, Failure::Mark(Mark::Park { reason: "permanent", error }) if error.contains("10010"))
        );
        let too_long = decide(0, 0, ImError::GroupIdTooLong { len: 60, limit: 48 });
        assert!(matches!(too_long, Failure::Mark(Mark::Park { reason: "group_id_too_long", .. })));
    }

    #[test]
    fn every_park_reason_is_one_of_the_declared_reasons() {
        let failures = [
            decide(0, 0, ImError::im(10010, "group dissolved")),
            decide(0, 0, ImError::GroupIdTooLong { len: 60, limit: 48 }),
            decide(0, 0, ImError::TooLarge { size: 20_000, limit: 12_000 }),
            decide(3, 2, ImError::im(90994, "x")),
        ];
        let mut reasons: Vec<_> = failures
            .iter()
            .filter_map(|f| match f {
                Failure::Mark(Mark::Park { reason, .. }) => Some(*reason),
                _ => None,
            })
            .collect();
        reasons.push(UNDECODABLE);
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        for reason in reasons {
            assert!(PARK_REASONS.contains(&reason), "{reason} is not in PARK_REASONS");
        }
    }

    #[test]
    fn configuration_errors_pause_without_spending_an_attempt() {
        assert!(matches!(decide(3, 5, ImError::im(70003, "bad sig")), Failure::ConfigPause { .. }));
    }

    #[test]
    fn max_attempts_parks_the_row_on_its_last_failure() {
        assert!(matches!(decide(3, 1, ImError::im(90994, "x")), Failure::Mark(Mark::Retry { .. })));
        assert!(matches!(
            decide(3, 2, ImError::im(90994, "x")),
            Failure::Mark(Mark::Park { reason: "max_attempts", .. })
        ));
    }
}
