//! B1, the command path: JoinRoom/SendGift commands per second through HTTP (fake IM at 0 ms,
//! its limits off; the service's own rate limiter in the stack but set far above the load,
//! 10⁹/s, so IM never holds an event back), against a raw sqlx loop running the identical transaction (small snapshot
//! update fenced by version + the member or gift-total row + command log row + outbox rows,
//! the same SQL shapes and the same data sizes, precomputed with the pure domain; see
//! `command_raw`) at the same concurrency on the same database.
//!
//! Workload: `clients` concurrent clients, each owning `rooms / clients` rooms; a client
//! repeats "a new user joins one of its rooms, then sends a gift there", round robin over its
//! rooms. Rooms are created first (not timed). Raw runs first, the tables are emptied, then
//! the service runs; then, the tables emptied again, the service runs the same load with the
//! default `im_rate_limit` (190 calls/s app-wide, 35/s per group): far more IM-bound events
//! per second than Tencent takes, so most are left pending for the worker — the figures of that
//! run show what this overload costs the command path. Last, the not-binding run is repeated
//! with `auth.mode: jwt` (HS256, then RS256), every command carrying its user's token
//! (`auth`): what verification costs per command.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::join_all;
use room_service::app;
use room_service::domain::{Command, GiftId, UserId};
use room_service::publish::Path as PublishPath;
use room_service::store::Repository;
use serde_json::json;
use sqlx::mysql::MySqlPool;
use sqlx::{Executor, MySql, QueryBuilder};

use crate::Args;
use crate::command_raw::{Tx, precompute, run_raw};
use crate::report::Line;
use crate::support::{self, Acceptances, BenchDb, CpuTimes, Samples, global_status, ms};

pub(crate) mod auth;
mod service;

pub(crate) use auth::Tokens;
pub(crate) use service::run_service;
use service::{ServiceRun, service_run};

/// Server-wide statement counters read around each timed service run.
const COUNTERS: [&str; 4] = ["Com_commit", "Com_insert", "Com_update", "Com_select"];

/// `im_rate_limit` far above any load of this benchmark: the limiter takes a permit per event
/// and never refuses one.
pub(crate) const NOT_BINDING: [(&str, &str); 2] =
    [("im_rate_limit.global_per_sec", "1000000000"), ("im_rate_limit.per_group_per_sec", "1000000000")];

/// The service's pool size (`database.max_connections` default); the raw loop gets the same.
pub(crate) const POOL: u32 = 16;

/// What one timed run measured.
pub(crate) struct Run {
    pub(crate) elapsed: Duration,
    pub(crate) samples: Samples,
    pub(crate) n: usize,
    pub(crate) cpu: CpuTimes,
}

impl Run {
    /// Ends a run started at `started` (CPU times `cpu`) whose clients answered `results`.
    pub(crate) fn collect(
        started: Instant,
        cpu: CpuTimes,
        results: Vec<anyhow::Result<Samples>>,
    ) -> anyhow::Result<Run> {
        let (elapsed, cpu) = (started.elapsed(), CpuTimes::now().since(cpu));
        let mut samples = Samples::default();
        for r in results {
            samples.extend(r?);
        }
        Ok(Run { elapsed, n: samples.len(), samples, cpu })
    }
}

/// One client's commands: its room creations, then the timed (room, command) join/gift pairs.
pub(crate) type Plan = (Vec<Command>, Vec<(String, Command)>);

/// The rooms client `client` owns (room `r{n}` for each `n`), in the order of its creations.
pub(crate) fn client_rooms(args: &Args, client: usize) -> impl Iterator<Item = usize> {
    (client..args.rooms.max(args.clients)).step_by(args.clients)
}

/// One client's commands, in order: its room creations, then the timed join/gift pairs.
pub(crate) fn plan(args: &Args, client: usize) -> Plan {
    let rooms: Vec<String> =
        (client..args.rooms.max(args.clients)).step_by(args.clients).map(|r| format!("r{r}")).collect();
    let creates = rooms.iter().map(|_| create()).collect();
    let mut timed = Vec::new();
    for k in 0..args.pairs_per_client {
        let room = rooms[k % rooms.len()].clone();
        let user = user(&format!("c{client}u{k}"));
        timed.push((room.clone(), Command::JoinRoom { user_id: user.clone() }));
        timed.push((
            room,
            Command::SendGift {
                sender_id: user,
                receiver_id: user_owner(),
                gift_id: GiftId::parse("rocket").unwrap_or_else(|_| unreachable!()),
                count: 1 + (k as u32 % 5),
                unit_value: 100,
            },
        ));
    }
    (creates, timed)
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap_or_else(|_| unreachable!("benchmark ids are valid"))
}

