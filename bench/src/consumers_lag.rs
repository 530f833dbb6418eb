//! B9 part 2: the consumers' lag under B1's command load (B1's plans, clients and fake IM at
//! 0 ms with the rate limiter not binding). The load runs twice in the same database: with no
//! consumer, then — the tables emptied — with the webhook consumer (toward the local receiver,
//! as in part 1) and the audit consumer on. During the second run a sampler reads
//! `room_consumer_lag_seconds` and `room_consumer_position` from the admin `/metrics` every
//! 100 ms; after the load it goes on until both consumers are caught up (lag 0 and position =
//! the largest outbox id).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use room_service::app;
use room_service::consumer::ConsumerName;
use room_service::telemetry::names::{CONSUMER_LAG_SECONDS, CONSUMER_POSITION};
use sqlx::Executor;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use tokio_util::sync::CancellationToken;

use crate::Args;
use crate::command::{NOT_BINDING, POOL, Run, plan, run_service, truncate};
use crate::consumers_hook::{Receiver, webhook_overrides};
use crate::report::Line;
use crate::support::{self, BenchDb};

/// How often `/metrics` is read.
const EVERY: Duration = Duration::from_millis(100);
/// Longest wait for the consumers to catch up after the load.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(300);

/// One reading of both consumers' gauges: (lag s, position) by [`ConsumerName::ALL`] order.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    lag: [f64; 2],
    position: [i64; 2],
}

/// What a run with the consumers on measured besides the load.
struct Lag {
    max_lag: [f64; 2],
    catch_up: Duration,
    max_id: i64,
}

/// Runs part 2 and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let status = MySqlPoolOptions::new().max_connections(1).connect(&db.url()).await?;
    let off = one_run(args, db, &status, false).await;
    let on = if off.is_ok() {
        truncate(&status).await?;
        one_run(args, db, &status, true).await
    } else {
        Err(anyhow::anyhow!("not run: the run without consumers failed"))
    };
    status.close().await;
    let (off, _) = off?;
    let (on, lag) = on?;
    let lag = lag.ok_or_else(|| anyhow::anyhow!("no lag measured"))?;
    let rate = |r: &Run| r.n as f64 / r.elapsed.as_secs_f64();
    let secs = |s: f64| format!("{s:.2} s");
    Ok(vec![
        Line::ratio(
            "B9 B1 commands/s (consumers on ÷ off)",
            format!("{:.0}/s", rate(&on)),
            format!("{:.0}/s off ({} commands)", rate(&off), on.n),
            rate(&on) / rate(&off),
        ),
        Line::info(
            "B9 max lag under B1 load: webhook / audit",
            format!("{} / {}", secs(lag.max_lag[0]), secs(lag.max_lag[1])),
            format!("room_consumer_lag_seconds every {} ms", EVERY.as_millis()),
        ),
        Line::info(
            "B9 caught up after the load",
            format!("{} ms", lag.catch_up.as_millis()),
            format!("both at lag 0 and position {} (max outbox id)", lag.max_id),
        ),
    ])
}

/// One B1 load; with `consumers`, the lag figures too. Empties `room_event_consumer` and
/// `room_audit_log` afterwards (the B1 tables are emptied by the caller).
async fn one_run(
    args: &Args,
    db: &BenchDb,
    status: &MySqlPool,
    consumers: bool,
) -> anyhow::Result<(Run, Option<Lag>)> {
    let plans: Vec<_> = (0..args.clients).map(|c| plan(args, c)).collect();
    let im = support::fake_im(Duration::ZERO).await?;
    let receiver = Receiver::start().await?;
    let pool = POOL.to_string();
    let mut overrides: Vec<(String, String)> = vec![("database.max_connections".into(), pool)];
    overrides.extend(NOT_BINDING.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    if consumers {
        overrides.extend(webhook_overrides(&receiver.url()));
        overrides.push(("consumers.audit.enabled".into(), "true".into()));
    }
    let overrides: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let settings = support::settings(&db.url(), Some(&im), &overrides)?;
    let publisher = support::publisher(&settings, None)?;
    let running = app::start(settings, publisher).await?;
    let metrics_url = format!("http://{}/metrics", running.admin_addr);
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let stop = CancellationToken::new();
    let sampler = consumers.then(|| tokio::spawn(sample(metrics_url, samples.clone(), stop.clone())));
    let base = format!("http://{}", running.addr);
    let measured = run_service(&base, plans, args, status, None).await;
    let lag = match (&measured, consumers) {
        (Ok(_), true) => Some(caught_up(status, &samples).await),
        _ => None,
    };
    stop.cancel();
    if let Some(sampler) = sampler {
        let _ = sampler.await;
    }
    running.stop().await?;
    drop(im);
    for table in ["room_event_consumer", "room_audit_log"] {
        status.execute(sqlx::AssertSqlSafe(format!("TRUNCATE TABLE {table}"))).await?;
    }
    let (run, _) = measured?;
    Ok((run, lag.transpose()?))
}

/// Waits until the latest sample shows both consumers at lag 0 and at the largest outbox id;
/// the max lags are taken over every sample of the run.
async fn caught_up(status: &MySqlPool, samples: &Mutex<Vec<Sample>>) -> anyhow::Result<Lag> {
    let load_end = Instant::now();
    let max_id: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM room_outbox").fetch_one(status).await?;
    let done = |s: &Sample| s.at > load_end && s.lag == [0.0, 0.0] && s.position == [max_id, max_id];
    loop {
        let found = {
            let samples = samples.lock().unwrap_or_else(|e| e.into_inner());
            samples.iter().find(|s| done(s)).map(|s| s.at)
        };
        if let Some(at) = found {
            let samples = samples.lock().unwrap_or_else(|e| e.into_inner());
            let max = |i: usize| samples.iter().map(|s| s.lag[i]).fold(0.0, f64::max);
            return Ok(Lag { max_lag: [max(0), max(1)], catch_up: at - load_end, max_id });
        }
        if load_end.elapsed() >= CATCH_UP_LIMIT {
            let last = samples.lock().unwrap_or_else(|e| e.into_inner()).last().copied();
            anyhow::bail!(
                "consumers not caught up {CATCH_UP_LIMIT:?} after the load (max outbox id {max_id}, last sample {last:?})"
            );
        }
        tokio::time::sleep(EVERY / 2).await;
    }
}

/// Reads `/metrics` every [`EVERY`] until `stop`.
async fn sample(url: String, into: Arc<Mutex<Vec<Sample>>>, stop: CancellationToken) {
    let http = reqwest::Client::new();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while stop.run_until_cancelled(tick.tick()).await.is_some() {
        let text = match http.get(&url).send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(error) => {
                eprintln!("b9: reading {url}: {error}");
                continue;
            }
        };
        let at = Instant::now();
        let gauge = |name: &str, consumer: ConsumerName| -> Option<f64> {
            let label = format!("consumer=\"{}\"", consumer.as_str());
            text.lines()
                .find(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(&label))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
        };
        let [w, a] = ConsumerName::ALL;
        let (Some(lw), Some(la), Some(pw), Some(pa)) = (
            gauge(CONSUMER_LAG_SECONDS, w),
            gauge(CONSUMER_LAG_SECONDS, a),
            gauge(CONSUMER_POSITION, w),
            gauge(CONSUMER_POSITION, a),
        ) else {
            continue;
        };
        into.lock().unwrap_or_else(|e| e.into_inner()).push(Sample {
            at,
            lag: [lw, la],
            position: [pw as i64, pa as i64],
        });
    }
}
