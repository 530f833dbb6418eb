//! Part (b) of B4: sync publishes fail, the worker delivers; claimable → IM with no backlog,
//! and the rows nobody released.

use super::*;

/// Part (b): sync publishes fail, the worker delivers; claimable → IM with no backlog.
pub(super) async fn hand_off(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    let pool = repo.pool().clone();
    // First claimable moment of each row: when the releasing UPDATE ran (its `updated_at_ms`;
    // it sets `lock_until_ms` to 0 so the row sorts first, which is not a time).
    pool.execute(
        "CREATE TABLE bench_claimable (event_id VARCHAR(64) NOT NULL PRIMARY KEY, at_ms BIGINT NOT NULL)",
    )
    .await?;
    pool.execute(
        "CREATE TRIGGER bench_claimable_at AFTER UPDATE ON room_outbox FOR EACH ROW \
         IF NEW.status = 'pending' AND OLD.status = 'pending' AND NEW.lock_until_ms < OLD.lock_until_ms THEN \
         INSERT IGNORE INTO bench_claimable (event_id, at_ms) VALUES (NEW.event_id, NEW.updated_at_ms); \
         END IF",
    )
    .await?;

    let service = Service::start(args, db, Some("down")).await?;
    let (publish_timeout, poll) = (service.publish_timeout, service.poll_interval);
    let outcome = async {
        service.create_rooms("down").await?;
        let sent =
            service.live_load("down", args.live_rate, args.handoff_events as f64 / args.live_rate).await?;
        let orphans = orphans(&pool, args, publish_timeout).await?;
        service.settle(&sent).await;
        service.settle(&orphans).await;
        anyhow::Ok((sent, orphans))
    }
    .await;
    let (stats, seen) = service.stop().await?;
    let (sent, orphans) = outcome?;
    let created = created_at(&pool, "down%").await?;
    let orphans_created = created_at(&pool, "orphan%").await?;
    let released: HashMap<String, i64> = sqlx::query("SELECT event_id, at_ms FROM bench_claimable")
        .fetch_all(&pool)
        .await?
        .into_iter()
        .map(|row| Ok((row.try_get::<String, _>(0)?, row.try_get::<i64, _>(1)?)))
        .collect::<Result<_, sqlx::Error>>()?;
    repo.close().await;

    let since = |from: i64, to: i64| Duration::from_millis((to - from).max(0) as u64);
    let guard = publish_timeout.as_millis() as i64;
    let (mut claimable, mut commit, mut handoff) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut by_guard = 0;
    for s in &sent {
        let (Some((PublishPath::Worker, at)), Some(c)) = (seen.get(&s.event_id), created.get(&s.event_id))
        else {
            continue;
        };
        let from = match released.get(&s.event_id) {
            Some(r) => *r,
            None => {
                by_guard += 1;
                c + guard
            }
        };
        claimable.push(since(from, *at));
        commit.push(since(*c, *at));
        handoff.push(since(*c, from));
    }
    let answered_sync = sent.iter().filter(|s| s.delivered_sync).count();
    // Rows nobody released: claimable exactly when their guard ends (same NOW(3) as created).
    let mut by_guard_only = Samples::default();
    for o in &orphans {
        if let (Some((_, at)), Some(c)) = (seen.get(&o.event_id), orphans_created.get(&o.event_id)) {
            by_guard_only.push(since(c + guard, *at));
        }
    }
    Ok(vec![
        Line::new(
            "B4 worker claimable → IM p99, no backlog",
            format!("{} (p50 {})", ms(claimable.pct(99.0)), ms(claimable.pct(50.0))),
            format!(
                "{}/{} by the worker ({by_guard} claimable by the guard, {answered_sync} sync); {:.0}/s, sync publishes failing",
                claimable.len(),
                sent.len(),
                args.live_rate
            ),
            String::new(),
            "≤ 300 ms",
            claimable.len() == sent.len() && claimable.pct(99.0) <= Duration::from_millis(300),
        ),
        Line::info(
            "B4 worker commit → claimable / → IM p99",
            format!("{} / {}", ms(handoff.pct(99.0)), ms(commit.pct(99.0))),
            format!(
                "p50 {} / {}; guard {} ms; IM refusals {}",
                ms(handoff.pct(50.0)),
                ms(commit.pct(50.0)),
                guard,
                stats.dropped + stats.rate_limited
            ),
        ),
        Line::new(
            "B4 worker guard end → IM p99, no backlog",
            format!("{} (p50 {})", ms(by_guard_only.pct(99.0)), ms(by_guard_only.pct(50.0))),
            format!(
                "{}/{} rows nobody released (committed by a process that died); poll {} ms",
                by_guard_only.len(),
                orphans.len(),
                poll.as_millis()
            ),
            String::new(),
            "≤ 300 ms",
            by_guard_only.len() == orphans.len() && by_guard_only.pct(99.0) <= Duration::from_millis(300),
        ),
    ])
}

/// Rows as a process that died right after its commit leaves them: inserted straight into the
/// outbox (no command, no synchronous publish, nobody releases them), claimable only when
/// their young-pending guard (`publish_timeout`) ends; [`ORPHANS`] of them at `live_rate`
/// per second into 8 rooms of their own.
async fn orphans(pool: &MySqlPool, args: &Args, guard: Duration) -> anyhow::Result<Vec<Sent>> {
    let n = args.handoff_events.min(ORPHANS);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / args.live_rate));
    let mut sent = Vec::with_capacity(n);
    for k in 0..n {
        tick.tick().await;
        let row = crate::backlog::row(&format!("orphan-{k}"), &format!("orphan{}", k % LIVE_ROOMS))?;
        crate::backlog::insert(pool, std::slice::from_ref(&row), guard.as_millis() as i64).await?;
        sent.push(Sent { event_id: row.0, delivered_sync: false });
    }
    Ok(sent)
}

/// `created_at_ms` of the outbox rows of rooms matching `rooms` (a LIKE pattern).
pub(super) async fn created_at(pool: &MySqlPool, rooms: &str) -> anyhow::Result<HashMap<String, i64>> {
    let rows = sqlx::query("SELECT event_id, created_at_ms FROM room_outbox WHERE room_id LIKE ?")
        .bind(rooms)
        .fetch_all(pool)
        .await?;
    let mut out = HashMap::new();
    for row in rows {
        out.insert(row.try_get::<String, _>(0)?, row.try_get::<i64, _>(1)?);
    }
    Ok(out)
}