fn user_owner() -> UserId {
    user("owner")
}

fn create() -> Command {
    Command::CreateRoom { owner_id: user_owner(), title: "Friday night".into(), seats: Default::default() }
}

/// The HTTP path and body of `command` on `room`.
pub(crate) fn request(room: &str, command_id: &str, command: &Command) -> (String, serde_json::Value) {
    match command {
        Command::CreateRoom { owner_id, title, .. } => (
            "/v1/rooms".into(),
            json!({"command_id": command_id, "room_id": room, "owner_id": owner_id.as_str(), "title": title}),
        ),
        Command::JoinRoom { user_id } => {
            (format!("/v1/rooms/{room}/join"), json!({"command_id": command_id, "user_id": user_id.as_str()}))
        }
        Command::SendGift { sender_id, receiver_id, gift_id, count, unit_value } => (
            format!("/v1/rooms/{room}/gifts"),
            json!({"command_id": command_id, "sender_id": sender_id.as_str(), "receiver_id": receiver_id.as_str(),
                   "gift_id": gift_id.as_str(), "count": count, "unit_value": unit_value}),
        ),
        _ => (String::new(), json!({})),
    }
}

/// Empties the tables the commands write (the schema and the cluster tables stay).
pub(crate) async fn truncate(pool: &MySqlPool) -> anyhow::Result<()> {
    for table in [
        "room_outbox",
        "room_command_log",
        "room_snapshot",
        "room_member",
        "room_gift_total",
        "room_payment_refund",
    ] {
        pool.execute(sqlx::AssertSqlSafe(format!("TRUNCATE TABLE {table}"))).await?;
    }
    Ok(())
}

