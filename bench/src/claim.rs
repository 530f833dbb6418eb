//! B3, claim scaling: p99 of `OutboxQueue::claim_outbox` (batch 100) with 10k, 1M and 10M
//! delivered rows in the table (capped by `--max-rows`), and what the claim's reads examine.
//!
//! The table holds 2 × batch claimable pending rows plus the delivered rows, loaded in bulk by
//! `INSERT ... SELECT` doubling (in chunks by primary key, so no statement is huge). Each
//! sample is one full claim (SELECT ... FOR UPDATE SKIP LOCKED + UPDATE + read back, one
//! transaction); between samples the claimed rows are put back to claimable (not timed). Rows
//! examined come from `ANALYZE FORMAT=JSON` of the claim's two reads — the room listing (one
//! loose index scan per undelivered status; the pending one here) and the room's rows from its
//! head — (`r_rows`: rows actually read) next to `EXPLAIN`'s estimate and its `Extra` (no
//! filesort wanted). The listing reads one index entry per room when MariaDB takes the loose
//! scan, else the listed rooms' pending entries (here the 200 claimable rows); the room read
//! reads one row more than the batch: at most 3 × batch + 1 in all, never a delivered row.

use std::time::{Duration, Instant};

use room_service::store::{Claim, MySqlRepository, OutboxQueue, Repository};
use serde_json::Value;
use sqlx::Row;

use crate::Args;
use crate::report::Line;
use crate::support::{BenchDb, Samples, ms};

const BATCH: usize = 100;

/// The claim's reads as the repository runs them (for EXPLAIN): the pending rooms after the
/// cursor with their oldest row, then the room's rows from that head (one more than the batch).
const CLAIM_READS: [&str; 2] = [
    "SELECT status, room_id, MIN(id) AS head FROM room_outbox FORCE INDEX (idx_room_outbox_status_room) \
     WHERE status = 'pending' COLLATE utf8mb4_bin AND room_id > '' COLLATE utf8mb4_bin \
     GROUP BY status, room_id ORDER BY status, room_id LIMIT 100",
    "SELECT id, lock_until_ms FROM room_outbox FORCE INDEX (idx_room_outbox_room) WHERE room_id = 'r1' \
     AND id >= 1 ORDER BY id LIMIT 101",
];

/// One size's figures.
struct Point {
    rows: u64,
    p50: Duration,
    p99: Duration,
    examined: i64,
    estimated: i64,
    extra: String,
}

/// Runs B3 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    let pool = repo.pool();
    // Claimable rows first, then one delivered seed row to double from.
    for n in 0..(2 * BATCH) {
        insert_one(&repo, &format!("p-{n}"), "pending").await?;
    }
    insert_one(&repo, "d-seed", "delivered").await?;
    let sizes: Vec<u64> =
        [10_000, 1_000_000, 10_000_000].into_iter().filter(|s| *s <= args.max_rows).collect();
    let sizes = if sizes.is_empty() { vec![args.max_rows] } else { sizes };
    let samples = if args.smoke { 20 } else { 300 };
    let mut points = Vec::new();
    for size in sizes {
        let t = Instant::now();
        grow(&repo, size).await?;
        eprintln!("  b3: {size} delivered rows loaded in {:.1}s", t.elapsed().as_secs_f64());
        sqlx::query("ANALYZE TABLE room_outbox").execute(pool).await?;
        let mut s = Samples::default();
        for i in 0..(samples + 10) {
            let claim = Claim::new(format!("bench-{i}"), BATCH, Duration::from_secs(60));
            let t = Instant::now();
            let claimed = repo.claim_outbox(&claim).await?.rows;
            let took = t.elapsed();
            anyhow::ensure!(claimed.len() == BATCH, "claimed {} rows, expected {BATCH}", claimed.len());
            if i >= 10 {
                s.push(took); // the first ten warm the cache
            }
            sqlx::query(
                "UPDATE room_outbox SET status = 'pending', worker_id = NULL, \
                 lock_until_ms = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - 1000 WHERE status = 'delivering'",
            )
            .execute(pool)
            .await?;
        }
        let (examined, estimated, extra) = explain(&repo).await?;
        points.push(Point { rows: size, p50: s.pct(50.0), p99: s.pct(99.0), examined, estimated, extra });
    }
    repo.close().await;

    let mut lines = Vec::new();
    let first_p99 = points.first().map(|p| p.p99).unwrap_or_default();
    for p in &points {
        let ratio = p.p99.as_secs_f64() / first_p99.as_secs_f64().max(1e-9);
        lines.push(Line::new(
            &format!("B3 claim p99 at {} delivered", human(p.rows)),
            format!("{} (p50 {})", ms(p.p99), ms(p.p50)),
            format!("{} at {}", ms(first_p99), human(points[0].rows)),
            format!("{ratio:.2}"),
            "≤ 1.5 (at 10M)",
            ratio <= 1.5,
        ));
        lines.push(Line::new(
            &format!("B3 rows examined at {}", human(p.rows)),
            format!("{} read (EXPLAIN est. {})", p.examined, p.estimated),
            format!("batch {BATCH}; {}", if p.extra.is_empty() { "-".into() } else { p.extra.clone() }),
            format!("{:.2}× batch", p.examined as f64 / BATCH as f64),
            "≤ 3× batch + 1 (no delivered row), no filesort",
            p.examined <= 3 * BATCH as i64 + 1 && !p.extra.contains("filesort"),
        ));
    }
    Ok(lines)
}

