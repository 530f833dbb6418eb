//! B2, worker drain: `drain_rows` pending rows bulk-inserted (IM-visible RoomUserJoined
//! envelopes over 1,000 rooms, claimable at once), the fake IM at 20 ms per call with its rate
//! limits off, and one outbox worker (default options: batch 100, poll 1 s) publishing through
//! the full stack for `drain_secs` (or until the table is drained).
//!
//! The bound the configuration allows is in-flight publishes ÷ latency: the worker publishes
//! up to `max_in_flight` rooms at once (default 8; the rows spread over 1,000 rooms), so that
//! is 8 / 20 ms = 400 events/s. Commits are the
//! `Com_commit` delta of the worker's session: the worker's repository gets a pool of exactly
//! one connection, and `SHOW SESSION STATUS` is read through that same pool (a global counter
//! would also count the other users of this MariaDB).

use std::sync::Arc;
use std::time::{Duration, Instant};

use room_service::domain::{CommandContext, CommandId, Event, EventEnvelope, EventType, RoomId};
use room_service::outbox::{OutboxWorker, OutboxWorkerOptions};
use room_service::store::{MySqlRepository, Repository, SharedRepository};
use serde_json::json;
use sqlx::{MySql, QueryBuilder};
use tokio_util::sync::CancellationToken;

use crate::Args;
use crate::report::Line;
use crate::support::{self, BenchDb, session_status};

/// Latency of the fake IM per call.
const LATENCY: Duration = Duration::from_millis(20);

/// Rows per INSERT while loading.
const CHUNK: usize = 1000;

/// Runs B2 and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let db = BenchDb::create(&args.mysql_url, "b2").await?;
    let result = measure(args, &db).await;
    db.drop_now().await;
    result
}

/// Bulk-inserts `rows` claimable pending rows with valid envelopes.
async fn load(repo: &MySqlRepository, rows: usize) -> anyhow::Result<()> {
    const NOW: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
    for start in (0..rows).step_by(CHUNK) {
        let batch: Vec<(String, String, String)> = (start..(start + CHUNK).min(rows))
            .map(|n| {
                let room = format!("r{}", n % 1000);
                let ctx = CommandContext {
                    room_id: RoomId::parse(room.as_str()).unwrap_or_else(|_| unreachable!()),
                    command_id: CommandId::parse(format!("cmd-{n}")).unwrap_or_else(|_| unreachable!()),
                    request_id: uuid::Uuid::new_v4().to_string(),
                    now_ms: support::unix_ms(),
                };
                let event = Event {
                    event_type: EventType::RoomUserJoined,
                    payload: json!({"user_id": format!("u{n}"), "joined_at_ms": ctx.now_ms, "member_count": 1}),
                };
                let id = uuid::Uuid::now_v7().to_string();
                let envelope = EventEnvelope::new(event, &ctx, 2, id.clone());
                (id, room, serde_json::to_string(&envelope).unwrap_or_default())
            })
            .collect();
        let mut insert = QueryBuilder::<MySql>::new(
            "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, \
             lock_until_ms, created_at_ms, updated_at_ms) ",
        );
        insert.push_values(&batch, |mut row, (id, room, envelope)| {
            row.push_bind(id)
                .push_bind(room)
                .push("'RoomUserJoined'")
                .push_bind(envelope)
                .push("'pending'")
                .push("0")
                .push(format!("{NOW} - 1000"))
                .push(NOW)
                .push(NOW);
        });
        insert.build().execute(repo.pool()).await?;
    }
    Ok(())
}

async fn measure(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = MySqlRepository::connect(&db.url(), 1).await?;
    repo.migrate().await?;
    let loading = Instant::now();
    load(&repo, args.drain_rows).await?;
    eprintln!("  b2: {} rows loaded in {:.1}s", args.drain_rows, loading.elapsed().as_secs_f64());

    let im = support::fake_im(LATENCY).await?;
    let settings = support::settings(&db.url(), Some(&im), &[])?;
    let publisher = support::publisher(&settings, None)?;
    let options = OutboxWorkerOptions::from(&settings.outbox_worker);
    let counters = ["Com_commit", "Com_update", "Com_insert", "Com_select"];
    let before = session_status(repo.pool(), &counters).await?;
    let shared: SharedRepository = Arc::new(repo.clone());
    let worker = OutboxWorker::new(shared, publisher, "bench", options.clone());
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    let deadline = started + Duration::from_secs(args.drain_secs);
    while Instant::now() < deadline && im.stats().accepted < args.drain_rows as u64 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let accepted = im.stats().accepted;
    let elapsed = started.elapsed();
    cancel.cancel();
    task.await?;
    let after = session_status(repo.pool(), &counters).await?;
    let delivered: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM room_outbox WHERE status = 'delivered'")
        .fetch_one(repo.pool())
        .await?;
    repo.close().await;
    drop(im);

    let delta = |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
    let rate = accepted as f64 / elapsed.as_secs_f64();
    let in_flight = options.max_in_flight;
    let bound = in_flight as f64 / LATENCY.as_secs_f64();
    let commits = delta("Com_commit") as f64 / delivered.max(1) as f64;
    let statements =
        (delta("Com_update") + delta("Com_insert") + delta("Com_select")) as f64 / delivered.max(1) as f64;
    let full_drain = args.drain_rows as f64 / rate.max(1e-9);
    Ok(vec![
        Line::new(
            "B2 delivered events/s (÷ bound)",
            format!("{rate:.1}/s"),
            format!("{bound:.0}/s = {in_flight} in flight ÷ {} ms", LATENCY.as_millis()),
            format!("{:.2}", rate / bound),
            "≥ 0.9",
            rate / bound >= 0.9,
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
            format!("batch {}, {:.0}s measured", options.batch_size, elapsed.as_secs_f64()),
        ),
        Line::info(
            "B2 time to drain all rows",
            format!("{:.0} s (extrapolated)", full_drain),
            format!("{} rows at the measured rate", args.drain_rows),
        ),
    ])
}
