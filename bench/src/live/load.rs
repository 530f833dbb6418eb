//! B10's clients, over HTTP: the setup (rooms created, members joined) and the timed load,
//! where every client sends its next SendGift as soon as the previous one answered (closed
//! loop) or as soon as the shared pacer hands it a token (paced: one tokio interval for all
//! clients, so the offered rate holds whoever is free). Every command has its own
//! `command_id`; each gift's answer time (wall clock) and whether its `RoomGiftSent` was
//! delivered synchronously are kept, keyed by command id.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::time::MissedTickBehavior;

use crate::support::{Samples, unix_ms};

/// Owner of every room, receiver of every gift.
pub(crate) const OWNER: &str = "owner";

/// The user of client `c`: the member it joins as and sends as.
pub(crate) fn member(c: usize) -> String {
    format!("m{c}")
}

/// The service's public API.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub(crate) http: reqwest::Client,
    pub(crate) base: String,
}

/// The parts of a command answer B10 reads.
#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    events: Vec<AnswerEvent>,
}

#[derive(Debug, Deserialize)]
struct AnswerEvent {
    event_type: String,
    delivery: String,
}

impl Api {
    /// POSTs a command; the answer on a 2xx, an error naming the status otherwise.
    async fn command(&self, path: &str, body: serde_json::Value) -> anyhow::Result<Answer> {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "HTTP {status}: {}", response.text().await.unwrap_or_default());
        Ok(response.json().await?)
    }

    /// Creates `room` (owned by [`OWNER`]).
    async fn create(&self, room: &str) -> anyhow::Result<()> {
        let body = json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": OWNER,
                          "title": "live"});
        self.command("/v1/rooms", body).await.map(drop)
    }

    /// Joins `user` to `room`.
    async fn join(&self, room: &str, user: &str) -> anyhow::Result<()> {
        let body = json!({"command_id": format!("join-{room}-{user}"), "user_id": user});
        self.command(&format!("/v1/rooms/{room}/join"), body).await.map(drop)
    }

    /// Sends a gift; true when its `RoomGiftSent` answered `delivered` (IM took it before the
    /// answer).
    async fn gift(&self, room: &str, command_id: &str, sender: &str, count: usize) -> anyhow::Result<bool> {
        let body = json!({"command_id": command_id, "sender_id": sender, "receiver_id": OWNER,
                          "gift_id": "rocket", "count": count, "unit_value": 100});
        let answer = self.command(&format!("/v1/rooms/{room}/gifts"), body).await?;
        Ok(answer.events.iter().any(|e| e.event_type == "RoomGiftSent" && e.delivery == "delivered"))
    }
}

/// Where gift `k` of client `c` goes: `(room, sender)`.
pub(crate) type Target = Arc<dyn Fn(usize, usize) -> (String, String) + Send + Sync>;

/// Creates the rooms `target` names for `clients` clients over their first `visits` gifts
/// each, and joins each client's member to every room it will send to (`clients` at a time).
pub(crate) async fn setup(api: &Api, clients: usize, visits: usize, target: &Target) -> anyhow::Result<()> {
    let mut rooms = Vec::new();
    let mut joins = HashSet::new();
    for c in 0..clients {
        for k in 0..visits {
            let (room, sender) = target(c, k);
            if !rooms.contains(&room) {
                rooms.push(room.clone());
            }
            joins.insert((room, sender));
        }
    }
    let joins: Vec<(String, String)> = joins.into_iter().collect();
    // Client `c` takes items `c`, `c + clients`, ...
    let created = join_all((0..clients).map(|c| {
        let rooms = rooms.iter().skip(c).step_by(clients);
        async move {
            for room in rooms {
                api.create(room).await?;
            }
            anyhow::Ok(())
        }
    }));
    created.await.into_iter().collect::<anyhow::Result<()>>()?;
    let joined = join_all((0..clients).map(|c| {
        let joins = joins.iter().skip(c).step_by(clients);
        async move {
            for (room, user) in joins {
                api.join(room, user).await?;
            }
            anyhow::Ok(())
        }
    }));
    joined.await.into_iter().collect::<anyhow::Result<()>>()?;
    Ok(())
}

/// When a gift was answered, and whether IM had taken its event by then.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answered {
    pub(crate) at_ms: i64,
    pub(crate) delivered: bool,
}

/// What one timed load did.
#[derive(Debug, Default)]
pub(crate) struct Load {
    /// Gifts answered 200.
    pub(crate) gifts: usize,
    /// Gifts answered otherwise (or not at all).
    pub(crate) errors: usize,
    pub(crate) elapsed: Duration,
    /// Wall clock (ms) at the start and the end.
    pub(crate) started_ms: i64,
    pub(crate) ended_ms: i64,
    /// Answer times (HTTP round trips) of the gifts answered 200.
    pub(crate) http: Samples,
    /// By the digest of its command id (what its envelope carries:
    /// `room_service::domain::envelope_id`), the gifts answered 200.
    pub(crate) answers: HashMap<String, Answered>,
}

/// Closed loop, or a rate (gifts/s) offered by one pacer to all clients.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pace {
    Closed,
    Offered(f64),
}

/// `clients` clients send gifts tagged `tag` to `target` for `secs`, paced by `pace`.
pub(crate) async fn run(
    api: &Api,
    tag: &str,
    clients: usize,
    secs: u64,
    pace: Pace,
    target: &Target,
) -> anyhow::Result<Load> {
    let tokens = Arc::new(Semaphore::new(0));
    let (started, started_ms) = (Instant::now(), unix_ms());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let pacer = match pace {
        Pace::Closed => None,
        Pace::Offered(rate) => Some(tokio::spawn({
            let tokens = tokens.clone();
            async move {
                let mut every = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(1.0)));
                every.set_missed_tick_behavior(MissedTickBehavior::Burst);
                while every.tick().await < deadline {
                    tokens.add_permits(1);
                }
                tokens.close();
            }
        })),
    };
    let paced = pacer.is_some();
    let per_client = join_all((0..clients).map(|c| {
        let tokens = tokens.clone();
        async move {
            let mut load = Load::default();
            for k in 0.. {
                if paced {
                    match tokio::time::timeout_at(deadline, tokens.acquire()).await {
                        Ok(Ok(token)) => token.forget(),
                        _ => break,
                    }
                } else if tokio::time::Instant::now() >= deadline {
                    break;
                }
                let (room, sender) = target(c, k);
                let id = format!("{tag}-{c}-{k}");
                let t = Instant::now();
                match api.gift(&room, &id, &sender, 1 + k % 5).await {
                    Ok(delivered) => {
                        load.http.push(t.elapsed());
                        let key = room_service::domain::envelope_id(&id);
                        load.answers.insert(key, Answered { at_ms: unix_ms(), delivered });
                        load.gifts += 1;
                    }
                    Err(error) => {
                        if load.errors == 0 {
                            eprintln!("b10: {tag}: a gift failed (counted, the load goes on): {error:#}");
                        }
                        load.errors += 1;
                    }
                }
            }
            load
        }
    }))
    .await;
    if let Some(pacer) = pacer {
        pacer.abort();
    }
    let mut load = Load { elapsed: started.elapsed(), started_ms, ended_ms: unix_ms(), ..Load::default() };
    for one in per_client {
        load.gifts += one.gifts;
        load.errors += one.errors;
        load.http.extend(one.http);
        load.answers.extend(one.answers);
    }
    Ok(load)
}
