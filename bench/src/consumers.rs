//! B9, the consumers besides IM. Two parts:
//!
//! 1. Webhook throughput: `consumer_events` committed RoomUserJoined events bulk-inserted into
//!    a fresh outbox (as B2/B4 fill it, over `rooms` rooms), a local receiver (`consumers_hook`)
//!    answering 200. The raw baseline first — a sequential sqlx + reqwest loop: read 100
//!    envelopes past its position, POST them signed, one position UPDATE per batch — then the
//!    service in-process (IM disabled, outbox worker disabled, the webhook consumer alone:
//!    `batch_size` 100, `rate_limit_per_sec` 0, `poll_interval` 50 ms), timed from
//!    `app::start` until the receiver has every event.
//! 2. Lag under B1's command load (`consumers_lag`): the same load with the webhook and the
//!    audit consumers on, their lag gauges sampled from `/metrics` every 100 ms; the time after
//!    the load until both passed the last event; B1's commands/s with them on ÷ off.

use std::time::{Duration, Instant};

use room_service::app;
use room_service::store::Repository;

use crate::Args;
use crate::backlog;
use crate::consumers_hook::{Receiver, raw_loop, webhook_overrides};
use crate::report::Line;
use crate::support::{self, BenchDb};

/// Longest wait for the receiver to get every event.
const DEADLINE: Duration = Duration::from_secs(600);

/// Runs B9 and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let mut lines = BenchDb::scoped(&args.mysql_url, "b9", async |db| throughput(args, db).await).await?;
    let lag = BenchDb::scoped(&args.mysql_url, "b9lag", async |db| crate::consumers_lag::run(args, db).await);
    lines.extend(lag.await?);
    Ok(lines)
}

/// Part 1: the webhook consumer's events/s vs the raw loop's, same database and receiver.
async fn throughput(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let n = args.consumer_events;
    let repo = db.repository(4).await?;
    backlog::load(repo.pool(), n, args.rooms).await?;
    let receiver = Receiver::start().await?;

    // Raw baseline.
    let started = Instant::now();
    let sent = raw_loop(repo.pool(), &receiver.url()).await?;
    let raw = started.elapsed();
    anyhow::ensure!(sent == n && receiver.received() == n, "raw loop sent {sent} of {n} events");
    repo.close().await;
    receiver.reset();

    // The service's webhook consumer.
    let mut overrides: Vec<(String, String)> = webhook_overrides(&receiver.url());
    overrides.push(("outbox_worker.enabled".into(), "false".into()));
    let overrides: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let settings = support::settings(&db.url(), None, &overrides)?;
    let publisher = support::publisher(&settings, None)?;
    let started = Instant::now();
    let running = app::start(settings, publisher).await?;
    let waited = receiver.wait_for(n, DEADLINE).await;
    let consumer = started.elapsed();
    running.stop().await?;
    waited?;

    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    let (svc_rate, raw_rate) = (rate(consumer), rate(raw));
    Ok(vec![Line::ratio(
        "B9 webhook events/s (consumer ÷ raw)",
        format!("{svc_rate:.0}/s"),
        format!("{raw_rate:.0}/s raw ({n} events, batches of 100, sequential)"),
        svc_rate / raw_rate,
    )])
}
