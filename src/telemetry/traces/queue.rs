//! The export queue's bound and its counts, ours: the SDK's batch processor drops the spans
//! beyond its queue with one warning per process and counts nothing, and its exporter's
//! failures reach only the SDK's internal log. So two wrappers share one [`Queue`]:
//!
//! - [`Bounded`], the processor the provider calls as each span ends, hands a sampled span to
//!   the batch processor while fewer than `telemetry.otlp.max_queue_spans` wait for export
//!   (handed over, export not finished), and drops and counts it beyond
//!   (`room_trace_spans_dropped_total{reason="queue_full"}`): a collector that never answers
//!   holds at most that many spans in memory, and says so;
//! - [`Counted`], the exporter the batch processor calls on its thread, counts each batch's
//!   outcome (`room_trace_spans_exported_total`, or `room_trace_exports_failed_total` and
//!   `room_trace_spans_dropped_total{reason="export_failed"}`) and lets the queue count the
//!   batch's spans out.
//!
//! The batch processor's own queue is as long as ours, so it never drops a span itself.
//! Neither wrapper logs (the provider calls them inside `tracing`'s span bookkeeping); the
//! losses are summed for the warning [`super::export`] writes at most every 10 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

use crate::telemetry::names;

/// Spans waiting for export, and the spans lost since the last warning.
#[derive(Debug)]
pub(super) struct Queue {
    bound: usize,
    /// Spans handed to the batch processor whose export has not finished.
    waiting: AtomicUsize,
    dropped: AtomicU64,
    failed_exports: AtomicU64,
    failed_spans: AtomicU64,
}

/// What was lost since the last [`Queue::take_lost`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lost {
    /// Spans dropped because the queue was full.
    pub dropped: u64,
    /// Export calls that failed.
    pub failed_exports: u64,
    /// Spans of those calls.
    pub failed_spans: u64,
}

impl Lost {
    /// Nothing lost.
    pub(super) fn is_none(&self) -> bool {
        *self == Self::default()
    }
}

impl Queue {
    /// A queue of at most `bound` spans.
    pub(super) fn new(bound: usize) -> Arc<Self> {
        Arc::new(Self {
            bound,
            waiting: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            failed_exports: AtomicU64::new(0),
            failed_spans: AtomicU64::new(0),
        })
    }

    /// Takes a place for one span; `false` (counted) when `bound` spans wait.
    pub(super) fn admit(&self) -> bool {
        let admitted = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.bound).then_some(n + 1))
            .is_ok();
        if !admitted {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(names::TRACE_SPANS_DROPPED_TOTAL, names::LABEL_REASON => "queue_full")
                .increment(1);
        }
        admitted
    }

    /// The export of `spans` spans finished, `exported` or not: counts it, frees their places.
    fn finished(&self, spans: usize, exported: bool) {
        let n = spans as u64;
        if exported {
            metrics::counter!(names::TRACE_SPANS_EXPORTED_TOTAL).increment(n);
        } else {
            self.failed_exports.fetch_add(1, Ordering::Relaxed);
            self.failed_spans.fetch_add(n, Ordering::Relaxed);
            metrics::counter!(names::TRACE_EXPORTS_FAILED_TOTAL).increment(1);
            metrics::counter!(names::TRACE_SPANS_DROPPED_TOTAL, names::LABEL_REASON => "export_failed")
                .increment(n);
        }
        let _ =
            self.waiting.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| Some(w.saturating_sub(spans)));
    }

    /// Spans waiting for export now.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// What was lost since the last call, and starts counting again.
    pub(super) fn take_lost(&self) -> Lost {
        Lost {
            dropped: self.dropped.swap(0, Ordering::Relaxed),
            failed_exports: self.failed_exports.swap(0, Ordering::Relaxed),
            failed_spans: self.failed_spans.swap(0, Ordering::Relaxed),
        }
    }
}

/// The processor side of [`Queue`]: `inner` (the batch processor) sees a sampled span only
/// when the queue has room for it.
#[derive(Debug)]
pub(super) struct Bounded<P> {
    inner: P,
    queue: Arc<Queue>,
}

