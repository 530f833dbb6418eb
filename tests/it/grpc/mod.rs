//! The gRPC API through a tonic client against the real service (`app::start`, on MariaDB):
//! every RPC, replay, the status of each failure, the deadline, health following readiness,
//! reflection, and HTTP and gRPC commands sharing one room's version sequence.

mod calls;
mod cluster;
mod python;
mod serving;

use room_service::grpc::pb::room_service_client::RoomServiceClient;
use room_service::grpc::pb::{self, CommandOutcome};
use tonic::transport::Channel;

use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

/// A started service and a gRPC channel to it.
struct GrpcApp {
    app: TestApp,
    channel: Channel,
}

impl GrpcApp {
    /// The service over `db` with `overrides`.
    async fn start(db: &TestDb, overrides: &[(&str, &str)]) -> GrpcApp {
        let app = TestApp::start(settings(db.url(), None, overrides)).await;
        let channel = connect(app.app.grpc_addr).await;
        GrpcApp { app, channel }
    }

    fn rooms(&self) -> RoomServiceClient<Channel> {
        RoomServiceClient::new(self.channel.clone())
    }

    async fn create(&self, command_id: &str, room: &str) -> Result<CommandOutcome, tonic::Status> {
        let request = pb::CreateRoomRequest {
            command_id: command_id.into(),
            room_id: room.into(),
            owner_id: "alice".into(),
            title: "t".into(),
            seats: None,
        };
        self.rooms().create_room(request).await.map(tonic::Response::into_inner)
    }

    async fn join(&self, command_id: &str, room: &str, user: &str) -> Result<CommandOutcome, tonic::Status> {
        let request = member(command_id, room, user);
        self.rooms().join_room(request).await.map(tonic::Response::into_inner)
    }
}

/// A channel to `addr` (connected lazily by the first call).
async fn connect(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}")).expect("uri").connect().await.expect("connect")
}

fn member(command_id: &str, room: &str, user: &str) -> pb::MemberRequest {
    pb::MemberRequest { command_id: command_id.into(), room_id: room.into(), user_id: user.into() }
}

fn gift(command_id: &str, sender: &str) -> pb::SendGiftRequest {
    pb::SendGiftRequest {
        command_id: command_id.into(),
        room_id: "r1".into(),
        sender_id: sender.into(),
        receiver_id: "alice".into(),
        gift_id: "rocket".into(),
        count: 2,
        unit_value: 500,
    }
}

/// One unary call over a bare HTTP/2 connection with `grpc-timeout: timeout`; answers the
/// response head (a failure answers trailers-only: `grpc-status` is a header). Tonic's client
/// would also expire the call itself, so only this shows what the server answers.
async fn raw_call(
    addr: std::net::SocketAddr,
    path: &str,
    message: impl prost::Message,
    timeout: &str,
) -> axum::http::Response<hyper::body::Incoming> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.expect("h2");
    tokio::spawn(connection);
    let payload = message.encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend(u32::try_from(payload.len()).expect("small").to_be_bytes());
    frame.extend(payload);
    let request = axum::http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", timeout)
        .body(axum::body::Body::from(frame))
        .expect("request");
    sender.send_request(request).await.expect("answer")
}
