//! Poisoned request ids (SPEC §13.1, one validator for both protocols): while honest members
//! send gifts over HTTP, one member sends gifts over gRPC and HTTP with `x-request-id`s of 129
//! and 4,000 characters — on MariaDB, where a 129-character id overflowed the command log's
//! column and failed every co-batched gift (26 % of honest gifts in the review), and on SQLite,
//! where a long id made the event too large for IM and parked it. Promised: 0 honest failures,
//! the poisoner's gifts commit too (under a fresh request id), nothing is parked, every event
//! reaches IM.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::json;
use tonic::transport::Channel;

use crate::support::app::{TestApp, fake_im, settings};
use crate::support::backends;

const HONEST: usize = 4;
const LOAD: Duration = Duration::from_secs(3);

fn gift_body(command_id: &str, sender: &str) -> serde_json::Value {
    json!({"command_id": command_id, "sender_id": sender, "receiver_id": "alice", "gift_id": "rose",
           "count": 1, "unit_value": 1})
}

#[tokio::test]
async fn poisoned_request_ids_fail_no_honest_gift_and_park_nothing() {
    for db in backends().await {
        let im = fake_im().await;
        let app = Arc::new(TestApp::start(settings(db.url(), Some(&im), &[])).await);
        let create = json!({"command_id": "c", "room_id": "r1", "owner_id": "alice", "title": "t"});
        assert_eq!(app.post("/v1/rooms", create).await.0, 200, "{db}");
        let users: Vec<String> = (0..HONEST).map(|i| format!("h{i}")).chain(["mallory".to_owned()]).collect();
        for user in &users {
            let join = json!({"command_id": format!("join-{user}"), "user_id": user});
            assert_eq!(app.post("/v1/rooms/r1/join", join).await.0, 200, "{db}");
        }

        let stop = Arc::new(AtomicBool::new(false));
        let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut honest = Vec::new();
        for i in 0..HONEST {
            let (app, stop, sent, failed) = (app.clone(), stop.clone(), sent.clone(), failed.clone());
            honest.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let (status, body) = app
                        .post("/v1/rooms/r1/gifts", gift_body(&format!("h{i}-{n}"), &format!("h{i}")))
                        .await;
                    sent.fetch_add(1, Ordering::Relaxed);
                    if status != 200 {
                        failed.fetch_add(1, Ordering::Relaxed);
                        eprintln!("honest gift failed: {status} {body}");
                    }
                }
            }));
        }
        // The poisoner: gRPC and HTTP, ids of 129 and 4,000 printable characters.
        let channel =
            Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect().await.unwrap();
        let mut grpc = RoomServiceClient::new(channel);
        let mut poisoned = 0;
        let deadline = tokio::time::Instant::now() + LOAD;
        while tokio::time::Instant::now() < deadline {
            poisoned += 1;
            let long = if poisoned % 2 == 0 { "r".repeat(129) } else { "q\"\\".repeat(1_334) };
            let mut request = tonic::Request::new(pb::SendGiftRequest {
                command_id: format!("m-grpc-{poisoned}"),
                room_id: "r1".into(),
                sender_id: "mallory".into(),
                receiver_id: "alice".into(),
                gift_id: "rose".into(),
                count: 1,
                unit_value: 1,
            });
            request.metadata_mut().insert("x-request-id", long.parse().unwrap());
            let answer = grpc.send_gift(request).await;
            let echoed = answer.as_ref().map(|a| a.metadata().get("x-request-id").map(|v| v.len()));
            assert!(answer.is_ok(), "{db}: the poisoner's own gift is served: {answer:?}");
            assert_eq!(echoed.ok().flatten(), Some(36), "{db}: a fresh request id replaces the poisoned one");
            let response = app
                .http
                .post(format!("{}/v1/rooms/r1/gifts", app.base))
                .header("x-request-id", long)
                .json(&gift_body(&format!("m-http-{poisoned}"), "mallory"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{db}");
            assert_eq!(response.headers()["x-request-id"].len(), 36, "{db}");
        }
        stop.store(true, Ordering::Relaxed);
        for task in honest {
            task.await.unwrap();
        }
        app.settle().await;
        let (sent, failed) = (sent.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
        let parked =
            db.scalar("SELECT COUNT(*) FROM room_outbox WHERE status = 'failed'").await.unwrap_or(-1);
        let longest = db.scalar("SELECT MAX(LENGTH(request_id)) FROM room_command_log").await.unwrap_or(-1);
        let gifts_in_im = im.stats().accepted;
        eprintln!(
            "{db}: poisoned request ids: {} poisoned gifts, {sent} honest gifts, {failed} failed, {parked} parked, longest stored request id {longest}, {gifts_in_im} events in IM",
            poisoned * 2
        );
        assert_eq!(failed, 0, "{db}: honest gifts failed");
        assert_eq!(parked, 0, "{db}: events parked");
        assert!(longest <= 128, "{db}: a request id of {longest} characters was stored");
        let gifts = db
            .scalar("SELECT COUNT(*) FROM room_command_log WHERE command_type = 'send_gift'")
            .await
            .unwrap();
        assert_eq!(gifts as u64, sent + poisoned * 2, "{db}: every gift committed");
        Arc::try_unwrap(app).ok().expect("the only owner").stop().await;
    }
}
