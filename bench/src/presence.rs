//! B11, presence: heartbeats that never queue behind commits (SPEC §12.2).
//!
//! Part one, one room of `--presence-members` members (filled in SQL, loaded before timing;
//! IM disabled, outbox worker and presence sweep off), five timed loads of
//! `--presence-seconds` each, every client sending its next request when the previous
//! answered:
//!
//! - `--presence-clients` clients heartbeating alone (`POST .../heartbeat`, one member each);
//! - as many clients sending gifts alone;
//! - both at once (heartbeats and gifts measured apart);
//! - the batch route alone (`POST .../heartbeats`, [`BATCH`] ids a call), counted in ids;
//! - the batch route while the gifts flow.
//!
//! Part two, the crowd: a room of `--crowd-members` members on a second service with the
//! presence sweep on (`presence.stale_after` `--crowd-stale-seconds`, scanned every second).
//! Every member heartbeats once a second through the batch route while gifts flow, for three
//! stale periods: none may be evicted. Then the last `--crowd-stopped` stop: after two more
//! stale periods exactly those are gone, each evicted once (one `RoomUserLeft` each), and every
//! other member is still in the room.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use room_service::app;
use room_service::store::Repository;
use serde_json::json;
use sqlx::mysql::MySqlPool;

use crate::Args;
use crate::command::Run;
use crate::fill;
use crate::report::Line;
use crate::support::{self, BenchDb, CpuTimes, Samples, ms};

/// The room of part one.
const ROOM: &str = "presence";
/// The room of part two.
const CROWD: &str = "crowd";
/// Ids per call of the batch route.
const BATCH: usize = 100;
/// Ids per call of the crowd's batch route (the route's maximum).
const CROWD_BATCH: usize = 1000;
/// Target: heartbeats/s while the room takes gifts at full speed.
const HEARTBEATS_TARGET: f64 = 10_000.0;
/// Target: p99 of a heartbeat while the room takes gifts.
const HEARTBEAT_P99_TARGET: Duration = Duration::from_millis(50);
/// Target: gifts/s while heartbeats flow ÷ gifts/s alone.
const GIFTS_RATIO_TARGET: f64 = 0.6;

/// Runs B11 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    let pool = repo.pool().clone();
    fill::room(&pool, ROOM, args.presence_members).await?;
    fill::room(&pool, CROWD, args.crowd_members).await?;
    let mut lines = part_one(args, db).await?;
    lines.extend(crowd(args, db, &pool).await?);
    repo.close().await;
    Ok(lines)
}

/// The five loads of part one, on one service.
async fn part_one(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let settings = support::settings(&db.url(), None, &[("outbox_worker.enabled", "false")])?;
    let publisher = support::publisher(&settings, None)?;
    let running = app::start(settings, publisher).await?;
    let api = Api::new(format!("http://{}", running.addr));
    let measured = async {
        fill::check_loaded(&api.http, &api.base, ROOM, args.presence_members).await?;
        let (secs, clients, members) = (args.presence_seconds, args.presence_clients, args.presence_members);
        let beats = Duration::from_secs(secs);
        let alone = api.storm(beats, clients, |c, k| Request::heartbeat(ROOM, members, c, k)).await?;
        let gifts = api.storm(beats, clients, |c, k| Request::gift(ROOM, members, "alone", c, k)).await?;
        let (beats_under, gifts_under) = tokio::try_join!(
            api.storm(beats, clients, |c, k| Request::heartbeat(ROOM, members, c, k)),
            api.storm(beats, clients, |c, k| Request::gift(ROOM, members, "both", c, k)),
        )?;
        let batch = api.storm(beats, clients, |c, k| Request::batch(ROOM, members, BATCH, c, k)).await?;
        let (batch_under, _) = tokio::try_join!(
            api.storm(beats, clients, |c, k| Request::batch(ROOM, members, BATCH, c, k)),
            api.storm(beats, clients, |c, k| Request::gift(ROOM, members, "batch", c, k)),
        )?;
        anyhow::Ok(part_one_lines(args, [&alone, &gifts, &beats_under, &gifts_under, &batch, &batch_under]))
    }
    .await;
    running.stop().await?;
    measured
}