fn human(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

async fn insert_one(repo: &MySqlRepository, event_id: &str, status: &str) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, lock_until_ms, \
         created_at_ms, updated_at_ms, delivered_at_ms) VALUES (?, 'r1', 'RoomUserJoined', ?, ?, 0, \
         IF(? = 'pending', CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - 1000, NULL), \
         CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), \
         IF(? = 'delivered', CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), NULL))",
    )
    .bind(event_id)
    .bind(format!("{{\"event_id\":\"{event_id}\",\"filler\":\"{}\"}}", "x".repeat(300)))
    .bind(status)
    .bind(status)
    .bind(status)
    .execute(repo.pool())
    .await?;
    Ok(())
}

/// Copies delivered rows (new event ids) until there are `target` of them.
async fn grow(repo: &MySqlRepository, target: u64) -> anyhow::Result<()> {
    const CHUNK: i64 = 250_000;
    let mut count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM room_outbox WHERE status = 'delivered'")
        .fetch_one(repo.pool())
        .await?;
    while count < target as i64 {
        let take = (target as i64 - count).min(count).min(CHUNK);
        let inserted = sqlx::query(
            "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, lock_until_ms, \
             created_at_ms, updated_at_ms, delivered_at_ms) \
             SELECT CONCAT('d-', UUID()), room_id, event_type, envelope, 'delivered', 0, NULL, created_at_ms, \
             updated_at_ms, delivered_at_ms FROM room_outbox WHERE status = 'delivered' ORDER BY id DESC LIMIT ?",
        )
        .bind(take)
        .execute(repo.pool())
        .await?
        .rows_affected();
        anyhow::ensure!(inserted > 0, "bulk load inserted nothing");
        count += inserted as i64;
    }
    Ok(())
}

/// (rows read per ANALYZE, rows estimated per EXPLAIN, EXPLAIN's Extra) of the claim's reads,
/// summed over them.
async fn explain(repo: &MySqlRepository) -> anyhow::Result<(i64, i64, String)> {
    let pool = repo.pool();
    let (mut examined, mut estimated, mut extras) = (0, 0, Vec::new());
    for read in CLAIM_READS {
        let explain = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {read}"))).fetch_one(pool).await?;
        let rows: Option<i64> = explain
            .try_get::<Option<u64>, _>("rows")
            .ok()
            .flatten()
            .map(|v| v as i64)
            .or_else(|| explain.try_get::<Option<i64>, _>("rows").ok().flatten())
            .or_else(|| {
                explain.try_get::<Option<String>, _>("rows").ok().flatten().and_then(|s| s.parse().ok())
            });
        let extra: Option<String> = explain.try_get("Extra").ok().flatten();
        let analyze: String = sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE FORMAT=JSON {read}")))
            .fetch_one(pool)
            .await?
            .try_get(0)?;
        let json: Value = serde_json::from_str(&analyze)?;
        examined += find_number(&json, "r_rows").map_or(-1, |v| v.round() as i64);
        estimated += rows.unwrap_or(-1);
        extras.extend(extra.filter(|e| !e.is_empty()));
    }
    Ok((examined, estimated, extras.join(" / ")))
}

/// The first number named `key` anywhere in `v` (depth first).
fn find_number(v: &Value, key: &str) -> Option<f64> {
    match v {
        Value::Object(map) => map
            .get(key)
            .and_then(Value::as_f64)
            .or_else(|| map.values().find_map(|child| find_number(child, key))),
        Value::Array(items) => items.iter().find_map(|child| find_number(child, key)),
        _ => None,
    }
}
