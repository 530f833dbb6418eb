//! The worker loop: the [engine](super::engine) fed continuously until cancelled.

use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior, interval, sleep_until};
use tokio_util::sync::CancellationToken;

use super::engine::{Engine, MARK_INTERVAL};
use super::{OutboxWorker, WORKER_NAME};
use crate::telemetry::names;

/// Shortest wait for the next row's claim-after time (a row claimable now but locked by
/// another worker's claim in progress must not spin this loop).
const MIN_WAIT: Duration = Duration::from_millis(10);

impl OutboxWorker {
    /// Runs until `cancel` fires. Claims a batch at once, then whenever the rows it holds fall
    /// to the low-water mark (so the next batch is claimed while the tail of the current one is
    /// still in flight): at once after a claim that left claimable rows it saw, otherwise on the
    /// next `poll_interval` tick, when woken ([`Self::waker`]) or when the next row's
    /// claim-after time comes. Results are marked at least every 250 ms; the leases
    /// of rows still held are renewed every quarter of a lease. While publishing is paused after
    /// a configuration error nothing is claimed.
    ///
    /// On cancel no new batch is claimed; the publishes in flight finish (each bounded by
    /// `publish_timeout`) and are marked; queued rows are released, claimable at once.
    pub async fn run_outbox_worker(&self, cancel: CancellationToken) {
        let options = &self.options;
        tracing::info!(
            worker = WORKER_NAME,
            node_id = %self.node_id,
            poll_interval = ?options.poll_interval,
            batch_size = options.batch_size,
            publish_timeout = ?options.publish_timeout,
            max_in_flight = options.max_in_flight,
            "Outbox worker started"
        );
        metrics::gauge!(names::OUTBOX_PUBLISH_PAUSED, names::LABEL_REASON => "configuration").set(0.0);
        let mut engine = Engine::new(self.clone());
        let mut ticks = Ticks::new(options.poll_interval, options.lease() / 4);
        let low_water = (options.batch_size / 2).max(options.max_in_flight);
        let mut claims = ClaimsDue { due: true, backlog: false, next_row: None };
        loop {
            if cancel.is_cancelled() {
                break;
            }
            let paused = engine.paused();
            if paused.is_none() && (claims.due || claims.backlog) && engine.unfinished() <= low_water {
                self.claim(&mut engine, &mut claims).await;
            }
            engine.start();
            let resume = paused.unwrap_or_else(Instant::now);
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                () = engine.next_done() => {}
                _ = ticks.flush.tick() => {
                    engine.flush().await;
                }
                _ = ticks.renew.tick() => engine.renew().await,
                _ = ticks.poll.tick() => claims.due = true,
                () = self.wake.notified() => claims.due = true,
                () = sleep_until(resume), if paused.is_some() => claims.due = true,
                () = sleep_until(claims.next_row.unwrap_or_else(Instant::now)), if claims.next_row.is_some() => {
                    claims.next_row = None;
                    claims.due = true;
                }
            }
        }
        self.stop(engine).await;
    }

    /// Claims a batch, and notes when the next claim is due.
    async fn claim(&self, engine: &mut Engine, claims: &mut ClaimsDue) {
        claims.due = false;
        match engine.claim().await {
            Ok(claimed) => {
                // Rows left that the claim saw: claim again as soon as the rows held allow (a
                // claim that took nothing waits for its tick instead: what it left is capped or
                // behind the rows held here).
                claims.backlog = claimed.rows > 0 && claimed.more;
                claims.next_row = if claims.backlog { None } else { self.next_row().await };
            }
            Err(error) => {
                claims.backlog = false;
                tracing::error!(worker = WORKER_NAME, node_id = %self.node_id, %error, "Outbox claim failed; retrying on the next tick");
            }
        }
    }

    /// Once cancelled: releases the queued rows, lets the publishes in flight finish (a publish
    /// waiting for rate-limit permits is given up after one publish_timeout: its row stays
    /// delivering and comes back after its lease), and marks their results.
    async fn stop(&self, mut engine: Engine) {
        engine.release_queued();
        let finish = async {
            while engine.publishing() {
                engine.next_done().await;
            }
        };
        if tokio::time::timeout(self.options.publish_timeout, finish).await.is_err() {
            engine.abort();
        }
        engine.flush().await;
        tracing::info!(worker = WORKER_NAME, node_id = %self.node_id, "Outbox worker stopped");
    }

    /// When the next row becomes claimable, if before the next poll tick would find it.
    async fn next_row(&self) -> Option<Instant> {
        match self.repo.next_claimable_in().await {
            Ok(Some(wait)) if wait < self.options.poll_interval => Some(Instant::now() + wait.max(MIN_WAIT)),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(worker = WORKER_NAME, node_id = %self.node_id, %error, "Could not read the next claim time");
                None
            }
        }
    }
}

/// When the worker claims: at start, after a claim that left rows, on a tick or a wake, and
/// when the next row's claim-after time (its young-pending guard, its retry delay) comes.
struct ClaimsDue {
    /// A tick, a wake or a time came (or the worker just started): claim when the rows held
    /// allow.
    due: bool,
    /// The last claim left claimable rows it saw: claim again as soon as the rows held allow.
    backlog: bool,
    /// When the next row becomes claimable, if before the next poll tick would find it.
    next_row: Option<Instant>,
}

/// The worker's timers, each delaying its missed ticks rather than bursting them.
struct Ticks {
    /// A claim is due every `poll_interval`.
    poll: Interval,
    /// Results are marked at least every [`MARK_INTERVAL`].
    flush: Interval,
    /// The leases of rows held are renewed every quarter of a lease.
    renew: Interval,
}

impl Ticks {
    fn new(poll: Duration, renew: Duration) -> Self {
        let delayed = |period| {
            let mut ticks = interval(period);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            ticks
        };
        Self { poll: delayed(poll), flush: delayed(MARK_INTERVAL), renew: delayed(renew) }
    }
}
