//! `room-service-bench`: the benchmark harness (docs/BENCHMARKS.md).
//!
//! Starts what each benchmark needs — the service in-process on a loopback port
//! (`room_service::app::start`), the fake Tencent IM with the configured latency, a fresh
//! MariaDB database per benchmark (`rs_bench_*`, dropped afterwards) — measures, and prints one
//! table where every figure stands beside a baseline measured in the same invocation on the
//! same machine and beside its target. It never fails on a missed target: benchmarks are not
//! tests. `--smoke` runs tiny sizes in seconds (CI proves the harness works with it).
//!
//! B1 command path vs a raw sqlx loop · B2 worker drain vs the configured bound · B3 claim
//! query p99 by table size · B4 commit → IM acceptance latency · B5 publish stack overhead ·
//! B6 resident memory with many active rooms and with one big room (in a child process, so
//! nothing else counts) · B7 hot rooms: latency and bytes per command by room size, one hot
//! room vs the same load spread · B8 many nodes: 3 cluster nodes vs 1 node under the same
//! load sent to random nodes, and what a forward hop adds · B9 consumers: webhook events/s vs a
//! raw sqlx + reqwest loop, and the webhook and audit consumers' lag under B1's load · B10 live
//! room: the real binary and fake IM as child processes, gifts/s into one hot room and spread
//! over many with IM on vs off, and what IM saw (events/s and per call, commit → IM, backlog) ·
//! B11 presence: heartbeats/s and p99 alone and under a gift storm, gifts/s alone and under a
//! heartbeat storm, the batch route vs the single one, and a crowd of 100,000 members kept
//! present while exactly the silent ones are evicted · B12 token verification: a token's first
//! `authenticate` vs the same token's next one (HS256, RS256, UserSig) · B13 events API (and
//! `b13h`: 16 hostile readers, a reconnect herd, old ranges, with IM on) ·
//! B14 traces: B1's load against the real binary with traces off, exported at ratio 1.0 and at
//! 0.01, and off again: commands/s, CPU and spans per command · B15 moderation: MuteUser,
//! KickUser with a ban and SetAttributes beside JoinRoom (16 clients, the real binary), and a
//! room with 100,000 bans vs a room with none, one command at a time · B16 mic seats: a seat
//! take and leave beside JoinRoom, gifts in rooms with 20 held seats vs none, 50 members racing
//! for one seat (exactly one seated a race).

/// The service's allocator (`src/main.rs`): B1 and the other in-process benchmarks run the
/// service with it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod backlog;
mod claim;
mod command;
mod command_raw;
mod consumers;
mod consumers_hook;
mod consumers_lag;
mod drain;
mod fill;
mod history;
mod history_herd;
mod hot;
mod hot_load;
mod latency;
mod live;
mod many;
mod many_hop;
mod many_nodes;
mod memory;
mod moderation;
mod moderation_scale;
mod presence;
mod report;
mod seats;
mod stack;
mod support;
mod traces;
mod verify;

use std::time::Instant;

use clap::Parser;

use report::Line;
use support::BenchDb;