impl<P> Bounded<P> {
    /// `inner` behind `queue`.
    pub(super) fn new(inner: P, queue: Arc<Queue>) -> Self {
        Self { inner, queue }
    }
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        // The batch processor would export a recorded but unsampled span; ours are never
        // recorded unsampled, and none is exported.
        if span.span_context.is_sampled() && self.queue.admit() {
            self.inner.on_end(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter side of [`Queue`]: `inner` (the OTLP exporter), each batch's outcome counted.
#[derive(Debug)]
pub(super) struct Counted<E> {
    inner: E,
    queue: Arc<Queue>,
}

impl<E> Counted<E> {
    /// `inner`, counting into `queue`.
    pub(super) fn new(inner: E, queue: Arc<Queue>) -> Self {
        Self { inner, queue }
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.queue.finished(spans, result.is_ok());
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn shutdown(&self) -> OTelSdkResult {
        self.inner.shutdown()
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::SystemTime;

    use opentelemetry::InstrumentationScope;
    use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
    use opentelemetry_sdk::error::OTelSdkError;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};

    use super::*;

    fn span(flags: TraceFlags) -> SpanData {
        let context =
            SpanContext::new(TraceId::from(7_u128), SpanId::from(9_u64), flags, false, TraceState::default());
        SpanData {
            span_context: context,
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "command".into(),
            start_time: SystemTime::UNIX_EPOCH,
            end_time: SystemTime::UNIX_EPOCH,
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: InstrumentationScope::default(),
        }
    }

    /// A processor that keeps what it is handed.
    #[derive(Debug, Default)]
    struct Keep(Mutex<Vec<SpanData>>);

    impl SpanProcessor for Keep {
        fn on_start(&self, _: &mut Span, _: &Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// An exporter that answers every batch with `ok`.
    #[derive(Debug)]
    struct Answer {
        ok: bool,
    }

    impl SpanExporter for Answer {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            if self.ok { Ok(()) } else { Err(OTelSdkError::InternalFailure("unreachable".into())) }
        }
    }

    #[test]
    fn spans_beyond_the_bound_are_dropped_and_counted_until_an_export_finishes() {
        let queue = Queue::new(3);
        let bounded = Bounded::new(Keep::default(), queue.clone());
        for _ in 0..5 {
            bounded.on_end(span(TraceFlags::SAMPLED));
        }
        assert_eq!(bounded.inner.0.lock().unwrap().len(), 3, "the batch processor saw the bound's worth");
        assert_eq!((queue.waiting(), queue.take_lost().dropped), (3, 2));
        bounded.on_end(span(TraceFlags::default()));
        assert_eq!(queue.waiting(), 3, "an unsampled span takes no place and is not exported");

        let exporter = Counted::new(Answer { ok: true }, queue.clone());
        futures::executor::block_on(exporter.export(vec![span(TraceFlags::SAMPLED); 2])).unwrap();
        assert_eq!(queue.waiting(), 1, "an exported batch frees its places");
        bounded.on_end(span(TraceFlags::SAMPLED));
        assert_eq!(bounded.inner.0.lock().unwrap().len(), 4);
        assert!(queue.take_lost().is_none(), "nothing lost since the last look");
    }

    #[test]
    fn a_failed_export_frees_its_places_and_counts_its_spans_as_lost() {
        let queue = Queue::new(10);
        let bounded = Bounded::new(Keep::default(), queue.clone());
        for _ in 0..4 {
            bounded.on_end(span(TraceFlags::SAMPLED));
        }
        let exporter = Counted::new(Answer { ok: false }, queue.clone());
        let batch = std::mem::take(&mut *bounded.inner.0.lock().unwrap());
        assert!(futures::executor::block_on(exporter.export(batch)).is_err(), "the outcome is passed on");
        assert_eq!(queue.waiting(), 0);
        assert_eq!(queue.take_lost(), Lost { dropped: 0, failed_exports: 1, failed_spans: 4 });
        assert!(queue.take_lost().is_none());
    }
}
