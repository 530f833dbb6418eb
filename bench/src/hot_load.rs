//! B7, hot rooms, part two: one hot room vs the same load spread over many rooms.
//!
//! `--hot-clients` concurrent HTTP clients each send `--hot-gifts-per-client` SendGift, one
//! after another, every one by a member with its own command id: first spread over
//! `--spread-rooms` rooms of `--spread-members` members (client `c` sends to rooms `c`,
//! `c + clients`, ..., so no two clients share a room and every commit holds one command), then
//! all into ONE room of `--hot-members` members (`hot`), where the service queues them on the
//! room's cell and commits up to `rooms.max_commit_batch` per transaction (group commit).
//! Both rooms sets are filled in SQL and loaded (member counts checked) before timing.
//!
//! Commands per transaction come from the service's own counters (`RoomService::commit_stats`:
//! room transactions and the commands they logged), cross-checked against MariaDB's global
//! `Com_commit` delta (the delivery marks are autocommit statements and the outbox worker is
//! off, so the service's commits are its room commits; anything else committing on the shared
//! server meanwhile counts too).

use std::time::Instant;

use futures::future::join_all;
use room_service::room::{CommitStats, RoomService};
use sqlx::mysql::MySqlPool;

use crate::Args;
use crate::command::Run;
use crate::fill;
use crate::hot::Api;
use crate::report::Line;
use crate::support::{self, CpuTimes, Samples, ms};

/// The one hot room.
const HOT_ROOM: &str = "hot";
/// Target: gifts per second into the hot room.
const HOT_RATE_TARGET: f64 = 3_000.0;
/// Target: hot room rate ÷ spread rate.
const SPREAD_RATIO_TARGET: f64 = 0.8;

fn spread_room(r: usize) -> String {
    format!("spread-{r}")
}

/// Fills the hot room and the spread rooms (before the service starts).
pub(crate) async fn fill(pool: &MySqlPool, args: &Args) -> anyhow::Result<()> {
    fill::room(pool, HOT_ROOM, args.hot_members).await?;
    for r in 0..args.spread_rooms {
        fill::room(pool, &spread_room(r), args.spread_members).await?;
    }
    Ok(())
}

/// A timed load and the commits it took.
struct Load {
    run: Run,
    /// The service's room transactions and the commands they logged, during the load.
    stats: CommitStats,
    /// Global `Com_commit` delta.
    commits: i64,
}

/// Runs part two and returns its lines.
pub(crate) async fn run(
    api: &Api,
    rooms: &RoomService,
    pool: &MySqlPool,
    args: &Args,
) -> anyhow::Result<Vec<Line>> {
    fill::check_loaded(&api.http, &api.base, HOT_ROOM, args.hot_members).await?;
    for r in 0..args.spread_rooms {
        fill::check_loaded(&api.http, &api.base, &spread_room(r), args.spread_members).await?;
    }
    let (clients, per_client) = (args.hot_clients, args.hot_gifts_per_client);
    let spread = load(api, rooms, pool, args, "spread", |c, k| {
        (spread_room((c + clients * k) % args.spread_rooms), fill::member(k % args.spread_members))
    })
    .await?;
    let hot = load(api, rooms, pool, args, "hot", |c, k| {
        (HOT_ROOM.to_owned(), fill::member((c * per_client + k) % args.hot_members))
    })
    .await?;
    Ok(lines(args, &hot, &spread))
}

