//! Rate limit: keeps IM calls within Tencent's limits — app-wide calls per second, messages per
//! second into one group — for both paths together, with GCRA limiters from `governor`.
//!
//! In the publish stack it sits below the event filter (a skipped event never takes a permit)
//! and above the timeout (waiting for a permit is not part of a call's time budget):
//!
//! - path `sync` (a room's lane) takes a permit now if there is one; otherwise a message with
//!   a [`Turn`](crate::publish::Turn) waits its turn on the turn's terms (told first, then its
//!   permit, then handed back to the turn: too late, or refilled), and one without fails at
//!   once with [`Throttled`] (class `throttled`); a turn is told when its message passes, at
//!   once or after its wait;
//! - path `worker` waits for its permits, and first for a permit of its own limiter at
//!   `worker_share` of the app-wide rate, so live events keep headroom during a backlog drain.
//!
//! A message that waited for its permit takes on, through its turn, what its source has ready
//! when the permit comes (a room lane's events committed during the wait), so the wait a room's
//! turn costs is paid once by everything ready at its turn; a permit past the turn's `call_by`
//! is [`TooLate`](crate::publish::error::TooLate), and the sink is not called.
//!
//! When the receiver answers rate-limited anyway (60007 and kin, `MsgDropReason`), the group —
//! or the whole app, for app-wide codes — is paused for `pause`: the sync path is throttled and
//! the worker waits until it ends.
//!
//! With Redis configured the app-wide limit is the cluster's ([`ClusterQuota`]): every node
//! takes its app-wide permits from one GCRA key in Redis, and falls back to its own share
//! (`global_per_sec / cluster.expected_nodes`) while Redis is away; see [`cluster`].
//!
//! Every limit holds in every sliding one-second window: a limiter of `L` per second with a
//! burst of `b` emits at `L − b + 1` per second, with the period rounded up, so no window of
//! one second ever sees more than `L` calls.
//!
//! # Readiness
//!
//! `poll_ready` only forwards. A worker message waits (and a sync message asking the cluster's
//! quota asks) inside the response future, so `call`
//! keeps the service that was polled ready for it and leaves a clone in its place (tower's
//! `Buffer` and `LoadShed` do the same).

mod clock;
pub mod cluster;
mod future;
mod layer;
mod limits;

use std::task::{Context, Poll};

use tower::Service;

pub use self::cluster::ClusterQuota;
pub use self::future::ResponseFuture;
pub use self::layer::{RateLimitLayer, RateLimitOptions};
use self::limits::{Admission, Limits};
pub use crate::publish::error::Throttled;
use crate::publish::{BoxError, Message, Outcome, Path};

/// Takes rate-limit permits before forwarding a message to `S` (see the module docs).
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    limits: std::sync::Arc<Limits>,
}

impl<S: Clone> RateLimit<S> {
    /// The service that was polled ready, for a message that calls it later; a clone takes its
    /// place.
    fn take_ready(&mut self) -> S {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

impl<S> Service<Message> for RateLimit<S>
where
    S: Service<Message, Response = Outcome> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = Outcome;
    type Error = BoxError;
    type Future = ResponseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, message: Message) -> Self::Future {
        let limits = std::sync::Arc::clone(&self.limits);
        match message.path {
            Path::Sync => match limits.try_acquire(&message.group) {
                Admission::Granted => {
                    if let Some(turn) = &message.turn {
                        turn.passed();
                    }
                    let group = message.group.clone();
                    ResponseFuture::called(self.inner.call(message), limits, group)
                }
                Admission::Refused if message.turn.is_some() => {
                    ResponseFuture::waiting(self.take_ready(), message, limits, false)
                }
                Admission::Refused => ResponseFuture::throttled(),
                Admission::AskCluster => ResponseFuture::asking(self.take_ready(), message, limits),
            },
            // Background paths wait for their permits; a consumer's stack has limits of its own.
            Path::Worker | Path::Webhook | Path::Audit => {
                ResponseFuture::waiting(self.take_ready(), message, limits, true)
            }
        }
    }
}

#[cfg(test)]
mod tests;
