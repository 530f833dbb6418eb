//! B1's baseline: the service's transaction for one command committed alone, statement for
//! statement, as a raw sqlx loop over transactions precomputed with the pure domain (so the loop
//! does no domain work). What `store::command::commit::commit_room` writes for a batch of one:
//!
//! 1. the small snapshot (`RoomSnapshot` JSON), INSERTed for a new room or UPDATEd fenced on the
//!    version the command was decided on;
//! 2. the row the command changed (`applied.changes`): a join upserts its `room_member` row, a
//!    gift upserts the sender's `room_gift_total` row (a create writes neither);
//! 3. the command log row;
//! 4. the outbox rows, in one multi-row INSERT.
//!
//! The service may put several queued commands of a room into one transaction (group commit);
//! B1's clients each send to their own rooms one command at a time, so it commits them alone
//! too and the two sides write the same rows.

use std::collections::HashMap;
use std::time::Instant;

use futures::future::join_all;
use room_service::domain::{
    self, Change, Command, CommandContext, CommandId, EventEnvelope, RoomId, RoomState,
};
use serde_json::json;
use sqlx::mysql::MySqlPool;
use sqlx::{MySql, QueryBuilder};

use crate::command::Run;
use crate::support::{CpuTimes, Samples, unix_ms};

/// One command as the service would commit it.
pub(crate) struct Tx {
    command_id: String,
    room_id: String,
    command_type: &'static str,
    version: i64,
    expected: i64,
    state: String,
    outcome: String,
    outbox: Vec<(String, &'static str, String)>,
    /// `(user_id, joined_at_ms)` of a join.
    member: Option<(String, i64)>,
    /// `(user_id, total_value, first_version)` of a gift's sender.
    gift_total: Option<(String, i64, i64)>,
}

/// Applies a client's commands with the pure domain, as the service would, into transactions.
pub(crate) fn precompute(
    client: usize,
    commands: &[(String, Command)],
    states: &mut HashMap<String, RoomState>,
) -> Vec<Tx> {
    let mut out = Vec::new();
    for (n, (room, command)) in commands.iter().enumerate() {
        let command_id = format!("raw-{client}-{n}-{}", states.len());
        let ctx = CommandContext {
            room_id: RoomId::parse(room.as_str()).unwrap_or_else(|_| unreachable!()),
            command_id: CommandId::parse(command_id.as_str()).unwrap_or_else(|_| unreachable!()),
            request_id: uuid::Uuid::new_v4().to_string(),
            now_ms: unix_ms(),
            max_admins: room_service::domain::DEFAULT_MAX_ADMINS,
            seat_request_ttl_ms: room_service::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
            idle_close_after_ms: None,
        };
        let Ok(applied) = domain::apply(states.get(room), command, &ctx) else { continue };
        let expected = states.get(room).map_or(0, |s| s.version) as i64;
        let version = applied.state.version as i64;
        let outbox: Vec<(String, &'static str, String)> = applied
            .events
            .iter()
            .map(|e| {
                let envelope =
                    EventEnvelope::new(e.clone(), &ctx, version as u64, uuid::Uuid::now_v7().to_string());
                let json = envelope.to_json();
                (envelope.event_id, envelope.event_type.as_str(), json)
            })
            .collect();
        let (mut member, mut gift_total) = (None, None);
        for change in &applied.changes {
            match change {
                Change::MemberJoined { user_id, joined_at_ms } => {
                    member = Some((user_id.to_string(), *joined_at_ms));
                }
                Change::SenderTotal { user_id, total } => {
                    let value = i64::try_from(total.total_value).unwrap_or(i64::MAX);
                    gift_total = Some((user_id.to_string(), value, total.first_version as i64));
                }
                // B1 sends neither leaves, closes nor moderation commands.
                _ => {}
            }
        }
        let events: Vec<_> =
            outbox.iter().map(|(id, t, _)| json!({"event_id": id, "event_type": t})).collect();
        out.push(Tx {
            command_id,
            room_id: room.clone(),
            command_type: command.name(),
            version,
            expected,
            state: applied.state.snapshot_json(),
            outcome: json!({"applied": true, "room_version": version, "events": events}).to_string(),
            outbox,
            member,
            gift_total,
        });
        states.insert(room.clone(), applied.state);
    }
    out
}

/// The service's `commit_room` for one command, statement for statement, as raw sqlx.
async fn raw_commit(pool: &MySqlPool, tx: &Tx) -> anyhow::Result<()> {
    const NOW: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
    let mut t = pool.begin().await?;
    let written = if tx.expected == 0 {
        sqlx::query("INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES (?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))")
            .bind(&tx.room_id).bind(tx.version).bind("open").bind(&tx.state).execute(&mut *t).await?
    } else {
        sqlx::query("UPDATE room_snapshot SET version = ?, status = ?, state = ?, updated_at_ms = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) WHERE room_id = ? AND version = ?")
            .bind(tx.version).bind("open").bind(&tx.state).bind(&tx.room_id).bind(tx.expected).execute(&mut *t).await?
    };
    anyhow::ensure!(written.rows_affected() == 1, "raw loop: version conflict on {}", tx.room_id);
    if let Some((user_id, joined_at_ms)) = &tx.member {
        sqlx::query("INSERT INTO room_member (room_id, user_id, joined_at_ms) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE joined_at_ms = VALUES(joined_at_ms)")
            .bind(&tx.room_id).bind(user_id).bind(joined_at_ms).execute(&mut *t).await?;
    }
    if let Some((user_id, total_value, first_version)) = &tx.gift_total {
        sqlx::query("INSERT INTO room_gift_total (room_id, user_id, total_value, first_version) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE total_value = VALUES(total_value), first_version = VALUES(first_version)")
            .bind(&tx.room_id).bind(user_id).bind(total_value).bind(first_version).execute(&mut *t).await?;
    }
    sqlx::query("INSERT INTO room_command_log (command_id, room_id, command_type, fingerprint, request_id, applied, room_version, outcome, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))")
        .bind(&tx.command_id).bind(&tx.room_id).bind(tx.command_type).bind("f".repeat(64))
        .bind("00000000-0000-4000-8000-000000000000").bind(1_i64).bind(tx.version).bind(&tx.outcome)
        .execute(&mut *t).await?;
    if !tx.outbox.is_empty() {
        let mut insert = QueryBuilder::<MySql>::new(
            "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, lock_until_ms, created_at_ms, updated_at_ms) ",
        );
        insert.push_values(&tx.outbox, |mut row, (id, event_type, envelope)| {
            row.push_bind(id)
                .push_bind(&tx.room_id)
                .push_bind(*event_type)
                .push_bind(envelope)
                .push("'pending'")
                .push("0")
                .push(format!("{NOW} + "))
                .push_bind_unseparated(3000_i64)
                .push(NOW)
                .push(NOW);
        });
        insert.build().execute(&mut *t).await?;
    }
    t.commit().await?;
    Ok(())
}

/// Raw: every client runs its precomputed transactions one after another.
pub(crate) async fn run_raw(pool: &MySqlPool, plans: Vec<(Vec<Tx>, Vec<Tx>)>) -> anyhow::Result<Run> {
    let plans: Vec<(Vec<Tx>, Vec<Tx>)> = plans;
    for (creates, _) in &plans {
        for tx in creates {
            raw_commit(pool, tx).await?;
        }
    }
    let (started, cpu) = (Instant::now(), CpuTimes::now());
    let results = join_all(plans.into_iter().map(|(_, timed)| async move {
        let mut samples = Samples::default();
        for tx in &timed {
            let t = Instant::now();
            raw_commit(pool, tx).await?;
            samples.push(t.elapsed());
        }
        anyhow::Ok(samples)
    }))
    .await;
    Run::collect(started, cpu, results)
}
