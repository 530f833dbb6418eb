//! B10, live room: the real service as a black box. The `room-service` binary next to this
//! harness runs as a child process (`serve`, configured by `ROOM_SERVICE__*` variables, at its
//! defaults: `im_rate_limit` 190 calls/s and 35/s per group, the outbox worker on), on a fresh
//! database, with the fake Tencent IM as another child (`room-service-fakes fake-im`, Tencent's
//! limits: 200 calls/s per app refused 60007, 40 messages/s per group dropped; a latency per
//! call). `--live-clients` HTTP clients each send their next SendGift as soon as the previous
//! one answered, for `--live-seconds`:
//!
//! - hot: all into one room (`hot`), each client as its own member;
//! - spread: round robin over `--live-rooms` rooms (client `c` sends to rooms `c`,
//!   `c + clients`, ..., as their member);
//! - paced (IM on only): into the hot room again, `--paced-rate` gifts/s offered by one pacer;
//! - burst (once, last): into the hot room for `--burst-seconds` against an unlimited fake
//!   that answers at once (the service's own `im_rate_limit` still in force), which is how
//!   the livelocked backlog of #25 was found.
//!
//! Once with IM off (the log sink; the baseline of gifts/s) and once per `--live-latencies`
//! with IM on, each load on its own database, service and fake (a backlog one load leaves
//! never slows the next). Setup events are delivered and the fake reset before each load;
//! after it, the outbox is polled until no row is undelivered (at most `--live-drain-secs`).
//! The IM figures (`figures`) come from outside: the fake's counters polled every 10 ms and its
//! records.

mod figures;
mod lines;
pub(crate) mod load;
pub(crate) mod process;
mod watch;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};

use crate::Args;
use crate::report::Line;
use crate::support::{BenchDb, CpuTimes, cpu_of};
use figures::Im;
use load::{Api, Load, Pace, Target, member};
use watch::{Backlog, Fake};

/// How long the setup's events may take to be delivered before a load.
const SETUP_BOUND: Duration = Duration::from_secs(60);

/// The loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scenario {
    Hot,
    Spread,
    Paced,
    Burst,
}

impl Scenario {
    fn tag(self) -> &'static str {
        match self {
            Scenario::Hot => "hot",
            Scenario::Spread => "spread",
            Scenario::Paced => "paced",
            Scenario::Burst => "burst",
        }
    }
}

/// The IM a load publishes to.
#[derive(Debug, Clone, Copy)]
enum ImSetting {
    /// IM disabled: the log sink.
    Off,
    /// The fake at Tencent's limits with this latency per call.
    Tencent(Duration),
    /// The fake without limits, answering at once.
    Unlimited,
}

/// CPU used during a load (not its drain).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cpu {
    pub(crate) service: Duration,
    pub(crate) fake: Duration,
    /// MariaDB (server-wide) and this harness (clients and polls).
    pub(crate) db: Duration,
    pub(crate) bench: Duration,
}

/// One load and what followed it.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) load: Load,
    pub(crate) backlog: Backlog,
    /// `None` with IM off.
    pub(crate) im: Option<Im>,
    pub(crate) cpu: Cpu,
}

/// The loads at one setting (IM off, or on at one latency), each on its own database,
/// service and fake.
#[derive(Debug)]
pub(crate) struct Mode {
    pub(crate) hot: Outcome,
    pub(crate) spread: Outcome,
    pub(crate) paced: Option<Outcome>,
}

/// Runs B10 and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let version = process::version().await?;
    eprintln!("b10: {version}, IM off");
    let off = mode(args, ImSetting::Off).await?;
    let mut on = Vec::new();
    for &ms in &args.live_latencies {
        let latency = Duration::from_millis(ms);
        eprintln!("b10: IM on, fake latency {ms} ms");
        on.push((latency, mode(args, ImSetting::Tencent(latency)).await?));
    }
    eprintln!("b10: burst, IM unlimited and instant");
    let burst = fresh(args, ImSetting::Unlimited, Scenario::Burst).await?;
    Ok(lines::all(args, &version, &off, &on, &burst))
}

/// `scenario` on a fresh database, service and fake.
async fn fresh(args: &Args, im: ImSetting, scenario: Scenario) -> anyhow::Result<Outcome> {
    BenchDb::scoped(&args.mysql_url, "b10", async |db| isolated(args, db, im, scenario).await).await
}

/// The loads at `im`: hot, spread, and paced with IM on.
async fn mode(args: &Args, im: ImSetting) -> anyhow::Result<Mode> {
    let hot = fresh(args, im, Scenario::Hot).await?;
    let spread = fresh(args, im, Scenario::Spread).await?;
    let paced = match im {
        ImSetting::Off => None,
        _ => Some(fresh(args, im, Scenario::Paced).await?),
    };
    Ok(Mode { hot, spread, paced })
}

