//! B13, the events API under a hot room (SPEC §13.2): the real service as a black box (the
//! `room-service` binary beside this harness, IM off: the log sink, so the database is the only
//! shared resource), on a fresh MariaDB database. `--live-clients` clients send gifts into one
//! room, closed loop, for `--live-seconds`, twice:
//!
//! 1. alone: the gifts/s baseline;
//! 2. while one reader asks `GET /v1/rooms/hot/events?after_version=…&limit=100` at
//!    `--history-reads` per second (each from a random version among the room's last 1000, so
//!    every read returns 100 events), timing each read.
//!
//! Targets: read p99 ≤ 50 ms, and gifts/s with the reads ≥ 0.8 × without.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use crate::Args;
use crate::live::load::{self, Api, Pace, Target, member};
use crate::live::process;
use crate::report::Line;
use crate::support::{BenchDb, Samples, ms};

/// Events a read asks for.
const PAGE: u64 = 100;
/// Targets.
const P99_TARGET: Duration = Duration::from_millis(50);
const RATIO_TARGET: f64 = 0.8;

/// Runs B13 on `db`.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let service = process::start_service(&db.url(), None, 1, &[]).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
    let api = Api { http: http.clone(), base: service.base.clone() };
    let target: Target = Arc::new(|c, _| ("hot".to_owned(), member(c)));
    load::setup(&api, args.live_clients, 1, &target).await?;
    // A history to read from: enough gifts that every read returns a whole page.
    let warm = load::run(&api, "b13-warm", args.live_clients, 2, Pace::Closed, &target).await?;
    anyhow::ensure!(warm.gifts as u64 > PAGE, "b13: only {} gifts to read back", warm.gifts);
    let alone =
        load::run(&api, "b13-alone", args.live_clients, args.live_seconds, Pace::Closed, &target).await?;
    let version = Arc::new(AtomicU64::new(room_version(&http, &service.base).await?));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn(read_while(
        http.clone(),
        service.base.clone(),
        args.history_reads,
        version,
        stop.clone(),
    ));
    let with_reads =
        load::run(&api, "b13-reads", args.live_clients, args.live_seconds, Pace::Closed, &target).await;
    stop.store(true, Ordering::Relaxed);
    let reads = reader.await?;
    service.proc.stop().await;
    let with_reads = with_reads?;
    let rate = |l: &load::Load| l.gifts as f64 / l.elapsed.as_secs_f64().max(1e-9);
    let (base, loaded) = (rate(&alone), rate(&with_reads));
    let ratio = loaded / base.max(1e-9);
    let p99 = reads.latency.pct(99.0);
    Ok(vec![
        Line::new(
            "B13 events API read p99 (100 events) under a hot room",
            ms(p99),
            format!(
                "{} reads at {}/s offered ({} failed, {} short pages); p50 {}",
                reads.latency.len(),
                args.history_reads,
                reads.failed,
                reads.short,
                ms(reads.latency.pct(50.0))
            ),
            String::new(),
            &format!("≤ {}", ms(P99_TARGET)),
            p99 <= P99_TARGET && reads.failed == 0,
        ),
        Line::new(
            "B13 hot room gifts/s with the reads ÷ without",
            format!("{loaded:.0}/s"),
            format!("{base:.0}/s without, {} clients, {} s each", args.live_clients, args.live_seconds),
            format!("{ratio:.2}"),
            &format!("≥ {RATIO_TARGET}"),
            ratio >= RATIO_TARGET,
        ),
    ])
}

/// What the reader saw.
#[derive(Debug, Default)]
struct Reads {
    latency: Samples,
    failed: usize,
    /// Pages of fewer than [`PAGE`] events.
    short: usize,
}

/// The room's version now.
async fn room_version(http: &reqwest::Client, base: &str) -> anyhow::Result<u64> {
    let room: serde_json::Value = http.get(format!("{base}/v1/rooms/hot")).send().await?.json().await?;
    room["version"].as_u64().ok_or_else(|| anyhow::anyhow!("b13: the room has no version: {room}"))
}

/// Reads pages at `per_sec` until `stop`, each from a random version among the room's last
/// 1000; waits for the reads in flight.
async fn read_while(
    http: reqwest::Client,
    base: String,
    per_sec: u32,
    version: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Reads {
    let reads = Arc::new(std::sync::Mutex::new(Reads::default()));
    let mut every = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(per_sec.max(1))));
    every.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut tasks = tokio::task::JoinSet::new();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        every.tick().await;
        n += 1;
        // Every tenth read refreshes the room's version (the newest the pages may reach).
        if n.is_multiple_of(10)
            && let Ok(v) = room_version(&http, &base).await
        {
            version.store(v, Ordering::Relaxed);
        }
        let newest = version.load(Ordering::Relaxed);
        let after = newest.saturating_sub(PAGE + n * 7919 % 900);
        let (http, base, reads) = (http.clone(), base.clone(), reads.clone());
        tasks.spawn(async move {
            let t = Instant::now();
            let answer = http
                .get(format!("{base}/v1/rooms/hot/events?after_version={after}&limit={PAGE}"))
                .send()
                .await;
            let page: Option<serde_json::Value> = match answer {
                Ok(r) if r.status().is_success() => r.json().await.ok(),
                _ => None,
            };
            let took = t.elapsed();
            let mut reads = reads.lock().unwrap_or_else(|e| e.into_inner());
            match page {
                Some(page) => {
                    reads.latency.push(took);
                    if page["events"].as_array().map_or(0, Vec::len) < PAGE as usize {
                        reads.short += 1;
                    }
                }
                None => reads.failed += 1,
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    std::mem::take(&mut *reads.lock().unwrap_or_else(|e| e.into_inner()))
}
