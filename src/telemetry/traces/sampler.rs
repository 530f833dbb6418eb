//! Which traces are kept (SPEC §13.4): [`KeptOrRatio`], the provider's sampler.
//!
//! A span follows its parent; a new trace is kept when a span it links to was (a redelivery of
//! a kept command), else by the ratio on its trace id — the same answer on every node. A
//! caller's sampled `traceparent` is a request, not an order: the ratio keeps what it keeps,
//! and beyond it a node honours at most `telemetry.otlp.forced_per_sec` callers' traces a
//! second, so a caller sampling every command cannot crowd the traces the ratio keeps out of
//! the export queue. Beyond that budget the caller's trace id is still continued, the ratio
//! deciding, and `room_trace_forced_refused_total` counts it.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SamplingResult, ShouldSample};

use crate::telemetry::names;

/// The mark [`super::continue_trace`] puts on the context it read from a caller's
/// `traceparent`: only there is a sampled flag the caller's request, weighed against the
/// budget. The remote parents the service makes itself (`set_parent`: the lane's IM call) are
/// followed as they are.
#[derive(Clone, Copy, Debug)]
pub(super) struct FromCaller;

/// A GCRA of callers' forced traces on clock `C`.
type Budget<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// The sampler: parent-based with the ratio for new traces, links kept, a command path's
/// orphan `publish` dropped, and callers' forced traces within a budget (see the module).
#[derive(Clone, Debug)]
pub(super) struct KeptOrRatio<C: Clock = DefaultClock> {
    parent_based: Sampler,
    ratio: Sampler,
    /// `None`: `forced_per_sec` is 0, the ratio alone decides a caller's trace.
    forced: Option<Arc<Budget<C>>>,
}

impl KeptOrRatio {
    /// Keeps `ratio` of new traces, and up to `forced_per_sec` callers' sampled traces a second
    /// beyond it (bursts of one second's worth).
    pub(super) fn new(ratio: f64, forced_per_sec: u32) -> Self {
        Self::with_clock(ratio, forced_per_sec, DefaultClock::default())
    }
}

impl<C: Clock> KeptOrRatio<C> {
    fn with_clock(ratio: f64, forced_per_sec: u32, clock: C) -> Self {
        let forced = NonZeroU32::new(forced_per_sec)
            .map(|rate| Arc::new(RateLimiter::direct_with_clock(Quota::per_second(rate), clock)));
        Self {
            parent_based: Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))),
            ratio: Sampler::TraceIdRatioBased(ratio),
            forced,
        }
    }

    /// A caller's sampled parent: the ratio's answer when it keeps the trace, else kept while
    /// the budget lasts, else the ratio's "drop", counted. The caller's `tracestate` stays.
    fn forced(&self, parent: &Context, trace_id: TraceId, name: &str, kind: &SpanKind) -> SamplingResult {
        let by_ratio = self.ratio.should_sample(Some(parent), trace_id, name, kind, &[], &[]);
        if by_ratio.decision == SamplingDecision::RecordAndSample {
            return by_ratio;
        }
        if self.forced.as_ref().is_some_and(|budget| budget.check().is_ok()) {
            return SamplingResult { decision: SamplingDecision::RecordAndSample, ..by_ratio };
        }
        metrics::counter!(names::TRACE_FORCED_REFUSED_TOTAL).increment(1);
        by_ratio
    }
}

