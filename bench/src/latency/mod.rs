//! B4, delivery latency, in two parts, each with the service in-process (default settings:
//! the outbox worker on, default `im_rate_limit`, the full stack with its rate limiter) and the
//! fake IM at Tencent's real limits (200 calls/s, 40 messages/s per group) and 20 ms per call.
//! A probe just above the IM leaf records when IM accepted each event (wall clock, ms).
//!
//! (a) Live load during a backlog drain: `backlog_rows` pending rows are bulk-inserted over
//! 1,000 rooms before the service starts, so its worker drains them at its configured rate
//! (152/s) the whole time; after a short warm-up, `live_rate` JoinRoom commands per second
//! (open loop, each on its own task) go through the HTTP API into 8 rooms without backlog for
//! `live_secs`. Figure: commit → IM acceptance p99 of those live events, target ≤ 150 ms. The
//! commit time is the outbox row's `created_at_ms` (MariaDB's `NOW(3)` at insert, inside the
//! command's transaction; the same clock on this machine), so each figure slightly overstates
//! the latency by the commit itself.
//!
//! (b) Hand-off to the worker with no backlog: the same live load into 8 other rooms, but the
//! probe fails every synchronous publish into them at once (as if IM were unreachable for the
//! command path only; class `transient`), so each event is left pending, made claimable at
//! once and the worker woken (`room::sync_publish::hand_to_worker`). A trigger in the
//! benchmark's database records the moment each row became claimable: the `updated_at_ms`
//! that releasing UPDATE wrote (MariaDB's `NOW(3)`; since `c914741` the release sets
//! `lock_until_ms` to 0, not to now; a row never released would become claimable when its
//! young-pending guard ends, `created_at_ms + publish_timeout`). Figure:
//! claimable → IM acceptance by the worker p99, target ≤ 300 ms. Failing in the probe rather
//! than with the fake's queued faults keeps the worker's own calls from drawing a fault (which
//! would measure the retry delay, not the hand-off).
//!
//! Then the other way a row becomes claimable: nobody releases it (the process that committed
//! it died before publishing) and its young-pending guard ends. Such rows are inserted straight
//! into the outbox at the same rate, claimable `publish_timeout` after their `created_at_ms`
//! (one `NOW(3)` for both), and timed from that moment to IM acceptance, same target. Nothing
//! wakes the worker for them: before `c914741` it found them on its next `poll_interval` tick;
//! since then, after a short claim it waits for the next row's claim-after time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use room_service::app;
use room_service::publish::Path as PublishPath;
use room_service::store::Repository;
use room_service_fakes::fake_im::FakeIm;
use serde_json::json;
use sqlx::mysql::MySqlPool;
use sqlx::{Executor, Row};

use crate::Args;
use crate::report::Line;
use crate::support::{self, Acceptances, BenchDb, ProbeOptions, Samples, ms, unix_ms};

mod hand_off;

use hand_off::{created_at, hand_off};

const IM_LATENCY: Duration = Duration::from_millis(20);
/// Rooms of the live load (and of the hand-off load); none holds backlog.
const LIVE_ROOMS: usize = 8;
/// Rooms the backlog of part (a) is spread over.
const BACKLOG_ROOMS: usize = 1000;
/// Most rows of the guard-expiry case (B4 b).
const ORPHANS: usize = 100;
/// Longest wait for the last live events once the load has stopped.
const SETTLE: Duration = Duration::from_secs(10);

/// Runs B4 (both parts) and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let during = BenchDb::scoped(&args.mysql_url, "b4a", async |db| during_drain(args, db).await).await;
    let handoff = BenchDb::scoped(&args.mysql_url, "b4b", async |db| hand_off(args, db).await).await;
    let mut lines = during?;
    lines.extend(handoff?);
    Ok(lines)
}

/// One live command's event: its id, and whether the command's answer said it was delivered.
struct Sent {
    event_id: String,
    delivered_sync: bool,
}

/// A started service with its fake IM and acceptance probe.
struct Service {
    im: FakeIm,
    seen: Acceptances,
    running: app::RunningApp,
    http: reqwest::Client,
    base: String,
    /// `outbox_worker.publish_timeout`: the young-pending guard of a fresh row.
    publish_timeout: Duration,
    /// `outbox_worker.poll_interval`.
    poll_interval: Duration,
}

impl Service {
    async fn start(args: &Args, db: &BenchDb, fail_sync_prefix: Option<&str>) -> anyhow::Result<Self> {
        let im = FakeIm::try_start(support::tencent_fake_options(IM_LATENCY)).await?;
        let mut overrides = vec![("outbox_worker.enabled", "true")];
        if args.smoke {
            // A shorter young-pending guard, so the guard-expiry case takes 1 s, not 3.
            overrides.push(("outbox_worker.publish_timeout", "1s"));
        }
        let settings = support::settings(&db.url(), Some(&im), &overrides)?;
        let (publish_timeout, poll_interval) =
            (settings.outbox_worker.publish_timeout, settings.outbox_worker.poll_interval);
        let seen: Acceptances = Arc::new(Mutex::new(HashMap::new()));
        let probe =
            ProbeOptions { seen: Some(seen.clone()), fail_sync_prefix: fail_sync_prefix.map(str::to_owned) };
        let publisher = support::publisher_with(&settings, probe)?;
        let running = app::start(settings, publisher).await?;
        let base = format!("http://{}", running.addr);
        Ok(Self { im, seen, running, http: reqwest::Client::new(), base, publish_timeout, poll_interval })
    }

