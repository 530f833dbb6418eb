//! The engine's writes: buffered marks flushed in one fenced call per claim, lease renewal,
//! and handing rows back unattempted.

use std::collections::HashMap;
use std::time::Duration;

use super::{Engine, Held, event_type_label};
use crate::outbox::WORKER_NAME;
use crate::store::{Mark, MarkReport, PublishResult};
use crate::telemetry::names;

impl Engine {
    /// Hands every queued (not yet started) row back, claimable after `after`.
    pub(in crate::outbox) fn defer_all(&mut self, after: Duration) {
        self.ready.clear();
        for (_, queue) in self.queues.drain() {
            self.marks.extend(queue.into_iter().map(|h| (h, Mark::Defer { after })));
        }
    }

    /// Writes the buffered marks, one fenced call per claim; a claim with nothing left ends.
    /// Marks that could not be written stay buffered for the next flush (their rows stay held,
    /// their leases renewed). True when nothing is left buffered.
    pub(in crate::outbox) async fn flush(&mut self) -> bool {
        if self.marks.is_empty() {
            return true;
        }
        let mut by_claim: HashMap<String, Vec<(Held, Mark)>> = HashMap::new();
        for (held, mark) in self.marks.drain(..) {
            by_claim.entry(held.worker_id.clone()).or_default().push((held, mark));
        }
        for (worker_id, marks) in by_claim {
            let results: Vec<PublishResult> =
                marks.iter().map(|(h, m)| PublishResult { id: h.row.id, mark: m.clone() }).collect();
            match self.worker.repo.finish_claimed(&worker_id, &results).await {
                Ok(report) => self.marked(&worker_id, &marks, report),
                Err(error) => {
                    // Fenced marks are safe to write again: keep them for the next flush.
                    tracing::error!(worker = WORKER_NAME, node_id = %self.worker.node_id, worker_id = %worker_id, %error, "Could not mark outbox rows; retrying");
                    self.marks.extend(marks);
                }
            }
        }
        self.marks.is_empty()
    }

    fn marked(&mut self, worker_id: &str, marks: &[(Held, Mark)], report: MarkReport) {
        self.report.delivered += report.delivered;
        self.report.retried += report.retried;
        self.report.parked += report.parked;
        self.report.deferred += report.deferred;
        self.report.lease_lost += report.lease_lost;
        if report.lease_lost > 0 {
            metrics::counter!(names::OUTBOX_LEASE_LOST_TOTAL).increment(report.lease_lost);
            tracing::warn!(worker = WORKER_NAME, node_id = %self.worker.node_id, worker_id = %worker_id, lease_lost = report.lease_lost, status = "delivering", "Outbox lease lost; results left unmarked");
        }
        if report.lease_lost == 0 {
            for (held, mark) in marks {
                if let Mark::Park { reason, .. } = mark {
                    metrics::counter!(names::OUTBOX_PARKED_TOTAL, names::LABEL_EVENT_TYPE => event_type_label(&held.row.event_type), names::LABEL_REASON => *reason).increment(1);
                }
            }
        }
        self.release_count(worker_id, marks.len());
    }

    fn release_count(&mut self, worker_id: &str, n: usize) {
        if let Some(left) = self.claims.get_mut(worker_id) {
            *left = left.saturating_sub(n);
            if *left == 0 {
                self.claims.remove(worker_id);
                self.leases.remove(worker_id);
            }
        }
    }

    /// Extends the lease of every live claim (rows may wait long for permits).
    /// A renewal that finds fewer of the claim's rows than it holds means the lease was lost
    /// (for some rows, taken back by another worker): its queued rows are not published.
    pub(in crate::outbox) async fn renew(&mut self) {
        let lease = self.worker.options.lease();
        for (worker_id, held) in &self.claims {
            let asked = tokio::time::Instant::now();
            match self.worker.repo.renew_lease(worker_id, lease).await {
                Ok(renewed) if renewed < *held as u64 => {
                    self.leases.insert(worker_id.clone(), asked);
                }
                Ok(_) => {
                    self.leases.insert(worker_id.clone(), asked + lease);
                }
                Err(error) => {
                    tracing::warn!(worker = WORKER_NAME, node_id = %self.worker.node_id, worker_id = %worker_id, %error, "Could not renew an outbox lease");
                }
            }
        }
    }

    /// On cancel: queued rows go back claimable at once (in-flight ones finish).
    pub(in crate::outbox) fn release_queued(&mut self) {
        let before = self.marks.len();
        self.defer_all(Duration::ZERO);
        self.report.released += (self.marks.len() - before) as u64;
    }
}
