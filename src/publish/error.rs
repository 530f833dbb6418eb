//! One place that maps any publish error to a bounded [`ErrorClass`], used by logs, metrics
//! and retry decisions.

use std::error::Error;

/// Bounded class of a publish failure (SPEC §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The publish timed out: outcome unknown, retried with the identical body.
    Timeout,
    /// Network, 5xx, or a transient IM code; unknown codes land here too.
    Transient,
    /// The receiver throttled or dropped the message.
    RateLimited,
    /// The credentials must be regenerated.
    AuthRefresh,
    /// The deployment is misconfigured (app id, group, identifier).
    Configuration,
    /// This message can never be delivered as it is.
    Permanent,
    /// The local rate limiter had no permit for a publish that must not wait (the synchronous
    /// path); the event stays pending for the worker. Never reached the receiver.
    Throttled,
}

impl ErrorClass {
    /// Every class, in declaration order.
    pub const ALL: [ErrorClass; 7] = [
        ErrorClass::Timeout,
        ErrorClass::Transient,
        ErrorClass::RateLimited,
        ErrorClass::AuthRefresh,
        ErrorClass::Configuration,
        ErrorClass::Permanent,
        ErrorClass::Throttled,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Timeout => "timeout",
            ErrorClass::Transient => "transient",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::AuthRefresh => "auth_refresh",
            ErrorClass::Configuration => "configuration",
            ErrorClass::Permanent => "permanent",
            ErrorClass::Throttled => "throttled",
        }
    }
}

/// The error of a leaf outside this module (an event consumer's sink): its class and a short
/// text free of secrets. Cloneable, so one failed batch answers every event in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SinkError {
    /// How the failure is counted and retried.
    pub class: ErrorClass,
    /// What went wrong.
    pub message: String,
}

impl SinkError {
    /// A failure of `class`.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Self { class, message: message.into() }
    }
}

impl Classify for SinkError {
    fn class(&self) -> ErrorClass {
        self.class
    }
}

/// Errors that know their own class implement this; [`classify`] finds them in a chain.
pub trait Classify {
    /// The class of this error.
    fn class(&self) -> ErrorClass;

    /// True when the message's content was refused (see [`is_content_refusal`]).
    fn content_refused(&self) -> bool {
        false
    }

    /// A bounded, more precise reason (a parked row records it); the class name by default.
    fn reason(&self) -> &'static str {
        self.class().as_str()
    }

    /// For a rate-limited error: true when the receiver throttles the whole app, not one group.
    fn app_wide(&self) -> bool {
        false
    }
}

/// The bounded reason of an error (see [`Classify::reason`]); its class name when no error in
/// the chain knows better.
pub fn reason(error: &(dyn Error + 'static)) -> &'static str {
    find_leaf(error).map_or(ErrorClass::Transient.as_str(), |leaf| leaf.reason())
}

/// True when a permanent error refuses a message's content — what one of its events carries
/// (80001 refused content, 80002 and 93000 too long, 9000x a body IM cannot take, or the
/// message over the size limit) — rather than the group or the call: a pack refused so may
/// hold only one culprit, so it is split (SPEC §13.1).
pub fn is_content_refusal(error: &(dyn Error + 'static)) -> bool {
    find_leaf(error).is_some_and(|leaf| leaf.content_refused())
}

/// True when a rate-limited error throttles the whole app rather than one group.
pub fn is_app_wide(error: &(dyn Error + 'static)) -> bool {
    find_leaf(error).is_some_and(|leaf| leaf.app_wide())
}

impl Classify for tower::timeout::error::Elapsed {
    fn class(&self) -> ErrorClass {
        ErrorClass::Timeout
    }
}

/// The first error of `error`'s `source()` chain that knows its class: a tower timeout, or a
/// leaf error this crate knows (IM's, the rate limit's, a consumer sink's). The one walk behind
/// [`classify`], [`reason`], [`is_content_refusal`] and [`is_app_wide`].
fn find_leaf<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a dyn Classify> {
    let mut current: Option<&(dyn Error + 'static)> = Some(error);
    while let Some(err) = current {
        let known: Option<&dyn Classify> =
            if let Some(e) = err.downcast_ref::<tower::timeout::error::Elapsed>() {
                Some(e)
            } else if let Some(e) = err.downcast_ref::<crate::publish::tencent::ImError>() {
                Some(e)
            } else if let Some(e) = err.downcast_ref::<crate::publish::rate_limit::Throttled>() {
                Some(e)
            } else if let Some(e) = err.downcast_ref::<crate::publish::turn::TooLate>() {
                Some(e)
            } else {
                err.downcast_ref::<SinkError>().map(|e| e as &dyn Classify)
            };
        if known.is_some() {
            return known;
        }
        current = err.source();
    }
    None
}

/// Classifies an error by walking its `source()` chain: a tower timeout is
/// [`ErrorClass::Timeout`], a leaf error answers for itself, anything else is transient.
pub fn classify(error: &(dyn Error + 'static)) -> ErrorClass {
    find_leaf(error).map_or(ErrorClass::Transient, |leaf| leaf.class())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_is_classified_as_timeout() {
        let err: crate::publish::BoxError = Box::new(tower::timeout::error::Elapsed::new());
        assert_eq!(classify(err.as_ref()), ErrorClass::Timeout);
    }

    #[test]
    fn unknown_errors_are_transient() {
        let err = std::io::Error::other("boom");
        assert_eq!(classify(&err), ErrorClass::Transient);
    }
}
