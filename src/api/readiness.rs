//! Readiness's database check, shared by `/readyz` and gRPC health (`grpc::health`):
//! one ping answers every check for [`REUSE`] after it started, and checks arriving while a
//! ping runs wait for it rather than each sending their own. So probes, however many and from
//! whichever protocol, cost the database at most one round trip per [`REUSE`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::store::{SharedRepository, StoreError};

/// How long one ping's result answers the checks that follow it.
pub const REUSE: Duration = Duration::from_millis(250);

/// What a ping answered.
type Answer = Result<(), Arc<StoreError>>;

/// Sends one ping.
type Ping = Box<dyn Fn() -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync>;

/// The database check of readiness; cheap to clone (clones share the last ping).
#[derive(Clone)]
pub struct DbPing {
    inner: Arc<Inner>,
}

struct Inner {
    ping: Ping,
    /// When the last ping started, and its answer. Held across a ping: who comes meanwhile
    /// waits for its answer.
    last: Mutex<Option<(Instant, Answer)>>,
}

impl std::fmt::Debug for DbPing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbPing").finish_non_exhaustive()
    }
}

impl DbPing {
    /// Pings `repo`.
    pub fn new(repo: SharedRepository) -> Self {
        Self::from_fn(move || {
            let repo = repo.clone();
            Box::pin(async move { repo.ping().await })
        })
    }

    /// Pings with `ping` (tests count the pings through it).
    pub fn from_fn(
        ping: impl Fn() -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync + 'static,
    ) -> Self {
        Self { inner: Arc::new(Inner { ping: Box::new(ping), last: Mutex::new(None) }) }
    }

    /// Whether the database answers: the last ping's answer if it started less than
    /// [`REUSE`] ago, else a new ping's.
    pub async fn check(&self) -> Answer {
        let mut last = self.inner.last.lock().await;
        if let Some((started, answer)) = &*last
            && started.elapsed() < REUSE
        {
            return answer.clone();
        }
        let started = Instant::now();
        let answer = (self.inner.ping)().await.map_err(Arc::new);
        *last = Some((started, answer.clone()));
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A check over a ping that takes `takes` and fails while `down` says so; and its count.
    fn counting(takes: Duration, down: Arc<std::sync::atomic::AtomicBool>) -> (DbPing, Arc<AtomicUsize>) {
        let pings = Arc::new(AtomicUsize::new(0));
        let counted = pings.clone();
        let check = DbPing::from_fn(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let down = down.load(Ordering::SeqCst);
            Box::pin(async move {
                tokio::time::sleep(takes).await;
                if down { Err(StoreError::Config("down".into())) } else { Ok(()) }
            })
        });
        (check, pings)
    }

    #[tokio::test(start_paused = true)]
    async fn checks_within_250_ms_of_a_ping_reuse_it() {
        let (check, pings) = counting(Duration::ZERO, Default::default());
        for _ in 0..10 {
            assert!(check.check().await.is_ok());
            tokio::time::advance(Duration::from_millis(24)).await;
        }
        assert_eq!(pings.load(Ordering::SeqCst), 1, "ten checks within 240 ms: one ping");
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(check.clone().check().await.is_ok());
        assert_eq!(pings.load(Ordering::SeqCst), 2, "250 ms after the ping: a new one");
    }

    #[tokio::test(start_paused = true)]
    async fn checks_during_a_ping_share_it() {
        let (check, pings) = counting(Duration::from_millis(100), Default::default());
        let checks: Vec<_> = (0..20)
            .map(|_| {
                tokio::spawn({
                    let check = check.clone();
                    async move { check.check().await.is_ok() }
                })
            })
            .collect();
        for answer in futures::future::join_all(checks).await {
            assert!(answer.unwrap());
        }
        assert_eq!(pings.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_ping_is_reused_too_then_tried_again() {
        let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (check, pings) = counting(Duration::ZERO, down.clone());
        assert!(check.check().await.is_err());
        down.store(false, Ordering::SeqCst);
        assert!(check.check().await.is_err(), "the failure answers for 250 ms");
        tokio::time::advance(REUSE).await;
        assert!(check.check().await.is_ok());
        assert_eq!(pings.load(Ordering::SeqCst), 2);
    }
}
