//! One load client: its rooms, its loop of commands with retries, and the next command a
//! room takes.

use super::*;

/// One room of a client and who is in it.
#[derive(Debug)]
struct Room {
    id: String,
    created: bool,
    members: Vec<String>,
    /// Commands acknowledged in this room.
    commands: usize,
}

impl Room {
    /// Records an acknowledged command and what it did to the room.
    fn acked(&mut self, effect: Effect) {
        self.commands += 1;
        match effect {
            Effect::Created => self.created = true,
            Effect::Joined(user) => self.members.push(user),
            Effect::Left(user) => self.members.retain(|m| *m != user),
            Effect::None => {}
        }
    }
}

/// One client's loop.
pub(super) struct Client {
    pub(super) plan: LoadPlan,
    pub(super) index: usize,
    pub(super) http: reqwest::Client,
    pub(super) stop: CancellationToken,
    pub(super) give_up: Arc<Mutex<Option<Instant>>>,
    pub(super) target: usize,
    pub(super) report: LoadReport,
}

/// What happened to one command.
enum Fate {
    Acked,
    Abandoned,
    Refused,
}

impl Client {
    pub(super) async fn run(mut self) -> LoadReport {
        let tag = self.plan.tag.clone();
        let mut rooms: Vec<Room> = (0..self.plan.rooms_per_client.max(1))
            .map(|k| Room {
                id: format!("{tag}c{}r{k}", self.index),
                created: false,
                members: Vec::new(),
                commands: 0,
            })
            .collect();
        let mut n = 0usize;
        while !self.stop.is_cancelled() {
            let room_index = n % rooms.len();
            let room = &rooms[room_index];
            let command_id = format!("{tag}-{}-{n}", self.index);
            let (path, body, effect) = next_command(room, &command_id, n);
            match self.send(&path, &body, &command_id).await {
                Fate::Acked => rooms[room_index].acked(effect),
                Fate::Abandoned => {
                    self.report.given_up += 1;
                    break;
                }
                Fate::Refused => break,
            }
            n += 1;
            tokio::select! {
                _ = self.stop.cancelled() => {}
                _ = tokio::time::sleep(self.plan.pace) => {}
            }
        }
        self.report
    }

    fn give_up_passed(&self) -> bool {
        self.give_up.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|t| Instant::now() >= t)
    }

    /// Sends one command until it is acknowledged, refused, or the give-up time passes.
    async fn send(&mut self, path: &str, body: &Value, command_id: &str) -> Fate {
        loop {
            if self.give_up_passed() {
                return Fate::Abandoned;
            }
            let url = format!("{}{path}", self.plan.targets[self.target]);
            let started = Instant::now();
            let answer = self.http.post(&url).json(body).send().await;
            let took = started.elapsed();
            let retry_elsewhere = match answer {
                Err(error) if error.is_timeout() => {
                    self.report.hung += 1;
                    true
                }
                Err(_) => {
                    self.report.max_latency = self.report.max_latency.max(took);
                    self.report.transport_errors += 1;
                    true
                }
                Ok(response) => {
                    self.report.max_latency = self.report.max_latency.max(took);
                    let status = response.status().as_u16();
                    *self.report.statuses.entry(status).or_default() += 1;
                    let text = response.text().await.unwrap_or_default();
                    match status {
                        200..=299 => {
                            self.acked(command_id, &text);
                            return Fate::Acked;
                        }
                        503 => {
                            *self.report.unavailable.entry(error_code(&text)).or_default() += 1;
                            true
                        }
                        409 if error_code(&text) == "version_conflict" => false,
                        _ => {
                            self.report.unexpected_count += 1;
                            if self.report.unexpected.len() < 5 {
                                let code = error_code(&text);
                                self.report
                                    .unexpected
                                    .push(format!("{status} {code} for {command_id} ({path})"));
                            }
                            // A 5xx other than 503 is counted by the row; any other answer
                            // means the harness and the service disagree: stop this client.
                            if status >= 500 {
                                true
                            } else {
                                return Fate::Refused;
                            }
                        }
                    }
                }
            };
            if retry_elsewhere {
                self.target = (self.target + 1) % self.plan.targets.len();
            }
            tokio::time::sleep(BACKOFF).await;
        }
    }

    /// Records an acknowledgement and the event ids it listed.
    fn acked(&mut self, command_id: &str, text: &str) {
        let events = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v.get("events").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e.get("event_id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        self.report.acked.insert(command_id.to_owned(), events);
        self.report.ack_times.push(Instant::now());
    }
}

/// The `error.code` of an error body.
fn error_code(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

/// What an acknowledged command changes in the client's view of its room.
enum Effect {
    Created,
    Joined(String),
    Left(String),
    None,
}

/// The next command for `room`: create it, then keep two to six members in it, joining,
/// sending gifts and leaving in turn.
fn next_command(room: &Room, command_id: &str, n: usize) -> (String, Value, Effect) {
    let id = &room.id;
    if !room.created {
        let body = json!({"command_id": command_id, "room_id": id, "owner_id": "owner", "title": "faults"});
        return ("/v1/rooms".into(), body, Effect::Created);
    }
    let member = |k: usize| room.members[k % room.members.len()].clone();
    let choice = if room.members.len() < 2 {
        0
    } else if room.members.len() >= 6 {
        3
    } else {
        match room.commands % 4 {
            // Nobody leaves a room of two: it gets a gift instead.
            3 if room.members.len() <= 2 => 1,
            choice => choice,
        }
    };
    match choice {
        0 => {
            let user = format!("u{n}");
            let body = json!({"command_id": command_id, "user_id": user});
            (format!("/v1/rooms/{id}/join"), body, Effect::Joined(user))
        }
        1 | 2 => {
            let body = json!({
                "command_id": command_id, "sender_id": member(n), "receiver_id": "owner",
                "gift_id": "rose", "count": 1 + n % 3, "unit_value": 10,
            });
            (format!("/v1/rooms/{id}/gifts"), body, Effect::None)
        }
        _ => {
            let user = member(n / 4);
            let body = json!({"command_id": command_id, "user_id": user});
            (format!("/v1/rooms/{id}/leave"), body, Effect::Left(user))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_are_created_first_then_keep_two_to_six_members() {
        let mut room = Room { id: "r".into(), created: false, members: Vec::new(), commands: 0 };
        for n in 0..200 {
            let (path, body, effect) = next_command(&room, &format!("c{n}"), n);
            assert_eq!(body["command_id"], format!("c{n}"));
            if n == 0 {
                assert_eq!(path, "/v1/rooms");
            }
            if path.ends_with("/gifts") {
                assert!(room.members.contains(&body["sender_id"].as_str().unwrap().to_owned()));
            }
            if path.ends_with("/leave") {
                assert!(room.members.len() > 2, "{n}: {:?}", room.members);
            }
            room.acked(effect);
            assert!(room.members.len() <= 6);
        }
    }

    #[test]
    fn ack_gaps_and_recovery_are_read_from_ack_times() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let report = LoadReport { ack_times: vec![at(100), at(900), at(1000)], ..LoadReport::default() };
        assert_eq!(report.longest_ack_gap(t0, at(1200)), Duration::from_millis(800));
        assert_eq!(report.first_ack_after(at(500)), Some(at(900)));
        assert_eq!(report.first_ack_after(at(1100)), None);
    }
}
