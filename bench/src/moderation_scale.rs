//! B15, moderation, part two (SPEC §14.2 "Scale"): a room with 100,000 active bans answers a
//! command at the cost of a room with none.
//!
//! Two rooms of [`MEMBERS`] members are filled straight in SQL (`fill`) before the service
//! starts; one of them also gets `--moderation-bans` (100,000) `room_restriction` rows (kind
//! `ban`, until ten years from now, by the owner), so the service loads them like any bans.
//! The first command to each room (a JoinRoom) is timed alone: the room's load, its bans
//! included. Then, one at a time over HTTP and alternating between the two rooms (so a drift
//! of the shared machine falls on both alike), after a few untimed ones of each:
//! `--ban-commands` (300) JoinRoom of new users, as many MuteUser of new users by the owner,
//! and in the banned room as many joins of banned users, each refused (409 `banned`).
//! Target: p50 with the bans ≤ 1.5× p50 without, per kind.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sqlx::mysql::MySqlPool;
use sqlx::{MySql, QueryBuilder};

use crate::Args;
use crate::fill::{self, OWNER};
use crate::moderation::{Api, Kind, P50_RATIO_TARGET};
use crate::report::Line;
use crate::support::{Samples, ms, unix_ms};

/// Members of both rooms.
const MEMBERS: usize = 10;
/// Commands of each kind sent untimed to each room before the timed ones.
const WARM_UP: usize = 10;
/// Ban rows per INSERT statement (6 placeholders each, far below MariaDB's 65,535).
const CHUNK: usize = 5_000;
/// How long the filled bans last: ten years.
const BAN_MS: i64 = 10 * 365 * 24 * 3_600 * 1_000;
/// The room without bans (the baseline).
const NONE: &str = "bans-none";
/// The room with the bans.
const BANNED: &str = "bans-many";

/// The `i`-th banned user of the banned room.
fn banned(i: usize) -> String {
    format!("b{i:07}")
}

/// Creates both rooms, then `bans` active bans in [`BANNED`] in multi-row INSERTs of
/// [`CHUNK`]. Run it before the service starts.
pub async fn fill(pool: &MySqlPool, bans: usize) -> anyhow::Result<()> {
    fill::room(pool, NONE, MEMBERS).await?;
    fill::room(pool, BANNED, MEMBERS).await?;
    let until_ms = unix_ms() + BAN_MS;
    for start in (0..bans).step_by(CHUNK) {
        let mut insert = QueryBuilder::<MySql>::new(
            "INSERT INTO room_restriction (room_id, kind, user_id, until_ms, reason, by_actor) ",
        );
        insert.push_values(start..(start + CHUNK).min(bans), |mut row, i| {
            row.push_bind(BANNED).push_bind("ban").push_bind(banned(i)).push_bind(until_ms);
            row.push_bind("").push_bind(OWNER);
        });
        insert.build().execute(pool).await?;
    }
    Ok(())
}

/// Per room ([`NONE`], [`BANNED`]): what its commands took.
#[derive(Default)]
struct Room {
    first: Duration,
    joins: Samples,
    mutes: Samples,
}

/// Part two on the running service; its lines.
pub async fn run(api: &Api, args: &Args) -> anyhow::Result<Vec<Line>> {
    let mut rooms = [(NONE, Room::default()), (BANNED, Room::default())];
    for (room, figures) in &mut rooms {
        let t = Instant::now();
        api.ok(room, Kind::Join, "first", 0).await?;
        figures.first = t.elapsed();
        fill::check_loaded(&api.http, &api.base, room, MEMBERS + 1).await?;
        for k in 0..WARM_UP {
            api.ok(room, Kind::Join, &format!("wj{k}"), k).await?;
            api.ok(room, Kind::Mute, &format!("wu{k}"), k).await?;
        }
    }
    let count = args.ban_commands;
    for (kind, user) in [(Kind::Join, "nj"), (Kind::Mute, "nu")] {
        for k in 0..count {
            for (room, figures) in &mut rooms {
                let t = Instant::now();
                api.ok(room, kind, &format!("{user}{k}"), k).await?;
                let samples = if kind == Kind::Join { &mut figures.joins } else { &mut figures.mutes };
                samples.push(t.elapsed());
            }
        }
    }
    let refused = refused_joins(api, count, args.moderation_bans).await?;
    let [(_, none), (_, many)] = &rooms;
    Ok(scale_lines(args.moderation_bans, none, many, &refused))
}

/// `count` joins of banned users (spread over the bans), each refused 409 `banned`; their
/// latencies.
async fn refused_joins(api: &Api, count: usize, bans: usize) -> anyhow::Result<Samples> {
    let stride = (bans / count.max(1)).max(1);
    let mut samples = Samples::default();
    for k in 0..count {
        let user = banned(k * stride % bans.max(1));
        let t = Instant::now();
        let (status, body) = api.send(BANNED, Kind::Join, &user, k).await?;
        samples.push(t.elapsed());
        anyhow::ensure!(
            status == StatusCode::CONFLICT && body.contains("banned"),
            "b15: the banned {user} joined {BANNED}: HTTP {status}: {body}"
        );
    }
    Ok(samples)
}

/// p50 (p99) with the bans against without, per kind; the first command of each room; the
/// refused joins against the joins without bans.
fn scale_lines(bans: usize, none: &Room, many: &Room, refused: &Samples) -> Vec<Line> {
    let figures = |s: &Samples| format!("{} (p99 {})", ms(s.pct(50.0)), ms(s.pct(99.0)));
    let ratio = |a: &Samples, b: &Samples| a.pct(50.0).as_secs_f64() / b.pct(50.0).as_secs_f64().max(1e-9);
    let mut lines = Vec::new();
    for (what, with, without) in
        [("JoinRoom", &many.joins, &none.joins), ("MuteUser", &many.mutes, &none.mutes)]
    {
        let r = ratio(with, without);
        lines.push(Line::new(
            &format!("B15 {what} p50 with {bans} bans"),
            figures(with),
            format!("{} with none", figures(without)),
            format!("{r:.2}"),
            "p50 ≤ 1.5× no bans",
            r <= P50_RATIO_TARGET,
        ));
    }
    lines.push(Line::ratio(
        &format!("B15 first command (room load) with {bans} bans"),
        ms(many.first),
        format!("{} with none ({MEMBERS} members each)", ms(none.first)),
        many.first.as_secs_f64() / none.first.as_secs_f64().max(1e-9),
    ));
    let r = ratio(refused, &none.joins);
    lines.push(Line::new(
        &format!("B15 banned user's JoinRoom (409) p50 with {bans} bans"),
        figures(refused),
        format!("{} JoinRoom with none", ms(none.joins.pct(50.0))),
        format!("{r:.2}"),
        "p50 ≤ 1.5× a join with no bans",
        r <= P50_RATIO_TARGET,
    ));
    lines
}
