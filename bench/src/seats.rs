//! B16, mic seats (SPEC §14.3): what a seat action costs beside a join, what 20 held seats cost
//! every gift of their room, and what a crowd racing for one seat costs.
//!
//! The real service as a black box (`room-service serve`, IM off, as B15), auth mode none, so a
//! member's seat action names it in `user_id`. Every room is written straight in SQL (`fill`)
//! with 20 free seats in free mode and `--seat-members` members before the service starts.
//!
//! - Part one: `--clients` (16) clients, one room each, send their next command as soon as the
//!   previous one answered; in two rounds, each client a burst of JoinRoom of new users (the
//!   baseline), then of take (the lowest free seat) and leave by one member after another.
//!   Target: a take's and a leave's p50 ≤ 1.5× the join's.
//! - Part two: gifts into rooms whose 20 seats are all held vs rooms without seats (every
//!   command rewrites the snapshot, which carries the seats), alternating rounds. Target: the
//!   seated rooms' gift p50 ≤ 1.5× the seatless rooms'.
//! - Part three: `--seat-racers` (50) members of one room take seat 0 at once, `--seat-races`
//!   (20) times (the winner leaves between races): exactly one applied each race, every other
//!   answer 409 `seat_occupied`; the answers' p50/p99 beside a lone take's.

use std::time::{Duration, Instant};

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::json;

use room_service::store::Repository;

use crate::Args;
use crate::fill::{self, member};
use crate::live::process;
use crate::report::Line;
use crate::support::{BenchDb, Samples, ms};

/// Seats of every room.
const SEATS: u32 = 20;
/// Rounds the timed commands are split into.
const ROUNDS: usize = 2;
/// Target: a seat action's (or a seated room's gift's) p50 ≤ this × the baseline's.
const P50_RATIO_TARGET: f64 = 1.5;
/// The room of part three.
const RACE_ROOM: &str = "seat-race";

/// What a timed command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Join,
    Take,
    Leave,
    Gift,
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    /// Sends `kind` by `user` into `room` under `command_id`; its status and body.
    async fn send(
        &self,
        room: &str,
        kind: Kind,
        user: &str,
        command_id: &str,
    ) -> anyhow::Result<(StatusCode, String)> {
        let (route, body) = match kind {
            Kind::Join => ("join", json!({"command_id": command_id, "user_id": user})),
            Kind::Take => ("seats/take", json!({"command_id": command_id, "user_id": user})),
            Kind::Leave => ("seats/leave", json!({"command_id": command_id, "user_id": user})),
            Kind::Gift => (
                "gifts",
                json!({"command_id": command_id, "sender_id": user, "receiver_id": fill::OWNER,
                       "gift_id": "rose", "count": 1, "unit_value": 1}),
            ),
        };
        let response =
            self.http.post(format!("{}/v1/rooms/{room}/{route}", self.base)).json(&body).send().await?;
        Ok((response.status(), response.text().await.unwrap_or_default()))
    }

    /// [`Api::send`], which must answer a 2xx.
    /// (A caller's command ids are its own across rooms: each is prefixed with its room.)
    async fn ok(&self, room: &str, kind: Kind, user: &str, command_id: &str) -> anyhow::Result<()> {
        let (status, body) = self.send(room, kind, user, &format!("{room}-{command_id}")).await?;
        anyhow::ensure!(status.is_success(), "{kind:?} by {user} in {room}: HTTP {status}: {body}");
        Ok(())
    }
}

fn seated_room(c: usize) -> String {
    format!("seat-{c}")
}

fn gift_room(c: usize, seats: bool) -> String {
    format!("seat-gift-{}-{c}", if seats { "held" } else { "none" })
}

/// Runs B16 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    let members = args.seat_members.max(SEATS as usize).max(args.seat_racers);
    for c in 0..args.clients {
        fill::room_with_seats(repo.pool(), &seated_room(c), members, SEATS).await?;
        fill::room_with_seats(repo.pool(), &gift_room(c, true), SEATS as usize, SEATS).await?;
        fill::room_with_seats(repo.pool(), &gift_room(c, false), SEATS as usize, 0).await?;
    }
    fill::room_with_seats(repo.pool(), RACE_ROOM, members, SEATS).await?;
    repo.close().await;
    let service = process::start_service(&db.url(), None, 1, &[]).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let api = Api { http, base: service.base.clone() };
    let measured = async {
        let mut lines = actions(&api, args, members).await?;
        lines.extend(gifts(&api, args).await?);
        lines.extend(race(&api, args).await?);
        anyhow::Ok(lines)
    }
    .await;
    service.proc.stop().await;
    measured
}

/// Part one: joins, takes and leaves, each client in its own room.
async fn actions(api: &Api, args: &Args, members: usize) -> anyhow::Result<Vec<Line>> {
    let per_round = args.seat_commands.div_ceil(args.clients * ROUNDS).max(1);
    let (mut joins, mut takes, mut leaves) = (Samples::default(), Samples::default(), Samples::default());
    let mut next_member = 0;
    for round in 0..ROUNDS {
        let join = |c: usize| async move {
            let (room, mut samples) = (seated_room(c), Samples::default());
            for k in 0..per_round {
                let user = format!("j{c}-{round}-{k}");
                let t = Instant::now();
                api.ok(&room, Kind::Join, &user, &format!("join-{user}")).await?;
                samples.push(t.elapsed());
            }
            anyhow::Ok(samples)
        };
        for samples in join_all((0..args.clients).map(join)).await {
            joins.extend(samples?);
        }
        let first = next_member;
        let seat = |c: usize| async move {
            let (room, mut taken, mut left) = (seated_room(c), Samples::default(), Samples::default());
            for k in 0..per_round {
                let user = member((first + k) % members);
                let id = format!("{round}-{k}");
                let t = Instant::now();
                api.ok(&room, Kind::Take, &user, &format!("take-{id}")).await?;
                taken.push(t.elapsed());
                let t = Instant::now();
                api.ok(&room, Kind::Leave, &user, &format!("leave-{id}")).await?;
                left.push(t.elapsed());
            }
            anyhow::Ok((taken, left))
        };
        for result in join_all((0..args.clients).map(seat)).await {
            let (taken, left) = result?;
            takes.extend(taken);
            leaves.extend(left);
        }
        next_member += per_round;
    }
    let join_p50 = joins.pct(50.0);
    let mut lines = vec![Line::info(
        "B16 JoinRoom (baseline): p50",
        format!("{} (p99 {})", ms(join_p50), ms(joins.pct(99.0))),
        format!("{} clients, one room each, {} joins", args.clients, joins.len()),
    )];
    for (what, samples) in [("take", &takes), ("leave", &leaves)] {
        lines.push(ratio_line(&format!("B16 seat {what} p50 ÷ JoinRoom p50"), samples, &joins, "JoinRoom's"));
    }
    Ok(lines)
}

