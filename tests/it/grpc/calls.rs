//! Every RPC of `room.v1.RoomService`: its happy path, replay, and each failure's status.

use room_service::grpc::pb;
use room_service_fakes::fake_wallet::{Call, FakeWallet, FakeWalletOptions, Fault};
use tonic::Code;

use super::{GrpcApp, gift, member, raw_call};
use crate::support::TestDb;

#[tokio::test]
async fn every_rpc_answers_like_its_http_route() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[]).await;
    let created = g.create("c1", "r1").await.expect("create");
    assert!(created.applied && !created.replayed);
    assert_eq!(created.room_version, 1);
    let room = created.room.expect("room");
    assert_eq!((room.room_id.as_str(), room.status()), ("r1", pb::RoomStatus::Open));
    assert_eq!(created.events.len(), 1);
    assert_eq!(created.events[0].event_type, "RoomCreated");
    assert_ne!(created.events[0].delivery(), pb::Delivery::Unspecified);

    assert_eq!(g.join("c2", "r1", "bob").await.expect("join").room_version, 2);
    assert_eq!(g.join("c3", "r1", "carol").await.expect("join").room_version, 3);
    let mut rooms = g.rooms();
    let sent = rooms.send_gift(gift("c4", "bob")).await.expect("gift").into_inner();
    assert_eq!(sent.room.as_ref().map(|r| r.heat), Some(1000));
    rooms
        .heartbeat(pb::HeartbeatRequest { room_id: "r1".into(), user_id: "bob".into() })
        .await
        .expect("heartbeat");
    let beats = |ids: &[&str]| pb::HeartbeatsRequest {
        room_id: "r1".into(),
        user_ids: ids.iter().map(|u| u.to_string()).collect(),
    };
    let answer =
        rooms.heartbeats(beats(&["bob", "dave", "carol", "bob"])).await.expect("heartbeats").into_inner();
    assert_eq!((answer.alive, answer.unknown), (2, vec!["dave".to_owned()]));
    let too_many: Vec<String> = (0..1001).map(|i| format!("u{i}")).collect();
    for bad in [
        beats(&[]),
        beats(&["bob", "no way"]),
        pb::HeartbeatsRequest { room_id: "r1".into(), user_ids: too_many },
    ] {
        let status = rooms.heartbeats(bad).await.expect_err("invalid");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("user_ids"), "{status:?}");
    }
    // The largest valid request (1000 ids of 64 bytes) is taken under the default limits.
    let thousand = pb::HeartbeatsRequest {
        room_id: "r1".into(),
        user_ids: (0..1000).map(|i| format!("{i:0>64}")).collect(),
    };
    let answer = rooms.heartbeats(thousand).await.expect("1000 ids of 64 bytes").into_inner();
    assert_eq!((answer.alive, answer.unknown.len()), (0, 1000));
    let missing = pb::HeartbeatsRequest { room_id: "nope".into(), user_ids: vec!["bob".into()] };
    assert_eq!(rooms.heartbeats(missing).await.expect_err("no room").code(), Code::NotFound);

    let got = rooms.get_room(pb::GetRoomRequest { room_id: "r1".into() }).await.expect("get").into_inner();
    assert_eq!((got.version, got.member_count, got.heat), (4, 2, 1000));
    assert_eq!(got.gift_rank[0].user_id, "bob");

    let page =
        |limit: u32, after: &str| pb::ListMembersRequest { room_id: "r1".into(), limit, after: after.into() };
    let first = rooms.list_members(page(1, "")).await.expect("members").into_inner();
    assert_eq!(first.members.iter().map(|m| m.user_id.as_str()).collect::<Vec<_>>(), ["bob"]);
    assert_eq!(first.next_after, "bob");
    let last = rooms.list_members(page(0, &first.next_after)).await.expect("members").into_inner();
    assert_eq!(last.members.iter().map(|m| m.user_id.as_str()).collect::<Vec<_>>(), ["carol"]);
    assert_eq!(last.next_after, "");

    let left = rooms.leave_room(member("c5", "r1", "carol")).await.expect("leave").into_inner();
    assert_eq!(left.room_version, 5);
    let closed = rooms
        .close_room(pb::CloseRoomRequest {
            command_id: "c6".into(),
            room_id: "r1".into(),
            actor_id: String::new(),
        })
        .await
        .expect("close")
        .into_inner();
    assert_eq!(closed.room.map(|r| r.status()), Some(pb::RoomStatus::Closed));
    g.app.stop().await;
}

