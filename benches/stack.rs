//! B5 (criterion): the per-event cost of the publish stack — Trace → Metrics → EventFilter →
//! Timeout — around a no-op leaf, against calling that leaf directly. Both go through a
//! cloned, type-erased `Publisher` with `oneshot`, as the command path and the worker call it.
//! The Prometheus recorder is installed and a JSON subscriber at `info` writes to a sink, so
//! spans and metrics are really recorded. The stack's overhead is the difference of the two.
//!
//! `cargo bench --bench stack` (the harness's B5 line is the quick form of the same figure).

use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use room_service::publish::filter::EventFilterLayer;
use room_service::publish::metrics::MetricsLayer;
use room_service::publish::rate_limit::{RateLimitLayer, RateLimitOptions};
use room_service::publish::stack::into_publisher;
use room_service::publish::trace::TraceLayer;
use room_service::publish::{BoxError, Message, Outcome, Path, Priority, Publisher};
use tower::{Service, ServiceBuilder, ServiceExt};

/// A leaf that accepts every message at once.
#[derive(Clone, Copy, Debug, Default)]
struct NoopLeaf;

impl Service<Message> for NoopLeaf {
    type Response = Outcome;
    type Error = BoxError;
    type Future = Ready<Result<Outcome, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _message: Message) -> Self::Future {
        ready(Ok(Outcome::Delivered))
    }
}

fn message(event_type: &'static str) -> Message {
    Message {
        event_id: "0190f5c2-7b1e-7cc0-8000-000000000001".into(),
        event_type,
        group: "room-1".into(),
        priority: Priority::Normal,
        body: Arc::from(r#"{"event_id":"0190f5c2-7b1e-7cc0-8000-000000000001","payload":{}}"#),
        path: Path::Sync,
    }
}

fn full_stack() -> Publisher {
    into_publisher(
        ServiceBuilder::new()
            .layer(TraceLayer::new())
            .layer(MetricsLayer::new())
            .layer(EventFilterLayer::skip(room_service::domain::EventType::im_skipped()))
            // As with IM enabled; limits the benchmark never reaches, so it measures the cost
            // of taking permits, not waiting for them.
            .layer(RateLimitLayer::new(RateLimitOptions {
                global_per_sec: u32::MAX / 2,
                per_group_per_sec: u32::MAX / 2,
                worker_share: 1.0,
                pause: Duration::from_secs(1),
            }))
            .timeout(Duration::from_secs(3))
            .service(NoopLeaf),
    )
}

fn bench(c: &mut Criterion) {
    let _ = room_service::telemetry::install_metrics();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::sink)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("publish");
    let cases = [
        ("leaf_only", into_publisher(NoopLeaf), "RoomUserJoined"),
        ("full_stack", full_stack(), "RoomUserJoined"),
        ("full_stack_filtered", full_stack(), "RoomHeatChanged"),
    ];
    for (name, publisher, event_type) in cases {
        let msg = message(event_type);
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(publisher.clone().oneshot(msg.clone())).expect("publish"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
