//! B15, moderation (SPEC §14.2), part one: what a moderation command costs beside a join.
//!
//! The real service as a black box (`room-service serve`, spawned like B13's: IM off, the log
//! sink; the outbox worker as it is), auth mode none, so a moderator's body names its actor
//! (`actor_id` = the owner). Every room is written straight in SQL (`fill`) before the service
//! starts. `--clients` (16) clients, one room each, send their next command as soon as the
//! previous one answered; each kind in turn, all clients at once: JoinRoom of a new user (the
//! baseline), MuteUser of a new user (600 s), KickUser with a 600 s ban of a new, non-member
//! user, and SetAttributes of one of 32 keys (`k<i % 32>`) to a new value. `--moderation-commands`
//! (2,000) timed commands of each kind in all, in two rounds of the four kinds (so a drift of
//! the shared machine falls on every kind alike), after a few untimed ones of each.
//! Lines: commands/s and p50/p99 per kind; target: a moderation command's p50 ≤ 1.5× the join's.
//!
//! Part two (a room with 100,000 bans vs a room with none) is `moderation_scale`; both run on
//! one service.

use std::time::{Duration, Instant};

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::json;

use room_service::store::Repository;

use crate::Args;
use crate::fill::{self, OWNER};
use crate::live::process;
use crate::moderation_scale;
use crate::report::Line;
use crate::support::{BenchDb, Samples, ms};

/// Commands of each kind each client sends untimed before the timed rounds.
const WARM_UP: usize = 10;
/// Rounds of the four kinds the timed commands are split into.
const ROUNDS: usize = 2;
/// Target: a moderation command's p50 ≤ this × a join's.
pub(crate) const P50_RATIO_TARGET: f64 = 1.5;

/// A command B15 sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Join,
    Mute,
    Kick,
    Attributes,
}

/// The kinds of part one, the baseline first.
const KINDS: [Kind; 4] = [Kind::Join, Kind::Mute, Kind::Kick, Kind::Attributes];

impl Kind {
    /// The command's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Join => "JoinRoom",
            Kind::Mute => "MuteUser",
            Kind::Kick => "KickUser+ban",
            Kind::Attributes => "SetAttributes",
        }
    }

    /// The route under `/v1/rooms/{id}` and the body of command `k` of this kind, on `user`
    /// (the joining, muted or kicked user; unused by SetAttributes).
    fn request(self, command_id: &str, user: &str, k: usize) -> (&'static str, serde_json::Value) {
        match self {
            Kind::Join => ("join", json!({"command_id": command_id, "user_id": user})),
            Kind::Mute => (
                "mutes",
                json!({"command_id": command_id, "actor_id": OWNER, "user_id": user, "duration_s": 600}),
            ),
            Kind::Kick => (
                "kicks",
                json!({"command_id": command_id, "actor_id": OWNER, "user_id": user, "ban_s": 600,
                       "reason": "spam"}),
            ),
            Kind::Attributes => (
                "attributes",
                json!({"command_id": command_id, "actor_id": OWNER,
                       "set": {format!("k{}", k % 32): format!("value-{k}")}}),
            ),
        }
    }
}

/// The service's public API.
pub(crate) struct Api {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
}

impl Api {
    /// Sends command `k` of `kind` to `room` on `user`; its status and body.
    pub(crate) async fn send(
        &self,
        room: &str,
        kind: Kind,
        user: &str,
        k: usize,
    ) -> anyhow::Result<(StatusCode, String)> {
        let command_id = format!("{room}-{kind:?}-{user}-{k}");
        let (route, body) = kind.request(&command_id, user, k);
        let response =
            self.http.post(format!("{}/v1/rooms/{room}/{route}", self.base)).json(&body).send().await?;
        Ok((response.status(), response.text().await.unwrap_or_default()))
    }

    /// [`Api::send`], which must answer a 2xx.
    pub(crate) async fn ok(&self, room: &str, kind: Kind, user: &str, k: usize) -> anyhow::Result<()> {
        let (status, body) = self.send(room, kind, user, k).await?;
        anyhow::ensure!(status.is_success(), "{} in {room}: HTTP {status}: {body}", kind.name());
        Ok(())
    }
}

/// The room of client `c`.
fn client_room(c: usize) -> String {
    format!("mod-{c}")
}

/// The new user command `k` of `kind` by client `c` joins, mutes or kicks.
fn new_user(kind: Kind, c: usize, k: usize) -> String {
    let tag = match kind {
        Kind::Join => 'j',
        Kind::Mute => 'u',
        Kind::Kick => 'x',
        Kind::Attributes => 'a',
    };
    format!("{tag}{c}-{k}")
}