/// Benchmarks of room-service against baselines measured in the same run.
#[derive(Debug, Clone, Parser)]
#[command(name = "room-service-bench")]
pub struct Args {
    /// Tiny sizes (seconds in all): proves the harness works, measures nothing meaningful.
    #[arg(long)]
    pub smoke: bool,
    /// MariaDB server (no database path); each benchmark creates and drops its own database.
    #[arg(long, env = "ROOM_SERVICE_BENCH_MYSQL_URL", default_value = "mysql://root@127.0.0.1:3306")]
    pub mysql_url: String,
    /// Benchmarks to run, comma-separated (b1..b16); all when absent.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// B1, B8, B15: concurrent clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// B1, B8: rooms (spread over the clients; each client owns its own rooms).
    #[arg(long, default_value_t = 256)]
    pub rooms: usize,
    /// B1, B8: join+gift pairs per client (two commands each).
    #[arg(long, default_value_t = 300)]
    pub pairs_per_client: usize,
    /// B2: rows bulk-inserted pending.
    #[arg(long, default_value_t = 100_000)]
    pub drain_rows: usize,
    /// B2: how long the worker drains before the rate is taken (the full 100k at the worker's
    /// 152/s would take 11 minutes; the rate is steady, so the drain time is extrapolated).
    #[arg(long, default_value_t = 60)]
    pub drain_secs: u64,
    /// B4: backlog rows the worker drains while the live load runs.
    #[arg(long, default_value_t = 100_000)]
    pub backlog_rows: usize,
    /// B4: live commands per second (open loop), during the drain and for the hand-off part.
    #[arg(long, default_value_t = 10.0)]
    pub live_rate: f64,
    /// B4: how long the live load runs during the drain.
    #[arg(long, default_value_t = 60)]
    pub live_secs: u64,
    /// B4: commands whose synchronous publish fails (handed to the worker, no backlog).
    #[arg(long, default_value_t = 300)]
    pub handoff_events: usize,
    /// B3: the largest table measured (10k, 1M, 10M capped at this).
    #[arg(long, default_value_t = 10_000_000)]
    pub max_rows: u64,
    /// B6: active rooms.
    #[arg(long, default_value_t = 10_000)]
    pub memory_rooms: usize,
    /// B6: members of the one big room (its second measurement).
    #[arg(long, default_value_t = 100_000)]
    pub memory_members: usize,
    /// Internal: run B6's measurement in this (child) process and print it.
    #[arg(long, hide = true)]
    pub memory_child: bool,
    /// Internal: with `--memory-child`, measure the one big room instead of the many rooms.
    #[arg(long, hide = true)]
    pub memory_one_room: bool,
    /// B7: room sizes (members) measured one command at a time.
    #[arg(long, value_delimiter = ',', default_values_t = [10, 1_000, 10_000, 100_000])]
    pub hot_sizes: Vec<usize>,
    /// B7: timed JoinRoom, then as many SendGift, per room size.
    #[arg(long, default_value_t = 300)]
    pub hot_commands: usize,
    /// B7: concurrent clients of the hot room vs spread load.
    #[arg(long, default_value_t = 16)]
    pub hot_clients: usize,
    /// B7: gifts each client sends (spread, then again into the hot room).
    #[arg(long, default_value_t = 600)]
    pub hot_gifts_per_client: usize,
    /// B7: members of the one hot room.
    #[arg(long, default_value_t = 100_000)]
    pub hot_members: usize,
    /// B7: rooms the spread load goes to.
    #[arg(long, default_value_t = 256)]
    pub spread_rooms: usize,
    /// B7: members of each spread room.
    #[arg(long, default_value_t = 8)]
    pub spread_members: usize,
    /// B8: timed requests at the owner, and as many through a non-owner (one hop).
    #[arg(long, default_value_t = 2_000)]
    pub hop_samples: usize,
    /// B9: committed events the webhook consumer (and the raw loop) delivers.
    #[arg(long, default_value_t = 20_000)]
    pub consumer_events: usize,
    /// B10: concurrent HTTP clients (each sends its next gift when the previous answered).
    #[arg(long, default_value_t = 16)]
    pub live_clients: usize,
    /// B10: how long each load runs.
    #[arg(long, default_value_t = 15)]
    pub live_seconds: u64,
    /// B10: latencies of the fake IM per call (ms), one IM-on run each.
    #[arg(long, value_delimiter = ',', default_values_t = [20, 100])]
    pub live_latencies: Vec<u64>,
    /// B10: `im_batch.in_flight_per_room` of the service (1: strict room order at IM).
    #[arg(long = "in-flight-per-room", default_value_t = 1)]
    pub live_in_flight: usize,
    /// B10: rooms of the spread load.
    #[arg(long, default_value_t = 256)]
    pub live_rooms: usize,
    /// B10: `tencent_im.manage_groups` of the service (its default, true, creates each room's
    /// group first; the fake then refuses a message to a missing group, as Tencent does).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub manage_groups: bool,
    /// B10: gifts/s offered into the hot room by the paced load.
    #[arg(long, default_value_t = 570.0)]
    pub paced_rate: f64,
    /// B10: how long the burst into one room runs (IM unlimited and instant).
    #[arg(long, default_value_t = 8)]
    pub burst_seconds: u64,
    /// B10: longest wait for the backlog after a load.
    #[arg(long, default_value_t = 120)]
    pub live_drain_secs: u64,
    /// B13: reads of the events API per second while the hot room takes gifts.
    #[arg(long, default_value_t = 200)]
    pub history_reads: u32,
    /// B12: tokens (one per user) authenticated fresh, then again.
    #[arg(long, default_value_t = 2_000)]
    pub verify_tokens: usize,
    /// B11: members of the room heartbeating under gifts.
    #[arg(long, default_value_t = 10_000)]
    pub presence_members: usize,
    /// B11: concurrent clients of each side (heartbeats, gifts).
    #[arg(long, default_value_t = 16)]
    pub presence_clients: usize,
    /// B11: how long each load runs.
    #[arg(long, default_value_t = 5)]
    pub presence_seconds: u64,
    /// B15: timed commands of each kind (JoinRoom, MuteUser, KickUser, SetAttributes) over
    /// the `--clients` clients.
    #[arg(long, default_value_t = 2_000)]
    pub moderation_commands: usize,
    /// B15: active bans of the banned room.
    #[arg(long, default_value_t = 100_000)]
    pub moderation_bans: usize,
    /// B15: timed JoinRoom, then as many MuteUser and refused joins, in the rooms with and
    /// without the bans, one at a time.
    #[arg(long, default_value_t = 300)]
    pub ban_commands: usize,
    /// B16: timed commands of each kind (JoinRoom, seat take and leave; gifts with and without
    /// held seats) over the `--clients` clients.
    #[arg(long, default_value_t = 2_000)]
    pub seat_commands: usize,
    /// B16: members of each seated room.
    #[arg(long, default_value_t = 1_000)]
    pub seat_members: usize,
    /// B16: members racing for one seat at once.
    #[arg(long, default_value_t = 50)]
    pub seat_racers: usize,
    /// B16: races.
    #[arg(long, default_value_t = 20)]
    pub seat_races: usize,
    /// B11: members of the crowd room, each heartbeating once a second.
    #[arg(long, default_value_t = 100_000)]
    pub crowd_members: usize,
    /// B11: crowd members that stop heartbeating and must be evicted.
    #[arg(long, default_value_t = 1_000)]
    pub crowd_stopped: usize,
    /// B11: the crowd service's `presence.stale_after`, in seconds.
    #[arg(long, default_value_t = 5)]
    pub crowd_stale_seconds: u64,
}

