//! Big rooms written straight into the database (B6, B7): filling a room of 100,000 members
//! through HTTP one join at a time would take minutes, so its rows are bulk-inserted before the
//! service first loads it. A filled room looks exactly as if it had been created and joined
//! through the service: the small snapshot row (`RoomSnapshot` JSON with `member_count` set)
//! and one `room_member` row per member. The service then loads it like any other room, and
//! [`check_loaded`] proves over HTTP that it holds every member.

use room_service::domain::{LiveFigures, RoomId, RoomSnapshot, RoomStatus, Seat, SeatMode, UserId};
use sqlx::mysql::MySqlPool;
use sqlx::{MySql, QueryBuilder};

/// Owner of every filled room (not a member).
pub const OWNER: &str = "owner";

/// Member rows per INSERT statement (3 placeholders each, far below MariaDB's 65,535).
const CHUNK: usize = 5_000;

/// The user id of a filled room's `i`-th member; ids sort in fill order.
pub fn member(i: usize) -> String {
    format!("m{i:07}")
}

/// Creates `room_id` with `members` members (`member(0)`, `member(1)`, ...): its snapshot row as
/// CreateRoom leaves it (version 1, heat 0) but counting the members, then the member rows in
/// multi-row INSERTs of [`CHUNK`]. Run it before the service first loads the room.
pub async fn room(pool: &MySqlPool, room_id: &str, members: usize) -> anyhow::Result<()> {
    room_with_seats(pool, room_id, members, 0).await
}

/// [`room`] with `seats` free mic seats (free mode).
pub async fn room_with_seats(
    pool: &MySqlPool,
    room_id: &str,
    members: usize,
    seats: u32,
) -> anyhow::Result<()> {
    let now_ms = crate::support::unix_ms();
    let snapshot = RoomSnapshot {
        room_id: RoomId::parse(room_id)?,
        owner_id: UserId::parse(OWNER)?,
        title: "Friday night".into(),
        status: RoomStatus::Open,
        version: 1,
        heat: 0,
        member_count: members as u64,
        gift_rank: Vec::new(),
        admins: Vec::new(),
        muted_all: false,
        announcement: String::new(),
        cover_url: String::new(),
        attributes: Default::default(),
        // As if created and last written now (idle close counts from `last_command_ms`).
        figures: LiveFigures {
            created_at_ms: now_ms,
            peak_members: members as u64,
            gifts: 0,
            last_command_ms: now_ms,
        },
        seat_mode: SeatMode::Free,
        seats: (0..seats).map(|index| Seat { index, user_id: None, locked: false, muted: false }).collect(),
    };
    sqlx::query(
        "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) \
         VALUES (?, 1, 'open', ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))",
    )
    .bind(room_id)
    .bind(serde_json::to_string(&snapshot)?)
    .execute(pool)
    .await?;
    let joined_at_ms = now_ms;
    for start in (0..members).step_by(CHUNK) {
        let mut insert =
            QueryBuilder::<MySql>::new("INSERT INTO room_member (room_id, user_id, joined_at_ms) ");
        insert.push_values(start..(start + CHUNK).min(members), |mut row, i| {
            row.push_bind(room_id).push_bind(member(i)).push_bind(joined_at_ms);
        });
        insert.build().execute(pool).await?;
    }
    Ok(())
}

/// Loads `room_id` into the service at `base` (`GET /v1/rooms/{id}`) and checks that it holds
/// `members` members; returns how long the load took.
pub async fn check_loaded(
    http: &reqwest::Client,
    base: &str,
    room_id: &str,
    members: usize,
) -> anyhow::Result<std::time::Duration> {
    let started = std::time::Instant::now();
    let room: serde_json::Value =
        http.get(format!("{base}/v1/rooms/{room_id}")).send().await?.error_for_status()?.json().await?;
    let took = started.elapsed();
    let count = room["member_count"].as_u64();
    anyhow::ensure!(
        count == Some(members as u64),
        "room {room_id} loaded with member_count {count:?}, expected {members}"
    );
    Ok(took)
}
