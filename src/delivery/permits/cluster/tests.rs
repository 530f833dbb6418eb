//! The cluster's quota against real Redis: the shared one at 127.0.0.1:6379 (override with
//! `ROOM_SERVICE_TEST_REDIS_URL`; each test uses a key of its own), a closed port, and private
//! `redis-server`s this module starts and kills.
//!
//! The figures are printed: `cargo test --lib permits::cluster -- --nocapture`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;

use super::*;
use crate::secret::Secret;

const SHARED_REDIS: &str = "redis://127.0.0.1:6379/";

fn shared_redis_url() -> String {
    std::env::var("ROOM_SERVICE_TEST_REDIS_URL").unwrap_or_else(|_| SHARED_REDIS.to_owned())
}

/// A key no other test (nor another run) uses.
fn unique_key() -> String {
    format!("room-service-test:{}:{{{}}}", QUOTA_KEY_PREFIX.trim_end_matches(':'), uuid::Uuid::now_v7())
}

/// One node's limiter over its own connection to `url`.
fn node(url: &str, key: &str, limit: u32, expected_nodes: u32) -> Arc<SharedLimiter> {
    let redis = RedisConn::open(&Secret::new(url)).expect("a valid redis url");
    let quota = ClusterQuota { redis, key: key.to_owned(), expected_nodes };
    SharedLimiter::new(&quota, limit, (limit / 20).max(1))
}

/// How long the shared-quota tests ask.
const QUOTA_RUN: Duration = Duration::from_secs(3);

