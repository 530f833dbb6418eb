//! Faults the fake IM server can be told to serve on its next calls, and the queue they wait
//! in. Faults apply to the next calls whatever their API (`send_group_msg` and the group admin
//! APIs alike), one per call, in the order they were injected.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One misbehaviour, served instead of (or before) the normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer `ActionStatus: FAIL` with this `ErrorCode`.
    ErrorCode(i64),
    /// Answer HTTP 502 with an HTML body, like a gateway in front of Tencent.
    Http502,
    /// Sleep this long, then answer normally.
    Delay(Duration),
    /// Close the connection without writing any response.
    DropConnection,
    /// Answer HTTP 200 with a body that is not JSON (a proxy's page).
    NonJson,
    /// Accept (and record) the message, then wait this long before answering: past the
    /// caller's timeout this is the unknown outcome a retry must not turn into a second message.
    AcceptThenDelay(Duration),
}

/// The JSON form of a fault injection, as posted to `POST /fake/faults`:
/// `{"kind":"error_code","code":10002,"count":3}`, `{"kind":"http_502"}`,
/// `{"kind":"delay","ms":4000}`, `{"kind":"drop_connection","count":2}`, `{"kind":"non_json"}`,
/// `{"kind":"accept_then_delay","ms":4000}`; `"admin": true` serves it to the group admin calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// `error_code`, `http_502`, `delay`, `drop_connection`, `non_json` or `accept_then_delay`.
    pub kind: FaultKind,
    /// The `ErrorCode`, for `error_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// The delay in milliseconds, for `delay` and `accept_then_delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
    /// How many of the next calls get this fault (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// Serve it to the group admin calls (`create_group`, `forbid_send_msg`...) instead of the
    /// messages (`send_group_msg`, the default): each has its own queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin: bool,
}

/// A spec's default `count`: the next call only (the fake wallet's spec defaults to it too).
pub(crate) fn one() -> u32 {
    1
}

/// `ms` as a delay, or `missing` when a delay kind came without it (shared with the fake
/// wallet's spec, whose delay kinds read the same).
pub(crate) fn millis(ms: Option<u64>, missing: &'static str) -> Result<Duration, &'static str> {
    Ok(Duration::from_millis(ms.ok_or(missing)?))
}

/// Kinds of [`FaultSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// See [`Fault::ErrorCode`].
    ErrorCode,
    /// See [`Fault::Http502`].
    #[serde(rename = "http_502")]
    Http502,
    /// See [`Fault::Delay`].
    Delay,
    /// See [`Fault::DropConnection`].
    DropConnection,
    /// See [`Fault::NonJson`].
    NonJson,
    /// See [`Fault::AcceptThenDelay`].
    AcceptThenDelay,
}

impl FaultSpec {
    /// The fault and its count, or why the spec is incomplete.
    pub fn into_fault(self) -> Result<(Fault, u32), &'static str> {
        let fault = match self.kind {
            FaultKind::ErrorCode => Fault::ErrorCode(self.code.ok_or("error_code needs code")?),
            FaultKind::Http502 => Fault::Http502,
            FaultKind::Delay => Fault::Delay(millis(self.ms, "delay needs ms")?),
            FaultKind::DropConnection => Fault::DropConnection,
            FaultKind::NonJson => Fault::NonJson,
            FaultKind::AcceptThenDelay => {
                Fault::AcceptThenDelay(millis(self.ms, "accept_then_delay needs ms")?)
            }
        };
        Ok((fault, self.count))
    }
}

/// Faults waiting for calls, first in first out (the fake IM's, and the fake wallet's with its
/// own fault type).
#[derive(Debug)]
pub(crate) struct FaultQueue<F = Fault> {
    pending: VecDeque<(F, u32)>,
}

impl<F> Default for FaultQueue<F> {
    fn default() -> Self {
        Self { pending: VecDeque::new() }
    }
}

impl<F: Clone> FaultQueue<F> {
    /// Queues `fault` for the next `count` calls (after those already queued).
    pub(crate) fn push(&mut self, fault: F, count: u32) {
        if count > 0 {
            self.pending.push_back((fault, count));
        }
    }

    /// The fault for this call, if any.
    pub(crate) fn next(&mut self) -> Option<F> {
        let (fault, remaining) = self.pending.front_mut()?;
        let fault = fault.clone();
        *remaining -= 1;
        if *remaining == 0 {
            self.pending.pop_front();
        }
        Some(fault)
    }

    /// How many calls still get a fault.
    pub(crate) fn remaining(&self) -> u64 {
        self.pending.iter().map(|(_, n)| u64::from(*n)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_served_in_order_and_count_down() {
        let mut q = FaultQueue::default();
        q.push(Fault::ErrorCode(10002), 2);
        q.push(Fault::Http502, 1);
        q.push(Fault::DropConnection, 0);
        assert_eq!(q.remaining(), 3);
        assert_eq!(q.next(), Some(Fault::ErrorCode(10002)));
        assert_eq!(q.next(), Some(Fault::ErrorCode(10002)));
        assert_eq!(q.next(), Some(Fault::Http502));
        assert_eq!(q.next(), None);
    }

    #[test]
    fn specs_parse_from_json() {
        let spec: FaultSpec =
            serde_json::from_str(r#"{"kind":"error_code","code":10002,"count":3}"#).unwrap();
        assert_eq!(spec.into_fault(), Ok((Fault::ErrorCode(10002), 3)));
        let spec: FaultSpec = serde_json::from_str(r#"{"kind":"delay","ms":250}"#).unwrap();
        assert_eq!(spec.into_fault(), Ok((Fault::Delay(Duration::from_millis(250)), 1)));
        let spec: FaultSpec = serde_json::from_str(r#"{"kind":"http_502"}"#).unwrap();
        assert_eq!(spec.into_fault(), Ok((Fault::Http502, 1)));
        let spec: FaultSpec = serde_json::from_str(r#"{"kind":"error_code"}"#).unwrap();
        assert!(spec.into_fault().is_err());
        assert!(serde_json::from_str::<FaultSpec>(r#"{"kind":"melt"}"#).is_err());
    }
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    fn parse(json: &str) -> Result<(Fault, u32), &'static str> {
        serde_json::from_str::<FaultSpec>(json).expect("valid spec JSON").into_fault()
    }

    #[test]
    fn every_kind_parses_and_incomplete_specs_are_refused() {
        assert_eq!(parse(r#"{"kind":"non_json","count":2}"#), Ok((Fault::NonJson, 2)));
        assert_eq!(
            parse(r#"{"kind":"accept_then_delay","ms":700}"#),
            Ok((Fault::AcceptThenDelay(Duration::from_millis(700)), 1))
        );
        assert_eq!(parse(r#"{"kind":"drop_connection"}"#), Ok((Fault::DropConnection, 1)));
        assert_eq!(parse(r#"{"kind":"accept_then_delay"}"#), Err("accept_then_delay needs ms"));
        assert_eq!(parse(r#"{"kind":"error_code"}"#), Err("error_code needs code"));
    }
}
