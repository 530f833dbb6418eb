//! The storage conformance suite: every test runs unchanged against SQLite and MariaDB
//! (`for db in backends().await`), naming the backend in its assertion messages. MariaDB-only
//! checks (concurrent claimers, the claim query plan, no gap locks) live in `mariadb`, SQLite's
//! claim plan in `sqlite`.

mod admin;
mod claim;
mod commit;
mod consumers;
mod leases;
mod mariadb;
mod open_rooms;
mod sqlite;

use std::time::Duration;

use room_service::store::{LoggedCommand, MemberChanges, NewOutboxRow, RoomCommit, SnapshotWrite};

/// A command that moves `room_id` from version `expected` to `expected + 1` with `events`
/// outbox rows, claimable at once (`publish_timeout` 0; set the field to change it).
pub fn commit(room_id: &str, command_id: &str, expected: u64, events: usize) -> RoomCommit {
    let version = expected + 1;
    RoomCommit {
        seat_requests: Default::default(),
        room_id: room_id.to_owned(),
        expected_version: expected,
        snapshot: Some(SnapshotWrite {
            version,
            status: "open",
            state: format!(r#"{{"room":"{room_id}","version":{version}}}"#),
            owner_id: "owner".into(),
        }),
        commands: vec![LoggedCommand {
            command_id: command_id.to_owned(),
            caller: String::new(),
            command_type: "test",
            fingerprint: format!("{:064x}", version),
            request_id: format!("req-{command_id}"),
            applied: true,
            room_version: version,
            outcome: format!(r#"{{"command":"{command_id}","version":{version}}}"#),
        }],
        outbox: (0..events)
            .map(|i| NewOutboxRow {
                event_id: uuid::Uuid::now_v7().to_string(),
                event_type: "RoomTestEvent",
                envelope: format!(r#"{{"room":"{room_id}","version":{version},"n":{i}}}"#),
                room_version: None,
                trace_context: None,
            })
            .collect(),
        members: MemberChanges::default(),
        gift_totals: Vec::new(),
        restrictions: Default::default(),
        attributes: Default::default(),
        claim_after: Duration::ZERO,
        shard: room_service::cluster::shard_of(room_id),
        fence: None,
    }
}

/// A no-op command (join of a member) decided on `room_id` at `version`: logged, nothing else.
pub fn noop(room_id: &str, command_id: &str, version: u64) -> RoomCommit {
    let mut c = commit(room_id, command_id, version, 0);
    c.snapshot = None;
    (c.commands[0].applied, c.commands[0].room_version) = (false, version);
    c
}

/// Event ids of a commit's outbox rows.
pub fn event_ids(c: &RoomCommit) -> Vec<String> {
    c.outbox.iter().map(|e| e.event_id.clone()).collect()
}
