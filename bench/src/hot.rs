//! B7, hot rooms, part one: per-command latency and bytes written vs room size.
//!
//! Rooms of 10, 1,000, 10,000 and 100,000 members (`--hot-sizes`) are filled straight in SQL
//! (`fill`) before the service starts, so it loads each one from its rows like any room; a
//! `GET /v1/rooms/{id}` then checks `member_count`. Per room, one client sends `--hot-commands`
//! JoinRoom (new users), then as many SendGift (by existing members), one at a time over HTTP
//! (IM disabled: the log sink; outbox worker off), after a few untimed ones of each.
//!
//! Bytes written per command, two ways: the row sizes (byte lengths of the values the timed
//! commands wrote, read back: their command log and outbox rows, the snapshot row once per
//! command, their member or gift-total row; integers counted at their column width), and the
//! InnoDB redo written (`Innodb_os_log_written` delta ÷ commands, delivery marks included;
//! global, so anything else the shared MariaDB does meanwhile counts too).
//!
//! Part two (one hot room vs the same load spread) is `hot_load`; both run on one service.

use std::time::{Duration, Instant};

use room_service::app;
use room_service::room::RoomService;
use room_service::store::Repository;
use serde_json::json;
use sqlx::mysql::MySqlPool;

use crate::Args;
use crate::fill;
use crate::report::Line;
use crate::support::{self, BenchDb, Samples, ms};

/// Commands of each kind sent untimed before a timed series.
const WARM_UP: usize = 10;
/// Target: p50 in the largest room ≤ this × p50 in the smallest.
const P50_RATIO_TARGET: f64 = 1.5;
/// Target: bytes written per command.
const BYTES_TARGET: f64 = 2048.0;

/// The service under test, over HTTP.
pub(crate) struct Api {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
}

impl Api {
    async fn post(&self, path: String, body: serde_json::Value) -> anyhow::Result<()> {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "HTTP {status}: {}", response.text().await.unwrap_or_default());
        Ok(())
    }

    /// JoinRoom.
    pub(crate) async fn join(&self, room: &str, command_id: &str, user: &str) -> anyhow::Result<()> {
        self.post(format!("/v1/rooms/{room}/join"), json!({"command_id": command_id, "user_id": user})).await
    }

    /// SendGift of `count` × 100 to the owner.
    pub(crate) async fn gift(
        &self,
        room: &str,
        command_id: &str,
        sender: &str,
        count: usize,
    ) -> anyhow::Result<()> {
        let body = json!({"command_id": command_id, "sender_id": sender, "receiver_id": fill::OWNER,
                          "gift_id": "rocket", "count": count, "unit_value": 100});
        self.post(format!("/v1/rooms/{room}/gifts"), body).await
    }
}

/// The room of `members` members measured in part one.
fn size_room(members: usize) -> String {
    format!("size-{members}")
}

/// JoinRoom or SendGift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Join,
    Gift,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Join => "JoinRoom",
            Kind::Gift => "SendGift",
        }
    }
}

/// What one series of one kind measured.
struct Series {
    samples: Samples,
    /// Per command: command log, outbox, snapshot, member or gift-total row (bytes).
    rows: [f64; 4],
    /// Redo bytes per command.
    redo: f64,
}

/// Runs B7 (both parts) on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    let pool = repo.pool().clone();
    let filled = Instant::now();
    for &n in &args.hot_sizes {
        fill::room(&pool, &size_room(n), n).await?;
    }
    crate::hot_load::fill(&pool, args).await?;
    eprintln!("b7: rooms filled in {:.1}s", filled.elapsed().as_secs_f64());
    let settings = support::settings(&db.url(), None, &[("outbox_worker.enabled", "false")])?;
    let publisher = support::publisher(&settings, None)?;
    let running = app::start(settings, publisher).await?;
    let api = Api { http: reqwest::Client::new(), base: format!("http://{}", running.addr) };
    let measured = async {
        let mut lines = Vec::new();
        // p50 of each kind in the first (smallest) room: the baseline of the others.
        let mut smallest: Option<(usize, Duration, Duration)> = None;
        for &n in &args.hot_sizes {
            let join = series(&api, &running.rooms, &pool, n, Kind::Join, args.hot_commands).await?;
            let gift = series(&api, &running.rooms, &pool, n, Kind::Gift, args.hot_commands).await?;
            let (first, join_p50, gift_p50) =
                *smallest.get_or_insert((n, join.samples.pct(50.0), gift.samples.pct(50.0)));
            lines.extend(size_lines(n, (first, join_p50), Kind::Join, &join));
            lines.extend(size_lines(n, (first, gift_p50), Kind::Gift, &gift));
        }
        lines.extend(crate::hot_load::run(&api, &running.rooms, &pool, args).await?);
        anyhow::Ok(lines)
    }
    .await;
    running.stop().await?;
    repo.close().await;
    measured
}

/// Loads the room of `n` members, warms up, then times `count` commands of `kind` and reads
/// back what they wrote.
async fn series(
    api: &Api,
    rooms: &RoomService,
    pool: &MySqlPool,
    n: usize,
    kind: Kind,
    count: usize,
) -> anyhow::Result<Series> {
    let room = size_room(n);
    if kind == Kind::Join {
        fill::check_loaded(&api.http, &api.base, &room, n).await?;
    }
    let room = room.as_str();
    let send = |id: String, k: usize| async move {
        match kind {
            Kind::Join => api.join(room, &id, &format!("n{k:07}")).await,
            Kind::Gift => api.gift(room, &id, &fill::member(k % n), 1 + k % 5).await,
        }
    };
    for k in 0..WARM_UP {
        send(format!("warm-{room}-{kind:?}-{k}"), count + k).await?;
    }
    rooms.flush_delivery_marks().await;
    let (log_id, outbox_id) = max_ids(pool).await?;
    let redo_before = redo_written(pool).await?;
    let mut samples = Samples::default();
    for k in 0..count {
        let t = Instant::now();
        send(format!("{room}-{kind:?}-{k}"), k).await?;
        samples.push(t.elapsed());
    }
    rooms.flush_delivery_marks().await;
    let redo = (redo_written(pool).await? - redo_before) as f64 / count as f64;
    let rows = row_bytes(pool, room, kind, (log_id, outbox_id), count).await?;
    Ok(Series { samples, rows, redo })
}

