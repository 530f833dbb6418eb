//! The accept loop against misbehaving clients, over real loopback TCP: every way a client can
//! hold a connection open is bounded, and so is shutdown.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use room_service::http::server::{Protocol, ServeOptions, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const IDLE: Duration = Duration::from_millis(400);

fn options() -> ServeOptions {
    ServeOptions {
        listener: "test",
        protocol: Protocol::Http1,
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: IDLE,
        max_connections: 100,
        shutdown_timeout: Duration::from_millis(300),
    }
}

struct Server {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<std::io::Result<()>>,
}

/// Serves a router with `/` (instant) and `/slow` (2 s) and `POST /echo` (reads the body).
async fn start(options: ServeOptions) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "slow"
            }),
        )
        .route("/echo", axum::routing::post(|body: String| async move { body }));
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(listener, router, options, stop.clone().cancelled_owned()));
    Server { addr, stop, task }
}

/// Reads until the server closes the connection (or `within` passes: then panics).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> String {
    let mut buf = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("the connection was still open after {within:?}"))
        .ok();
    String::from_utf8_lossy(&buf).into_owned()
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_cut_off() {
    let server = start(options()).await;
    let body = reqwest::get(format!("http://{}/", server.addr)).await.unwrap().text().await.unwrap();
    assert_eq!(body, "ok", "a complete request is served");

    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let answer = closed_within(&mut stream, Duration::from_secs(5)).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
    // A header-read timeout far longer than the idle timeout: only the latter can close these.
    let server = start(ServeOptions { header_read_timeout: Duration::from_secs(10), ..options() }).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    closed_within(&mut stream, IDLE + Duration::from_millis(600)).await;

    // Between two requests of a kept-alive connection too.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answer = closed_within(&mut stream, IDLE + Duration::from_millis(600)).await;
    assert!(answer.contains("200 OK"), "{answer}");
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_body_that_stalls_midway_ends_the_connection() {
    let server = start(options()).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nsix by")
        .await
        .unwrap();
    let answer = closed_within(&mut stream, Duration::from_secs(5)).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_http2_preface_is_refused() {
    let server = start(options()).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    // The HTTP/2 connection preface and an empty SETTINGS frame.
    stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00").await.unwrap();
    let answer = closed_within(&mut stream, Duration::from_millis(300)).await;
    assert!(!answer.contains("200"), "{answer}");
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn connections_over_the_cap_get_a_503_and_the_rest_are_still_served() {
    let server =
        start(ServeOptions { max_connections: 2, idle_timeout: Duration::from_secs(5), ..options() }).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(server.addr).await.unwrap());
    }
    // Accepted in order: give the loop a moment to take both.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = TcpStream::connect(server.addr).await.unwrap();
    let answer = closed_within(&mut third, Duration::from_secs(2)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(body["error"]["code"], "overloaded");

    // A held connection is still served; once one closes, a new one is accepted.
    held[0].write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    assert!(closed_within(&mut held[0], Duration::from_secs(2)).await.contains("200 OK"));
    drop(held.remove(0));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let body = reqwest::get(format!("http://{}/", server.addr)).await.unwrap().text().await.unwrap();
    assert_eq!(body, "ok");
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_waits_for_open_requests_at_most_the_shutdown_timeout() {
    let server = start(ServeOptions { idle_timeout: Duration::from_secs(30), ..options() }).await;
    // A request half sent (the body never comes) and a slow request in flight.
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    stalled
        .write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nsix by")
        .await
        .unwrap();
    let slow = tokio::spawn(reqwest::get(format!("http://{}/slow", server.addr)));
    tokio::time::sleep(Duration::from_millis(100)).await;

    let started = Instant::now();
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1500), "shutdown took {took:?} with a 300 ms shutdown timeout");
    closed_within(&mut stalled, Duration::from_secs(1)).await;
    assert!(slow.await.unwrap().is_err(), "the slow request was dropped, not answered");
}

#[tokio::test]
async fn a_request_answered_after_longer_than_the_idle_timeout_still_gets_its_answer() {
    // The idle timeout (400 ms) counts silence while waiting for a request, not the time a
    // handler takes (2 s here): the socket is not read while a request is being answered.
    let server = start(options()).await;
    let body = reqwest::get(format!("http://{}/slow", server.addr)).await.unwrap().text().await.unwrap();
    assert_eq!(body, "slow");
    server.stop.cancel();
    server.task.await.unwrap().unwrap();
}