/// Runs B1 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let plans: Vec<_> = (0..args.clients).map(|c| plan(args, c)).collect();

    // Raw baseline: the same pool settings as the service (READ COMMITTED sessions).
    let repo = db.repository(POOL).await?;
    let raw_plans: Vec<(Vec<Tx>, Vec<Tx>)> = plans
        .iter()
        .enumerate()
        .map(|(c, (creates, timed))| {
            let mut states = HashMap::new();
            let rooms = (c..args.rooms.max(args.clients)).step_by(args.clients);
            let creates: Vec<(String, Command)> =
                rooms.zip(creates).map(|(r, cmd)| (format!("r{r}"), cmd.clone())).collect();
            (precompute(c, &creates, &mut states), precompute(c, timed, &mut states))
        })
        .collect();
    let raw = run_raw(repo.pool(), raw_plans).await?;
    truncate(repo.pool()).await?;
    repo.close().await;

    // The service, fake IM at 0 ms and its limits off, the rate limiter not binding; then the
    // same with the default im_rate_limit.
    let unlimited = service_run(args, db, plans.clone(), &NOT_BINDING, None).await?;
    let limited = service_run(args, db, plans.clone(), &[], None).await?;
    let (svc, marker) = (&unlimited.run, unlimited.marks);
    let (svc_n, svc_samples, raw_samples) = (svc.n, &svc.samples, &raw.samples);

    let raw_rate = raw.n as f64 / raw.elapsed.as_secs_f64();
    let svc_rate = svc.n as f64 / svc.elapsed.as_secs_f64();
    let per = |cpu: Duration, n: usize| format!("{:.0} µs", cpu.as_secs_f64() * 1e6 / n.max(1) as f64);
    let cpu_budget = |r: &Run| (r.cpu.this + r.cpu.db).as_secs_f64() / r.elapsed.as_secs_f64();
    let ratio = svc_rate / raw_rate;
    let lim = &limited.run;
    let lim_rate = lim.n as f64 / lim.elapsed.as_secs_f64();
    let per_command = |s: &ServiceRun| s.statements as f64 / s.run.n.max(1) as f64;
    let sync_share = |s: &ServiceRun| s.sync_accepted as f64 / s.im_events.max(1) as f64;
    let (raw_p99, svc_p99) = (raw_samples.pct(99.0), svc_samples.pct(99.0));
    let p99_ratio = svc_p99.as_secs_f64() / raw_p99.as_secs_f64().max(1e-9);
    let shape = format!("{} clients, {} rooms, {} commands", args.clients, args.rooms, svc_n);
    // The same load with every command's token verified (HS256, RS256).
    let authed = auth::runs(args, db, &plans, svc_rate).await?;
    let mut lines = vec![
        Line::new(
            "B1 commands/s (service ÷ raw)",
            format!("{svc_rate:.0}/s"),
            format!("{raw_rate:.0}/s raw"),
            format!("{ratio:.2}"),
            "≥ 0.8 (≥ 0.65, DB on same 2 cores)",
            ratio >= 0.65,
        ),
        Line::new(
            "B1 p99 (service ÷ raw)",
            ms(svc_p99),
            format!("{} raw", ms(raw_p99)),
            format!("{p99_ratio:.2}"),
            "≤ 2",
            p99_ratio <= 2.0,
        ),
        Line::info("B1 p50", ms(svc_samples.pct(50.0)), format!("{} raw", ms(raw_samples.pct(50.0)))),
        Line::info(
            "B1 CPU/command: bench process",
            per(svc.cpu.this, svc.n),
            format!("{} raw (service, fake IM and HTTP client share it)", per(raw.cpu.this, raw.n)),
        ),
        Line::info(
            "B1 CPU/command: MariaDB",
            per(svc.cpu.db, svc.n),
            format!("{} raw", per(raw.cpu.db, raw.n)),
        ),
        Line::info(
            "B1 cores busy (of 2)",
            format!("{:.2}", cpu_budget(svc)),
            format!("{:.2} raw (bench + MariaDB only)", cpu_budget(&raw)),
        ),
        Line::info(
            "B1 mark statements/command",
            format!("{:.3}", marker as f64 / (svc_n + args.rooms.max(args.clients)) as f64),
            format!("{shape}; 1.0 before the marker"),
        ),
        Line::info(
            "B1 DB statements/command",
            format!("{:.2}", per_command(&unlimited)),
            format!(
                "server-wide commit+insert+update+select; {:.1}% of {} IM-bound events delivered sync",
                sync_share(&unlimited) * 100.0,
                unlimited.im_events
            ),
        ),
        Line::ratio(
            "B1 default im_rate_limit: commands/s (÷ raw)",
            format!("{lim_rate:.0}/s"),
            format!("{raw_rate:.0}/s raw; {svc_rate:.0}/s not binding"),
            lim_rate / raw_rate,
        ),
        Line::info(
            "B1 default im_rate_limit: p50 / p99",
            format!("{} / {}", ms(lim.samples.pct(50.0)), ms(lim.samples.pct(99.0))),
            format!("{} / {} not binding", ms(svc_samples.pct(50.0)), ms(svc_p99)),
        ),
        Line::info(
            "B1 default im_rate_limit: delivered sync",
            format!(
                "{:.1}% ({} of {} IM-bound events)",
                sync_share(&limited) * 100.0,
                limited.sync_accepted,
                limited.im_events
            ),
            "the rest left pending for the worker (190 calls/s app-wide, 35/s per group)".into(),
        ),
        Line::info(
            "B1 default im_rate_limit: statements/command",
            format!("{:.2}", per_command(&limited)),
            format!("{:.2} not binding (server-wide, the worker's included)", per_command(&unlimited)),
        ),
        Line::info(
            "B1 default im_rate_limit: CPU/command",
            format!("{} bench + {} MariaDB", per(lim.cpu.this, lim.n), per(lim.cpu.db, lim.n)),
            format!(
                "{} + {} not binding; cores busy {:.2}",
                per(svc.cpu.this, svc.n),
                per(svc.cpu.db, svc.n),
                cpu_budget(lim)
            ),
        ),
    ];
    lines.extend(authed);
    Ok(lines)
}