/// Part two: gifts into rooms with their 20 seats held vs rooms without seats.
async fn gifts(api: &Api, args: &Args) -> anyhow::Result<Vec<Line>> {
    for c in 0..args.clients {
        for s in 0..SEATS as usize {
            api.ok(&gift_room(c, true), Kind::Take, &member(s), &format!("fill-{s}")).await?;
        }
        fill::check_loaded(&api.http, &api.base, &gift_room(c, false), SEATS as usize).await?;
    }
    let per_round = args.seat_commands.div_ceil(args.clients * ROUNDS).max(1);
    let (mut held, mut none) = (Samples::default(), Samples::default());
    for round in 0..ROUNDS {
        for seats in [false, true] {
            let client = |c: usize| async move {
                let (room, mut samples) = (gift_room(c, seats), Samples::default());
                for k in 0..per_round {
                    let t = Instant::now();
                    api.ok(&room, Kind::Gift, &member(k % SEATS as usize), &format!("g-{round}-{k}")).await?;
                    samples.push(t.elapsed());
                }
                anyhow::Ok(samples)
            };
            let into = if seats { &mut held } else { &mut none };
            for samples in join_all((0..args.clients).map(client)).await {
                into.extend(samples?);
            }
        }
    }
    Ok(vec![ratio_line("B16 gift p50, 20 seats held ÷ no seats", &held, &none, "a seatless room's")])
}

/// Part three: a crowd racing for seat 0.
async fn race(api: &Api, args: &Args) -> anyhow::Result<Vec<Line>> {
    let (mut answers, mut lone) = (Samples::default(), Samples::default());
    let (mut wrong, mut applied_total) = (0usize, 0usize);
    for r in 0..args.seat_races {
        // A lone take and leave of seat 0, as the baseline.
        let user = member(args.seat_racers);
        let t = Instant::now();
        api.ok(RACE_ROOM, Kind::Take, &user, &format!("lone-{r}")).await?;
        lone.push(t.elapsed());
        api.ok(RACE_ROOM, Kind::Leave, &user, &format!("lone-leave-{r}")).await?;
        let racer = |i: usize| async move {
            let user = member(i);
            let body = json!({"command_id": format!("race-{r}-{i}"), "user_id": user, "index": 0});
            let t = Instant::now();
            let response = api
                .http
                .post(format!("{}/v1/rooms/{RACE_ROOM}/seats/take", api.base))
                .json(&body)
                .send()
                .await?;
            let took = t.elapsed();
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            anyhow::Ok((user, status, text, took))
        };
        let mut winner = None;
        for result in join_all((0..args.seat_racers).map(racer)).await {
            let (user, status, text, took) = result?;
            answers.push(took);
            match status {
                StatusCode::OK => {
                    applied_total += 1;
                    winner = Some(user);
                }
                StatusCode::CONFLICT if text.contains("seat_occupied") => {}
                _ => wrong += 1,
            }
        }
        if let Some(user) = winner {
            api.ok(RACE_ROOM, Kind::Leave, &user, &format!("race-leave-{r}")).await?;
        }
    }
    let races = args.seat_races;
    Ok(vec![
        Line::new(
            "B16 racing takes: applied per race, other answers",
            format!("{applied_total} applied in {races} races, {wrong} not 409 seat_occupied"),
            format!("{} racers a race", args.seat_racers),
            format!("{:.2}", applied_total as f64 / races.max(1) as f64),
            "exactly 1 a race, the rest 409",
            applied_total == races && wrong == 0,
        ),
        Line::ratio(
            "B16 racing take answers p99 ÷ a lone take's p99",
            format!("{} (p50 {})", ms(answers.pct(99.0)), ms(answers.pct(50.0))),
            format!("{} (p50 {})", ms(lone.pct(99.0)), ms(lone.pct(50.0))),
            answers.pct(99.0).as_secs_f64() / lone.pct(99.0).as_secs_f64().max(1e-9),
        ),
    ])
}

/// A line of `samples`' p50 against `baseline`'s, with the target ratio.
fn ratio_line(what: &str, samples: &Samples, baseline: &Samples, of: &str) -> Line {
    let (p50, base) = (samples.pct(50.0), baseline.pct(50.0));
    let ratio = p50.as_secs_f64() / base.as_secs_f64().max(1e-9);
    Line::new(
        what,
        format!("{} (p99 {})", ms(p50), ms(samples.pct(99.0))),
        format!("{} (p99 {})", ms(base), ms(baseline.pct(99.0))),
        format!("{ratio:.2}"),
        &format!("p50 ≤ 1.5× {of}"),
        ratio <= P50_RATIO_TARGET,
    )
}
