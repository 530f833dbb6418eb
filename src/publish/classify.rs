//! One place that maps any publish error to a bounded [`ErrorClass`], used by logs, metrics
//! and retry decisions: the one walk of an error's `source()` chain that finds the first error
//! knowing its class — a tower timeout, the IM leaf's error, the rate limit's, a consumer
//! sink's.

use std::error::Error;

use super::error::{Classify, ErrorClass, SinkError, Throttled, TooLate};
use super::tencent::error::ImError;

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
            } else if let Some(e) = err.downcast_ref::<ImError>() {
                Some(e)
            } else if let Some(e) = err.downcast_ref::<Throttled>() {
                Some(e)
            } else if let Some(e) = err.downcast_ref::<TooLate>() {
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