/// What one kind measured over its rounds.
#[derive(Default)]
struct Tally {
    samples: Samples,
    elapsed: Duration,
}

impl Tally {
    fn rate(&self) -> f64 {
        self.samples.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs B15 (both parts) on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let repo = db.repository(2).await?;
    let filled = Instant::now();
    for c in 0..args.clients {
        fill::room(repo.pool(), &client_room(c), 0).await?;
    }
    moderation_scale::fill(repo.pool(), args.moderation_bans).await?;
    repo.close().await;
    eprintln!("b15: rooms filled in {:.1}s", filled.elapsed().as_secs_f64());
    let service = process::start_service(&db.url(), None, 1, &[]).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let api = Api { http, base: service.base.clone() };
    let measured = async {
        let mut lines = cost(&api, args).await?;
        lines.extend(moderation_scale::run(&api, args).await?);
        anyhow::Ok(lines)
    }
    .await;
    service.proc.stop().await;
    measured
}

/// Part one: warms every room up, then times [`ROUNDS`] rounds of the four kinds.
async fn cost(api: &Api, args: &Args) -> anyhow::Result<Vec<Line>> {
    for c in 0..args.clients {
        fill::check_loaded(&api.http, &api.base, &client_room(c), 0).await?;
    }
    for kind in KINDS {
        burst(api, args.clients, kind, 0..WARM_UP).await?;
    }
    let per_round = args.moderation_commands.div_ceil(args.clients * ROUNDS).max(1);
    let mut tallies: Vec<Tally> = KINDS.iter().map(|_| Tally::default()).collect();
    for round in 0..ROUNDS {
        let from = WARM_UP + round * per_round;
        for (kind, tally) in KINDS.into_iter().zip(&mut tallies) {
            let started = Instant::now();
            tally.samples.extend(burst(api, args.clients, kind, from..from + per_round).await?);
            tally.elapsed += started.elapsed();
        }
    }
    Ok(cost_lines(args.clients, &tallies))
}

/// Every client sends commands `ks` of `kind` into its room, one at a time; their latencies.
async fn burst(api: &Api, clients: usize, kind: Kind, ks: std::ops::Range<usize>) -> anyhow::Result<Samples> {
    let client = |c: usize| {
        let ks = ks.clone();
        async move {
            let (room, mut samples) = (client_room(c), Samples::default());
            for k in ks {
                let user = new_user(kind, c, k);
                let t = Instant::now();
                api.ok(&room, kind, &user, k).await?;
                samples.push(t.elapsed());
            }
            anyhow::Ok(samples)
        }
    };
    let mut all = Samples::default();
    for samples in join_all((0..clients).map(client)).await {
        all.extend(samples?);
    }
    Ok(all)
}

/// Per kind: commands/s beside the join's, and p50 (p99) against the join's p50.
fn cost_lines(clients: usize, tallies: &[Tally]) -> Vec<Line> {
    let join = &tallies[0];
    let (join_p50, join_rate) = (join.samples.pct(50.0), join.rate());
    let join_figures = format!("{} (p99 {})", ms(join_p50), ms(join.samples.pct(99.0)));
    let mut lines = vec![Line::info(
        "B15 JoinRoom (baseline): commands/s, p50",
        format!("{join_rate:.0}/s, {join_figures}"),
        format!("{clients} clients, one room each, {} joins of new users", join.samples.len()),
    )];
    for (kind, tally) in KINDS.into_iter().zip(tallies).skip(1) {
        let what = kind.name();
        let p50 = tally.samples.pct(50.0);
        let ratio = p50.as_secs_f64() / join_p50.as_secs_f64().max(1e-9);
        lines.push(Line::ratio(
            &format!("B15 {what} commands/s"),
            format!("{:.0}/s", tally.rate()),
            format!("{join_rate:.0}/s JoinRoom"),
            tally.rate() / join_rate.max(1e-9),
        ));
        lines.push(Line::new(
            &format!("B15 {what} p50 ÷ JoinRoom p50"),
            format!("{} (p99 {})", ms(p50), ms(tally.samples.pct(99.0))),
            join_figures.clone(),
            format!("{ratio:.2}"),
            "p50 ≤ 1.5× JoinRoom's",
            ratio <= P50_RATIO_TARGET,
        ));
    }
    lines
}