/// Three nodes sharing `limit` on a fresh key of the shared Redis, and the key.
fn three_nodes_on_one_key(limit: u32) -> (Vec<Arc<SharedLimiter>>, String) {
    let (url, key) = (shared_redis_url(), unique_key());
    ((0..3).map(|_| node(&url, &key, limit, 3)).collect(), key)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

/// A `redis-server` of our own on `port`, killed on drop.
struct PrivateRedis(std::process::Child);

impl PrivateRedis {
    fn start(port: u16, password: &str) -> Self {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .args(["--requirepass", password])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let give_up = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < give_up, "redis-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self(child)
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// For `run`, `per_node` askers on each of `nodes` call `ask` (with the node's index) one call
/// after another; answers what the calls granted (`Some`), in no order, how many calls were
/// made, and the seconds it took.
async fn keep_asking<T, F>(
    nodes: &[Arc<SharedLimiter>],
    per_node: usize,
    run: Duration,
    ask: impl Fn(usize, Arc<SharedLimiter>) -> F + Send + Sync + 'static,
) -> (Vec<T>, u32, f64)
where
    F: Future<Output = Option<T>> + Send + 'static,
    T: Send + 'static,
{
    let ask = Arc::new(ask);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        for _ in 0..per_node {
            let (ask, node) = (Arc::clone(&ask), Arc::clone(node));
            tasks.push(tokio::spawn(async move {
                let (mut granted, mut asked) = (Vec::new(), 0_u32);
                while started.elapsed() < run {
                    asked += 1;
                    granted.extend(ask(n, Arc::clone(&node)).await);
                }
                (granted, asked)
            }));
        }
    }
    let (mut granted, mut asked) = (Vec::new(), 0);
    for task in tasks {
        let (more, calls) = task.await.expect("the asker ran to its end");
        granted.extend(more);
        asked += calls;
    }
    (granted, asked, started.elapsed().as_secs_f64())
}

/// The most grants certainly inside one second of Redis' clock: a grant happened between its
/// request's send and its answer, so grants `i..=j` (by send time) certainly lie within one
/// second when `answered_j - sent_i < 1 s`. A lower bound of the true count, so a count above
/// the limit is a real breach, never a measurement artefact.
fn most_in_one_second(grants: &mut [(Instant, Instant)]) -> usize {
    grants.sort();
    (0..grants.len())
        .map(|i| {
            let end = grants[i].0 + Duration::from_secs(1);
            grants[i..].iter().filter(|(_, answered)| *answered < end).count()
        })
        .max()
        .unwrap_or(0)
}

/// The most instants within any window of `width`.
fn most_within(times: &mut [Instant], width: Duration) -> usize {
    times.sort();
    (0..times.len())
        .map(|i| times[i..].iter().take_while(|t| t.duration_since(times[i]) < width).count())
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_asking_one_key_never_get_more_than_the_limit_in_any_second() {
    const LIMIT: u32 = 50;
    let (nodes, key) = three_nodes_on_one_key(LIMIT);
    let (mut grants, asked, elapsed) = keep_asking(&nodes, 3, QUOTA_RUN, |_, node| async move {
        let sent = Instant::now();
        let granted = node.check().await;
        let answered = Instant::now();
        tokio::time::sleep(Duration::from_millis(2)).await;
        granted.then_some((sent, answered))
    })
    .await;
    let most = most_in_one_second(&mut grants);
    let per_sec = grants.len() as f64 / elapsed;
    println!(
        "shared quota, sync path: 3 nodes × 3 askers, {asked} asks in {elapsed:.2} s: {} granted \
         ({per_sec:.1}/s), at most {most} in one second (limit {LIMIT})",
        grants.len()
    );
    assert!(nodes.iter().all(|n| !n.in_fallback()), "Redis answered throughout");
    assert!(most <= LIMIT as usize, "{most} permits within one second, limit {LIMIT}");
    assert!(per_sec >= f64::from(LIMIT) * 0.6, "only {per_sec:.1}/s granted of {LIMIT}/s");
    let _ = nodes[0].redis.connection().del::<_, ()>(&key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_waiting_on_one_key_share_the_limit() {
    const LIMIT: u32 = 40;
    let (nodes, key) = three_nodes_on_one_key(LIMIT);
    let (granted, _, elapsed) = keep_asking(&nodes, 4, QUOTA_RUN, |n, node| async move {
        node.until_ready().await;
        Some((n, Instant::now()))
    })
    .await;
    let mut times: Vec<Instant> = granted.iter().map(|(_, t)| *t).collect();
    // Measured when each waiter woke, up to one Redis round trip after its grant: a window
    // 25 ms short of a second keeps that jitter out of the count.
    let most = most_within(&mut times, Duration::from_millis(975));
    let per_node: Vec<usize> = (0..3).map(|n| granted.iter().filter(|(m, _)| *m == n).count()).collect();
    let per_sec = granted.len() as f64 / elapsed;
    println!(
        "shared quota, worker path: 3 nodes × 4 waiters for {elapsed:.2} s: {} granted ({per_sec:.1}/s, \
         by node {per_node:?}), at most {most} in 975 ms (limit {LIMIT})",
        granted.len()
    );
    assert!(most <= LIMIT as usize, "{most} permits within 975 ms, limit {LIMIT}");
    assert!(per_sec >= f64::from(LIMIT) * 0.6, "only {per_sec:.1}/s granted of {LIMIT}/s");
    assert!(per_node.iter().all(|n| *n > 0), "every node got permits: {per_node:?}");
    let _ = nodes[0].redis.connection().del::<_, ()>(&key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_each_node_takes_its_share_and_no_call_waits_for_redis() {
    const LIMIT: u32 = 60;
    // A port nothing listens on: refused at once.
    let node = node(&format!("redis://127.0.0.1:{}/", free_port()), &unique_key(), LIMIT, 3);
    // The sync path: the first ask finds Redis down and answers from the local share.
    let started = Instant::now();
    let mut sync_granted = 0;
    for _ in 0..200 {
        if Arc::clone(&node).check().await {
            sync_granted += 1;
        }
    }
    let asking = started.elapsed();
    assert!(node.in_fallback());
    // The worker path for two seconds more, on the share of 60 / 3 = 20 per second.
    let run = Duration::from_secs(2);
    let started = Instant::now();
    let mut times = Vec::new();
    while started.elapsed() < run {
        node.until_ready().await;
        times.push(Instant::now());
    }
    let per_sec = times.len() as f64 / started.elapsed().as_secs_f64();
    let most = most_within(&mut times, Duration::from_secs(1));
    println!(
        "fallback: 200 sync asks in {asking:?} ({sync_granted} granted); worker {} permits in {:?} \
         ({per_sec:.1}/s), at most {most} in one second (share {})",
        times.len(),
        started.elapsed(),
        LIMIT / 3
    );
    // 200 asks paying a Redis timeout each would take a minute.
    assert!(asking < Duration::from_secs(5), "200 asks took {asking:?}");
    assert!((1..=20).contains(&sync_granted), "{sync_granted} sync permits from a share of 20/s");
    assert!(most <= 20 + 1, "{most} permits within one second from a share of 20/s");
    assert!(per_sec >= 10.0, "only {per_sec:.1}/s from a share of 20/s");
}

/// Log lines of the test's own thread (a current-thread runtime runs every task there).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

#[tokio::test]
async fn redis_going_away_and_coming_back_is_said_once_each_way_and_sharing_resumes() {
    const PASSWORD: &str = "quota-hunter2";
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _logs = tracing::subscriber::set_default(subscriber);
    let port = free_port();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{port}/");
    let key = unique_key();
    let node = node(&url, &key, 60, 3);

    // Redis down from the start: fallback, retried in the background at most every second.
    for _ in 0..50 {
        let _ = Arc::clone(&node).check().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(node.in_fallback(), "no Redis on {port}");

    // Redis comes up: within a retry or two the node shares the quota again.
    let redis = PrivateRedis::start(port, PASSWORD);
    let give_up = Instant::now() + RETRY_EVERY * 10;
    while node.in_fallback() {
        assert!(Instant::now() < give_up, "still in fallback {:?} after Redis came back", RETRY_EVERY * 10);
        let _ = Arc::clone(&node).check().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    node.until_ready().await;
    let tat: Option<String> = node.redis.connection().get(&key).await.expect("Redis answers");
    assert!(tat.is_some(), "the permit came from the key in Redis");

    // Redis goes away again, in the middle of the worker's waits: no wait fails.
    drop(redis);
    let started = Instant::now();
    for _ in 0..30 {
        node.until_ready().await;
    }
    assert!(node.in_fallback());
    assert!(started.elapsed() < Duration::from_secs(10), "30 permits took {:?}", started.elapsed());

    let logs = captured.text();
    let warned = logs.matches("IM quota falls back").count();
    let recovered = logs.matches("IM quota is shared by the cluster again").count();
    assert_eq!((warned, recovered), (2, 1), "two falls and one recovery, each said once:\n{logs}");
    assert!(!logs.contains(PASSWORD), "the Redis password leaked into the logs:\n{logs}");
}
