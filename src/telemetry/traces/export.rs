//! The OTLP pipeline: the SDK provider with [`KeptOrRatio`] as its sampler, over our
//! [`Bounded`] queue, the SDK's batch processor (its own OS thread, a batch each second) and
//! the tonic exporter, [`Counted`]. Spans the queue dropped and exports that failed are
//! counted as they happen and told in one warning at most every [`WARN_EVERY`], naming the
//! endpoint (never a credential: `telemetry.otlp.endpoint` may not carry one).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Tracer};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::queue::{Bounded, Counted, Lost, Queue};
use super::sampler::KeptOrRatio;
use crate::config::OtlpSettings;

/// At most one warning of lost spans this often.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// Spans sent in one export call at most.
const MAX_BATCH: usize = 1024;

/// The exporting half, kept by `main` to flush at stop.
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
    queue: Arc<Queue>,
    endpoint: String,
    warnings: JoinHandle<()>,
}

impl Exporter {
    /// Exports what is queued and stops the processor's thread (at most `timeout`), then warns
    /// of what was lost since the last warning.
    pub async fn shutdown(self, timeout: Duration) {
        let provider = self.provider;
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(timeout)).await;
        if let Ok(Err(error)) = stopped {
            tracing::warn!(%error, "Traces not all exported at stop");
        }
        self.warnings.abort();
        warn_of(self.queue.take_lost(), &self.queue, &self.endpoint);
    }
}

/// The OTLP pipeline of `settings`: an SDK provider (resource `service.name` `room-service`,
/// `service.instance.id` the node id, `service.version`) over the bounded queue, the batch
/// processor and the tonic exporter, and the task warning of lost spans. Must run inside the
/// Tokio runtime (the exporter's channel and the task are made here).
pub fn exporter(settings: &OtlpSettings, node_id: &str) -> Result<(Exporter, Tracer), String> {
    let otlp = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(&settings.endpoint)
        .with_timeout(settings.timeout)
        .build()
        .map_err(|e| format!("telemetry.otlp.endpoint: cannot make the OTLP exporter: {e}"))?;
    let queue = Queue::new(settings.max_queue_spans);
    // As long as ours: it never holds more than ours admitted, so it never drops a span itself.
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(settings.max_queue_spans)
        .with_max_export_batch_size(MAX_BATCH)
        .with_scheduled_delay(Duration::from_secs(1))
        .build();
    let processor =
        BatchSpanProcessor::builder(Counted::new(otlp, queue.clone())).with_batch_config(batch).build();
    let resource = Resource::builder()
        .with_service_name("room-service")
        .with_attributes([
            KeyValue::new("service.instance.id", node_id.to_owned()),
            KeyValue::new("service.version", crate::build::VERSION),
        ])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Bounded::new(processor, queue.clone()))
        .with_sampler(KeptOrRatio::new(settings.sample_ratio, settings.forced_per_sec))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("room-service");
    let warnings = tokio::spawn(warn_of_losses(queue.clone(), settings.endpoint.clone()));
    super::turn_on();
    Ok((Exporter { provider, queue, endpoint: settings.endpoint.clone(), warnings }, tracer))
}

/// Looks every second for lost spans and warns of them, at most once per [`WARN_EVERY`].
async fn warn_of_losses(queue: Arc<Queue>, endpoint: String) {
    let mut warner = Warner { queue: queue.clone(), last: None };
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Some(lost) = warner.due(Instant::now()) {
            warn_of(lost, &queue, &endpoint);
        }
    }
}

/// When to warn, and of what.
#[derive(Debug)]
struct Warner {
    queue: Arc<Queue>,
    /// When the last warning was written.
    last: Option<Instant>,
}

impl Warner {
    /// What to warn of at `now`: everything lost since the last warning, if anything was and
    /// that warning is at least [`WARN_EVERY`] old (until then the losses add up).
    fn due(&mut self, now: Instant) -> Option<Lost> {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < WARN_EVERY) {
            return None;
        }
        let lost = self.queue.take_lost();
        if lost.is_none() {
            return None;
        }
        self.last = Some(now);
        Some(lost)
    }
}

/// The warning of `lost` spans, with how many still wait in `queue`.
fn warn_of(lost: Lost, queue: &Queue, endpoint: &str) {
    if lost.is_none() {
        return;
    }
    tracing::warn!(
        endpoint,
        waiting_spans = queue.waiting(),
        dropped_spans = lost.dropped,
        failed_exports = lost.failed_exports,
        failed_spans = lost.failed_spans,
        "Spans were not exported: the export queue was full or exports failed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drops `spans` spans at a queue of 0.
    fn lose(queue: &Queue, spans: usize) {
        for _ in 0..spans {
            assert!(!queue.admit());
        }
    }

    #[test]
    fn losses_are_told_at_most_once_per_period_and_add_up_meanwhile() {
        let queue = Queue::new(0);
        let mut warner = Warner { queue: queue.clone(), last: None };
        let start = Instant::now();
        assert_eq!(warner.due(start), None, "nothing lost, nothing told");
        lose(&queue, 2);
        assert_eq!(warner.due(start).map(|l| l.dropped), Some(2), "the first loss at once");
        lose(&queue, 3);
        assert_eq!(warner.due(start + Duration::from_secs(9)), None);
        lose(&queue, 4);
        let told = warner.due(start + WARN_EVERY).expect("due again");
        assert_eq!(told.dropped, 7, "everything since the last warning");
        assert_eq!(warner.due(start + WARN_EVERY * 3), None, "told once");
    }
}
