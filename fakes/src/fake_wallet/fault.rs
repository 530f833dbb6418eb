//! Faults the fake wallet can be told to serve on its next calls: one queue per call
//! (debit, refund), one fault per call, in the order they were injected.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::fake_im::fault::millis;

/// One misbehaviour, served instead of (or around) the normal answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer HTTP 503 `{"error":{"code":"unavailable"}}`; nothing is debited or refunded.
    Http503,
    /// Sleep this long, then do the call and answer.
    Delay(Duration),
    /// Do the call (the debit lands), then wait this long before answering: past the caller's
    /// timeout this is the unknown outcome a retry with the same key must settle.
    AcceptThenDelay(Duration),
}

/// Which call a fault is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// `POST /v1/debits`.
    #[default]
    Debit,
    /// `POST /v1/refunds`.
    Refund,
}

/// The JSON form of a fault injection, as posted to `POST /fake/faults`:
/// `{"kind":"http_503","count":2}`, `{"kind":"delay","ms":3000}`,
/// `{"kind":"accept_then_delay","ms":3000}`, `{"kind":"http_503","call":"refund"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// `http_503`, `delay` or `accept_then_delay`.
    pub kind: FaultKind,
    /// `debit` (the default) or `refund`.
    #[serde(default)]
    pub call: Call,
    /// The delay in milliseconds, for `delay` and `accept_then_delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    /// How many of the next calls get this fault (default 1).
    #[serde(default = "crate::fake_im::fault::one")]
    pub count: u32,
}

/// Kinds of [`FaultSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// See [`Fault::Http503`].
    #[serde(rename = "http_503")]
    Http503,
    /// See [`Fault::Delay`].
    Delay,
    /// See [`Fault::AcceptThenDelay`].
    AcceptThenDelay,
}

impl FaultSpec {
    /// The fault, the call it is for and its count, or why the spec is incomplete.
    pub fn into_fault(self) -> Result<(Fault, Call, u32), &'static str> {
        let fault = match self.kind {
            FaultKind::Http503 => Fault::Http503,
            FaultKind::Delay => Fault::Delay(millis(self.ms, "delay needs ms")?),
            FaultKind::AcceptThenDelay => {
                Fault::AcceptThenDelay(millis(self.ms, "accept_then_delay needs ms")?)
            }
        };
        Ok((fault, self.call, self.count))
    }
}

/// Faults waiting for the calls of one route.
pub(crate) type FaultQueue = crate::fake_im::fault::FaultQueue<Fault>;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<(Fault, Call, u32), &'static str> {
        serde_json::from_str::<FaultSpec>(json).expect("valid spec JSON").into_fault()
    }

    #[test]
    fn every_kind_parses_and_incomplete_specs_are_refused() {
        assert_eq!(parse(r#"{"kind":"http_503","count":2}"#), Ok((Fault::Http503, Call::Debit, 2)));
        assert_eq!(
            parse(r#"{"kind":"delay","ms":250,"call":"refund"}"#),
            Ok((Fault::Delay(Duration::from_millis(250)), Call::Refund, 1))
        );
        assert_eq!(
            parse(r#"{"kind":"accept_then_delay","ms":700}"#),
            Ok((Fault::AcceptThenDelay(Duration::from_millis(700)), Call::Debit, 1))
        );
        assert_eq!(parse(r#"{"kind":"delay"}"#), Err("delay needs ms"));
        assert_eq!(parse(r#"{"kind":"accept_then_delay"}"#), Err("accept_then_delay needs ms"));
        assert!(serde_json::from_str::<FaultSpec>(r#"{"kind":"melt"}"#).is_err());
        assert!(serde_json::from_str::<FaultSpec>(r#"{"kind":"http_503","call":"transfer"}"#).is_err());
    }

    #[test]
    fn faults_are_served_in_order_and_count_down() {
        let mut q = FaultQueue::default();
        q.push(Fault::Http503, 2);
        q.push(Fault::Delay(Duration::from_millis(1)), 1);
        q.push(Fault::Http503, 0);
        assert_eq!(q.remaining(), 3);
        assert_eq!(q.next(), Some(Fault::Http503));
        assert_eq!(q.next(), Some(Fault::Http503));
        assert_eq!(q.next(), Some(Fault::Delay(Duration::from_millis(1))));
        assert_eq!(q.next(), None);
        assert_eq!(q.remaining(), 0);
    }
}
