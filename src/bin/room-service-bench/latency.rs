//! B4, delivery latency: commit → IM acceptance, p50/p99, on the synchronous path and on the
//! worker path (IM failing, then recovering).
//!
//! The service runs in-process against the fake IM at 20 ms per call (limits off); a probe
//! just above the IM leaf records when IM accepted each event (wall clock, ms). The commit
//! time is the outbox row's `created_at_ms` (MariaDB's `NOW(3)` at insert, inside the
//! command's transaction; the same clock on this machine), so each figure slightly
//! overstates the latency by the commit itself.
//!
//! Worker path: the fake answers HTTP 502 to exactly as many calls as commands are sent, so
//! every synchronous push fails and IM is healthy again right after the last one. The rows
//! become claimable `publish_timeout` after their commit (SPEC §4: the worker does not race
//! the synchronous push), so commit → acceptance is at least `publish_timeout` by design; the
//! target (poll_interval + 300 ms) is checked on the time from "claimable and IM healthy" to
//! acceptance, and the raw commit → acceptance figure is shown beside it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::join_all;
use room_service::app;
use room_service::fake_im::Fault;
use room_service::publish::Path as PublishPath;
use serde_json::json;
use sqlx::Row;
use sqlx::mysql::MySqlPool;

use crate::Args;
use crate::report::Line;
use crate::support::{self, Acceptances, BenchDb, Samples, ms, unix_ms};

const IM_LATENCY: Duration = Duration::from_millis(20);
const POLL: Duration = Duration::from_secs(1);
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(1);
const CLIENTS: usize = 8;

/// Runs B4 and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let db = BenchDb::create(&args.mysql_url, "b4").await?;
    let result = measure(args, &db).await;
    db.drop_now().await;
    result
}

async fn measure(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let (sync_n, worker_n) = if args.smoke { (40, 16) } else { (2_000, 400) };
    let im = support::fake_im(IM_LATENCY).await?;
    let (poll, timeout) = (format!("{}ms", POLL.as_millis()), format!("{}ms", PUBLISH_TIMEOUT.as_millis()));
    let settings = support::settings(
        &db.url(),
        Some(&im),
        &[
            ("outbox_worker.enabled", "true"),
            ("outbox_worker.poll_interval", &poll),
            ("outbox_worker.publish_timeout", &timeout),
        ],
    )?;
    let seen: Acceptances = Arc::new(Mutex::new(HashMap::new()));
    let publisher = support::publisher(&settings, Some(seen.clone()))?;
    let running = app::start(settings, publisher).await?;
    let base = format!("http://{}", running.addr);
    let http = reqwest::Client::new();
    let pool = sqlx::mysql::MySqlPoolOptions::new().max_connections(2).connect(&db.url()).await?;

    let outcome = async {
        for r in 0..CLIENTS {
            let body = json!({"command_id": format!("create-{r}"), "room_id": format!("r{r}"), "owner_id": "o", "title": "t"});
            http.post(format!("{base}/v1/rooms")).json(&body).send().await?.error_for_status()?;
        }
        // Synchronous path: IM healthy.
        let sync_ids = joins(&http, &base, "s", sync_n).await?;
        // Worker path: every synchronous push fails, then IM is healthy again.
        im.inject(Fault::Http502, worker_n as u32);
        let worker_ids = joins(&http, &base, "w", worker_n).await?;
        let healthy_at = unix_ms();
        let deadline = Instant::now() + PUBLISH_TIMEOUT + POLL * 3 + Duration::from_secs(10);
        while count_worker(&seen, &worker_ids) < worker_ids.len() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::Ok((sync_ids, worker_ids, healthy_at))
    }
    .await;
    running.stop().await?;
    drop(im);
    let (sync_ids, worker_ids, healthy_at) = outcome?;
    let created = created_at(&pool).await?;
    pool.close().await;

    let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let (mut sync, mut worker, mut worker_claimable) =
        (Samples::default(), Samples::default(), Samples::default());
    let since = |from: i64, to: i64| Duration::from_millis((to - from).max(0) as u64);
    for id in &sync_ids {
        if let (Some((PublishPath::Sync, at)), Some(c)) = (seen.get(id), created.get(id)) {
            sync.push(since(*c, *at));
        }
    }
    for id in &worker_ids {
        if let (Some((PublishPath::Worker, at)), Some(c)) = (seen.get(id), created.get(id)) {
            worker.push(since(*c, *at));
            let claimable = (*c + PUBLISH_TIMEOUT.as_millis() as i64).max(healthy_at);
            worker_claimable.push(since(claimable, *at));
        }
    }
    let worker_target = POLL + Duration::from_millis(300);
    Ok(vec![
        Line::new(
            "B4 sync commit → IM p99",
            format!("{} (p50 {})", ms(sync.pct(99.0)), ms(sync.pct(50.0))),
            format!("{}/{} delivered sync; IM {} ms", sync.len(), sync_ids.len(), IM_LATENCY.as_millis()),
            String::new(),
            "≤ 150 ms",
            sync.len() == sync_ids.len() && sync.pct(99.0) <= Duration::from_millis(150),
        ),
        Line::new(
            "B4 worker claimable → IM p99",
            format!("{} (p50 {})", ms(worker_claimable.pct(99.0)), ms(worker_claimable.pct(50.0))),
            format!("{}/{} by the worker; poll {} ms", worker.len(), worker_ids.len(), POLL.as_millis()),
            String::new(),
            "≤ poll_interval + 300 ms",
            worker.len() > 0 && worker_claimable.pct(99.0) <= worker_target,
        ),
        Line::info(
            "B4 worker commit → IM p99",
            format!("{} (p50 {})", ms(worker.pct(99.0)), ms(worker.pct(50.0))),
            format!("includes publish_timeout {} ms grace", PUBLISH_TIMEOUT.as_millis()),
        ),
    ])
}

/// `n` joins of new users spread over the rooms by `CLIENTS` concurrent clients; the ids of
/// their events.
async fn joins(http: &reqwest::Client, base: &str, tag: &str, n: usize) -> anyhow::Result<Vec<String>> {
    let per_client = n.div_ceil(CLIENTS);
    let results = join_all((0..CLIENTS).map(|c| async move {
        let mut ids = Vec::new();
        for k in 0..per_client {
            let body = json!({"command_id": format!("{tag}-{c}-{k}"), "user_id": format!("{tag}{c}u{k}")});
            let answer: serde_json::Value = http
                .post(format!("{base}/v1/rooms/r{c}/join"))
                .json(&body)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            if let Some(id) = answer["events"][0]["event_id"].as_str() {
                ids.push(id.to_owned());
            }
        }
        anyhow::Ok(ids)
    }))
    .await;
    let mut ids = Vec::new();
    for r in results {
        ids.extend(r?);
    }
    Ok(ids)
}

fn count_worker(seen: &Acceptances, ids: &[String]) -> usize {
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    ids.iter().filter(|id| matches!(seen.get(*id), Some((PublishPath::Worker, _)))).count()
}

async fn created_at(pool: &MySqlPool) -> anyhow::Result<HashMap<String, i64>> {
    let rows = sqlx::query("SELECT event_id, created_at_ms FROM room_outbox").fetch_all(pool).await?;
    let mut out = HashMap::new();
    for row in rows {
        out.insert(row.try_get::<String, _>(0)?, row.try_get::<i64, _>(1)?);
    }
    Ok(out)
}
