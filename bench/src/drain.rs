//! B2, worker drain at Tencent's limits: `drain_rows` pending rows bulk-inserted (IM-visible
//! RoomUserJoined envelopes over [`ROOMS`] rooms, claimable at once), the fake IM at Tencent's
//! real limits (200 calls/s per app, refused 60007; 40 messages/s per group, dropped with
//! `MsgDropReason`) and 20 ms per call, and the real streaming worker
//! (`OutboxWorker::run_outbox_worker`, default options) publishing through the full stack —
//! rate limiter included, with the default `im_rate_limit` — for `drain_secs` (or until every
//! row was accepted), then cancelled.
//!
//! The bound is the worker's configured rate, `floor(global_per_sec × worker_share)` = 152/s
//! by default (the in-flight bound, `max_in_flight` ÷ latency = 400/s, is far above it). The
//! rate is the fake's accepted count ÷ the time since the worker started; the rows are spread
//! over 1,000 rooms, so each room gets 0.15 messages/s and the per-group limit never binds.
//!
//! The fake runs on a thread of its own (its own single-threaded runtime), so the worker's CPU
//! is this process's CPU minus that thread's: the worker (engine, publish stack, IM client:
//! HTTP, usersig, JSON), its database driver, and the harness waking every 50 ms to read the
//! fake's counters. Commits are the `Com_commit` delta of the worker's session: the worker's
//! repository gets a pool of exactly one connection, and `SHOW SESSION STATUS` is read through
//! that same pool (a global counter would also count the other users of this MariaDB).

use std::sync::Arc;
use std::time::{Duration, Instant};

use room_service::outbox::OutboxWorker;
use room_service::store::{Repository, SharedRepository};
use tokio_util::sync::CancellationToken;

use crate::Args;
use crate::report::Line;
use crate::support::{self, BenchDb, CpuTimes, FakeThread, session_status};

/// Latency of the fake IM per call.
const LATENCY: Duration = Duration::from_millis(20);

/// Rooms the backlog is spread over.
const ROOMS: usize = 1000;

/// Runs B2 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(1).await?;
    crate::backlog::load_timed(repo.pool(), args.drain_rows, ROOMS, "b2").await?;

    let fake = FakeThread::start(support::tencent_fake_options(LATENCY)).await?;
    let im = fake.im();
    let settings = support::settings(&db.url(), Some(im), &[])?;
    let limits = room_service::app::rate_limit(&settings);
    let worker_rate = (f64::from(limits.global_per_sec) * limits.worker_share).floor().max(1.0);
    let publisher = support::publisher(&settings, None)?;
    // As `app::start` builds them: the per-room hold comes from `im_rate_limit`.
    let options = settings.outbox_worker.clone();
    let counters = ["Com_commit", "Com_update", "Com_insert", "Com_select"];
    let before = session_status(repo.pool(), &counters).await?;
    let shared: SharedRepository = Arc::new(repo.clone());
    let worker = OutboxWorker::new(shared, publisher, "bench", options.clone())
        .with_per_room_rate(settings.im_rate_limit.per_group_per_sec)
        .with_permits(room_service::app::permits(&settings, None));
    let cancel = CancellationToken::new();
    let (cpu_before, fake_cpu_before) = (CpuTimes::now(), fake.cpu());
    let started = Instant::now();
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    let deadline = started + Duration::from_secs(args.drain_secs);
    while Instant::now() < deadline && im.stats().accepted < args.drain_rows as u64 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = im.stats();
    let elapsed = started.elapsed();
    let (cpu, fake_cpu) = (CpuTimes::now().since(cpu_before), fake.cpu().saturating_sub(fake_cpu_before));
    cancel.cancel();
    task.await?;
    let after = session_status(repo.pool(), &counters).await?;
    let delivered: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM room_outbox WHERE status = 'delivered'")
        .fetch_one(repo.pool())
        .await?;
    repo.close().await;
    let final_stats = im.stats();
    drop(fake);

    let delta = |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
    let accepted = stats.accepted;
    let rate = accepted as f64 / elapsed.as_secs_f64();
    let ratio = rate / worker_rate;
    let in_flight_bound = options.max_in_flight as f64 / LATENCY.as_secs_f64();
    let refusals = final_stats.dropped + final_stats.rate_limited;
    let commits = delta("Com_commit") as f64 / delivered.max(1) as f64;
    let statements =
        (delta("Com_update") + delta("Com_insert") + delta("Com_select")) as f64 / delivered.max(1) as f64;
    let full_drain = args.drain_rows as f64 / rate.max(1e-9);
    let worker_cpu = cpu.this.saturating_sub(fake_cpu);
    let per_event = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6 / accepted.max(1) as f64);
    Ok(vec![
        Line::new(
            "B2 drain events/s (÷ worker rate)",
            format!("{rate:.1}/s"),
            format!(
                "{worker_rate:.0}/s = {} × {} (in-flight bound {in_flight_bound:.0}/s)",
                limits.global_per_sec, limits.worker_share
            ),
            format!("{ratio:.3}"),
            "≥ 0.95",
            ratio >= 0.95,
        ),
        Line::new(
            "B2 IM limit refusals",
            refusals.to_string(),
            format!(
                "{} dropped (40/s per group) + {} refused 60007 (200/s) of {} calls",
                final_stats.dropped, final_stats.rate_limited, final_stats.calls
            ),
            String::new(),
            "0",
            refusals == 0,
        ),
        Line::info(
            "B2 worker CPU per event",
            per_event(worker_cpu),
            format!(
                "this process {} − fake IM thread {}, {accepted} events in {:.1}s",
                ms_total(cpu.this),
                ms_total(fake_cpu),
                elapsed.as_secs_f64()
            ),
        ),
        Line::info(
            "B2 fake IM / MariaDB CPU per event",
            format!("{} / {}", per_event(fake_cpu), per_event(cpu.db)),
            "fake IM thread (usersig check, JSON, HTTP); MariaDB server-wide".into(),
        ),
        Line::new(
            "B2 DB commits per event",
            format!("{commits:.3}"),
            format!("{} commits / {delivered} delivered", delta("Com_commit")),
            String::new(),
            "≤ 0.05",
            commits <= 0.05,
        ),
        Line::info(
            "B2 statements per event",
            format!("{statements:.3}"),
            format!("batch {}, in flight {}, {} rooms", options.batch_size, options.max_in_flight, ROOMS),
        ),
        Line::info(
            "B2 time to drain all rows",
            format!("{full_drain:.0} s (extrapolated)"),
            format!("{} rows at the measured rate", args.drain_rows),
        ),
    ])
}

/// A CPU total in seconds, for the baseline column.
fn ms_total(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
