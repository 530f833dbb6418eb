//! Operator tooling: the `room-service outbox ...` commands run as a real process against a
//! SQLite file and a MariaDB database (`cli`), and the retention purge driven directly, as a
//! task and from the app (`retention`). Rows are seeded with literal SQL so every status and
//! age is exactly what the test names.

mod api;
mod cli;
mod retention;
mod tool;

use crate::support::TestDb;

/// One hour, in ms.
pub const HOUR_MS: i64 = 3_600_000;
/// One day, in ms.
pub const DAY_MS: i64 = 24 * HOUR_MS;

/// A row to seed: `status`, `retry_count`, and how long ago (ms) it was created/delivered.
#[derive(Debug, Clone, Copy)]
pub struct Seed<'a> {
    pub event_id: &'a str,
    pub status: &'a str,
    pub retry_count: i32,
    pub age_ms: i64,
}

impl<'a> Seed<'a> {
    pub fn new(event_id: &'a str, status: &'a str, age_ms: i64) -> Self {
        Seed { event_id, status, retry_count: 0, age_ms }
    }

    pub fn retries(self, retry_count: i32) -> Self {
        Seed { retry_count, ..self }
    }
}

/// Inserts the rows as the service would have left them in their status (database clock):
/// retryable rows not claimable for an hour, delivering rows leased for an hour by `w-other`,
/// delivered rows with `delivered_at_ms` = now − age. Returns their ids, in order.
pub async fn seed(db: &TestDb, rows: &[Seed<'_>]) -> Vec<i64> {
    let now = db.now_ms().await;
    let mut ids = Vec::new();
    for s in rows {
        let at = now - s.age_ms;
        let (error, worker, lock, delivered) = match s.status {
            "pending" => ("NULL".into(), "NULL".into(), at.to_string(), "NULL".into()),
            "retryable" => ("'IM said no'".into(), "NULL".into(), (now + HOUR_MS).to_string(), "NULL".into()),
            "delivering" => {
                ("NULL".into(), "'w-other'".to_owned(), (now + HOUR_MS).to_string(), "NULL".into())
            }
            "delivered" => ("NULL".into(), "NULL".into(), "NULL".into(), at.to_string()),
            "failed" => ("'parked'".to_owned(), "NULL".into(), "NULL".into(), "NULL".into()),
            other => panic!("unknown status {other}"),
        };
        db.execute(format!(
            "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, last_error, \
             worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms) VALUES ('{id}', 'r1', \
             'UserJoined', '{{\"event_id\":\"{id}\",\"n\":1}}', '{status}', {retries}, {error}, {worker}, {lock}, \
             {at}, {at}, {delivered})",
            id = s.event_id,
            status = s.status,
            retries = s.retry_count,
        ))
        .await;
        let id = db.scalar(format!("SELECT id FROM room_outbox WHERE event_id = '{}'", s.event_id)).await;
        ids.push(id.expect("seeded id"));
    }
    ids
}

/// `(event_id, status)` of every row, by id.
pub async fn statuses(db: &TestDb) -> Vec<(String, String)> {
    db.outbox().await.into_iter().map(|r| (r.event_id, r.status)).collect()
}

/// The event ids of every row, by id.
pub async fn event_ids(db: &TestDb) -> Vec<String> {
    db.outbox().await.into_iter().map(|r| r.event_id).collect()
}