/// Every client sends its gifts one after another to the `(room, sender)` that `target(client,
/// k)` names; a few untimed ones first (HTTP connections).
async fn load(
    api: &Api,
    rooms: &RoomService,
    pool: &MySqlPool,
    args: &Args,
    tag: &str,
    target: impl Fn(usize, usize) -> (String, String),
) -> anyhow::Result<Load> {
    let per_client = args.hot_gifts_per_client;
    let warm_up = join_all((0..args.hot_clients).map(|c| {
        let (room, sender) = target(c, per_client + c);
        async move { api.gift(&room, &format!("warm-{tag}-{c}"), &sender, 1).await }
    }));
    warm_up.await.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    rooms.flush_delivery_marks().await;
    let (commits_before, stats_before) = (com_commit(pool).await?, rooms.commit_stats());
    let (started, cpu) = (Instant::now(), CpuTimes::now());
    let results = join_all((0..args.hot_clients).map(|c| {
        let plan: Vec<(String, String)> = (0..per_client).map(|k| target(c, k)).collect();
        async move {
            let mut samples = Samples::default();
            for (k, (room, sender)) in plan.iter().enumerate() {
                let t = Instant::now();
                api.gift(room, &format!("{tag}-{c}-{k}"), sender, 1 + k % 5).await?;
                samples.push(t.elapsed());
            }
            anyhow::Ok(samples)
        }
    }))
    .await;
    let run = Run::collect(started, cpu, results)?;
    let (commits, now) = (com_commit(pool).await? - commits_before, rooms.commit_stats());
    rooms.flush_delivery_marks().await;
    let stats = CommitStats {
        transactions: now.transactions - stats_before.transactions,
        commands: now.commands - stats_before.commands,
    };
    Ok(Load { run, stats, commits })
}

/// `Com_commit` now (server-wide).
async fn com_commit(pool: &MySqlPool) -> anyhow::Result<i64> {
    let status = support::global_status(pool, &["Com_commit"]).await?;
    status.get("Com_commit").copied().ok_or_else(|| anyhow::anyhow!("no Com_commit"))
}

fn lines(args: &Args, hot: &Load, spread: &Load) -> Vec<Line> {
    let rate = |l: &Load| l.run.n as f64 / l.run.elapsed.as_secs_f64();
    let (hot_rate, spread_rate) = (rate(hot), rate(spread));
    let ratio = hot_rate / spread_rate.max(1e-9);
    let per_commit = |l: &Load| {
        let batch = l.stats.commands as f64 / l.stats.transactions.max(1) as f64;
        format!("{batch:.1} ({} transactions; Com_commit Δ {})", l.stats.transactions, l.commits)
    };
    let busy = |l: &Load| (l.run.cpu.this + l.run.cpu.db).as_secs_f64() / l.run.elapsed.as_secs_f64();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let latency = |l: &Load| format!("{} (p99 {})", ms(l.run.samples.pct(50.0)), ms(l.run.samples.pct(99.0)));
    let shape = format!("{} clients × {} gifts", args.hot_clients, args.hot_gifts_per_client);
    vec![
        Line::new(
            &format!("B7 hot room gifts/s (1 room × {} members)", args.hot_members),
            format!("{hot_rate:.0}/s"),
            format!("{shape}, {:.1}s", hot.run.elapsed.as_secs_f64()),
            format!("{:.2} of target", hot_rate / HOT_RATE_TARGET),
            "≥ 3000/s",
            hot_rate >= HOT_RATE_TARGET,
        ),
        Line::new(
            "B7 hot ÷ spread gifts/s",
            format!("{hot_rate:.0}/s hot"),
            format!("{spread_rate:.0}/s over {} rooms × {} members", args.spread_rooms, args.spread_members),
            format!("{ratio:.2}"),
            "≥ 0.8",
            ratio >= SPREAD_RATIO_TARGET,
        ),
        Line::info("B7 gift p50 (p99), hot", latency(hot), format!("{} spread", latency(spread))),
        Line::info(
            "B7 commands per room transaction, hot",
            per_commit(hot),
            format!("{} spread", per_commit(spread)),
        ),
        Line::info(
            &format!("B7 cores busy (of {cores}), hot"),
            format!("{:.2}", busy(hot)),
            format!("{:.2} spread (bench process + MariaDB)", busy(spread)),
        ),
    ]
}
