//! The consumer loop: hold the lease, read past the position, deliver, advance.
//!
//! ```text
//! acquire_consumer (lease on the consumer's row, database clock; renewed every third of it)
//!   └▶ events_after(position) ─▶ HighWater::walk: stop at a gap not proven gone
//!   └▶ stack.call per event, in order (trace, metrics, filter, rate limit, timeout) ─▶ Batcher
//!   └▶ flush: one delivery ─▶ every event's answer
//!   └▶ ok: advance_consumer(last id), fenced on the owner │ failed: record the error, back off,
//!      same events again (never skipped)
//! ```
//!
//! At least once and in order: the position moves only after the sink acknowledged every event
//! up to it, so a crash (or a lost lease) redelivers at most one batch.

use std::time::Duration;

use futures::FutureExt;
use futures::future::join_all;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::{Service, ServiceExt};

use super::batch::{Batcher, Sink};
use super::high_water::HighWater;
use super::progress;
use super::{ConsumerOptions, ConsumerStack};
use crate::publish::{BoxError, Message, Outcome, classify};
use crate::store::{ConsumerLease, SharedRepository, StoreError, short_error};

/// How a round's publish ended, when no delivery failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Published {
    /// Every event acknowledged.
    All,
    /// The lease went to another instance (or a reset) between two partial deliveries.
    LeaseLost,
}

/// What one round came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Work was done: go again at once.
    Busy,
    /// Nothing to deliver now.
    Idle,
    /// Another instance holds the consumer now (or an operator reset it).
    Lost,
}

/// One consumer of one instance; see the module docs.
pub struct Consumer<S: Sink> {
    repo: SharedRepository,
    stack: ConsumerStack,
    batcher: Batcher<S>,
    options: ConsumerOptions,
    owner: String,
}

impl<S: Sink> Consumer<S> {
    /// A consumer publishing through `stack`, whose leaf is `batcher`.
    pub fn new(
        repo: SharedRepository,
        stack: ConsumerStack,
        batcher: Batcher<S>,
        options: ConsumerOptions,
    ) -> Self {
        // Unique per run: a restarted instance is a new owner, so it never inherits a fence.
        let owner = format!("{}-{:016x}", options.node_id, rand::random::<u64>());
        Self { repo, stack, batcher, options, owner }
    }