fn part_one_lines(args: &Args, loads: [&Run; 6]) -> Vec<Line> {
    let [alone, gifts, beats_under, gifts_under, batch, batch_under] = loads;
    let rate = |r: &Run, per_call: usize| (r.n * per_call) as f64 / r.elapsed.as_secs_f64();
    let p = |r: &Run| format!("{} (p99 {})", ms(r.samples.pct(50.0)), ms(r.samples.pct(99.0)));
    let (under, alone_rate) = (rate(beats_under, 1), rate(alone, 1));
    let p99 = beats_under.samples.pct(99.0);
    let gift_ratio = rate(gifts_under, 1) / rate(gifts, 1).max(1e-9);
    let shape = format!(
        "1 room × {} members, {} + {} clients, {} s a load",
        args.presence_members, args.presence_clients, args.presence_clients, args.presence_seconds
    );
    vec![
        Line::info("B11 shape", shape, "IM disabled, sweep off".into()),
        Line::new(
            "B11 heartbeats/s under a gift storm",
            format!("{under:.0}/s"),
            format!("{alone_rate:.0}/s alone"),
            format!("{:.2}", under / alone_rate.max(1e-9)),
            "≥ 10000/s",
            under >= HEARTBEATS_TARGET,
        ),
        Line::new(
            "B11 heartbeat p50 (p99) under a gift storm",
            p(beats_under),
            format!("{} alone", p(alone)),
            String::new(),
            "p99 ≤ 50 ms",
            p99 <= HEARTBEAT_P99_TARGET,
        ),
        Line::new(
            "B11 gifts/s under a heartbeat storm",
            format!("{:.0}/s", rate(gifts_under, 1)),
            format!("{:.0}/s alone", rate(gifts, 1)),
            format!("{gift_ratio:.2}"),
            "≥ 0.6",
            gift_ratio >= GIFTS_RATIO_TARGET,
        ),
        Line::info(
            "B11 gift p50 (p99) under a heartbeat storm",
            p(gifts_under),
            format!("{} alone", p(gifts)),
        ),
        Line::ratio(
            &format!("B11 batch route ({BATCH} ids a call), member heartbeats/s"),
            format!("{:.0}/s (call p99 {})", rate(batch, BATCH), ms(batch.samples.pct(99.0))),
            format!("{alone_rate:.0}/s single route"),
            rate(batch, BATCH) / alone_rate.max(1e-9),
        ),
        Line::ratio(
            "B11 batch route under a gift storm, member heartbeats/s",
            format!("{:.0}/s (call p99 {})", rate(batch_under, BATCH), ms(batch_under.samples.pct(99.0))),
            format!("{under:.0}/s single route under gifts"),
            rate(batch_under, BATCH) / under.max(1e-9),
        ),
    ]
}

/// Part two: the crowd stays present while it takes gifts, and exactly the silent ones leave.
async fn crowd(args: &Args, db: &BenchDb, pool: &MySqlPool) -> anyhow::Result<Vec<Line>> {
    let stale = Duration::from_secs(args.crowd_stale_seconds);
    let stale_after = format!("{}s", args.crowd_stale_seconds);
    let settings = support::settings(
        &db.url(),
        None,
        &[
            ("outbox_worker.enabled", "false"),
            ("presence.enabled", "true"),
            ("presence.stale_after", &stale_after),
            ("presence.scan_interval", "1s"),
        ],
    )?;
    let publisher = support::publisher(&settings, None)?;
    let running = app::start(settings, publisher).await?;
    let api = Api::new(format!("http://{}", running.addr));
    let members = args.crowd_members;
    let stopped = args.crowd_stopped.min(members);
    let measured = async {
        fill::check_loaded(&api.http, &api.base, CROWD, members).await?;
        let all = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let beating = tokio::spawn(beat_every_second(api.clone(), members, stopped, all.clone(), stop.clone()));
        let gifts = tokio::spawn({
            let (api, stop) = (api.clone(), stop.clone());
            async move { gifts_until(&api, members - stopped, &stop).await }
        });
        tokio::time::sleep(stale * 3).await;
        let evicted_while_present = left_count(pool).await?;
        all.store(false, Ordering::Release);
        tokio::time::sleep(stale * 2 + Duration::from_secs(2)).await;
        stop.store(true, Ordering::Release);
        let rounds = beating.await??;
        let gifts = gifts.await??;
        let left = left_count(pool).await?;
        let remaining: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM room_member WHERE room_id = ?")
            .bind(CROWD)
            .fetch_one(pool)
            .await?;
        let silent_remaining: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM room_member WHERE room_id = ? AND user_id >= ?")
                .bind(CROWD)
                .bind(fill::member(members - stopped))
                .fetch_one(pool)
                .await?;
        let kept = evicted_while_present == 0
            && left == stopped as i64
            && remaining == (members - stopped) as i64
            && silent_remaining == 0;
        anyhow::Ok(vec![Line::new(
            &format!("B11 crowd: {members} members at 1 heartbeat/s (batch route) under gifts, stale_after {stale_after}"),
            format!(
                "{evicted_while_present} evicted while present; {left} left after {stopped} stopped ({silent_remaining} of them still in, {remaining} members)"
            ),
            format!("{rounds} rounds of {} calls of ≤ {CROWD_BATCH} ids, {gifts} gifts meanwhile", members.div_ceil(CROWD_BATCH)),
            String::new(),
            &format!("0 evicted; exactly the {stopped}, once"),
            kept,
        )])
    }
    .await;
    running.stop().await?;
    measured
}

