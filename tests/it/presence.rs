//! The presence stale worker: stale members leave through the command pipeline, once.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use room_service::domain::{Command, CommandId, DomainError, RoomId, UserId};
use room_service::room::presence::sweep_stale;
use room_service::room::{Clock, CommandRequest, RoomError, RoomOptions, RoomService};
use tokio_util::sync::CancellationToken;

use crate::support::app::{publisher, settings};
use crate::support::{TestDb, backends};

const STALE_AFTER: Duration = Duration::from_secs(60);

fn service(db: &TestDb, now: &Arc<AtomicI64>) -> RoomService {
    let now = now.clone();
    let clock: Clock = Arc::new(move || now.load(Ordering::SeqCst));
    let options = RoomOptions::new(Duration::from_secs(1));
    RoomService::new(db.repo.clone(), publisher(&settings(db.url(), None, &[])), options, clock)
}

async fn run(rooms: &RoomService, id: &str, command: Command) {
    let room = RoomId::parse("r1").unwrap();
    rooms.execute(room, CommandId::parse(id).unwrap(), "test".into(), command).await.unwrap();
}

async fn sweep(rooms: &RoomService) -> usize {
    sweep_stale(rooms, STALE_AFTER, &CancellationToken::new()).await
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

async fn room_with(rooms: &RoomService, members: &[&str]) {
    run(
        rooms,
        "create",
        Command::CreateRoom { owner_id: user("owner"), title: "t".into(), seats: Default::default() },
    )
    .await;
    for m in members {
        run(rooms, &format!("join-{m}"), Command::JoinRoom { user_id: user(m) }).await;
    }
}

#[tokio::test]
async fn stale_members_leave_with_reason_stale_and_fresh_ones_stay() {
    for db in backends().await {
        let now = Arc::new(AtomicI64::new(1_000_000));
        let rooms = service(&db, &now);
        room_with(&rooms, &["idle", "active"]).await;
        now.fetch_add(50_000, Ordering::SeqCst);
        rooms.heartbeat(&RoomId::parse("r1").unwrap(), &user("active")).await.unwrap();
        now.fetch_add(20_000, Ordering::SeqCst); // idle: 70 s since join; active: 20 s since heartbeat

        assert_eq!(sweep(&rooms).await, 1, "{db}");
        let room = RoomId::parse("r1").unwrap();
        let members: Vec<String> = rooms
            .members(&room, None, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.user_id.to_string())
            .collect();
        assert_eq!(members, ["active"], "{db}");
        let left: Vec<_> = db.outbox().await.into_iter().filter(|r| r.event_type == "RoomUserLeft").collect();
        assert_eq!(left.len(), 1, "{db}");
        assert!(left[0].envelope.contains(r#""reason":"stale""#), "{db}: {}", left[0].envelope);
        assert_eq!(sweep(&rooms).await, 0, "{db}: nothing left to remove");
    }
}

#[tokio::test]
async fn two_nodes_sweeping_the_same_member_remove_it_once() {
    let db = TestDb::mysql().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let a = service(&db, &now);
    let b = service(&db, &now);
    room_with(&a, &["idle"]).await;
    b.snapshot(&RoomId::parse("r1").unwrap()).await.unwrap(); // B loads the room too
    now.fetch_add(120_000, Ordering::SeqCst);

    let (removed_a, removed_b) = tokio::join!(sweep(&a), sweep(&b));
    assert_eq!(removed_a + removed_b, 1, "exactly one node applied the removal");
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM room_command_log WHERE command_type = 'leave_room'").await,
        Some(1)
    );
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM room_outbox WHERE event_type = 'RoomUserLeft'").await,
        Some(1)
    );
}

#[tokio::test]
async fn a_restart_never_mass_evicts_members() {
    let db = TestDb::sqlite().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    room_with(&service(&db, &now), &["a", "b"]).await;
    // Much later, a new process loads the room: every heartbeat clock starts at load time.
    now.fetch_add(3_600_000, Ordering::SeqCst);
    let rooms = service(&db, &now);
    rooms.snapshot(&RoomId::parse("r1").unwrap()).await.unwrap();
    let seen = |id: &str| rooms.last_seen(&RoomId::parse("r1").unwrap(), &user(id));
    assert_eq!((seen("a"), seen("b")), (Some(4_600_000), Some(4_600_000)), "seeded at load time");
    assert_eq!(sweep(&rooms).await, 0);
    now.fetch_add(61_000, Ordering::SeqCst);
    assert_eq!(sweep(&rooms).await, 2);
}

#[tokio::test]
async fn idle_cells_are_evicted_and_reload_from_the_snapshot() {
    let db = TestDb::sqlite().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    room_with(&rooms, &["a"]).await;
    let missing = RoomId::parse("missing").unwrap();
    assert!(rooms.snapshot(&missing).await.is_err());
    run(
        &rooms,
        "leave-a",
        Command::LeaveRoom { user_id: user("a"), reason: room_service::domain::LeaveReason::User },
    )
    .await;
    assert_eq!(rooms.cell_count(), 1, "the unknown room left no cell");

    // The empty room goes only once idle.
    assert_eq!(rooms.evict_idle(Duration::from_secs(300)), 0);
    now.fetch_add(301_000, Ordering::SeqCst);
    assert_eq!(rooms.evict_idle(Duration::from_secs(300)), 1);
    assert_eq!(rooms.cell_count(), 0);

    let room = rooms.snapshot(&RoomId::parse("r1").unwrap()).await.unwrap();
    assert_eq!(room.version, 3, "reloaded from the snapshot");
}

#[tokio::test]
async fn unknown_rooms_leave_no_cell_and_a_room_created_after_its_miss_is_read_at_once() {
    for db in backends().await {
        let now = Arc::new(AtomicI64::new(1_000_000));
        let rooms = service(&db, &now);
        let late = RoomId::parse("late").unwrap();
        let not_found = |e: RoomError| matches!(e, RoomError::Domain(DomainError::RoomNotFound));
        for _ in 0..2 {
            // The second round is answered from the miss remembered by the first.
            assert!(rooms.snapshot(&late).await.is_err_and(not_found), "{db}");
            assert!(rooms.members(&late, None, 10).await.is_err_and(not_found), "{db}");
            assert!(rooms.heartbeat(&late, &user("a")).await.is_err_and(not_found), "{db}");
            assert!(rooms.heartbeats(&late, &[user("a"), user("b")]).await.is_err_and(not_found), "{db}");
            assert_eq!(rooms.cell_count(), 0, "{db}: nothing lasting");
        }
        let create =
            Command::CreateRoom { owner_id: user("owner"), title: "t".into(), seats: Default::default() };
        rooms
            .execute(late.clone(), CommandId::parse("create-late").unwrap(), "test".into(), create)
            .await
            .unwrap();
        // Even with its cell gone (idle, no members), the room is read from the database at
        // once: its creation forgot the miss.
        assert_eq!(rooms.evict_idle(Duration::ZERO), 1, "{db}");
        assert_eq!(rooms.snapshot(&late).await.expect("the created room").version, 1, "{db}");
    }
}

#[tokio::test]
async fn rooms_with_members_stay_in_memory() {
    let db = TestDb::sqlite().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    room_with(&rooms, &["a"]).await;
    now.fetch_add(3_600_000, Ordering::SeqCst);
    assert_eq!(rooms.evict_idle(Duration::from_secs(300)), 0);
    assert_eq!(rooms.cell_count(), 1);
}

#[tokio::test]
async fn a_removal_whose_member_is_no_longer_stale_changes_nothing() {
    let db = TestDb::sqlite().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    room_with(&rooms, &["a"]).await;
    let logged = db.count("room_command_log").await;
    // The scan saw `a` stale, then a heartbeat came in before the removal ran.
    let cutoff = now.load(Ordering::SeqCst);
    now.fetch_add(5_000, Ordering::SeqCst);
    rooms.heartbeat(&RoomId::parse("r1").unwrap(), &user("a")).await.unwrap();
    let (presence, r1) = (rooms.clone(), RoomId::parse("r1").unwrap());
    let still_stale = Arc::new(move |room: &room_service::domain::RoomState| {
        room.members.contains_key(&user("a"))
            && presence.last_seen(&r1, &user("a")).is_some_and(|t| t <= cutoff)
    });
    let leave = Command::LeaveRoom { user_id: user("a"), reason: room_service::domain::LeaveReason::Stale };
    let room = RoomId::parse("r1").unwrap();
    let command_id = CommandId::parse("presence:stale:x").unwrap();
    let request = CommandRequest::new(room, command_id, "t", leave).only_if(still_stale);
    let answer = rooms.submit(request).await.unwrap();
    assert!(!answer.applied);
    assert_eq!(db.count("room_command_log").await, logged, "nothing logged");
    assert_eq!(rooms.snapshot(&RoomId::parse("r1").unwrap()).await.unwrap().member_count, 1);
}

#[tokio::test]
async fn a_cancelled_sweep_removes_nobody() {
    let db = TestDb::sqlite().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    room_with(&rooms, &["a", "b"]).await;
    now.fetch_add(120_000, Ordering::SeqCst);
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(sweep_stale(&rooms, STALE_AFTER, &cancel).await, 0);
    assert_eq!(rooms.snapshot(&RoomId::parse("r1").unwrap()).await.unwrap().member_count, 2);
}

#[tokio::test]
async fn a_large_room_of_stale_members_clears_in_group_commits() {
    const MEMBERS: usize = 3_000;
    for db in backends().await {
        let now = Arc::new(AtomicI64::new(1_000_000));
        let rooms = service(&db, &now);
        run(
            &rooms,
            "create",
            Command::CreateRoom { owner_id: user("owner"), title: "t".into(), seats: Default::default() },
        )
        .await;
        let room = RoomId::parse("r1").unwrap();
        let joins = (0..MEMBERS).map(|i| {
            let rooms = rooms.clone();
            let room = room.clone();
            async move {
                let join = Command::JoinRoom { user_id: user(&format!("v{i:05}")) };
                rooms
                    .execute(room, CommandId::parse(format!("j{i}")).unwrap(), "t".into(), join)
                    .await
                    .unwrap();
            }
        });
        futures::future::join_all(joins).await;
        rooms.heartbeat(&room, &user("v00007")).await.unwrap();
        now.fetch_add(70_000, Ordering::SeqCst);
        rooms.heartbeat(&room, &user("v00007")).await.unwrap(); // the one viewer still watching

        let before = rooms.commit_stats();
        assert_eq!(sweep(&rooms).await, MEMBERS - 1, "{db}");
        let stats = rooms.commit_stats();
        let transactions = stats.transactions - before.transactions;
        assert_eq!(stats.commands - before.commands, MEMBERS as u64 - 1, "{db}");
        assert!(
            transactions * 10 < MEMBERS as u64,
            "{db}: {transactions} transactions for {MEMBERS} removals"
        );
        let members = rooms.members(&room, None, 10).await.unwrap();
        assert_eq!(members.iter().map(|m| m.user_id.as_str()).collect::<Vec<_>>(), ["v00007"], "{db}");
        assert_eq!(db.count("room_member").await, 1, "{db}");
    }
}

/// Holds the room's snapshot row locked from another connection: the room's next commit waits
/// on it, so its drain holds the cell's lock mid-commit. Returns once a commit is waiting.
async fn hold_snapshot_row(db: &TestDb) -> sqlx::Transaction<'static, sqlx::MySql> {
    let mut tx = db.mysql_pool().begin().await.expect("begin");
    sqlx::query("SELECT version FROM room_snapshot WHERE room_id = 'r1' FOR UPDATE")
        .execute(&mut *tx)
        .await
        .expect("lock the snapshot row");
    tx
}