#[tokio::test]
async fn a_repeated_command_id_replays_and_the_same_callers_different_command_under_it_already_exists() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[]).await;
    g.create("c1", "r1").await.expect("create");
    let first = g.join("c2", "r1", "bob").await.expect("join");
    // The replay reads its events' delivery from the outbox: once the best-effort mark of the
    // first answer is written (a busy machine may not have flushed it yet).
    g.app.settle().await;
    let again = g.join("c2", "r1", "bob").await.expect("replay");
    assert!(again.replayed && !first.replayed);
    assert_eq!((again.room_version, &again.events), (first.room_version, &first.events));
    // Another caller's c2 is its own command (ids are per caller): carol joins under it.
    assert!(!g.join("c2", "r1", "carol").await.expect("carol's own c2").replayed);
    let conflict = g.rooms().leave_room(member("c2", "r1", "bob")).await.expect_err("conflict");
    assert_eq!(conflict.code(), Code::AlreadyExists, "{conflict:?}");
    assert_eq!(conflict.metadata().get("error-code").unwrap(), "command_conflict");
    g.app.stop().await;
}

#[tokio::test]
async fn each_failure_answers_its_status_code() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[]).await;
    let mut rooms = g.rooms();
    // Bad input names the field.
    let bad = g.join("c1", "no spaces", "bob").await.expect_err("bad room id");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("room_id"), "{}", bad.message());
    let bad = g.join("presence:mine", "r1", "bob").await.expect_err("reserved prefix");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("command_id"), "{}", bad.message());
    let bad = rooms
        .list_members(pb::ListMembersRequest { room_id: "r1".into(), limit: 1001, after: String::new() })
        .await
        .expect_err("limit");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().starts_with("limit"), "{}", bad.message());
    // Unknown room.
    let missing = rooms.get_room(pb::GetRoomRequest { room_id: "nope".into() }).await.expect_err("missing");
    assert_eq!(missing.code(), Code::NotFound);
    assert_eq!(g.join("c1", "nope", "bob").await.expect_err("missing").code(), Code::NotFound);
    // The room's state refuses: FAILED_PRECONDITION.
    g.create("c2", "r1").await.expect("create");
    let exists = g.create("c3", "r1").await.expect_err("exists");
    assert_eq!(exists.code(), Code::FailedPrecondition);
    assert_eq!(exists.metadata().get("error-code").unwrap(), "room_exists");
    let bad =
        rooms.send_gift(pb::SendGiftRequest { count: 0, ..gift("c6", "alice") }).await.expect_err("count");
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    let not_member = rooms.send_gift(gift("c4", "zed")).await.expect_err("not a member");
    assert_eq!(not_member.code(), Code::FailedPrecondition);
    // An oversized message.
    let huge = pb::CreateRoomRequest {
        seats: None,
        command_id: "c5".into(),
        room_id: "r2".into(),
        owner_id: "alice".into(),
        title: "x".repeat(room_service::grpc::GrpcOptions::from(&g.app.settings.http).max_message_bytes + 1),
    };
    // tonic answers an oversized message with OUT_OF_RANGE.
    assert_eq!(rooms.create_room(huge).await.expect_err("too large").code(), Code::OutOfRange);
    g.app.stop().await;
}

#[tokio::test]
async fn the_wallet_refusing_is_failed_precondition_and_a_slow_one_passes_the_deadline() {
    let db = TestDb::mysql().await;
    let wallet = FakeWallet::start(FakeWalletOptions { initial_balance: 10_000 }).await;
    let overrides =
        [("wallet.enabled", "true"), ("wallet.base_url", &wallet.base_url()), ("wallet.timeout", "2s")];
    let g = GrpcApp::start(&db, &overrides).await;
    g.create("c1", "r1").await.expect("create");
    g.join("c2", "r1", "bob").await.expect("join");
    let mut rooms = g.rooms();

    wallet.set_balance("bob", 10);
    let poor = rooms.send_gift(gift("c3", "bob")).await.expect_err("insufficient");
    assert_eq!(poor.code(), Code::FailedPrecondition);
    assert_eq!(poor.metadata().get("error-code").unwrap(), "insufficient_balance");

    wallet.set_balance("bob", 10_000);
    wallet.inject(Fault::Delay(std::time::Duration::from_millis(800)), Call::Debit, 1);
    let late =
        raw_call(g.app.app.grpc_addr, "/room.v1.RoomService/SendGift", gift("c4", "bob"), "200m").await;
    assert_eq!(late.headers().get("grpc-status").map(|v| v.to_str().unwrap()), Some("4"), "{late:?}");
    // The command went on: its retry under the same command_id answers its outcome.
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let retried = rooms.send_gift(gift("c4", "bob")).await.expect("retry");
    assert_eq!(retried.into_inner().room_version, 3);
    g.app.stop().await;
}
