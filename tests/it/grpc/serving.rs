//! The gRPC listener as a whole: request ids, the shared version sequence with HTTP, health
//! following readiness, reflection, and draining.

use std::time::Duration;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::json;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::{v1, v1alpha};

use super::{GrpcApp, connect, member};
use crate::support::TestDb;
use crate::support::app::router_state;

#[tokio::test]
async fn http_and_grpc_commands_on_one_room_share_one_version_sequence() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[]).await;
    assert_eq!(g.create("c1", "r1").await.expect("create").room_version, 1);
    let mut versions = vec![1];
    for i in 0..3 {
        let (status, body) = g
            .app
            .post("/v1/rooms/r1/join", json!({"command_id": format!("h{i}"), "user_id": format!("h{i}")}))
            .await;
        assert_eq!(status, 200, "{body}");
        versions.push(body["room_version"].as_u64().unwrap());
        versions.push(g.join(&format!("g{i}"), "r1", &format!("g{i}")).await.expect("join").room_version);
    }
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7]);
    // A gRPC command replayed over HTTP: one command log.
    let (status, body) = g.app.post("/v1/rooms/r1/join", json!({"command_id": "g0", "user_id": "g0"})).await;
    assert_eq!((status, body["replayed"].as_bool()), (200, Some(true)), "{body}");
    let (_, metrics) = g.app.admin_get("/metrics").await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    for transport in ["http", "grpc"] {
        let series = format!(
            "room_commands_total{{command=\"join_room\",result=\"applied\",transport=\"{transport}\"}} "
        );
        assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
    }
    g.app.stop().await;
}

#[tokio::test]
async fn a_request_id_is_echoed_or_generated() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[]).await;
    let mut rooms = g.rooms();
    let mut request = tonic::Request::new(pb::GetRoomRequest { room_id: "nope".into() });
    request.metadata_mut().insert("x-request-id", "req-123".parse().unwrap());
    let status = rooms.get_room(request).await.expect_err("missing");
    assert_eq!(status.metadata().get("x-request-id").unwrap(), "req-123");
    let status = rooms.get_room(pb::GetRoomRequest { room_id: "nope".into() }).await.expect_err("missing");
    let generated = status.metadata().get("x-request-id").expect("a generated id").to_str().unwrap();
    assert_eq!(generated.len(), 36, "{generated}");
    g.app.stop().await;
}

/// The service names a reflection version lists (`v1` and `v1alpha` are the same protocol in
/// two generated packages).
macro_rules! listed {
    ($version:ident, $channel:expr) => {{
        use $version::server_reflection_request::MessageRequest;
        use $version::server_reflection_response::MessageResponse;
        let request = $version::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut client = $version::server_reflection_client::ServerReflectionClient::new($channel.clone());
        let mut answers =
            client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
        let answer = answers.message().await.unwrap().expect("an answer");
        let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
            panic!("not a service list: {answer:?}");
        };
        list.service.into_iter().map(|s| s.name).collect::<Vec<String>>()
    }};
}

#[tokio::test]
async fn reflection_lists_the_room_and_health_services_over_v1_and_v1alpha() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[]).await;
    for (version, names) in [("v1", listed!(v1, g.channel)), ("v1alpha", listed!(v1alpha, g.channel))] {
        for name in ["room.v1.RoomService", "grpc.health.v1.Health"] {
            assert!(names.iter().any(|n| n == name), "{version}: {name} not in {names:?}");
        }
    }
    g.app.stop().await;
}

async fn health(channel: &tonic::transport::Channel, service: &str) -> Result<ServingStatus, tonic::Status> {
    let request = HealthCheckRequest { service: service.into() };
    let answer = HealthClient::new(channel.clone()).check(request).await?.into_inner();
    Ok(answer.status())
}

#[tokio::test]
async fn health_is_serving_then_not_serving_once_the_service_leaves() {
    let db = TestDb::mysql().await;
    let g = GrpcApp::start(&db, &[("http.shutdown_grace", "2s")]).await;
    assert_eq!(health(&g.channel, "").await.unwrap(), ServingStatus::Serving);
    assert_eq!(health(&g.channel, "room.v1.RoomService").await.unwrap(), ServingStatus::Serving);
    assert_eq!(health(&g.channel, "other.Service").await.unwrap_err().code(), Code::NotFound);
    let mut watch = HealthClient::new(g.channel.clone())
        .watch(HealthCheckRequest { service: String::new() })
        .await
        .expect("watch")
        .into_inner();
    assert_eq!(watch.message().await.unwrap().expect("first").status(), ServingStatus::Serving);
    g.app.app.shutdown_token().cancel();
    let change =
        tokio::time::timeout(Duration::from_secs(5), watch.message()).await.expect("a change in time");
    assert_eq!(change.unwrap().expect("a change").status(), ServingStatus::NotServing);
    let started = std::time::Instant::now();
    let mut status = ServingStatus::Serving;
    for _ in 0..50 {
        status = health(&g.channel, "").await.unwrap();
        if status == ServingStatus::NotServing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, ServingStatus::NotServing);
    // Commands are still served while leaving.
    g.create("c1", "r1").await.expect("served while leaving");
    // The watch ends once the service drains: it does not hold the shutdown.
    let ended = tokio::time::timeout(Duration::from_secs(5), watch.message()).await.expect("the watch ends");
    assert!(matches!(ended, Ok(None) | Err(_)), "{ended:?}");
    g.app.app.wait().await.expect("clean stop");
    assert!(started.elapsed() < Duration::from_secs(6), "stopped in {:?}", started.elapsed());
}

#[tokio::test]
async fn commands_answer_unavailable_while_draining() {
    let db = TestDb::mysql().await;
    let state = router_state(&db);
    state.lifecycle.start_draining();
    let router = room_service::grpc::router(state, Default::default()).expect("router");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let options = room_service::http::server::ServeOptions::grpc(
        &crate::support::app::settings(db.url(), None, &[]).http,
    );
    let server = tokio::spawn(room_service::http::server::serve(
        listener,
        router,
        options,
        stop.clone().cancelled_owned(),
    ));
    let channel = connect(addr).await;
    let status = RoomServiceClient::new(channel.clone())
        .join_room(member("c1", "r1", "bob"))
        .await
        .expect_err("draining");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.metadata().get("error-code").unwrap(), "draining");
    assert_eq!(health(&channel, "").await.unwrap(), ServingStatus::NotServing);
    stop.cancel();
    server.await.unwrap().unwrap();
}
