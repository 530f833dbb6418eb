//! The publish errors' bounded classes ([`ErrorClass`]), the trait an error that knows its
//! class implements ([`Classify`]), and the errors of the stack's own layers ([`Throttled`],
//! [`TooLate`]) and of a consumer's sink ([`SinkError`]). It names no leaf of the stack: the one
//! walk that finds a class in an error chain is [`super::classify()`].

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

/// Errors that know their own class implement this; [`classify`](super::classify::classify) finds
/// them in a chain.
pub trait Classify {
    /// The class of this error.
    fn class(&self) -> ErrorClass;

    /// True when the message's content was refused (see
    /// [`is_content_refusal`](super::classify::is_content_refusal)).
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

/// A synchronous publish found no permit (or its group paused): the event is left pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no IM rate-limit permit right now; left pending for the outbox worker")]
pub struct Throttled;

impl Classify for Throttled {
    fn class(&self) -> ErrorClass {
        ErrorClass::Throttled
    }
}

/// A lane message's permit would come after the latest time it may be sent: it is not built, and the events
/// are left pending for the outbox worker (class `throttled`: never reached the receiver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "its rate-limit permit came after the latest time it could be sent; left pending for the outbox worker"
)]
pub struct TooLate;

impl Classify for TooLate {
    fn class(&self) -> ErrorClass {
        ErrorClass::Throttled
    }

    fn reason(&self) -> &'static str {
        "too_late"
    }
}
