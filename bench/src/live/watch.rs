//! What B10 watches from outside the service: the fake IM's counters (`GET /fake/stats`)
//! polled every [`POLL`] with the wall-clock time each answer arrived, the fake's records
//! (`GET /fake/messages`, once, at the end), and the outbox's undelivered rows in MariaDB.
//!
//! The fake appends a record per event (element) under the same lock that adds the event to
//! `accepted`, so record `i` (in the order `/fake/messages` lists them, since the last reset)
//! was accepted before the first poll whose `accepted` exceeds `i`: that poll's arrival time
//! is its acceptance time, late by at most one poll interval (plus the poll's round trip).

use std::time::{Duration, Instant};

use room_service_fakes::fake_im::{FakeStats, RecordedMessage};
use sqlx::mysql::MySqlPool;
use tokio_util::sync::CancellationToken;

use crate::support::unix_ms;

/// How often the fake's counters are read.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// The fake's counters as one poll found them.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// Wall clock (ms) when the answer arrived.
    pub(crate) at_ms: i64,
    pub(crate) stats: FakeStats,
}

/// The fake IM's control endpoints.
#[derive(Debug, Clone)]
pub(crate) struct Fake {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
}

impl Fake {
    /// Its counters now.
    pub(crate) async fn stats(&self) -> anyhow::Result<FakeStats> {
        let response = self.http.get(format!("{}/fake/stats", self.base)).send().await?;
        Ok(response.error_for_status()?.json().await?)
    }

    /// Every record since the last reset, in the order they were accepted.
    pub(crate) async fn records(&self) -> anyhow::Result<Vec<RecordedMessage>> {
        let response = self.http.get(format!("{}/fake/messages", self.base)).send().await?;
        Ok(response.error_for_status()?.json().await?)
    }

    /// Forgets records, counters and rate windows.
    pub(crate) async fn reset(&self) -> anyhow::Result<()> {
        self.http.post(format!("{}/fake/reset", self.base)).send().await?.error_for_status()?;
        Ok(())
    }

    /// Polls the counters every [`POLL`] in the background until [`Sampler::finish`].
    pub(crate) fn sample(&self) -> Sampler {
        let cancel = CancellationToken::new();
        let fake = self.clone();
        let task = tokio::spawn({
            let cancel = cancel.clone();
            async move {
                let mut samples = Vec::new();
                let mut every = tokio::time::interval(POLL);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !cancel.is_cancelled() {
                    every.tick().await;
                    let stats = fake.stats().await?;
                    samples.push(Sample { at_ms: unix_ms(), stats });
                }
                anyhow::Ok(samples)
            }
        });
        Sampler { cancel, task, fake: self.clone() }
    }
}

/// The background poll of [`Fake::sample`].
#[derive(Debug)]
pub(crate) struct Sampler {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<Vec<Sample>>>,
    fake: Fake,
}

impl Sampler {
    /// Stops polling (after one last poll) and answers every sample, oldest first.
    pub(crate) async fn finish(self) -> anyhow::Result<Vec<Sample>> {
        self.cancel.cancel();
        let mut samples = self.task.await??;
        let stats = self.fake.stats().await?;
        samples.push(Sample { at_ms: unix_ms(), stats });
        Ok(samples)
    }
}

/// Outbox rows not delivered yet (`status <> 'delivered'`).
pub(crate) async fn undelivered(pool: &MySqlPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered'")
        .fetch_one(pool)
        .await?)
}

/// How the backlog went after a load: undelivered rows when it ended, and how long until none
/// was left (`None`: some still were after `bound`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backlog {
    pub(crate) at_end: i64,
    pub(crate) gone_after: Option<Duration>,
    /// Undelivered rows when the wait ended.
    pub(crate) left: i64,
    /// How long the wait took.
    pub(crate) waited: Duration,
}

/// Polls the undelivered rows every 50 ms until none is left, at most `bound`.
pub(crate) async fn backlog(pool: &MySqlPool, bound: Duration) -> anyhow::Result<Backlog> {
    let started = Instant::now();
    let at_end = undelivered(pool).await?;
    let mut left = at_end;
    while left > 0 && started.elapsed() < bound {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = undelivered(pool).await?;
    }
    let waited = started.elapsed();
    Ok(Backlog { at_end, gone_after: (left == 0).then_some(waited), left, waited })
}