    /// This instance's lease on the consumer's row.
    fn lease(&self) -> ConsumerLease<'_> {
        ConsumerLease::new(self.options.name.as_str(), &self.owner, self.options.lease_ttl)
    }

    /// Runs until `cancel` fires, then frees the lease so another instance takes over at once.
    pub async fn run(mut self, cancel: CancellationToken) {
        let name = self.options.name.as_str();
        tracing::info!(consumer = name, owner = %self.owner, "Consumer started");
        let mut held: Option<HighWater> = None;
        let mut renewed = Instant::now();
        while !cancel.is_cancelled() {
            if held.is_none() || renewed.elapsed() >= self.options.lease_ttl / 3 {
                match self.repo.acquire_consumer(self.lease()).await {
                    Ok(Some(position)) => {
                        renewed = Instant::now();
                        if held.as_ref().map(HighWater::position) != Some(position) {
                            tracing::info!(consumer = name, owner = %self.owner, position, "Consuming");
                            held = Some(HighWater::new(position, self.options.gap_grace));
                        }
                    }
                    Ok(None) => {
                        if held.take().is_some() {
                            tracing::warn!(consumer = name, owner = %self.owner, "Consumer lease taken over");
                        }
                        // Standing by, this instance reports the holder's progress, never a stale
                        // figure of its own (dashboards and the alert take the max over instances).
                        progress::export_stored(self.repo.as_ref(), self.options.name).await;
                        self.sleep(self.options.lease_ttl / 3, &cancel).await;
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(consumer = name, %error, "Cannot take the consumer lease");
                        self.sleep(self.options.poll_interval, &cancel).await;
                        continue;
                    }
                }
            }
            let Some(high_water) = held.as_mut() else { continue };
            match self.round(high_water, &cancel).await {
                Ok(Round::Busy) => {}
                Ok(Round::Idle) => self.sleep(self.options.poll_interval, &cancel).await,
                Ok(Round::Lost) => {
                    tracing::warn!(consumer = name, owner = %self.owner, "Consumer lease lost; taking it again");
                    held = None;
                }
                Err(error) => {
                    tracing::warn!(consumer = name, %error, "Consumer round failed");
                    self.sleep(self.options.poll_interval, &cancel).await;
                }
            }
        }
        if held.is_some()
            && let Err(error) = self.repo.release_consumer(self.lease()).await
        {
            tracing::warn!(consumer = name, %error, "Cannot release the consumer lease; it expires by itself");
        }
        tracing::info!(consumer = name, owner = %self.owner, "Consumer stopped");
    }

    async fn round(
        &mut self,
        high_water: &mut HighWater,
        cancel: &CancellationToken,
    ) -> Result<Round, StoreError> {
        let read_at = Instant::now();
        let events = self.repo.events_after(high_water.position(), self.options.batch_size as u32).await?;
        let walk = high_water.walk(&events, read_at);
        if let Some(mark) = walk.blocked
            && self.prove_gap(high_water, mark).await?
        {
            // Read again: the read after a proof shows every id that will ever exist below it.
            return Ok(Round::Busy);
        }
        let ready = &events[..walk.ready];
        let Some(last) = ready.last().map(|e| e.id) else {
            progress::export(self.repo.as_ref(), self.options.name, high_water.position()).await;
            return Ok(Round::Idle);
        };
        let messages = progress::decode(self.options.name, ready);
        let from = high_water.position();
        let mut attempt = 0_u32;
        loop {
            let error = match self.publish(&messages, from).await {
                Ok(Published::All) => break,
                Ok(Published::LeaseLost) => return Ok(Round::Lost),
                Err(error) => error,
            };
            attempt = attempt.saturating_add(1);
            let class = classify(error.as_ref());
            let text = short_error(&format!("{}: {error}", class.as_str()));
            tracing::warn!(
                consumer = self.options.name.as_str(),
                attempt,
                error_class = class.as_str(),
                error = %text,
                "Consumer delivery failed; the same events go again"
            );
            if !self.repo.record_consumer_error(self.lease(), &text).await? {
                return Ok(Round::Lost);
            }
            progress::export(self.repo.as_ref(), self.options.name, high_water.position()).await;
            let delay = self.options.backoff.retry_after(attempt, rand::rng().random_range(0.5..=1.0));
            if !self.back_off(delay, from, cancel).await? {
                return Ok(if cancel.is_cancelled() { Round::Idle } else { Round::Lost });
            }
        }
        if !self.repo.advance_consumer(self.lease(), from, last).await? {
            return Ok(Round::Lost);
        }
        high_water.pass(last);
        progress::export(self.repo.as_ref(), self.options.name, last).await;
        Ok(Round::Busy)
    }

    /// Asks the database whether the gap of mark `index` is certainly gone; true when it is.
    async fn prove_gap(&self, high_water: &mut HighWater, index: usize) -> Result<bool, StoreError> {
        let grace = high_water.grace();
        let Some(mark) = high_water.mark_mut(index) else { return Ok(false) };
        let since = match mark.db_ms {
            Some(ms) => ms,
            None => {
                // Taken after the read that revealed the gap: whoever holds a missing id began
                // before it.
                let now = self.repo.database_now_ms().await?;
                mark.db_ms = Some(now);
                now
            }
        };
        let open = self.repo.open_writers_since(since).await?;
        match open {
            Some(0) => mark.settled = true,
            None => mark.unprovable = true,
            Some(_) => {}
        }
        if !mark.settled && !mark.reported && mark.seen_at.elapsed() >= grace {
            mark.reported = true;
            tracing::warn!(
                consumer = self.options.name.as_str(),
                below = mark.below,
                open_writers = open,
                "A missing outbox id is held longer than consumers.gap_grace: the consumer waits for it"
            );
        }
        Ok(mark.settled)
    }

    /// Publishes `messages` in order through the stack and delivers them as one batch — or a
    /// few, when the rate limit makes the stack wait: what is queued goes first, so no queued
    /// event waits out its timeout behind the limiter, and the lease (read at `from`) is renewed
    /// between them, so a slow round never outlives it.
    async fn publish(&mut self, messages: &[Message], from: i64) -> Result<Published, BoxError> {
        let mut answers = Vec::with_capacity(messages.len());
        let mut renewed = Instant::now();
        for message in messages {
            if self.stack.ready().now_or_never().is_none() {
                self.flush(std::mem::take(&mut answers)).await?;
                if renewed.elapsed() >= self.options.lease_ttl / 3 {
                    if !self.still_held(from).await? {
                        return Ok(Published::LeaseLost);
                    }
                    renewed = Instant::now();
                }
            }
            let svc = self.stack.ready().await?;
            answers.push(svc.call(message.clone()));
        }
        self.flush(answers).await?;
        Ok(Published::All)
    }

    /// Renews the lease; false when another instance holds it now or the consumer was moved
    /// away from `from` (an operator's reset).
    async fn still_held(&self, from: i64) -> Result<bool, StoreError> {
        let held = self.repo.acquire_consumer(self.lease()).await?;
        Ok(held == Some(from))
    }

    async fn flush<F>(&self, answers: Vec<F>) -> Result<(), BoxError>
    where
        F: Future<Output = Result<Outcome, BoxError>>,
    {
        let (results, _) = tokio::join!(join_all(answers), self.batcher.flush());
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// Waits `delay` before a retry, renewing the lease meanwhile. False: stopping, or the lease
    /// was lost (or the consumer reset away from `from`).
    async fn back_off(
        &self,
        delay: Duration,
        from: i64,
        cancel: &CancellationToken,
    ) -> Result<bool, StoreError> {
        let until = Instant::now() + delay;
        let step = self.options.lease_ttl / 3;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(true);
            }
            if cancel.run_until_cancelled(tokio::time::sleep(left.min(step))).await.is_none() {
                return Ok(false);
            }
            if !self.still_held(from).await? {
                return Ok(false);
            }
        }
    }

    async fn sleep(&self, duration: Duration, cancel: &CancellationToken) {
        cancel.run_until_cancelled(tokio::time::sleep(duration)).await;
    }
}
