//! The storage conformance suite: every test runs unchanged against SQLite and MariaDB
//! (`for db in backends().await`), naming the backend in its assertion messages. MariaDB-only
//! checks (concurrent claimers, the claim query plan, no gap locks) live in `mariadb`, SQLite's
//! claim plan in `sqlite`.

mod admin;
mod claim;
mod commit;
mod mariadb;
mod sqlite;

use std::time::Duration;

use room_service::store::{CommandCommit, NewOutboxRow};

/// A command that moves `room_id` from version `expected` to `expected + 1` with `events`
/// outbox rows, claimable at once (`publish_timeout` 0; set the field to change it).
pub fn commit(room_id: &str, command_id: &str, expected: u64, events: usize) -> CommandCommit {
    let version = expected + 1;
    CommandCommit {
        command_id: command_id.to_owned(),
        room_id: room_id.to_owned(),
        command_type: "test",
        fingerprint: format!("{:064x}", version),
        request_id: format!("req-{command_id}"),
        applied: true,
        room_version: version,
        outcome: format!(r#"{{"command":"{command_id}","version":{version}}}"#),
        snapshot: Some((expected, format!(r#"{{"room":"{room_id}","version":{version}}}"#))),
        room_status: "open",
        outbox: (0..events)
            .map(|i| NewOutboxRow {
                event_id: uuid::Uuid::now_v7().to_string(),
                event_type: "RoomTestEvent",
                envelope: format!(r#"{{"room":"{room_id}","version":{version},"n":{i}}}"#),
            })
            .collect(),
        publish_timeout: Duration::ZERO,
    }
}

/// Event ids of a commit's outbox rows.
pub fn event_ids(c: &CommandCommit) -> Vec<String> {
    c.outbox.iter().map(|e| e.event_id.clone()).collect()
}
