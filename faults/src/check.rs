//! The three-way check after a row's fault and recovery: what the clients were told (acked
//! command ids and the event ids their answers listed), what the database holds
//! (`room_command_log`, `room_outbox`) and what the fake IM received.
//!
//! - **lost**: an acked command missing from the command log, an acked event missing from
//!   the outbox, or an outbox event meant for IM that IM never received (or a row that is
//!   still not delivered after the bounded wait, for the events IM skips).
//! - **unexpected**: a message IM received whose `event_id` is in no outbox row.
//! - **duplicated**: an event IM took more than once (recorded, then answered as a
//!   duplicate); `max_sends` is the most times IM took one event.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use room_service_fakes::fake_im::FakeIm;
use sqlx::mysql::MySqlPoolOptions;

use crate::support::wait_until;

/// What the check found.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    /// Acked commands missing from `room_command_log`.
    pub lost_commands: u64,
    /// Event ids an answer listed that are missing from `room_outbox`.
    pub lost_acked_events: u64,
    /// Outbox events meant for IM that IM never received.
    pub lost_in_delivery: u64,
    /// Rows not `delivered` after the wait (IM-skipped types included).
    pub undelivered: u64,
    /// Of those, rows left `delivering`.
    pub delivering: u64,
    /// Messages IM received whose event is in no outbox row.
    pub unexpected: u64,
    /// Events IM took more than once.
    pub duplicated: u64,
    /// The most times IM took one event.
    pub max_sends: u32,
    /// Events IM received (first time) after a later event of their room: each room's
    /// `room_version`s must reach IM in order (one message of a room in flight at a time, the
    /// default).
    pub out_of_order: u64,
    /// Outbox rows in all.
    pub outbox_rows: u64,
    /// Commands in the log.
    pub logged_commands: u64,
    /// How long the outbox took to drain after the row's load ended.
    pub drain: Duration,
    /// A few of the lost ids, for the notes.
    pub examples: Vec<String>,
}

impl CheckReport {
    /// Everything counted as lost.
    pub fn lost(&self) -> u64 {
        self.lost_commands + self.lost_acked_events + self.lost_in_delivery
    }
}

/// Events whose first arrival in their group (IM's order: `msg_seq`, then the element's index)
/// comes after an event of a higher `room_version` of the same group.
fn out_of_order(messages: &[room_service_fakes::fake_im::RecordedMessage]) -> u64 {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut highest: HashMap<&str, u64> = HashMap::new();
    let mut ordered: Vec<&room_service_fakes::fake_im::RecordedMessage> = messages.iter().collect();
    ordered.sort_by_key(|m| (m.group.as_str(), m.msg_seq, m.index));
    let mut late = 0;
    for m in ordered {
        if m.event_id.as_deref().is_some_and(|id| !seen.insert(id)) {
            continue;
        }
        let version = serde_json::from_str::<serde_json::Value>(&m.data)
            .ok()
            .and_then(|v| v["room_version"].as_u64())
            .unwrap_or(0);
        let top = highest.entry(m.group.as_str()).or_insert(0);
        if version < *top {
            late += 1;
        }
        *top = (*top).max(version);
    }
    late
}

/// Waits (up to `drain_timeout`) until no outbox row is undelivered, then compares the three
/// sources.
pub async fn check(
    db_url: &str,
    im: &FakeIm,
    acked: &HashMap<String, Vec<String>>,
    drain_timeout: Duration,
) -> anyhow::Result<CheckReport> {
    let pool = MySqlPoolOptions::new().max_connections(2).connect(db_url).await?;
    let mut report = CheckReport::default();
    let undelivered_sql = "SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered'";
    let drained =
        wait_until("the outbox drains", drain_timeout, || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(undelivered_sql).fetch_one(&pool).await.is_ok_and(|n| n == 0)
            }
        })
        .await;
    report.drain = drained.unwrap_or(drain_timeout);

    let logged: HashSet<String> = sqlx::query_scalar("SELECT command_id FROM room_command_log")
        .fetch_all(&pool)
        .await?
        .into_iter()
        .collect();
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT event_id, event_type, status FROM room_outbox").fetch_all(&pool).await?;
    pool.close().await;
    report.logged_commands = logged.len() as u64;
    report.outbox_rows = rows.len() as u64;

    let received: HashSet<String> = im.all_messages().into_iter().filter_map(|m| m.event_id).collect();
    let sends = im.sends_by_event();
    let in_outbox: HashSet<&str> = rows.iter().map(|(id, _, _)| id.as_str()).collect();
    let mut examples = Vec::new();

    for (command_id, events) in acked {
        if !logged.contains(command_id) {
            report.lost_commands += 1;
            examples.push(format!("command {command_id} acked, not logged"));
            continue;
        }
        for event_id in events {
            if !in_outbox.contains(event_id.as_str()) {
                report.lost_acked_events += 1;
                examples.push(format!("event {event_id} of {command_id} acked, not in the outbox"));
            }
        }
    }
    let skipped = room_service::domain::EventType::im_skipped();
    for (event_id, event_type, status) in &rows {
        if status != "delivered" {
            report.undelivered += 1;
            report.delivering += u64::from(status == "delivering");
        }
        if !skipped.contains(&event_type.as_str()) && !received.contains(event_id) {
            report.lost_in_delivery += 1;
            examples.push(format!("event {event_id} ({event_type}, {status}) never reached IM"));
        }
    }
    report.unexpected = im
        .all_messages()
        .iter()
        .filter(|m| m.event_id.as_deref().is_none_or(|id| !in_outbox.contains(id)))
        .count() as u64;
    report.duplicated = sends.values().filter(|s| s.received > 1).count() as u64;
    report.max_sends = sends.values().map(|s| s.received).max().unwrap_or(0);
    report.out_of_order = out_of_order(&im.all_messages());
    examples.truncate(5);
    report.examples = examples;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use room_service_fakes::fake_im::RecordedMessage;

    use super::out_of_order;

    fn message(group: &str, seq: u64, event: &str, version: u64) -> RecordedMessage {
        RecordedMessage {
            group: group.into(),
            random: 0,
            event_id: Some(event.into()),
            data: format!(r#"{{"room_version":{version}}}"#),
            desc: "RoomUserJoined".into(),
            elements: 1,
            index: 0,
            priority: None,
            msg_seq: seq,
            msg_time: 0,
            accepted_at: tokio::time::Instant::now(),
        }
    }

    #[test]
    fn an_event_after_a_later_one_of_its_room_is_out_of_order_and_a_resend_is_not() {
        let in_order = [message("a", 1, "e1", 1), message("a", 2, "e2", 2), message("b", 1, "f1", 1)];
        assert_eq!(out_of_order(&in_order), 0);
        let resent = [message("a", 1, "e1", 1), message("a", 2, "e2", 2), message("a", 3, "e1", 1)];
        assert_eq!(out_of_order(&resent), 0, "a duplicate is counted as a duplicate, not as disorder");
        let late = [message("a", 1, "e2", 2), message("a", 2, "e1", 1), message("b", 1, "f1", 5)];
        assert_eq!(out_of_order(&late), 1);
    }
}
