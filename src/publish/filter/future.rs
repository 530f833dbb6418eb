//! [`ResponseFuture`] of [`EventFilter`](super::EventFilter): either the inner call or an
//! immediate `Skipped`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::publish::{BoxError, Outcome};

pin_project! {
    /// Response future of [`EventFilter`](super::EventFilter).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    #[derive(Debug)]
    enum State<F> {
        Called {
            #[pin]
            fut: F,
        },
        Skipped,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn called(fut: F) -> Self {
        Self { state: State::Called { fut } }
    }

    pub(super) fn skipped() -> Self {
        Self { state: State::Skipped }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Outcome, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Outcome, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called { fut } => fut.poll(cx).map_err(Into::into),
            StateProj::Skipped => Poll::Ready(Ok(Outcome::Skipped)),
        }
    }
}