/// The largest ids of the command log and the outbox so far.
async fn max_ids(pool: &MySqlPool) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM room_command_log), (SELECT COALESCE(MAX(id), 0) FROM room_outbox)",
    )
    .fetch_one(pool)
    .await?)
}

/// `Innodb_os_log_written` now (server-wide).
async fn redo_written(pool: &MySqlPool) -> anyhow::Result<i64> {
    let status = support::global_status(pool, &["Innodb_os_log_written"]).await?;
    status.get("Innodb_os_log_written").copied().ok_or_else(|| anyhow::anyhow!("no Innodb_os_log_written"))
}

/// Per command: bytes of the log and outbox rows written after `after` ids in `room`, of the
/// snapshot row, and of one member row (joins: the new users `n…`) or gift-total row (gifts).
async fn row_bytes(
    pool: &MySqlPool,
    room: &str,
    kind: Kind,
    after: (i64, i64),
    count: usize,
) -> anyhow::Result<[f64; 4]> {
    let sum = |sql: &'static str, id: Option<i64>| async move {
        let q = sqlx::query_as::<_, (i64, i64)>(sql).bind(room);
        let q = match id {
            Some(id) => q.bind(id),
            None => q,
        };
        anyhow::Ok(q.fetch_one(pool).await?)
    };
    let (logged, log) = sum(
        "SELECT COUNT(*), CAST(COALESCE(SUM(LENGTH(command_id) + LENGTH(room_id) + LENGTH(command_type) \
         + LENGTH(fingerprint) + LENGTH(request_id) + 1 + 8 + LENGTH(outcome) + 8), 0) AS SIGNED) \
         FROM room_command_log WHERE room_id = ? AND id > ?",
        Some(after.0),
    )
    .await?;
    anyhow::ensure!(logged == count as i64, "{logged} of {count} timed commands logged in {room}");
    let (_, outbox) = sum(
        "SELECT COUNT(*), CAST(COALESCE(SUM(LENGTH(event_id) + LENGTH(room_id) + LENGTH(event_type) \
         + LENGTH(envelope) + LENGTH('pending') + 4 + 8 + 8 + 8), 0) AS SIGNED) \
         FROM room_outbox WHERE room_id = ? AND id > ?",
        Some(after.1),
    )
    .await?;
    let (_, snapshot) = sum(
        "SELECT 1, CAST(LENGTH(room_id) + 8 + LENGTH(status) + LENGTH(state) + 8 AS SIGNED) \
         FROM room_snapshot WHERE room_id = ?",
        None,
    )
    .await?;
    let (rows, row) = match kind {
        Kind::Join => {
            sum(
                "SELECT COUNT(*), CAST(COALESCE(SUM(LENGTH(room_id) + LENGTH(user_id) + 8), 0) AS SIGNED) \
                 FROM room_member WHERE room_id = ? AND user_id LIKE 'n%'",
                None,
            )
            .await?
        }
        Kind::Gift => sum(
            "SELECT COUNT(*), CAST(COALESCE(SUM(LENGTH(room_id) + LENGTH(user_id) + 8 + 8), 0) AS SIGNED) \
                 FROM room_gift_total WHERE room_id = ?",
            None,
        )
        .await?,
    };
    let per = |bytes: i64| bytes as f64 / count as f64;
    Ok([per(log), per(outbox), snapshot as f64, row as f64 / rows.max(1) as f64])
}

/// The lines of one kind at one size: p50 (p99) against `smallest` (its size and p50), row
/// bytes, redo bytes.
fn size_lines(n: usize, smallest: (usize, Duration), kind: Kind, s: &Series) -> Vec<Line> {
    let ((smallest_n, base), p50) = (smallest, s.samples.pct(50.0));
    let ratio = p50.as_secs_f64() / base.as_secs_f64().max(1e-9);
    let [log, outbox, snapshot, row] = s.rows;
    let rows = log + outbox + snapshot + row;
    let what = kind.name();
    let row_name = if kind == Kind::Join { "member" } else { "gift total" };
    vec![
        Line::new(
            &format!("B7 {what} p50 at {n} members"),
            format!("{} (p99 {})", ms(p50), ms(s.samples.pct(99.0))),
            format!("{} at {smallest_n}", ms(base)),
            format!("{ratio:.2}"),
            "p50 ≤ 1.5× smallest room",
            ratio <= P50_RATIO_TARGET,
        ),
        Line::new(
            &format!("B7 {what} row bytes/command at {n}"),
            format!("{rows:.0} B"),
            format!("log {log:.0} + outbox {outbox:.0} + snapshot {snapshot:.0} + {row_name} {row:.0}"),
            String::new(),
            "≤ 2 KB",
            rows <= BYTES_TARGET,
        ),
        Line::new(
            &format!("B7 {what} redo bytes/command at {n}"),
            format!("{:.0} B", s.redo),
            format!("Innodb_os_log_written Δ ÷ {}", s.samples.len()),
            String::new(),
            "≤ 2 KB",
            s.redo <= BYTES_TARGET,
        ),
    ]
}
