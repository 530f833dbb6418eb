//! The worker loop: one batch at once, then one per `poll_interval` tick, until cancelled.

use tokio::time::{MissedTickBehavior, interval};
use tokio_util::sync::CancellationToken;

use super::{OutboxWorker, WORKER_NAME};

impl OutboxWorker {
    /// Runs until `cancel` fires: processes one batch at once, then one per `poll_interval`
    /// tick (a late tick is delayed, never bunched). A full batch is followed by the next one
    /// without waiting, so a backlog drains at full speed; a claim or mark error is logged and
    /// the round ends until the next tick.
    ///
    /// On cancel no new batch is claimed. A cancel never aborts the publish in flight: that
    /// row finishes (bounded by `publish_timeout`) and its batch is marked; the rows of the
    /// batch not yet published are released, claimable at once by any worker.
    pub async fn run_outbox_worker(&self, cancel: CancellationToken) {
        tracing::info!(
            worker = WORKER_NAME,
            node_id = %self.node_id,
            poll_interval = ?self.options.poll_interval,
            batch_size = self.options.batch_size,
            publish_timeout = ?self.options.publish_timeout,
            "Outbox worker started"
        );
        let mut ticker = interval(self.options.poll_interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                _ = ticker.tick() => {}
            }
            self.run_round(&cancel).await;
        }
        tracing::info!(worker = WORKER_NAME, node_id = %self.node_id, "Outbox worker stopped");
    }

    /// One round: batches back to back while they come back full and no cancel has come.
    async fn run_round(&self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            match self.process_batch(cancel).await {
                Ok(report) if report.claimed >= self.options.batch_size => continue,
                Ok(_) => return,
                Err(error) => {
                    tracing::error!(
                        worker = WORKER_NAME,
                        node_id = %self.node_id,
                        %error,
                        "Outbox round failed; retrying on the next tick"
                    );
                    return;
                }
            }
        }
    }
}