    /// Creates rooms `{prefix}0` .. (CreateRoom's event never reaches IM).
    async fn create_rooms(&self, prefix: &str) -> anyhow::Result<()> {
        for r in 0..LIVE_ROOMS {
            let body = json!({"command_id": format!("create-{prefix}{r}"), "room_id": format!("{prefix}{r}"), "owner_id": "o", "title": "t"});
            self.http.post(format!("{}/v1/rooms", self.base)).json(&body).send().await?.error_for_status()?;
        }
        Ok(())
    }

    /// `rate` joins per second for `secs` seconds into rooms `{prefix}0..`, open loop: each
    /// command is sent on its own task at its scheduled time, whatever the earlier ones do.
    async fn live_load(&self, prefix: &str, rate: f64, secs: f64) -> anyhow::Result<Vec<Sent>> {
        let n = (rate * secs).round().max(1.0) as usize;
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(0.1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut tasks = Vec::with_capacity(n);
        for k in 0..n {
            tick.tick().await;
            let (http, url) =
                (self.http.clone(), format!("{}/v1/rooms/{prefix}{}/join", self.base, k % LIVE_ROOMS));
            let body = json!({"command_id": format!("{prefix}-{k}"), "user_id": format!("{prefix}u{k}")});
            tasks.push(tokio::spawn(async move {
                let answer: serde_json::Value =
                    http.post(url).json(&body).send().await?.error_for_status()?.json().await?;
                let event = &answer["events"][0];
                anyhow::Ok(Sent {
                    event_id: event["event_id"].as_str().unwrap_or_default().to_owned(),
                    delivered_sync: event["delivery"] == "delivered",
                })
            }));
        }
        let mut sent = Vec::with_capacity(n);
        for task in tasks {
            sent.push(task.await??);
        }
        Ok(sent)
    }

    /// Waits (at most [`SETTLE`]) until every event of `sent` was accepted by IM.
    async fn settle(&self, sent: &[Sent]) {
        let deadline = Instant::now() + SETTLE;
        while Instant::now() < deadline {
            let all = {
                let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
                sent.iter().all(|s| seen.contains_key(&s.event_id))
            };
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn accepted(&self) -> HashMap<String, (PublishPath, i64)> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The fake IM's counters and the accepted events, read while everything still runs; then
    /// stops the service before dropping its fake IM, so the stop's last publishes still land.
    async fn stop(
        self,
    ) -> anyhow::Result<(room_service_fakes::fake_im::FakeStats, HashMap<String, (PublishPath, i64)>)> {
        let stats = self.im.stats();
        let seen = self.accepted();
        let Service { im, running, .. } = self;
        running.stop().await?;
        drop(im);
        Ok((stats, seen))
    }
}

/// Part (a): live sync latency while the worker drains a backlog.
async fn during_drain(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    crate::backlog::load_timed(repo.pool(), args.backlog_rows, BACKLOG_ROOMS, "b4").await?;
    let pool = repo.pool().clone();

    let service = Service::start(args, db, None).await?;
    let outcome = async {
        service.create_rooms("live").await?;
        // Let the worker reach its steady drain before the live load starts.
        tokio::time::sleep(if args.smoke { Duration::from_millis(500) } else { Duration::from_secs(3) })
            .await;
        let from = unix_ms();
        let sent = service.live_load("live", args.live_rate, args.live_secs as f64).await?;
        let to = unix_ms();
        service.settle(&sent).await;
        anyhow::Ok((sent, from, to))
    }
    .await;
    let (stats, seen) = service.stop().await?;
    let (sent, from, to) = outcome?;
    let created = created_at(&pool, "live%").await?;
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered'")
        .fetch_one(&pool)
        .await?;
    repo.close().await;

    let since = |from: i64, to: i64| Duration::from_millis((to - from).max(0) as u64);
    let (mut live, mut via_worker) = (Samples::default(), Samples::default());
    for s in &sent {
        if let (Some((path, at)), Some(c)) = (seen.get(&s.event_id), created.get(&s.event_id)) {
            live.push(since(*c, *at));
            if *path == PublishPath::Worker {
                via_worker.push(since(*c, *at));
            }
        }
    }
    let sync_answers = sent.iter().filter(|s| s.delivered_sync).count();
    let worker_in_window =
        seen.values().filter(|(path, at)| *path == PublishPath::Worker && (from..=to).contains(at)).count();
    let window = Duration::from_millis((to - from).max(1) as u64);
    let drain_rate = worker_in_window as f64 / window.as_secs_f64();
    let refusals = stats.dropped + stats.rate_limited;
    let mut lines = vec![
        Line::new(
            "B4 live commit → IM p99, during drain",
            format!("{} (p50 {})", ms(live.pct(99.0)), ms(live.pct(50.0))),
            format!(
                "{}/{} accepted, {sync_answers} answered delivered (sync); {:.0}/s for {}s into {LIVE_ROOMS} rooms",
                live.len(),
                sent.len(),
                args.live_rate,
                args.live_secs
            ),
            String::new(),
            "≤ 150 ms",
            live.len() == sent.len() && live.pct(99.0) <= Duration::from_millis(150),
        ),
        Line::info(
            "B4 worker drain meanwhile",
            format!("{drain_rate:.1}/s"),
            format!(
                "{} backlog rows over {BACKLOG_ROOMS} rooms, {left} still undelivered at the end; IM refusals {refusals} ({} dropped, {} 60007)",
                args.backlog_rows, stats.dropped, stats.rate_limited
            ),
        ),
    ];
    if via_worker.len() > 0 || sync_answers < sent.len() {
        lines.push(Line::info(
            "B4 live events left to the worker",
            (sent.len() - sync_answers).to_string(),
            match via_worker.len() {
                0 => format!("none accepted through the worker {}s after the load", SETTLE.as_secs()),
                n => {
                    format!("{n} accepted through the worker, commit → IM max {}", ms(via_worker.pct(100.0)))
                }
            },
        ));
    }
    Ok(lines)
}
