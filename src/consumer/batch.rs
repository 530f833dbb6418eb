//! [`Batcher`]: the leaf of a consumer's publish stack. It turns the one-event requests of the
//! shared layers into one delivery per batch.
//!
//! The layers above it (trace, metrics, event filter, rate limit, timeout) are the IM stack's,
//! and they work one [`Message`] at a time, so every event is traced, counted and filtered on
//! its own. A consumer calls the stack once per event of a round, in order — each call reaches
//! this leaf right away (no layer of a consumer stack defers its inner call), which only queues
//! the message — then [`Batcher::flush`]es: the queued messages go to the [`Sink`] in one
//! delivery, and its one result answers every event's future. Events the filter skipped never
//! reach the batch.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tower::Service;

use crate::publish::error::SinkError;
use crate::publish::{BoxError, ErrorClass, Message, Outcome};

/// Delivers one batch of events, in order, all or nothing.
pub trait Sink: Send + Sync + 'static {
    /// Delivers `messages`; `Ok` acknowledges every one of them.
    fn deliver(&self, messages: Vec<Message>) -> impl Future<Output = Result<(), SinkError>> + Send;
}

type Waiter = oneshot::Sender<Result<(), SinkError>>;

/// Queues the messages it is called with until [`Batcher::flush`]; see the module docs.
#[derive(Debug)]
pub struct Batcher<S> {
    shared: Arc<Shared<S>>,
}

#[derive(Debug)]
struct Shared<S> {
    sink: S,
    queued: Mutex<Vec<(Message, Waiter)>>,
}

impl<S> Clone for Batcher<S> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<S: Sink> Batcher<S> {
    /// A batcher delivering to `sink`.
    pub fn new(sink: S) -> Self {
        Self { shared: Arc::new(Shared { sink, queued: Mutex::new(Vec::new()) }) }
    }

    /// Delivers everything queued so far in one batch and answers each message's caller with
    /// the result. Returns how many messages the batch held.
    pub async fn flush(&self) -> usize {
        let queued = std::mem::take(&mut *self.shared.queued.lock().unwrap_or_else(|p| p.into_inner()));
        if queued.is_empty() {
            return 0;
        }
        let (messages, waiters): (Vec<Message>, Vec<Waiter>) = queued.into_iter().unzip();
        let count = messages.len();
        let result = self.shared.sink.deliver(messages).await;
        for waiter in waiters {
            // A caller that went away (its timeout fired) no longer needs the answer.
            let _ = waiter.send(result.clone());
        }
        count
    }
}

impl<S: Sink> Service<Message> for Batcher<S> {
    type Response = Outcome;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Outcome, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, message: Message) -> Self::Future {
        let (tx, rx) = oneshot::channel();
        self.shared.queued.lock().unwrap_or_else(|p| p.into_inner()).push((message, tx));
        Box::pin(async move {
            match rx.await {
                Ok(Ok(())) => Ok(Outcome::Delivered),
                Ok(Err(error)) => Err(error.into()),
                Err(_) => Err(SinkError::new(ErrorClass::Transient, "batch dropped before delivery").into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use tower::ServiceExt;

    use super::*;
    use crate::publish::{Event, Path, Priority};

    #[derive(Default)]
    struct Recording {
        batches: StdMutex<Vec<Vec<String>>>,
        fail: bool,
    }

    impl Sink for Arc<Recording> {
        async fn deliver(&self, messages: Vec<Message>) -> Result<(), SinkError> {
            let ids = messages.into_iter().flat_map(|m| m.events).map(|e| e.event_id).collect();
            self.batches.lock().unwrap().push(ids);
            if self.fail { Err(SinkError::new(ErrorClass::Transient, "receiver said 503")) } else { Ok(()) }
        }
    }

    fn message(id: &str) -> Message {
        let event = Event {
            event_id: id.into(),
            event_type: "RoomUserJoined",
            priority: Priority::Normal,
            body: Arc::from("{}"),
            sender: None,
            seated: Default::default(),
            trace: None,
            admin: None,
        };
        Message::new("r".into(), Path::Webhook, vec![event])
    }

    #[tokio::test]
    async fn calls_are_delivered_as_one_batch_in_call_order() {
        let sink = Arc::new(Recording::default());
        let batcher = Batcher::new(sink.clone());
        let mut svc = batcher.clone();
        let a = svc.ready().await.unwrap().call(message("a"));
        let b = svc.ready().await.unwrap().call(message("b"));
        assert_eq!(batcher.flush().await, 2);
        assert_eq!(a.await.unwrap(), Outcome::Delivered);
        assert_eq!(b.await.unwrap(), Outcome::Delivered);
        assert_eq!(*sink.batches.lock().unwrap(), vec![vec!["a".to_owned(), "b".to_owned()]]);
        assert_eq!(batcher.flush().await, 0, "nothing is left queued");
    }

    #[tokio::test]
    async fn a_failed_batch_fails_every_event_with_the_sinks_class() {
        let sink = Arc::new(Recording { fail: true, ..Recording::default() });
        let batcher = Batcher::new(sink);
        let mut svc = batcher.clone();
        let a = svc.ready().await.unwrap().call(message("a"));
        let b = svc.ready().await.unwrap().call(message("b"));
        batcher.flush().await;
        for fut in [a, b] {
            let error = fut.await.expect_err("the batch failed");
            assert_eq!(crate::publish::classify(error.as_ref()), ErrorClass::Transient);
            assert!(error.to_string().contains("503"));
        }
    }
}
