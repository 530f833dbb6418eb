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
use tower::util::BoxService;
use tower::{Service, ServiceExt};

use super::ConsumerName;
use super::batch::{Batcher, Sink};
use super::high_water::HighWater;
use crate::config::OutboxWorkerSettings;
use crate::publish::{BoxError, Message, Outcome, classify};
use crate::store::{EventRow, SharedRepository, StoreError, short_error};
use crate::telemetry::names::{CONSUMER_LAG_SECONDS, CONSUMER_POSITION, LABEL_CONSUMER};

/// A consumer's publish stack: the shared layers around its [`Batcher`].
pub type ConsumerStack = BoxService<Message, Outcome, BoxError>;

/// How a consumer runs.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Which consumer.
    pub name: ConsumerName,
    /// This instance, for the lease owner and the log lines.
    pub node_id: String,
    /// Events read, delivered and acknowledged per round.
    pub batch_size: usize,
    /// Sleep of an idle round.
    pub poll_interval: Duration,
    /// Longest wait for a missing id the database cannot prove gone.
    pub gap_grace: Duration,
    /// Lifetime of the lease on the consumer's row.
    pub lease_ttl: Duration,
    /// The delivery policy whose backoff spaces the retries of a failed batch.
    pub backoff: OutboxWorkerSettings,
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

    /// Runs until `cancel` fires, then frees the lease so another instance takes over at once.
    pub async fn run(mut self, cancel: CancellationToken) {
        let name = self.options.name.as_str();
        tracing::info!(consumer = name, owner = %self.owner, "Consumer started");
        let mut held: Option<HighWater> = None;
        let mut renewed = Instant::now();
        while !cancel.is_cancelled() {
            if held.is_none() || renewed.elapsed() >= self.options.lease_ttl / 3 {
                match self.repo.acquire_consumer(name, &self.owner, self.options.lease_ttl).await {
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
                        self.export_stored().await;
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
            && let Err(error) = self.repo.release_consumer(name, &self.owner).await
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
        if walk.blocked && self.prove_gap(high_water).await? {
            // Read again: the read after a proof shows every id that will ever exist below it.
            return Ok(Round::Busy);
        }
        let ready = &events[..walk.ready];
        let Some(last) = ready.last().map(|e| e.id) else {
            self.export(high_water.position()).await;
            return Ok(Round::Idle);
        };
        let messages = self.decode(ready);
        let mut attempt = 0_u32;
        while let Err(error) = self.publish(&messages).await {
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
            let name = self.options.name.as_str();
            if !self.repo.record_consumer_error(name, &self.owner, &text, self.options.lease_ttl).await? {
                return Ok(Round::Lost);
            }
            self.export(high_water.position()).await;
            let delay = self.options.backoff.retry_after(attempt, rand::rng().random_range(0.5..=1.0));
            if !self.back_off(delay, cancel).await? {
                return Ok(if cancel.is_cancelled() { Round::Idle } else { Round::Lost });
            }
        }
        let name = self.options.name.as_str();
        if !self.repo.advance_consumer(name, &self.owner, last, self.options.lease_ttl).await? {
            return Ok(Round::Lost);
        }
        high_water.pass(last);
        self.export(last).await;
        Ok(Round::Busy)
    }

    /// Asks the database whether the oldest unproven gap is certainly gone; true when it is.
    async fn prove_gap(&self, high_water: &mut HighWater) -> Result<bool, StoreError> {
        let Some(mark) = high_water.pending_mark() else { return Ok(false) };
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
        if self.repo.open_writers_since(since).await? == Some(0) {
            mark.settled = true;
            return Ok(true);
        }
        Ok(false)
    }

    /// Publishes `messages` in order through the stack and delivers them as one batch (or a
    /// few, when the rate limit makes the stack wait: what is queued goes first, so no queued
    /// event waits out its timeout behind the limiter).
    async fn publish(&mut self, messages: &[Message]) -> Result<(), BoxError> {
        let mut answers = Vec::with_capacity(messages.len());
        for message in messages {
            if self.stack.ready().now_or_never().is_none() {
                self.flush(std::mem::take(&mut answers)).await?;
            }
            let svc = self.stack.ready().await?;
            answers.push(svc.call(message.clone()));
        }
        self.flush(answers).await
    }

    async fn flush<F>(&self, answers: Vec<F>) -> Result<(), BoxError>
    where
        F: Future<Output = Result<Outcome, BoxError>>,
    {
        let (results, _) = tokio::join!(join_all(answers), self.batcher.flush());
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// The messages of `events`; an envelope that cannot be decoded can never be delivered
    /// anywhere (the outbox worker parks it for IM): it is passed over, loudly.
    fn decode(&self, events: &[EventRow]) -> Vec<Message> {
        let path = self.options.name.path();
        events
            .iter()
            .filter_map(|e| match crate::outbox::decode_envelope(&e.event_id, &e.envelope, path) {
                Ok(message) => Some(message),
                Err(error) => {
                    tracing::error!(
                        consumer = self.options.name.as_str(),
                        event_id = %e.event_id,
                        outbox_id = e.id,
                        %error,
                        "Undecodable event passed over"
                    );
                    None
                }
            })
            .collect()
    }

    /// Waits `delay` before a retry, renewing the lease meanwhile. False: stopping, or the lease
    /// was lost.
    async fn back_off(&self, delay: Duration, cancel: &CancellationToken) -> Result<bool, StoreError> {
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
            let name = self.options.name.as_str();
            if self.repo.acquire_consumer(name, &self.owner, self.options.lease_ttl).await?.is_none() {
                return Ok(false);
            }
        }
    }

    async fn sleep(&self, duration: Duration, cancel: &CancellationToken) {
        cancel.run_until_cancelled(tokio::time::sleep(duration)).await;
    }

    /// Exports the stored position of this consumer (another instance holds it).
    async fn export_stored(&self) {
        let name = self.options.name.as_str();
        match self.repo.list_consumers().await {
            Ok(rows) => {
                if let Some(row) = rows.into_iter().find(|r| r.name == name) {
                    self.export(row.position).await;
                }
            }
            Err(error) => tracing::debug!(consumer = name, %error, "Cannot read the consumer's row"),
        }
    }

    /// Sets the position and lag gauges (the lag on the database clock).
    async fn export(&self, position: i64) {
        let name = self.options.name.as_str();
        metrics::gauge!(CONSUMER_POSITION, LABEL_CONSUMER => name).set(position as f64);
        match self.repo.consumer_lag(position).await {
            Ok(lag) => metrics::gauge!(CONSUMER_LAG_SECONDS, LABEL_CONSUMER => name)
                .set(lag.unwrap_or_default().as_secs_f64()),
            Err(error) => tracing::debug!(consumer = name, %error, "Cannot read the consumer lag"),
        }
    }
}