impl<C> ShouldSample for KeptOrRatio<C>
where
    C: Clock + Clone + std::fmt::Debug + Send + Sync + 'static,
    C::Instant: Send + Sync,
{
    fn should_sample(
        &self,
        parent: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        let parent_span = parent.filter(|cx| cx.has_active_span() && cx.span().span_context().is_valid());
        let decided = |decision| SamplingResult {
            decision,
            attributes: Vec::new(),
            trace_state: TraceState::default(),
        };
        if parent_span.is_none() && links.iter().any(|link| link.span_context.is_sampled()) {
            return decided(SamplingDecision::RecordAndSample);
        }
        let sync_publish =
            || attributes.iter().any(|kv| kv.key.as_str() == "path" && kv.value.as_str() == "sync");
        if parent_span.is_none() && links.is_empty() && name == "publish" && sync_publish() {
            return decided(SamplingDecision::Drop);
        }
        if let Some(cx) = parent_span.filter(|cx| {
            let caller = cx.span().span_context().clone();
            cx.get::<FromCaller>().is_some() && caller.is_remote() && caller.is_sampled()
        }) {
            return self.forced(cx, trace_id, name, kind);
        }
        self.parent_based.should_sample(parent, trace_id, name, kind, attributes, links)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use governor::clock::FakeRelativeClock;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags};

    use super::*;
    use crate::telemetry::traces::parse_traceparent;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn remote(trace_id: TraceId, flags: TraceFlags) -> Context {
        let span_id = SpanId::from(0x00f0_67aa_0ba9_02b7_u64);
        Context::new().with_remote_span_context(SpanContext::new(
            trace_id,
            span_id,
            flags,
            true,
            TraceState::default(),
        ))
    }

    /// What `continue_trace` makes of a caller's `traceparent` naming `trace_id`.
    fn caller(trace_id: TraceId, flags: TraceFlags) -> Context {
        remote(trace_id, flags).with_value(FromCaller)
    }

    fn decide<C>(sampler: &KeptOrRatio<C>, parent: &Context) -> SamplingDecision
    where
        C: Clock + Clone + std::fmt::Debug + Send + Sync + 'static,
        C::Instant: Send + Sync,
    {
        let trace_id = parent.span().span_context().trace_id();
        sampler.should_sample(Some(parent), trace_id, "http", &SpanKind::Server, &[], &[]).decision
    }

    /// How many of `parents` `sampler` keeps, and how many refusals it counted meanwhile.
    fn kept<C>(sampler: &KeptOrRatio<C>, parents: &[Context]) -> (usize, u64)
    where
        C: Clock + Clone + std::fmt::Debug + Send + Sync + 'static,
        C::Instant: Send + Sync,
    {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let kept = metrics::with_local_recorder(&recorder, || {
            parents.iter().filter(|p| decide(sampler, p) == SamplingDecision::RecordAndSample).count()
        });
        let refused = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, ..)| key.key().name() == names::TRACE_FORCED_REFUSED_TOTAL)
            .map_or(0, |(.., value)| match value {
                DebugValue::Counter(n) => n,
                other => panic!("{other:?}"),
            });
        (kept, refused)
    }

    fn callers(n: usize) -> Vec<Context> {
        (0..n).map(|_| caller(TraceId::from(rand::random::<u128>() | 1), TraceFlags::SAMPLED)).collect()
    }

    #[test]
    fn a_callers_sampled_traces_beyond_the_ratio_are_kept_within_the_budget_only() {
        let clock = FakeRelativeClock::default();
        let sampler = KeptOrRatio::with_clock(0.0, 5, clock.clone());
        assert_eq!(kept(&sampler, &callers(12)), (5, 7), "one second's worth, the rest refused and counted");
        clock.advance(Duration::from_millis(400));
        assert_eq!(kept(&sampler, &callers(12)), (2, 10), "5 a second");
        clock.advance(Duration::from_secs(10));
        assert_eq!(kept(&sampler, &callers(12)).0, 5, "bursts of one second's worth, however long idle");
        let refused = callers(3)[0].clone();
        let answer = sampler.should_sample(
            Some(&refused),
            refused.span().span_context().trace_id(),
            "http",
            &SpanKind::Server,
            &[],
            &[],
        );
        assert_eq!(answer.decision, SamplingDecision::Drop, "refused: the ratio (0) decides");
    }

    #[test]
    fn the_ratio_keeps_its_share_of_callers_traces_without_spending_the_budget() {
        let sampler = KeptOrRatio::with_clock(0.5, 3, FakeRelativeClock::default());
        let parents = callers(400);
        let by_ratio = parents
            .iter()
            .filter(|p| {
                let id = p.span().span_context().trace_id();
                Sampler::TraceIdRatioBased(0.5)
                    .should_sample(None, id, "http", &SpanKind::Server, &[], &[])
                    .decision
                    == SamplingDecision::RecordAndSample
            })
            .count();
        assert!((100..300).contains(&by_ratio), "{by_ratio}");
        assert_eq!(kept(&sampler, &parents), (by_ratio + 3, (400 - by_ratio - 3) as u64));
        let none = KeptOrRatio::with_clock(0.5, 0, FakeRelativeClock::default());
        assert_eq!(kept(&none, &parents).0, by_ratio, "forced_per_sec 0: the ratio alone");
    }

    #[test]
    fn parents_the_service_made_and_unsampled_callers_are_followed_as_they_are() {
        let sampler = KeptOrRatio::with_clock(0.0, 0, FakeRelativeClock::default());
        let id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        // The lane's IM call, parented on the command's span from another task: no budget.
        assert_eq!(decide(&sampler, &remote(id, TraceFlags::SAMPLED)), SamplingDecision::RecordAndSample);
        assert_eq!(decide(&sampler, &caller(id, TraceFlags::SAMPLED)), SamplingDecision::Drop);
        // A caller's "not sampled" is kept, whatever the budget.
        let generous = KeptOrRatio::with_clock(0.0, 100, FakeRelativeClock::default());
        assert_eq!(decide(&generous, &caller(id, TraceFlags::default())), SamplingDecision::Drop);
        assert_eq!(decide(&generous, &caller(id, TraceFlags::SAMPLED)), SamplingDecision::RecordAndSample);
    }

    #[test]
    fn a_new_trace_linked_to_a_kept_span_is_kept_whatever_the_ratio() {
        let never = KeptOrRatio::new(0.0, 20);
        let kept = parse_traceparent(PARENT).unwrap();
        let dropped = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        let id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        let decide = |links: Vec<Link>| {
            never.should_sample(None, id, "publish", &SpanKind::Internal, &[], &links).decision
        };
        assert_eq!(decide(vec![Link::with_context(kept)]), SamplingDecision::RecordAndSample);
        assert_eq!(decide(vec![Link::with_context(dropped)]), SamplingDecision::Drop);
        assert_eq!(decide(Vec::new()), SamplingDecision::Drop);
        let always = KeptOrRatio::new(1.0, 20);
        let decision = always.should_sample(None, id, "http", &SpanKind::Server, &[], &[]).decision;
        assert_eq!(decision, SamplingDecision::RecordAndSample);
    }

    #[test]
    fn a_command_paths_publish_outside_a_kept_trace_is_not_a_trace_of_its_own() {
        let always = KeptOrRatio::new(1.0, 20);
        let id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        let decide = |path: &'static str| {
            let attributes = [KeyValue::new("path", path)];
            always.should_sample(None, id, "publish", &SpanKind::Internal, &attributes, &[]).decision
        };
        assert_eq!(decide("sync"), SamplingDecision::Drop);
        assert_eq!(decide("worker"), SamplingDecision::RecordAndSample, "a sample of the worker's own work");
    }
}
