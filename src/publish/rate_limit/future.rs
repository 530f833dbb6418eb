//! [`ResponseFuture`] of [`RateLimit`](super::RateLimit): throttled at once, waiting for
//! permits (or asking the cluster's quota for one) then calling or throttled, or calling; a
//! rate-limited answer pauses the group (or the app).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::future::BoxFuture;
use pin_project_lite::pin_project;
use tower::Service;

use super::Throttled;
use super::limits::Limits;
use crate::publish::ErrorClass;
use crate::publish::classify::{classify, is_app_wide};
use crate::publish::{BoxError, Message, Outcome};

pin_project! {
    /// Response future of [`RateLimit`](super::RateLimit).
    pub struct ResponseFuture<S: Service<Message>> {
        #[pin]
        state: State<S>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S: Service<Message>> {
        Throttled,
        Waiting {
            permit: BoxFuture<'static, bool>,
            ready: Option<(S, Message)>,
            limits: Arc<Limits>,
        },
        Called {
            #[pin]
            fut: S::Future,
            limits: Arc<Limits>,
            group: String,
        },
    }
}

impl<S: Service<Message>> std::fmt::Debug for ResponseFuture<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S: Service<Message>> ResponseFuture<S> {
    pub(super) fn throttled() -> Self {
        Self { state: State::Throttled }
    }

    pub(super) fn called(fut: S::Future, limits: Arc<Limits>, group: String) -> Self {
        Self { state: State::Called { fut, limits, group } }
    }

    /// Background paths, and a sync message refused a permit now that may wait (it has a turn,
    /// which is told first): waits for every permit — the worker's share too when `worker` —
    /// then calls `ready`.
    pub(super) fn waiting(ready: S, message: Message, limits: Arc<Limits>, worker: bool) -> Self {
        let waiter = Arc::clone(&limits);
        let group = message.group.clone();
        if let Some(turn) = &message.turn {
            turn.must_wait();
        }
        let permit = Box::pin(async move {
            waiter.acquire(group, worker).await;
            true
        });
        Self { state: State::Waiting { permit, ready: Some((ready, message)), limits } }
    }

    /// Sync path with the cluster's quota: asks it for the app-wide permit (one round trip),
    /// then calls `ready`; without one, waits for it when the message may wait (telling its
    /// turn), or is throttled.
    pub(super) fn asking(ready: S, message: Message, limits: Arc<Limits>) -> Self {
        let asker = Arc::clone(&limits);
        let (group, turn) = (message.group.clone(), message.turn.clone());
        let permit = Box::pin(async move {
            if asker.check_cluster().await {
                return true;
            }
            let Some(turn) = turn else { return false };
            turn.must_wait();
            asker.acquire(group, false).await;
            true
        });
        Self { state: State::Waiting { permit, ready: Some((ready, message)), limits } }
    }
}

impl<S> Future for ResponseFuture<S>
where
    S: Service<Message, Response = Outcome>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Outcome, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let next = match self.as_mut().project().state.project() {
                StateProj::Throttled => return Poll::Ready(Err(Throttled.into())),
                StateProj::Waiting { permit, ready, limits } => {
                    if !ready!(permit.as_mut().poll(cx)) {
                        return Poll::Ready(Err(Throttled.into()));
                    }
                    let Some((mut service, mut message)) = ready.take() else {
                        return Poll::Ready(Err("rate limit future polled after completion".into()));
                    };
                    // It waited: too late, or what its source has ready now goes in the same call.
                    if let Some(turn) = message.turn.take() {
                        if let Err(too_late) = turn.permit_came(&mut message.events) {
                            return Poll::Ready(Err(too_late.into()));
                        }
                        turn.passed();
                    }
                    let group = message.group.clone();
                    State::Called { fut: service.call(message), limits: Arc::clone(limits), group }
                }
                StateProj::Called { fut, limits, group } => {
                    let result = ready!(fut.poll(cx)).map_err(Into::into);
                    if let Err(error) = &result
                        && classify(error.as_ref()) == ErrorClass::RateLimited
                    {
                        limits.pause(group, is_app_wide(error.as_ref()));
                    }
                    return Poll::Ready(result);
                }
            };
            self.as_mut().project().state.set(next);
        }
    }
}