/// What a load needs: its service, its fake, its database.
struct Ctx<'a> {
    args: &'a Args,
    api: Api,
    fake: Option<Fake>,
    pool: MySqlPool,
    /// Process ids of the service and the fake (0: none).
    pids: (u32, u32),
}

/// Starts the fake (IM on) and the service on `db`, and runs `scenario`: a backlog one load
/// leaves never reaches the next.
async fn isolated(args: &Args, db: &BenchDb, im: ImSetting, scenario: Scenario) -> anyhow::Result<Outcome> {
    let fake = match im {
        ImSetting::Off => None,
        ImSetting::Tencent(latency) => {
            Some(process::start_fake_requiring(latency, process::TENCENT_LIMITS, args.manage_groups).await?)
        }
        ImSetting::Unlimited => {
            Some(process::start_fake_requiring(Duration::ZERO, process::NO_LIMITS, args.manage_groups).await?)
        }
    };
    let fake_base = fake.as_ref().map(|f| f.base.as_str());
    let groups = [("TENCENT_IM__MANAGE_GROUPS", args.manage_groups.to_string())];
    let service = process::start_service(&db.url(), fake_base, args.live_in_flight, &groups).await?;
    let pool = MySqlPoolOptions::new().max_connections(1).connect(&db.url()).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let ctx = Ctx {
        args,
        api: Api { http, base: service.base.clone() },
        fake: fake.as_ref().map(|f| Fake { http: reqwest::Client::new(), base: f.base.clone() }),
        pool,
        pids: (service.proc.pid(), fake.as_ref().map_or(0, |f| f.proc.pid())),
    };
    let measured = run_scenario(&ctx, scenario).await;
    ctx.pool.close().await;
    service.proc.stop().await;
    if let Some(fake) = fake {
        fake.proc.stop().await;
    }
    measured
}

/// Where gift `k` of client `c` goes in `scenario`.
fn target(args: &Args, scenario: Scenario) -> Target {
    let (clients, rooms) = (args.live_clients, args.live_rooms);
    match scenario {
        Scenario::Hot | Scenario::Paced | Scenario::Burst => Arc::new(|c, _| ("hot".to_owned(), member(c))),
        Scenario::Spread => Arc::new(move |c, k| (format!("s{}", (c + k * clients) % rooms), member(c))),
    }
}

/// Sets up, runs and watches one load.
async fn run_scenario(ctx: &Ctx<'_>, scenario: Scenario) -> anyhow::Result<Outcome> {
    let (args, tag) = (ctx.args, scenario.tag());
    let target = target(args, scenario);
    let t = Instant::now();
    load::setup(&ctx.api, args.live_clients, args.live_rooms, &target).await?;
    let setup = watch::backlog(&ctx.pool, SETUP_BOUND).await?;
    anyhow::ensure!(setup.left == 0, "b10 {tag}: {} setup events still undelivered", setup.left);
    if let Some(fake) = &ctx.fake {
        fake.reset().await?;
    }
    eprintln!("b10: {tag}: set up in {:.1}s", t.elapsed().as_secs_f64());
    let sampler = ctx.fake.as_ref().map(Fake::sample);
    let pace = match scenario {
        Scenario::Paced => Pace::Offered(args.paced_rate),
        _ => Pace::Closed,
    };
    let before = cpu_now(ctx.pids);
    let secs = if scenario == Scenario::Burst { args.burst_seconds } else { args.live_seconds };
    let load = load::run(&ctx.api, tag, args.live_clients, secs, pace, &target).await?;
    let cpu = cpu_since(cpu_now(ctx.pids), before);
    let backlog = watch::backlog(&ctx.pool, Duration::from_secs(args.live_drain_secs)).await?;
    let im = match (&ctx.fake, sampler) {
        (Some(fake), Some(sampler)) => {
            let samples = sampler.finish().await?;
            let records = fake.records().await?;
            Some(figures::im(&load, &samples, &records))
        }
        _ => None,
    };
    eprintln!(
        "b10: {tag}: {} gifts in {:.1}s, backlog gone after {:?}",
        load.gifts,
        load.elapsed.as_secs_f64(),
        backlog.gone_after
    );
    Ok(Outcome { load, backlog, im, cpu })
}

/// CPU so far of the service, the fake, MariaDB and this harness.
fn cpu_now((service, fake): (u32, u32)) -> Cpu {
    let of = |pid: u32| {
        if pid == 0 { Duration::ZERO } else { cpu_of(Path::new(&format!("/proc/{pid}/stat"))) }
    };
    let here = CpuTimes::now();
    Cpu { service: of(service), fake: of(fake), db: here.db, bench: here.this }
}

fn cpu_since(now: Cpu, before: Cpu) -> Cpu {
    Cpu {
        service: now.service.saturating_sub(before.service),
        fake: now.fake.saturating_sub(before.fake),
        db: now.db.saturating_sub(before.db),
        bench: now.bench.saturating_sub(before.bench),
    }
}
