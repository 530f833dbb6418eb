//! Traces (SPEC §13.4): one trace per command, from the edge that received it (or the caller's
//! `traceparent`) through the forward hop, the commit and the room's lane to each IM call, and
//! from the outbox row to the worker's or a consumer's redelivery, by a span link.
//!
//! `tracing` spans are the only instrumentation; when `telemetry.otlp.endpoint` is set,
//! [`super::init_logging_and_traces`] adds `tracing-opentelemetry`'s layer over an SDK provider
//! whose batch processor (its own OS thread) exports by OTLP/gRPC. Without an endpoint nothing
//! of this runs: [`on`] is
//! false, the edges neither read nor answer `traceparent`, the command path makes none of its
//! extra spans and no row stores a context.
//!
//! What a caller sends is hostile: a `traceparent` the W3C propagator does not parse starts a
//! new trace, and a `tracestate` longer than [`MAX_TRACESTATE`] is dropped (it would ride on
//! every exported span of the trace).

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, TraceContextExt, TraceFlags, TraceId, TraceState,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SamplingDecision, SamplingResult, SdkTracerProvider,
    ShouldSample,
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::OtlpSettings;

/// The W3C header naming the trace and the caller's span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header of vendor state, carried along with [`TRACEPARENT`].
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` continued (W3C: 512 characters is what every vendor must carry).
pub const MAX_TRACESTATE: usize = 512;
/// Spans waiting for export at most; beyond it new ones are dropped, never queued without bound
/// (Quickwit's size: the SDK's 2,048 fills in a second of a busy node).
const QUEUE: usize = 32_768;
/// Links of one span at most (a packed IM message, a worker's batch).
pub const MAX_LINKS: usize = 32;

static ON: AtomicBool = AtomicBool::new(false);

/// True when spans are exported: only then does the service read, store and answer trace
/// contexts and make the command path's extra spans.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The exporting half, kept by `main` to flush at stop.
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Exports what is queued and stops the processor's thread (at most `timeout`).
    pub async fn shutdown(self, timeout: Duration) {
        let provider = self.provider;
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(timeout)).await;
        if let Ok(Err(error)) = stopped {
            tracing::warn!(%error, "Traces not all exported at stop");
        }
    }
}

/// The OTLP pipeline of `settings`: an SDK provider (resource `service.name` `room-service`,
/// `service.instance.id` the node id, `service.version`) over a batch processor and the tonic
/// exporter. Must run inside the Tokio runtime (the exporter's channel is made here).
pub fn exporter(
    settings: &OtlpSettings,
    node_id: &str,
) -> Result<(Exporter, opentelemetry_sdk::trace::Tracer), String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(&settings.endpoint)
        .with_timeout(settings.timeout)
        .build()
        .map_err(|e| format!("telemetry.otlp.endpoint: cannot make the OTLP exporter: {e}"))?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(QUEUE)
        .with_max_export_batch_size(1024)
        .with_scheduled_delay(Duration::from_secs(1))
        .build();
    let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batch).build();
    let resource = Resource::builder()
        .with_service_name("room-service")
        .with_attributes([
            KeyValue::new("service.instance.id", node_id.to_owned()),
            KeyValue::new("service.version", crate::build::VERSION),
        ])
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(KeptOrRatio::new(settings.sample_ratio))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("room-service");
    ON.store(true, Ordering::Relaxed);
    Ok((Exporter { provider }, tracer))
}

/// The sampler: a span follows its parent (the caller's sampled `traceparent` included); a new
/// trace is kept when a span it links to was (a redelivery of a kept command), else by the
/// ratio on its trace id — the same answer on every node. A command path's publish with
/// neither (its command's trace was not kept) is no trace of its own.
#[derive(Clone, Debug)]
struct KeptOrRatio {
    parent_based: Sampler,
}

impl KeptOrRatio {
    fn new(ratio: f64) -> Self {
        Self { parent_based: Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))) }
    }
}

impl ShouldSample for KeptOrRatio {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        let has_parent = parent.is_some_and(|cx| cx.has_active_span() && cx.span().span_context().is_valid());
        let decided = |decision| SamplingResult {
            decision,
            attributes: Vec::new(),
            trace_state: TraceState::default(),
        };
        if !has_parent && links.iter().any(|link| link.span_context.is_sampled()) {
            return decided(SamplingDecision::RecordAndSample);
        }
        let sync_publish =
            || attributes.iter().any(|kv| kv.key.as_str() == "path" && kv.value.as_str() == "sync");
        if !has_parent && links.is_empty() && name == "publish" && sync_publish() {
            return decided(SamplingDecision::Drop);
        }
        self.parent_based.should_sample(parent, trace_id, name, kind, attributes, links)
    }
}

/// Continues the caller's trace on `span` (an edge's): its `traceparent` and a `tracestate` of
/// at most [`MAX_TRACESTATE`] bytes; then records the span's `trace_id` and `span_id` fields
/// (declared `Empty` by the edge) so its log lines carry them. Does nothing when [`on`] is false.
pub fn continue_trace(span: &Span, headers: &HeaderMap) {
    if !on() {
        return;
    }
    if headers.contains_key(TRACEPARENT) {
        let parent = TraceContextPropagator::new().extract(&Incoming(headers));
        if parent.span().span_context().is_valid() {
            let _ = span.set_parent(parent);
        }
    }
    record_ids(span);
}

/// Records `trace_id` and `span_id` on `span` (fields it declared `Empty`).
pub fn record_ids(span: &Span) {
    let cx = span.context();
    let context = cx.span().span_context().clone();
    if context.is_valid() {
        span.record("trace_id", tracing::field::display(context.trace_id()));
        span.record("span_id", tracing::field::display(context.span_id()));
    }
}

/// Writes the current span's context as `traceparent` (and `tracestate`) into `headers`: the
/// forward hop's request, an edge's answer. Does nothing when [`on`] is false.
pub fn inject_current(headers: &mut HeaderMap) {
    if !on() {
        return;
    }
    let cx = Span::current().context();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut Outgoing(headers));
    }
}

/// A span the command path makes only when traces are exported: `make()` when [`on`], else
/// a disabled span (no allocation, nothing recorded).
pub fn span_if_on(make: impl FnOnce() -> Span) -> Span {
    if on() { make() } else { Span::none() }
}

/// The context of `span` when it is sampled: what a child made elsewhere (the lane's IM call)
/// is parented on, and what an outbox row keeps. `None` when not exported or not sampled.
pub fn sampled_context(span: &Span) -> Option<SpanContext> {
    if !on() || span.is_disabled() {
        return None;
    }
    let context = span.context().span().span_context().clone();
    (context.is_valid() && context.is_sampled()).then_some(context)
}

/// `context` as a W3C `traceparent` value (what an outbox row stores).
pub fn traceparent(context: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8())
}

/// The context a stored `traceparent` names (`None` for anything else: the column is ours, but
/// a row is read back on another node, after an upgrade, by an operator's tool).
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.split('-');
    let (Some("00"), Some(trace), Some(span), Some(flags), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let context = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
    context.is_valid().then_some(context)
}

/// Parents `span` on `parent` (one made on another task: the lane's span for its IM call).
pub fn set_parent(span: &Span, parent: &SpanContext) {
    let _ = span.set_parent(Context::new().with_remote_span_context(parent.clone()));
}

/// Links `span` to each of `contexts` (distinct, at most [`MAX_LINKS`]); call before the span
/// is first entered, so the sampler sees them.
pub fn link<'a>(span: &Span, contexts: impl IntoIterator<Item = &'a SpanContext>) {
    let mut linked: Vec<&SpanContext> = Vec::new();
    for context in contexts {
        if linked.len() == MAX_LINKS {
            break;
        }
        if !linked.iter().any(|c| c.span_id() == context.span_id() && c.trace_id() == context.trace_id()) {
            span.add_link(context.clone());
            linked.push(context);
        }
    }
}

/// A command's span while its trace is sampled, with its context: the commit's and the lane's
/// spans are its children, its outbox rows keep the context.
#[derive(Clone, Debug)]
pub struct Traced {
    span: Span,
    context: SpanContext,
}

impl Traced {
    /// `span` when it is sampled (`None` when traces are not exported or it is not kept).
    pub fn of(span: &Span) -> Option<Self> {
        sampled_context(span).map(|context| Self { span: span.clone(), context })
    }

    /// The span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Its context as a `traceparent` value, for the outbox rows.
    pub fn traceparent(&self) -> String {
        traceparent(&self.context)
    }
}

struct Incoming<'a>(&'a HeaderMap);

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.0.get(key)?.to_str().ok()?;
        (key != TRACESTATE || value.len() <= MAX_TRACESTATE).then_some(value)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Outgoing<'a>(&'a mut HeaderMap);

impl Injector for Outgoing<'_> {
    fn set(&mut self, key: &str, value: String) {
        if value.is_empty() {
            return;
        }
        if let (Ok(name), Ok(value)) = (HeaderName::from_str(key), HeaderValue::from_str(&value)) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_stored_traceparent_reads_back_as_the_context_it_names() {
        let context = parse_traceparent(PARENT).expect("valid");
        assert_eq!(context.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled());
        assert_eq!(traceparent(&context), PARENT);
    }

    #[test]
    fn anything_but_a_version_00_traceparent_reads_as_none() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_tracestate_longer_than_the_limit_is_not_read() {
        let mut headers = HeaderMap::new();
        headers.insert(TRACESTATE, HeaderValue::from_str(&"a=b,".repeat(200)).unwrap());
        assert_eq!(Incoming(&headers).get(TRACESTATE), None);
        headers.insert(TRACESTATE, HeaderValue::from_static("vendor=value"));
        assert_eq!(Incoming(&headers).get(TRACESTATE), Some("vendor=value"));
    }

    #[test]
    fn a_new_trace_linked_to_a_kept_span_is_kept_whatever_the_ratio() {
        let never = KeptOrRatio::new(0.0);
        let kept = parse_traceparent(PARENT).unwrap();
        let dropped = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        let id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        let decide = |links: Vec<Link>| {
            never.should_sample(None, id, "publish", &SpanKind::Internal, &[], &links).decision
        };
        assert_eq!(decide(vec![Link::with_context(kept)]), SamplingDecision::RecordAndSample);
        assert_eq!(decide(vec![Link::with_context(dropped)]), SamplingDecision::Drop);
        assert_eq!(decide(Vec::new()), SamplingDecision::Drop);
        let always = KeptOrRatio::new(1.0);
        let decision = always.should_sample(None, id, "http", &SpanKind::Server, &[], &[]).decision;
        assert_eq!(decision, SamplingDecision::RecordAndSample);
    }

    #[test]
    fn a_command_paths_publish_outside_a_kept_trace_is_not_a_trace_of_its_own() {
        let always = KeptOrRatio::new(1.0);
        let id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        let decide = |path: &'static str| {
            let attributes = [KeyValue::new("path", path)];
            always.should_sample(None, id, "publish", &SpanKind::Internal, &attributes, &[]).decision
        };
        assert_eq!(decide("sync"), SamplingDecision::Drop);
        assert_eq!(decide("worker"), SamplingDecision::RecordAndSample, "a sample of the worker's own work");
    }
}
