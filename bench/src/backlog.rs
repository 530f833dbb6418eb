//! A worker backlog written straight into the database (B2, B4): `rows` pending
//! RoomUserJoined rows with valid envelopes, spread round robin over `rooms` rooms, claimable
//! at once (`lock_until_ms` one second in the past, MariaDB's clock), in multi-row INSERTs.

use room_service::domain::{CommandContext, CommandId, Event, EventEnvelope, EventType, RoomId};
use serde_json::json;
use sqlx::mysql::MySqlPool;
use sqlx::{MySql, QueryBuilder};

/// Rows per INSERT while loading.
const CHUNK: usize = 1000;

/// The room of backlog row `n` of `rooms`: `b0`, `b1`, ... (no live room is named like this).
pub fn room(n: usize, rooms: usize) -> String {
    format!("b{}", n % rooms.max(1))
}

/// [`load`], timed on stderr under the benchmark's `tag`.
pub async fn load_timed(pool: &MySqlPool, rows: usize, rooms: usize, tag: &str) -> anyhow::Result<()> {
    let loading = std::time::Instant::now();
    load(pool, rows, rooms).await?;
    eprintln!("  {tag}: {rows} backlog rows loaded in {:.1}s", loading.elapsed().as_secs_f64());
    Ok(())
}

/// Bulk-inserts `rows` claimable pending rows over `rooms` rooms; row `n` goes to
/// [`room`]`(n, rooms)`, so every run of `rooms` consecutive ids touches each room once.
pub async fn load(pool: &MySqlPool, rows: usize, rooms: usize) -> anyhow::Result<()> {
    for start in (0..rows).step_by(CHUNK) {
        let batch = (start..(start + CHUNK).min(rows))
            .map(|n| row(&format!("cmd-{n}"), &room(n, rooms)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        insert(pool, &batch, -1000).await?;
    }
    Ok(())
}

/// A RoomUserJoined outbox row for `room`: (event id, room id, envelope JSON).
pub fn row(command_id: &str, room: &str) -> anyhow::Result<(String, String, String)> {
    let ctx = CommandContext {
        room_id: RoomId::parse(room)?,
        command_id: CommandId::parse(command_id)?,
        request_id: uuid::Uuid::now_v7().to_string(),
        now_ms: crate::support::unix_ms(),
        max_admins: room_service::domain::DEFAULT_MAX_ADMINS,
        seat_request_ttl_ms: room_service::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
        idle_close_after_ms: None,
    };
    let event = Event {
        event_type: EventType::RoomUserJoined,
        payload: json!({"user_id": format!("u-{command_id}"), "joined_at_ms": ctx.now_ms, "member_count": 1}),
    };
    let id = uuid::Uuid::now_v7().to_string();
    let envelope = EventEnvelope::new(event, &ctx, 2, id.clone());
    Ok((id, room.to_owned(), serde_json::to_string(&envelope)?))
}

/// Inserts `rows` pending, claimable `lock_offset_ms` after MariaDB's now (negative: already
/// claimable), `created_at_ms` = now, in one statement.
pub async fn insert(
    pool: &MySqlPool,
    rows: &[(String, String, String)],
    lock_offset_ms: i64,
) -> anyhow::Result<()> {
    const NOW: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
    let mut insert = QueryBuilder::<MySql>::new(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, \
         lock_until_ms, created_at_ms, updated_at_ms) ",
    );
    insert.push_values(rows, |mut row, (id, room, envelope)| {
        row.push_bind(id)
            .push_bind(room)
            .push("'RoomUserJoined'")
            .push_bind(envelope)
            .push("'pending'")
            .push("0")
            .push(format!("{NOW} + {lock_offset_ms}"))
            .push(NOW)
            .push(NOW);
    });
    insert.build().execute(pool).await?;
    Ok(())
}
