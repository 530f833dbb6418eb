//! Traces (SPEC §13.4): one trace per command, from the edge that received it (or the caller's
//! `traceparent`) through the forward hop, the commit and the room's lane to each IM call, and
//! from the outbox row to the worker's or a consumer's redelivery, by a span link.
//!
//! `tracing` spans are the only instrumentation; when `telemetry.otlp.endpoint` is set,
//! [`super::init_logging_and_traces`] adds `tracing-opentelemetry`'s layer over the SDK
//! pipeline of `export`: the sampler (`sampler`), our bounded and counted export queue
//! (`queue`) and the SDK's batch processor (its own OS thread) exporting by OTLP/gRPC.
//! Without an endpoint nothing of this runs: [`on`] is false, the edges neither read nor
//! answer `traceparent`, the command path makes none of its extra spans and no row stores a
//! context.
//!
//! What a caller sends is hostile: a `traceparent` the W3C propagator does not parse, or sent
//! twice, starts a new trace; a `tracestate` longer than [`MAX_TRACESTATE`] or sent twice is
//! dropped (it would ride on every exported span of the trace); a sampled `traceparent` is
//! honoured beyond the ratio only within `telemetry.otlp.forced_per_sec` (`sampler`).

mod export;
mod queue;
mod sampler;

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub use export::{Exporter, exporter};

/// The W3C header naming the trace and the caller's span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header of vendor state, carried along with [`TRACEPARENT`].
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` continued (W3C: 512 characters is what every vendor must carry).
pub const MAX_TRACESTATE: usize = 512;
/// Links of one span at most (a packed IM message, a worker's batch).
pub const MAX_LINKS: usize = 32;

static ON: AtomicBool = AtomicBool::new(false);

/// True when spans are exported: only then does the service read, store and answer trace
/// contexts and make the command path's extra spans.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Marks traces as exported ([`exporter`] made the pipeline).
fn turn_on() {
    ON.store(true, Ordering::Relaxed);
}

/// Continues the caller's trace on `span` (an edge's): its `traceparent` and a `tracestate` of
/// at most [`MAX_TRACESTATE`] bytes, each sent once (a header sent twice is not read: two
/// `traceparent`s start a new trace); then records the span's `trace_id` and `span_id` fields
/// (declared `Empty` by the edge) so its log lines carry them. Does nothing when [`on`] is false.
pub fn continue_trace(span: &Span, headers: &HeaderMap) {
    if !on() {
        return;
    }
    if headers.contains_key(TRACEPARENT) {
        let parent = TraceContextPropagator::new().extract(&Incoming(headers));
        if parent.span().span_context().is_valid() {
            let _ = span.set_parent(parent.with_value(sampler::FromCaller));
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
    /// The header's one value: `None` for a header sent twice (which one would be the
    /// caller's?), or a `tracestate` over [`MAX_TRACESTATE`].
    fn get(&self, key: &str) -> Option<&str> {
        let mut values = self.0.get_all(key).iter();
        let value = values.next()?.to_str().ok()?;
        if values.next().is_some() {
            return None;
        }
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
    fn a_header_sent_twice_is_not_read() {
        let mut headers = HeaderMap::new();
        headers.append(TRACEPARENT, HeaderValue::from_static(PARENT));
        headers.append(TRACESTATE, HeaderValue::from_static("vendor=value"));
        assert_eq!(Incoming(&headers).get(TRACEPARENT), Some(PARENT));
        let other = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
        headers.append(TRACEPARENT, HeaderValue::from_static(other));
        headers.append(TRACESTATE, HeaderValue::from_static("vendor=other"));
        assert_eq!(Incoming(&headers).get(TRACEPARENT), None, "neither of two traceparents");
        assert_eq!(Incoming(&headers).get(TRACESTATE), None, "neither of two tracestates");
        let parent = TraceContextPropagator::new().extract(&Incoming(&headers));
        assert!(!parent.span().span_context().is_valid(), "no parent: a new trace");
    }
}
