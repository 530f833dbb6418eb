//! Hot rooms at the room-service level: group commit semantics, the lane's hand-off under
//! ownership moves and slow commits, large rooms loaded after a
//! restart, a database written by the previous schema, and the members listing.
//!
//! The group-commit tests build the [`RoomService`] directly over a real database and submit
//! commands with `join_all` on the test's single-threaded runtime: every command is queued
//! before the room's drain task first runs, so they form one batch deterministically.

mod bounds;
mod group_commit;
mod lane;
mod legacy;
mod members;
mod unknown;

use std::time::Duration;

use futures::future::join_all;
use room_service::domain::{Command, CommandId, GiftId, LeaveReason, RoomId, UserId};
use room_service::room::{CommandResponse, RoomError, RoomOptions, RoomService, system_clock};
use room_service::store::SharedRepository;

use crate::support::TestDb;
use crate::support::app::{publisher, settings};

/// A room service over `repo` publishing to the log sink (IM disabled).
fn service_over(db: &TestDb, repo: SharedRepository) -> RoomService {
    let options = RoomOptions::new(Duration::from_secs(1));
    RoomService::new(repo, publisher(&settings(db.url(), None, &[])), options, system_clock())
}

fn service(db: &TestDb) -> RoomService {
    service_over(db, db.repo.clone())
}

fn room() -> RoomId {
    RoomId::parse("r1").unwrap()
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn join(id: &str) -> Command {
    Command::JoinRoom { user_id: user(id) }
}

fn leave(id: &str) -> Command {
    Command::LeaveRoom { user_id: user(id), reason: LeaveReason::User }
}

fn gift(sender: &str, value: u32) -> Command {
    Command::SendGift {
        sender_id: user(sender),
        receiver_id: user("owner"),
        gift_id: GiftId::parse("rose").unwrap(),
        count: 1,
        unit_value: value,
    }
}

async fn run(rooms: &RoomService, command_id: &str, command: Command) -> Result<CommandResponse, RoomError> {
    rooms.execute(room(), CommandId::parse(command_id).unwrap(), "test".into(), command).await
}

/// Submits every command at once (one batch); answers in submission order.
async fn run_all(
    rooms: &RoomService,
    commands: Vec<(String, Command)>,
) -> Vec<Result<CommandResponse, RoomError>> {
    join_all(commands.into_iter().map(|(id, command)| {
        let rooms = rooms.clone();
        async move { run(&rooms, &id, command).await }
    }))
    .await
}

async fn create(rooms: &RoomService) {
    let create =
        Command::CreateRoom { owner_id: user("owner"), title: "Live".into(), seats: Default::default() };
    run(rooms, "create", create).await.expect("create room");
}

/// Joins `count` members `m00000...` through the service, in group commits.
async fn fill(rooms: &RoomService, count: usize) {
    let joins: Vec<(String, Command)> =
        (0..count).map(|i| (format!("fill-{i}"), join(&format!("m{i:05}")))).collect();
    for chunk in joins.chunks(500) {
        for answer in run_all(rooms, chunk.to_vec()).await {
            assert!(answer.expect("join").applied);
        }
    }
}
