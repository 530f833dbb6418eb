//! B5, stack overhead (its one home): the
//! per-event cost of the delivery core's permit step, then Trace → Metrics → EventFilter →
//! Timeout (main.rs's stack) around a no-op leaf, minus the cost of calling that leaf directly,
//! both through a cloned, type-erased `Publisher` with `oneshot` exactly as a lane calls it.
//!
//! The rate limiter is measured giving a permit on every call (limits far above the call
//! rate: 10⁹/s app-wide and per group): with the default 190/s all but the first few calls of
//! a tight loop would be refused at once, which is the cheaper branch and not the one a
//! delivered event takes.
//!
//! Production conditions: the Prometheus recorder is installed and a JSON subscriber at
//! `info` (writing to a sink) is the default for the measuring thread, so spans and metrics
//! are really recorded.

use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use room_service::app::im_stack;
use room_service::delivery::Outlet;
use room_service::delivery::permits::{RateLimitOptions, RateLimits};
use room_service::publish::stack::into_publisher;
use room_service::publish::{BoxError, Event, Message, Outcome, Path, Priority, Publisher};
use tower::{Service, ServiceExt};

use crate::Args;
use crate::report::Line;

/// Calls per second far above what one thread can make: every call takes a permit.
const NOT_BINDING: u32 = 1_000_000_000;

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

fn message() -> Message {
    let event = Event {
        event_id: "0190f5c2-7b1e-7cc0-8000-000000000001".into(),
        event_type: "RoomUserJoined",
        priority: Priority::Normal,
        body: Arc::from(r#"{"event_id":"0190f5c2-7b1e-7cc0-8000-000000000001","payload":{}}"#),
        sender: None,
        seated: Default::default(),
        trace: None,
        admin: None,
    };
    Message::new("room-1".into(), Path::Sync, vec![event])
}

/// Mean time per `publisher.clone().oneshot(message)` over `n` calls, each after a permit of
/// `permits` when given (as a lane takes it: one asked for now, then the message built).
async fn per_call(publisher: &Publisher, permits: Option<&Outlet>, n: u32) -> anyhow::Result<Duration> {
    let msg = message();
    let started = Instant::now();
    for _ in 0..n {
        if let Some(outlet) = permits {
            anyhow::ensure!(outlet.permits.now("room-1").await, "a permit every call");
        }
        std::hint::black_box(publisher.clone().oneshot(msg.clone()).await.map_err(|e| anyhow::anyhow!(e))?);
    }
    Ok(started.elapsed() / n)
}

/// Runs B5 (quick form) on a current-thread runtime of its own (the subscriber is a
/// thread default) and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let n = if args.smoke { 20_000 } else { 500_000 };
    tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(measure(n))
    })
    .await?
}

async fn measure(n: u32) -> anyhow::Result<Vec<Line>> {
    let _ = room_service::telemetry::install_metrics();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_max_level(tracing::Level::INFO)
        .with_writer(std::io::sink)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let limits = RateLimitOptions {
        global_per_sec: NOT_BINDING,
        per_group_per_sec: NOT_BINDING,
        worker_share: 0.8,
        pause: Duration::from_secs(1),
    };
    let stack = im_stack(NoopLeaf, Duration::from_secs(3));
    let outlet = Outlet::new(stack.clone(), RateLimits::shared(&limits, None));
    let leaf = into_publisher(NoopLeaf);
    // Warm up all three, then take the best of three rounds each (less noise from the other
    // builds sharing these cores).
    for (publisher, permits) in [(&stack, Some(&outlet)), (&stack, None), (&leaf, None)] {
        per_call(publisher, permits, n / 10).await?;
    }
    let (mut best_full, mut best_unlimited, mut best_leaf) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        best_full = best_full.min(per_call(&stack, Some(&outlet), n).await?);
        best_unlimited = best_unlimited.min(per_call(&stack, None, n).await?);
        best_leaf = best_leaf.min(per_call(&leaf, None, n).await?);
    }
    let overhead = best_full.saturating_sub(best_leaf);
    let us = |d: Duration| format!("{:.2} µs", d.as_secs_f64() * 1e6);
    Ok(vec![
        Line::new(
            "B5 stack overhead per event",
            us(overhead),
            format!("leaf alone {}; stack {}", us(best_leaf), us(best_full)),
            String::new(),
            "≤ 5 µs",
            overhead <= Duration::from_micros(5),
        ),
        Line::info(
            "B5 of which the rate limiter",
            us(best_full.saturating_sub(best_unlimited)),
            format!("stack without it {}", us(best_unlimited)),
        ),
    ])
}
