//! B9's pieces: the local webhook receiver (axum on loopback, answering 200 and counting the
//! events of each `{"consumer":"webhook","events":[...]}` body) and the raw baseline loop (one
//! sqlx read of 100 envelopes, one signed POST, one position UPDATE per batch, sequentially).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use room_service::consumer::webhook::{SIGNATURE_HEADER, signature};
use sqlx::mysql::MySqlPool;
use tokio::sync::{oneshot, watch};

/// Path the receiver answers on.
const HOOK_PATH: &str = "/hooks/rooms";
/// Key of the signatures (a throwaway, loopback only).
pub const HOOK_SECRET: &str = "bench-webhook-secret-loopback-only";
/// Events per batch, the consumer's `batch_size` and the raw loop's `LIMIT`.
pub const BATCH: usize = 100;

/// A webhook receiver on `127.0.0.1:0`; stops when dropped.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    count: watch::Sender<usize>,
    _stop: oneshot::Sender<()>,
}

#[derive(serde::Deserialize)]
struct Batch {
    events: Vec<serde::de::IgnoredAny>,
}

async fn receive(State(count): State<watch::Sender<usize>>, body: Bytes) -> axum::http::StatusCode {
    match serde_json::from_slice::<Batch>(&body) {
        Ok(batch) => {
            count.send_modify(|c| *c += batch.events.len());
            axum::http::StatusCode::OK
        }
        Err(_) => axum::http::StatusCode::BAD_REQUEST,
    }
}

impl Receiver {
    /// Binds a loopback port and serves in a spawned task.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (count, _) = watch::channel(0_usize);
        let router = Router::new().route(HOOK_PATH, post(receive)).with_state(count.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(error) = axum::serve(listener, router).with_graceful_shutdown(shutdown).await {
                eprintln!("b9 receiver: {error}");
            }
        });
        Ok(Self { addr, count, _stop: stop })
    }

    /// The URL batches are POSTed to.
    pub fn url(&self) -> String {
        format!("http://{}{HOOK_PATH}", self.addr)
    }

    /// Events received so far.
    pub fn received(&self) -> usize {
        *self.count.borrow()
    }

    /// Sets the count back to zero.
    pub fn reset(&self) {
        self.count.send_replace(0);
    }

    /// Waits until at least `n` events arrived (an error after `limit`).
    pub async fn wait_for(&self, n: usize, limit: Duration) -> anyhow::Result<()> {
        let mut rx = self.count.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|&c| c >= n))
            .await
            .with_context(|| format!("webhook receiver got {} of {n} events in {limit:?}", self.received()))?
            .map(|_| ())
            .context("receiver closed")
    }
}

/// The raw baseline: reads the outbox past its position 100 envelopes at a time, POSTs each
/// batch (the consumer's body shape, signed the same way) and writes its position with one
/// UPDATE per batch (a row of its own in `room_event_consumer`). Returns the events sent.
pub async fn raw_loop(pool: &MySqlPool, url: &str) -> anyhow::Result<usize> {
    sqlx::query("INSERT INTO room_event_consumer (name, updated_at_ms) VALUES ('bench_raw', 0)")
        .execute(pool)
        .await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(3)).build()?;
    let (mut position, mut sent) = (0_i64, 0_usize);
    loop {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, envelope FROM room_outbox WHERE id > ? ORDER BY id LIMIT ?")
                .bind(position)
                .bind(BATCH as i64)
                .fetch_all(pool)
                .await?;
        let Some(&(last, _)) = rows.last() else { break };
        let events: Vec<&str> = rows.iter().map(|(_, e)| e.as_str()).collect();
        let body = format!(r#"{{"consumer":"webhook","events":[{}]}}"#, events.join(","));
        let signed = signature(HOOK_SECRET.as_bytes(), body.as_bytes());
        http.post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signed)
            .body(body)
            .send()
            .await?
            .error_for_status()?;
        sqlx::query(
            "UPDATE room_event_consumer SET position = ?, \
             updated_at_ms = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) WHERE name = 'bench_raw'",
        )
        .bind(last)
        .execute(pool)
        .await?;
        position = last;
        sent += rows.len();
    }
    Ok(sent)
}

/// The overrides enabling the webhook consumer toward `url`: batches of [`BATCH`], no rate
/// limit, idle polls every 50 ms.
pub fn webhook_overrides(url: &str) -> Vec<(String, String)> {
    let batch = BATCH.to_string();
    [
        ("consumers.webhook.enabled", "true"),
        ("consumers.webhook.url", url),
        ("consumers.webhook.secret", HOOK_SECRET),
        ("consumers.webhook.batch_size", batch.as_str()),
        ("consumers.webhook.rate_limit_per_sec", "0"),
        ("consumers.poll_interval", "50ms"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}
