//! An activity service for the webhook tests: an axum server on loopback that verifies every
//! request's `X-Room-Signature` on its own (the `hmac` crate, not the service's code), records
//! the events it acknowledged, and can be told to fail requests or answer slowly.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use tokio::net::TcpListener;

/// The secret tests configure.
pub const SECRET: &str = "webhook-test-secret-0123456789";

/// One acknowledged event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub event_id: String,
    pub event_type: String,
    pub room_id: String,
}

#[derive(Default)]
struct Inner {
    events: Mutex<Vec<Received>>,
    /// Bodies of the requests answered 503, in order.
    failed_bodies: Mutex<Vec<Bytes>>,
    /// Bodies of the requests acknowledged, in order.
    ok_bodies: Mutex<Vec<Bytes>>,
    bad_signatures: AtomicU32,
    fail_next: AtomicU32,
    fail_all: std::sync::atomic::AtomicBool,
    latency_ms: AtomicU32,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    requests: AtomicU32,
}

/// A running receiver.
#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Inner>,
    pub url: String,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let inner = Arc::new(Inner::default());
        let app = axum::Router::new().route("/hooks/rooms", post(receive)).with_state(inner.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind receiver");
        let url = format!("http://{}/hooks/rooms", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { inner, url }
    }

    /// Event ids acknowledged, in arrival order (duplicates kept).
    pub fn event_ids(&self) -> Vec<String> {
        self.inner.events.lock().unwrap().iter().map(|e| e.event_id.clone()).collect()
    }

    pub fn events(&self) -> Vec<Received> {
        self.inner.events.lock().unwrap().clone()
    }

    pub fn bad_signatures(&self) -> u32 {
        self.inner.bad_signatures.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u32 {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Answer the next `n` requests 503.
    pub fn fail_next(&self, n: u32) {
        self.inner.fail_next.store(n, Ordering::SeqCst);
    }

    /// Answer every request 503 until told otherwise.
    pub fn fail_all(&self, on: bool) {
        self.inner.fail_all.store(on, Ordering::SeqCst);
    }

    pub fn set_latency(&self, latency: Duration) {
        self.inner.latency_ms.store(latency.as_millis() as u32, Ordering::SeqCst);
    }

    pub fn failed_bodies(&self) -> Vec<Bytes> {
        self.inner.failed_bodies.lock().unwrap().clone()
    }

    pub fn ok_bodies(&self) -> Vec<Bytes> {
        self.inner.ok_bodies.lock().unwrap().clone()
    }

    /// Most requests ever handled at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }
}

/// Recomputes the HMAC of the raw body and compares in constant time.
fn verified(headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(hex) =
        headers.get("x-room-signature").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("sha256="))
    else {
        return false;
    };
    let Some(signature) = (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    hex.len() == 64
        && hex.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        && mac.verify_slice(&signature).is_ok()
}

async fn receive(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    inner.requests.fetch_add(1, Ordering::SeqCst);
    let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    inner.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let status = handle(&inner, &headers, body).await;
    inner.in_flight.fetch_sub(1, Ordering::SeqCst);
    status
}

async fn handle(inner: &Inner, headers: &HeaderMap, body: Bytes) -> StatusCode {
    let latency = inner.latency_ms.load(Ordering::SeqCst);
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency.into())).await;
    }
    if !verified(headers, &body) {
        inner.bad_signatures.fetch_add(1, Ordering::SeqCst);
        return StatusCode::UNAUTHORIZED;
    }
    let failing = inner.fail_all.load(Ordering::SeqCst)
        || inner.fail_next.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    if failing {
        inner.failed_bodies.lock().unwrap().push(body);
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    if parsed["consumer"] != "webhook" {
        return StatusCode::BAD_REQUEST;
    }
    let mut events = inner.events.lock().unwrap();
    for event in parsed["events"].as_array().into_iter().flatten() {
        events.push(Received {
            event_id: event["event_id"].as_str().unwrap_or_default().to_owned(),
            event_type: event["event_type"].as_str().unwrap_or_default().to_owned(),
            room_id: event["room_id"].as_str().unwrap_or_default().to_owned(),
        });
    }
    inner.ok_bodies.lock().unwrap().push(body);
    StatusCode::OK
}