async fn wait_for_a_blocked_commit(db: &TestDb) {
    // The room's commit of this test's database, stuck on the locked snapshot row. (The
    // processlist, not innodb_trx: a waiting transaction does not always show there.)
    let waiting = "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                   WHERE DB = DATABASE() AND INFO LIKE 'UPDATE room_snapshot%' AND TIME_MS > 200";
    for _ in 0..600 {
        if db.scalar(waiting).await.unwrap_or(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no commit waited on the snapshot row");
}

fn gift(sender: &str) -> Command {
    Command::SendGift {
        sender_id: user(sender),
        receiver_id: user("owner"),
        gift_id: room_service::domain::GiftId::parse("rose").unwrap(),
        count: 1,
        unit_value: 10,
    }
}

#[tokio::test]
async fn heartbeats_answer_while_the_rooms_drain_is_blocked_mid_commit() {
    let db = TestDb::mysql().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    room_with(&rooms, &["a", "b"]).await;
    let r1 = RoomId::parse("r1").unwrap();

    let lock = hold_snapshot_row(&db).await;
    let blocked = tokio::spawn({
        let rooms = rooms.clone();
        async move { run(&rooms, "gift-1", gift("a")).await }
    });
    let join = tokio::spawn({
        let rooms = rooms.clone();
        async move { run(&rooms, "join-c", Command::JoinRoom { user_id: user("c") }).await }
    });
    wait_for_a_blocked_commit(&db).await;

    now.fetch_add(10_000, Ordering::SeqCst);
    rooms.heartbeat(&r1, &user("a")).await.expect("a member's heartbeat");
    let beats = rooms.heartbeats(&r1, &[user("b"), user("c"), user("b"), user("x")]).await.unwrap();
    assert_eq!(beats.alive, 1);
    assert_eq!(beats.unknown, [user("c"), user("x")], "c's join is not committed yet");
    let refused = rooms.heartbeat(&r1, &user("c")).await.expect_err("not a member yet");
    assert!(refused.to_string().contains("not a member"), "{refused}");
    assert!(!blocked.is_finished() && !join.is_finished(), "the heartbeats answered before the gift");
    assert_eq!(rooms.last_seen(&r1, &user("a")), Some(1_010_000));

    lock.rollback().await.unwrap();
    blocked.await.unwrap();
    join.await.unwrap();
    assert_eq!(rooms.last_seen(&r1, &user("c")), Some(1_000_000), "seen at its join time (decided before)");
    rooms.heartbeat(&r1, &user("c")).await.expect("c is a member now");
}

#[tokio::test]
async fn a_heartbeat_after_the_scan_wins_even_while_the_room_commits() {
    let db = TestDb::mysql().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    room_with(&rooms, &["a", "b"]).await;
    let r1 = RoomId::parse("r1").unwrap();
    now.fetch_add(70_000, Ordering::SeqCst); // both stale

    let lock = hold_snapshot_row(&db).await;
    let blocked = tokio::spawn({
        let rooms = rooms.clone();
        async move { run(&rooms, "gift-1", gift("a")).await }
    });
    wait_for_a_blocked_commit(&db).await;
    // The sweep scans presence (a and b are stale), then waits for the room behind the commit.
    let sweep = tokio::spawn({
        let rooms = rooms.clone();
        async move { sweep(&rooms).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    rooms.heartbeat(&r1, &user("a")).await.expect("a heartbeat during the commit and the sweep");
    assert!(!blocked.is_finished() && !sweep.is_finished());

    lock.rollback().await.unwrap();
    blocked.await.unwrap();
    assert_eq!(sweep.await.unwrap(), 1, "only b was still stale at its removal's turn");
    let members = rooms.members(&r1, None, 10).await.unwrap();
    assert_eq!(members.iter().map(|m| m.user_id.as_str()).collect::<Vec<_>>(), ["a"]);
    assert_eq!(rooms.last_seen(&r1, &user("b")), None, "a leave removes the member's presence");
}

#[tokio::test]
async fn a_heartbeat_loads_the_room_and_answers_like_before() {
    for db in backends().await {
        let now = Arc::new(AtomicI64::new(1_000_000));
        room_with(&service(&db, &now), &["a"]).await;
        now.fetch_add(3_600_000, Ordering::SeqCst);
        // A new process: the first use of the room is a heartbeat.
        let rooms = service(&db, &now);
        let r1 = RoomId::parse("r1").unwrap();
        assert_eq!(rooms.last_seen(&r1, &user("a")), None, "{db}: not loaded");
        rooms.heartbeat(&r1, &user("a")).await.expect("loads the room");
        assert_eq!(rooms.last_seen(&r1, &user("a")), Some(4_600_000), "{db}");
        let not_member = rooms.heartbeat(&r1, &user("x")).await.unwrap_err();
        assert!(matches!(
            not_member,
            room_service::room::RoomError::Domain(room_service::domain::DomainError::NotMember { .. })
        ));
        let missing = rooms.heartbeat(&RoomId::parse("nope").unwrap(), &user("a")).await.unwrap_err();
        assert!(matches!(
            missing,
            room_service::room::RoomError::Domain(room_service::domain::DomainError::RoomNotFound)
        ));
        run(&rooms, "close", Command::CloseRoom { by: None, idle: false }).await;
        let closed = rooms.heartbeats(&r1, &[user("a")]).await.unwrap_err();
        assert!(matches!(
            closed,
            room_service::room::RoomError::Domain(room_service::domain::DomainError::RoomClosed)
        ));
    }
}

/// POSTs `body` to the in-process public router; status and JSON answer.
async fn post(app: &axum::Router, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    use tower::ServiceExt;
    let request = axum::http::Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

#[tokio::test]
async fn http_heartbeats_refresh_members_and_list_the_unknown() {
    use room_service::http::{PublicOptions, public_router};
    use serde_json::json;
    for db in backends().await {
        let state = crate::support::app::router_state(&db);
        let app = public_router(state.clone(), PublicOptions::default());
        let create = json!({"command_id": "c1", "room_id": "r1", "owner_id": "alice", "title": "Live"});
        assert_eq!(post(&app, "/v1/rooms", create).await.0, 200, "{db}");
        for (i, user) in ["bob", "carol"].iter().enumerate() {
            let join = json!({"command_id": format!("j{i}"), "user_id": user});
            assert_eq!(post(&app, "/v1/rooms/r1/join", join).await.0, 200, "{db}");
        }

        let ids = json!({"user_ids": ["bob", "dave", "carol", "bob", "erin", "dave"]});
        let (status, body) = post(&app, "/v1/rooms/r1/heartbeats", ids).await;
        assert_eq!((status, body), (200, json!({"alive": 2, "unknown": ["dave", "erin"]})), "{db}");
        let (status, body) = post(&app, "/v1/rooms/r1/heartbeats", json!({"user_ids": ["zed"]})).await;
        assert_eq!((status, body), (200, json!({"alive": 0, "unknown": ["zed"]})), "{db}");

        // 1–1000 valid ids, else 400 naming user_ids.
        let too_many: Vec<String> = (0..1001).map(|i| format!("u{i}")).collect();
        for bad in [
            json!({"user_ids": []}),
            json!({"user_ids": too_many}),
            json!({"user_ids": ["ok", "no way"]}),
            json!({}),
        ] {
            let (status, body) = post(&app, "/v1/rooms/r1/heartbeats", bad.clone()).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (400, Some("invalid_argument")),
                "{db}: {bad}"
            );
            assert!(body["error"]["message"].as_str().unwrap().contains("user_ids"), "{db}: {body}");
        }
        // The largest valid request (1000 ids of 64 bytes, about 67 KB) is taken under the
        // default body limit (64 KiB); a larger body still is not.
        let thousand: Vec<String> = (0..1000).map(|i| format!("{i:0>64}")).collect();
        let (status, body) = post(&app, "/v1/rooms/r1/heartbeats", json!({"user_ids": thousand})).await;
        assert_eq!((status, body["alive"].clone()), (200, json!(0)), "{db}: {body}");
        let (status, _) =
            post(&app, "/v1/rooms/r1/heartbeats", json!({"user_ids": [], "pad": "x".repeat(80_000)})).await;
        assert_eq!(status, 413, "{db}");

        // Missing and closed rooms answer like the single heartbeat.
        for path in ["/v1/rooms/nope/heartbeat", "/v1/rooms/nope/heartbeats"] {
            let body =
                if path.ends_with('s') { json!({"user_ids": ["bob"]}) } else { json!({"user_id": "bob"}) };
            let (status, body) = post(&app, path, body).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (404, Some("room_not_found")),
                "{db}: {path}"
            );
        }
        assert_eq!(post(&app, "/v1/rooms/r1/close", json!({"command_id": "close"})).await.0, 200, "{db}");
        for (path, body) in [
            ("/v1/rooms/r1/heartbeat", json!({"user_id": "bob"})),
            ("/v1/rooms/r1/heartbeats", json!({"user_ids": ["bob"]})),
        ] {
            let (status, body) = post(&app, path, body).await;
            assert_eq!((status, body["error"]["code"].as_str()), (409, Some("room_closed")), "{db}: {path}");
        }
        state.lifecycle.start_draining();
        let (status, body) = post(&app, "/v1/rooms/r1/heartbeats", json!({"user_ids": ["bob"]})).await;
        assert_eq!((status, body["error"]["code"].as_str()), (503, Some("draining")), "{db}");
    }
}

#[tokio::test]
async fn a_heartbeating_crowd_under_gifts_stays_and_exactly_the_silent_members_leave_once() {
    // The acceptance of SPEC §12.2 at test size (B11 runs 100,000 members): every member
    // heartbeats once a (fake) second through the batch route while gifts commit, the sweep
    // runs each second with stale_after 5 s; then the last 100 fall silent.
    const MEMBERS: usize = 3_000;
    const SILENT: usize = 100;
    const STALE: Duration = Duration::from_secs(5);
    let db = TestDb::mysql().await;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let rooms = service(&db, &now);
    let r1 = RoomId::parse("r1").unwrap();
    run(
        &rooms,
        "create",
        Command::CreateRoom { owner_id: user("owner"), title: "t".into(), seats: Default::default() },
    )
    .await;
    let ids: Vec<UserId> = (0..MEMBERS).map(|i| user(&format!("m{i:05}"))).collect();
    let rooms = &rooms;
    futures::future::join_all(ids.iter().map(|u| async move {
        run(rooms, &format!("join-{u}"), Command::JoinRoom { user_id: u.clone() }).await
    }))
    .await;
    let cancel = CancellationToken::new();
    let mut evicted = 0;
    for second in 0..20 {
        let beating = if second < 10 { &ids[..] } else { &ids[..MEMBERS - SILENT] };
        let gifts = futures::future::join_all((0..5).map(|k| {
            let sender = ids[(second * 5 + k) % (MEMBERS - SILENT)].as_str().to_owned();
            let command = gift(&sender);
            async move { run(rooms, &format!("gift-{second}-{k}"), command).await }
        }));
        let beats = async {
            for chunk in beating.chunks(1000) {
                let answer = rooms.heartbeats(&r1, chunk).await.expect("batch heartbeat");
                assert_eq!((answer.alive, answer.unknown.len()), (chunk.len(), 0), "second {second}");
            }
        };
        tokio::join!(gifts, beats);
        now.fetch_add(1_000, Ordering::SeqCst);
        evicted += sweep_stale(rooms, STALE, &cancel).await;
        if second < 10 {
            assert_eq!(evicted, 0, "a member heartbeating every second was evicted at second {second}");
        }
    }
    assert_eq!(evicted, SILENT);
    let left: Vec<String> = db
        .outbox()
        .await
        .into_iter()
        .filter(|r| r.event_type == "RoomUserLeft")
        .map(|r| r.envelope)
        .collect();
    assert_eq!(left.len(), SILENT, "one RoomUserLeft per silent member");
    for silent in &ids[MEMBERS - SILENT..] {
        assert_eq!(rooms.last_seen(&r1, silent), None, "{silent} is gone");
        assert_eq!(
            left.iter().filter(|e| e.contains(&format!("\"{silent}\""))).count(),
            1,
            "{silent} left once"
        );
    }
    let members = rooms.members(&r1, None, MEMBERS).await.unwrap();
    assert_eq!(members.len(), MEMBERS - SILENT);
    assert!(members.iter().all(|m| m.user_id.as_str() < ids[MEMBERS - SILENT].as_str()));
}
