//! [`DeliveryMarker`]: coalesces the "mark delivered" writes of concurrent commands.
//!
//! Where it sits: after a command's synchronous publish (SPEC §3 step 5) the pipeline hands the
//! ids of the events that went through to the marker and answers the client at once. A
//! background task collects ids from every command in flight and writes them with one
//! [`CommandStore::mark_delivered`](crate::store::CommandStore::mark_delivered) per batch: a batch is
//! flushed as soon as the channel is momentarily empty or [`MAX_BATCH`] ids have accumulated.
//! While one flush runs, the ids of the commands finishing meanwhile pile up for the next, so
//! under load the statements per command fall well below one instead of doubling the commits.
//!
//! Best effort, like the direct mark it replaces: a failed flush (or a full queue, or a submit
//! after [`DeliveryMarker::shutdown`]) is logged and the rows stay `pending`; the outbox worker
//! re-sends them later, so delivery stays at-least-once (receivers dedup on `event_id`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::store::{SharedCommandStore, StoreError};

/// Most event ids written by one `mark_delivered` statement.
pub const MAX_BATCH: usize = 500;

/// Commands whose ids may wait in the queue; beyond that a command's marks are dropped (its
/// rows stay pending for the worker) rather than holding memory or the response.
const QUEUE_CAPACITY: usize = 16_384;

/// Writes one batch; the repository's `mark_delivered` outside unit tests.
type FlushFn = Arc<dyn Fn(Vec<String>) -> BoxFuture<'static, Result<u64, StoreError>> + Send + Sync>;

enum Request {
    /// Event ids of one command to mark delivered.
    Mark(Vec<String>),
    /// Answered once every id queued before it has been flushed (or its flush failed).
    Flush(oneshot::Sender<()>),
}

/// Counters of a marker since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkerStats {
    /// Event ids handed to the marker.
    pub submitted: u64,
    /// `mark_delivered` statements run (successful or not).
    pub statements: u64,
    /// Statements that failed (their rows stay pending for the worker).
    pub failed_statements: u64,
    /// Event ids never written because the queue was full or the marker had stopped.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    submitted: AtomicU64,
    statements: AtomicU64,
    failed_statements: AtomicU64,
    dropped: AtomicU64,
}

/// Batches best-effort delivery marks of concurrent commands into few statements.
#[derive(Debug)]
pub struct DeliveryMarker {
    sender: Mutex<Option<mpsc::Sender<Request>>>,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
}

impl DeliveryMarker {
    /// Starts the marker task over `repo`. Must be called inside a Tokio runtime.
    pub fn spawn(repo: SharedCommandStore) -> Self {
        Self::spawn_with(Arc::new(move |ids: Vec<String>| {
            let repo = repo.clone();
            Box::pin(async move { repo.mark_delivered(&ids).await })
        }))
    }

    fn spawn_with(flush: FlushFn) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(run(receiver, flush, counters.clone()));
        Self { sender: Mutex::new(Some(sender)), task: tokio::sync::Mutex::new(Some(task)), counters }
    }

    /// Queues `event_ids` to be marked delivered; never waits. Dropped (logged) when the queue
    /// is full or the marker has stopped: the rows stay pending and the worker re-sends them.
    pub fn submit(&self, event_ids: Vec<String>) {
        if event_ids.is_empty() {
            return;
        }
        let count = event_ids.len() as u64;
        self.counters.submitted.fetch_add(count, Ordering::Relaxed);
        let sent = match self.sender.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(sender) => sender.try_send(Request::Mark(event_ids)).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => "queue full",
                mpsc::error::TrySendError::Closed(_) => "marker stopped",
            }),
            None => Err("marker stopped"),
        };
        if let Err(why) = sent {
            self.counters.dropped.fetch_add(count, Ordering::Relaxed);
            tracing::warn!(
                events = count,
                why,
                "Delivery marks dropped; the worker will re-send those events"
            );
        }
    }

    /// Waits until every id submitted before this call has been flushed (or its flush failed).
    /// Returns at once when the marker has stopped.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        let sender = self.sender.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(sender) = sender
            && sender.send(Request::Flush(done)).await.is_ok()
        {
            let _ = flushed.await;
        }
    }

    /// Stops taking ids, flushes what is queued and waits for the task to end. Idempotent.
    pub async fn shutdown(&self) {
        drop(self.sender.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(task) = self.task.lock().await.take()
            && let Err(error) = task.await
        {
            tracing::error!(%error, "Delivery marker task failed");
        }
    }

    /// Counters since start.
    pub fn stats(&self) -> MarkerStats {
        let c = &self.counters;
        MarkerStats {
            submitted: c.submitted.load(Ordering::Relaxed),
            statements: c.statements.load(Ordering::Relaxed),
            failed_statements: c.failed_statements.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The marker task: take what is queued (up to [`MAX_BATCH`] ids), flush it, repeat; ends
/// once every sender is gone and the queue is empty.
async fn run(mut receiver: mpsc::Receiver<Request>, flush: FlushFn, counters: Arc<Counters>) {
    let mut batch: Vec<String> = Vec::new();
    let mut waiters: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = receiver.recv().await {
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Request::Mark(ids) => batch.extend(ids),
                Request::Flush(done) => waiters.push(done),
            }
            if batch.len() >= MAX_BATCH {
                break;
            }
            next = receiver.try_recv().ok();
        }
        if !batch.is_empty() {
            let ids = std::mem::take(&mut batch);
            let count = ids.len();
            counters.statements.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = flush(ids).await {
                counters.failed_statements.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, events = count, "Could not mark published events delivered; the worker will re-send them");
            }
        }
        for done in waiters.drain(..) {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
mod tests;