impl Args {
    fn wants(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o.eq_ignore_ascii_case(id))
    }

    /// Applies `--smoke` sizes.
    fn sized(mut self) -> Self {
        if self.smoke {
            self.clients = self.clients.min(4);
            self.rooms = self.rooms.min(16);
            self.pairs_per_client = self.pairs_per_client.min(10);
            self.drain_rows = self.drain_rows.min(60);
            self.drain_secs = self.drain_secs.min(2);
            self.backlog_rows = self.backlog_rows.min(2_000);
            self.live_secs = self.live_secs.min(2);
            self.handoff_events = self.handoff_events.min(10);
            self.max_rows = self.max_rows.min(20_000);
            self.memory_rooms = self.memory_rooms.min(50);
            self.memory_members = self.memory_members.min(100);
            self.hot_sizes = vec![10, 100];
            self.hot_commands = self.hot_commands.min(10);
            self.hot_clients = self.hot_clients.min(4);
            self.hot_gifts_per_client = self.hot_gifts_per_client.min(10);
            self.hot_members = self.hot_members.min(100);
            self.spread_rooms = self.spread_rooms.min(8);
            self.hop_samples = self.hop_samples.min(20);
            self.consumer_events = self.consumer_events.min(300);
            self.live_clients = self.live_clients.min(2);
            self.live_seconds = self.live_seconds.min(1);
            self.burst_seconds = self.burst_seconds.min(1);
            self.live_latencies = vec![20];
            self.live_rooms = self.live_rooms.min(8);
            self.presence_members = self.presence_members.min(100);
            self.presence_clients = self.presence_clients.min(2);
            self.presence_seconds = self.presence_seconds.min(1);
            self.crowd_members = self.crowd_members.min(1_000);
            self.crowd_stopped = self.crowd_stopped.min(10);
            self.crowd_stale_seconds = self.crowd_stale_seconds.min(2);
            self.verify_tokens = self.verify_tokens.min(20);
            self.history_reads = self.history_reads.min(20);
            self.moderation_commands = self.moderation_commands.min(80);
            self.moderation_bans = self.moderation_bans.min(1_000);
            self.ban_commands = self.ban_commands.min(10);
            self.seat_commands = self.seat_commands.min(80);
            self.seat_members = self.seat_members.min(60);
            self.seat_racers = self.seat_racers.min(10);
            self.seat_races = self.seat_races.min(3);
        }
        // Sizes smallest first (the smallest is the baseline), none empty (a sender must exist).
        self.hot_sizes.retain(|&n| n > 0);
        self.hot_sizes.sort_unstable();
        self.hot_sizes.dedup();
        if self.hot_sizes.is_empty() {
            self.hot_sizes.push(10);
        }
        self.hot_members = self.hot_members.max(1);
        self.live_rate = self.live_rate.clamp(0.1, 1000.0);
        self.live_secs = self.live_secs.max(1);
        self.handoff_events = self.handoff_events.max(1);
        self.spread_rooms = self.spread_rooms.max(1);
        self.spread_members = self.spread_members.max(1);
        self.hop_samples = self.hop_samples.max(1);
        self.consumer_events = self.consumer_events.max(1);
        (self.live_clients, self.live_rooms) = (self.live_clients.max(1), self.live_rooms.max(1));
        self.live_seconds = self.live_seconds.max(1);
        self.burst_seconds = self.burst_seconds.max(1);
        self.paced_rate = self.paced_rate.clamp(1.0, 100_000.0);
        self.presence_members = self.presence_members.max(BATCH_MIN_MEMBERS);
        self.presence_clients = self.presence_clients.max(1);
        self.presence_seconds = self.presence_seconds.max(1);
        self.crowd_members = self.crowd_members.max(2);
        self.crowd_stopped = self.crowd_stopped.clamp(1, self.crowd_members - 1);
        self.crowd_stale_seconds = self.crowd_stale_seconds.max(2);
        self.verify_tokens = self.verify_tokens.max(1);
        self.clients = self.clients.max(1);
        (self.moderation_bans, self.ban_commands) = (self.moderation_bans.max(1), self.ban_commands.max(1));
        self
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse().sized();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    if args.memory_child {
        return memory::child(&args).await;
    }
    let started = Instant::now();
    println!(
        "room-service-bench{}: {}",
        if args.smoke { " --smoke" } else { "" },
        machine_notes(&args).await
    );
    let mut lines: Vec<Line> = Vec::new();
    type Bench = fn(&Args) -> futures::future::BoxFuture<'_, anyhow::Result<Vec<Line>>>;
    let benches: [(&str, &str, Bench); 17] = [
        ("b1", "command path", |a| Box::pin(on_fresh_db(a, "b1", command::run))),
        ("b2", "worker drain", |a| Box::pin(on_fresh_db(a, "b2", drain::run))),
        ("b3", "claim scaling", |a| Box::pin(on_fresh_db(a, "b3", claim::run))),
        ("b4", "delivery latency", |a| Box::pin(latency::run(a))),
        ("b5", "stack overhead", |a| Box::pin(stack::run(a))),
        ("b6", "memory", |a| Box::pin(memory::run(a))),
        ("b7", "hot rooms", |a| Box::pin(on_fresh_db(a, "b7", hot::run))),
        ("b8", "many nodes", |a| Box::pin(on_fresh_db(a, "b8", many::run))),
        ("b9", "consumers", |a| Box::pin(consumers::run(a))),
        ("b10", "live room", |a| Box::pin(live::run(a))),
        ("b11", "presence", |a| Box::pin(on_fresh_db(a, "b11", presence::run))),
        ("b12", "token verification", |a| Box::pin(verify::run(a))),
        ("b13", "events API", |a| Box::pin(on_fresh_db(a, "b13", history::run))),
        ("b13h", "events API, hostile readers", |a| Box::pin(on_fresh_db(a, "b13h", history_herd::run))),
        ("b14", "traces", |a| Box::pin(on_fresh_db(a, "b14", traces::run))),
        ("b15", "moderation", |a| Box::pin(on_fresh_db(a, "b15", moderation::run))),
        ("b16", "mic seats", |a| Box::pin(on_fresh_db(a, "b16", seats::run))),
    ];
    for (id, what, bench) in benches {
        if !args.wants(id) {
            continue;
        }
        let t = Instant::now();
        eprintln!("{id} ({what})...");
        let result = bench(&args).await;
        match result {
            Ok(more) => lines.extend(more),
            Err(error) => {
                eprintln!("{id} failed: {error:#}");
                lines.push(Line::new(
                    &format!("{} {what}", id.to_uppercase()),
                    "error".into(),
                    String::new(),
                    String::new(),
                    "runs",
                    false,
                ));
            }
        }
        eprintln!("{id} done in {:.1}s", t.elapsed().as_secs_f64());
    }
    println!("{}", report::render(&lines));
    println!("total {:.1}s", started.elapsed().as_secs_f64());
    if lines.iter().any(|l| l.value == "error") {
        anyhow::bail!("a benchmark could not run");
    }
    Ok(())
}