/// Every member heartbeats once a second through the batch route; after `all` turns false,
/// the last `stopped` no longer do. Returns the rounds sent once `stop` is set.
async fn beat_every_second(
    api: Api,
    members: usize,
    stopped: usize,
    all: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<usize> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut rounds = 0;
    while !stop.load(Ordering::Acquire) {
        tick.tick().await;
        let alive = if all.load(Ordering::Acquire) { members } else { members - stopped };
        let calls = (0..alive).step_by(CROWD_BATCH).map(|start| {
            let ids: Vec<String> = (start..(start + CROWD_BATCH).min(alive)).map(fill::member).collect();
            let api = &api;
            async move { api.send(&Request::Batch { room: CROWD, ids }).await }
        });
        join_all(calls).await.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        rounds += 1;
    }
    Ok(rounds)
}

/// Four clients send gifts (by members that keep heartbeating) until `stop`; returns how many.
async fn gifts_until(api: &Api, senders: usize, stop: &AtomicBool) -> anyhow::Result<usize> {
    let clients = (0..4).map(|c| async move {
        let mut sent = 0;
        while !stop.load(Ordering::Acquire) {
            api.send(&Request::gift(CROWD, senders, "crowd", c, sent)).await?;
            sent += 1;
        }
        anyhow::Ok(sent)
    });
    Ok(join_all(clients).await.into_iter().collect::<anyhow::Result<Vec<usize>>>()?.into_iter().sum())
}

/// `RoomUserLeft` events of the crowd (each eviction commits one).
async fn left_count(pool: &MySqlPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = 'RoomUserLeft'",
    )
    .bind(CROWD)
    .fetch_one(pool)
    .await?)
}

/// One request of a load.
enum Request {
    Heartbeat { room: &'static str, user: String },
    Batch { room: &'static str, ids: Vec<String> },
    Gift { room: &'static str, command_id: String, sender: String },
}

impl Request {
    /// Client `c`'s `k`-th single heartbeat: members taken in turn.
    fn heartbeat(room: &'static str, members: usize, c: usize, k: usize) -> Self {
        Self::Heartbeat { room, user: fill::member((c * 7919 + k) % members) }
    }

    /// Client `c`'s `k`-th batch of `size` consecutive members.
    fn batch(room: &'static str, members: usize, size: usize, c: usize, k: usize) -> Self {
        let start = (c * 7919 + k * size) % members;
        Self::Batch { room, ids: (start..start + size).map(|i| fill::member(i % members)).collect() }
    }

    /// Client `c`'s `k`-th gift of load `tag`, by one of the first `senders` members.
    fn gift(room: &'static str, senders: usize, tag: &str, c: usize, k: usize) -> Self {
        Self::Gift {
            room,
            command_id: format!("{tag}-{c}-{k}"),
            sender: fill::member((c * 31 + k) % senders),
        }
    }
}

/// The service under test, over HTTP.
#[derive(Clone)]
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(base: String) -> Self {
        Self { http: reqwest::Client::new(), base }
    }

    async fn send(&self, request: &Request) -> anyhow::Result<()> {
        let (path, body) = match request {
            Request::Heartbeat { room, user } => {
                (format!("/v1/rooms/{room}/heartbeat"), json!({"user_id": user}))
            }
            Request::Batch { room, ids } => {
                (format!("/v1/rooms/{room}/heartbeats"), json!({"user_ids": ids}))
            }
            Request::Gift { room, command_id, sender } => (
                format!("/v1/rooms/{room}/gifts"),
                json!({"command_id": command_id, "sender_id": sender, "receiver_id": fill::OWNER,
                       "gift_id": "rocket", "count": 1, "unit_value": 100}),
            ),
        };
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await?;
        let status = response.status();
        anyhow::ensure!(
            status.is_success(),
            "{path}: HTTP {status}: {}",
            response.text().await.unwrap_or_default()
        );
        Ok(())
    }

    /// `clients` clients send `request(client, k)` one after another for `length`.
    async fn storm(
        &self,
        length: Duration,
        clients: usize,
        request: impl Fn(usize, usize) -> Request,
    ) -> anyhow::Result<Run> {
        let request = &request;
        let (started, cpu) = (Instant::now(), CpuTimes::now());
        let results = join_all((0..clients).map(|c| async move {
            let mut samples = Samples::default();
            let mut k = 0;
            while started.elapsed() < length {
                let t = Instant::now();
                self.send(&request(c, k)).await?;
                samples.push(t.elapsed());
                k += 1;
            }
            anyhow::Ok(samples)
        }))
        .await;
        Run::collect(started, cpu, results)
    }
}