/// Runs `bench` on a fresh database tagged `tag`, dropped afterwards whatever it answered.
async fn on_fresh_db(
    args: &Args,
    tag: &str,
    bench: impl AsyncFnOnce(&Args, &BenchDb) -> anyhow::Result<Vec<Line>>,
) -> anyhow::Result<Vec<Line>> {
    BenchDb::scoped(&args.mysql_url, tag, async |db| bench(args, db).await).await
}

/// B11's batch calls take this many consecutive members of its room.
const BATCH_MIN_MEMBERS: usize = 100;

/// Cores, MariaDB version and durability settings, for the record.
async fn machine_notes(args: &Args) -> String {
    use sqlx::Connection;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let db = async {
        let mut conn = sqlx::mysql::MySqlConnection::connect(&args.mysql_url).await?;
        let row: (String, i64, i64) = sqlx::query_as(
            "SELECT VERSION(), CAST(@@innodb_flush_log_at_trx_commit AS SIGNED), \
             CAST(@@innodb_buffer_pool_size / 1048576 AS SIGNED)",
        )
        .fetch_one(&mut conn)
        .await?;
        let _ = conn.close().await;
        anyhow::Ok(format!(
            "MariaDB {} (innodb_flush_log_at_trx_commit={}, buffer pool {} MB)",
            row.0, row.1, row.2
        ))
    };
    let db = db.await.unwrap_or_else(|e| format!("MariaDB unreachable: {e}"));
    format!("{cores} cores ({}), {db}, same machine", std::env::consts::ARCH)
}
