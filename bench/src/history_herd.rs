//! B13, hostile readers of the events API (issue #45): the real service as a black box (IM off,
//! as in B13: with IM on at Tencent's limits a hot room's backlog grows through the run and its
//! gifts/s fall from phase to phase whatever reads, which hides what the readers cost),
//! `--live-clients` clients sending gifts into one hot room, closed loop, for
//! `--live-seconds`:
//!
//! 1. alone (before and after the readers: the baseline is their mean);
//! 2. beside 16 readers asking for 300 events as fast as they are answered, each from its own
//!    loopback address (after a 429, once its `Retry-After` has passed); and beside 16 that
//!    ask again at once (a flood of refusals: context, no target);
//! 3. beside a reconnect herd: a second into the phase, 2,000 one-shot reads at once, each a new
//!    connection from its own address, each from somewhere in the room's last 200 versions;
//! 4. on a second service with `rooms.history.max_events: 100000` and `max_age: 2s`, a room of
//!    21,500 events left idle past `max_age`: 4 readers of its old ranges (`recovered:
//!    false`), each from its own address reading every 100 ms, beside gifts into another room.
//!
//! Targets (#45): gifts ≥ 0.8× alone beside the 16 readers and beside the old-range readers,
//! ≥ 0.7× beside the herd, the herd's p99 ≤ 100 ms, an old range's median ≤ 10 ms.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Args;
use crate::live::load::{self, Api, Pace, Target, member};
use crate::live::process;
use crate::report::Line;
use crate::support::{BenchDb, Samples, ms};

/// Hostile readers.
const READERS: usize = 16;
/// Reads of the herd.
const HERD: usize = 2_000;
/// Events of the old room.
const DEEP: u64 = 21_500;

/// Runs the hostile part of B13 on `db`.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let herd = if args.smoke { 50 } else { HERD };
    let more = [("HTTP__MAX_CONNECTIONS", "4096".to_owned()), ("HTTP__MAX_IN_FLIGHT", "4096".to_owned())];
    let service = process::start_service(&db.url(), None, 1, &more).await?;
    let api = Api { http: reqwest::Client::new(), base: service.base.clone() };
    let target: Target = Arc::new(|c, _| ("hot".to_owned(), member(c)));
    load::setup(&api, args.live_clients, 1, &target).await?;
    let secs = args.live_seconds;
    let gifts = |tag: &'static str| load::run(&api, tag, args.live_clients, secs, Pace::Closed, &target);
    let rate = |l: &load::Load| l.gifts as f64 / l.elapsed.as_secs_f64().max(1e-9);
    // A history of at least 600 events: every read is a whole page of 300.
    let warm_to = if args.smoke { 60 } else { 700 };
    for round in 0.. {
        if version(&api.http, &service.base, "hot").await? >= warm_to {
            break;
        }
        load::run(&api, &format!("warm{round}"), args.live_clients, 1, Pace::Closed, &target).await?;
    }
    let newest = version(&api.http, &service.base, "hot").await?;
    let alone_before = rate(&gifts("alone-1").await?);
    // Readers that wait as a 429's Retry-After says, then readers that ask again at once.
    let mut beside_readers = Vec::new();
    for (tag, honour) in [("readers", true), ("flood", false)] {
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                let (base, stop, reads) = (service.base.clone(), stop.clone(), reads.clone());
                tokio::spawn(hostile_reader(base, r, newest, honour, stop, reads))
            })
            .collect();
        let started = Instant::now();
        let with = rate(&gifts(tag).await?);
        stop.store(true, Ordering::Relaxed);
        futures::future::join_all(readers).await;
        let seconds = started.elapsed().as_secs_f64();
        beside_readers.push((with, reads.as_ref().each_ref().map(|n| n.load(Ordering::Relaxed)), seconds));
    }
    let alone_after = rate(&gifts("alone-2").await?);
    let alone = (alone_before + alone_after) / 2.0;
    let port = service.base.rsplit(':').next().unwrap_or_default().parse::<u16>()?;
    let herd_reads = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reads = (0..herd).map(|v| {
            let after = newest.saturating_sub(v as u64 % 200);
            one_shot(port, address(3, v), format!("/v1/rooms/hot/events?after_version={after}&limit=300"))
        });
        futures::future::join_all(reads).await
    });
    let with_herd = rate(&gifts("herd").await?);
    let answers = herd_reads.await?;
    service.proc.stop().await;
    let mut herd_latency = Samples::default();
    answers.iter().filter(|(status, _)| *status == 200).for_each(|(_, took)| herd_latency.push(*took));
    let herd_ok = herd_latency.len();
    let (old, old_ratio) = old_ranges(args, db).await?;
    let herd_ratio = with_herd / alone;
    let herd_p99 = herd_latency.pct(99.0);
    let old_median = old.pct(50.0);
    let reader_line = |(with, [pages, limited, other], seconds): (f64, [u64; 3], f64)| {
        let ratio = with / alone;
        let refused = limited as f64 / seconds;
        let baseline = format!(
            "{alone:.0}/s alone ({alone_before:.0} before, {alone_after:.0} after); {pages} pages, \
             {limited} refused 429 ({refused:.0}/s), {other} failed"
        );
        (format!("{with:.0}/s"), baseline, format!("{ratio:.2}"), ratio)
    };
    let (value, baseline, ratio, readers_ratio) = reader_line(beside_readers[0]);
    let (flood_value, flood_baseline, _, flood_ratio) = reader_line(beside_readers[1]);
    Ok(vec![
        Line::new(
            "B13 hot room gifts/s beside 16 readers (limit 300, next read when answered) ÷ alone",
            value,
            baseline,
            ratio,
            "≥ 0.8",
            readers_ratio >= 0.8,
        ),
        Line::ratio(
            "B13 the same beside 16 readers ignoring Retry-After (a flood of 429s) ÷ alone",
            flood_value,
            flood_baseline,
            flood_ratio,
        ),
        Line::new(
            "B13 hot room gifts/s beside a herd of one-shot reads ÷ alone",
            format!("{with_herd:.0}/s"),
            format!("{alone:.0}/s alone; {herd_ok} of {herd} answered 200"),
            format!("{herd_ratio:.2}"),
            "≥ 0.7",
            herd_ratio >= 0.7 && herd_ok == herd,
        ),
        Line::new(
            "B13 herd read p99 (300 events, a new connection each)",
            ms(herd_p99),
            format!("p50 {}", ms(herd_latency.pct(50.0))),
            String::new(),
            "≤ 100 ms",
            herd_p99 <= Duration::from_millis(100),
        ),
        Line::new(
            "B13 old-range read median (21,500 events past max_age, max_events 100k)",
            ms(old_median),
            format!(
                "p99 {}, {} reads; gifts beside them {old_ratio:.2}× alone",
                ms(old.pct(99.0)),
                old.len()
            ),
            String::new(),
            "≤ 10 ms",
            old_median <= Duration::from_millis(10) && old_ratio >= 0.8,
        ),
    ])
}

/// A room of [`DEEP`] events left idle past `max_age`, read from old versions one read at a
/// time (4 readers) while gifts go into another room: the reads' times, and the gifts' rate
/// beside them ÷ alone.
async fn old_ranges(args: &Args, db: &BenchDb) -> anyhow::Result<(Samples, f64)> {
    let deep = if args.smoke { 400 } else { DEEP };
    let more =
        [("ROOMS__HISTORY__MAX_EVENTS", "100000".to_owned()), ("ROOMS__HISTORY__MAX_AGE", "2s".to_owned())];
    let service = process::start_service(&db.url(), None, 1, &more).await?;
    let api = Api { http: reqwest::Client::new(), base: service.base.clone() };
    let (deep_room, other): (Target, Target) =
        (Arc::new(|c, _| ("deep".to_owned(), member(c))), Arc::new(|c, _| ("other".to_owned(), member(c))));
    load::setup(&api, args.live_clients, 1, &deep_room).await?;
    load::setup(&api, args.live_clients, 1, &other).await?;
    for round in 0.. {
        if version(&api.http, &service.base, "deep").await? >= deep {
            break;
        }
        load::run(&api, &format!("deep{round}"), args.live_clients, 1, Pace::Closed, &deep_room).await?;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let secs = args.live_seconds;
    let alone = load::run(&api, "other-alone", args.live_clients, secs, Pace::Closed, &other).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let latency = Arc::new(std::sync::Mutex::new(Samples::default()));
    let readers: Vec<_> = (0..4u64)
        .map(|r| {
            let (base, stop, latency) = (service.base.clone(), stop.clone(), latency.clone());
            // Each from its own address, 10 reads a second: within any reader's share.
            let http = reqwest::Client::builder().local_address(address(6, r as usize)).build();
            tokio::spawn(async move {
                let Ok(http) = http else { return };
                let mut n = r;
                while !stop.load(Ordering::Relaxed) {
                    n += 4;
                    let after = 1 + n * 7919 % (deep / 2);
                    let started = Instant::now();
                    let url = format!("{base}/v1/rooms/deep/events?after_version={after}&limit=300");
                    if let Ok(answer) = http.get(url).send().await
                        && answer.status().is_success()
                        && answer.bytes().await.is_ok()
                    {
                        latency.lock().unwrap_or_else(|e| e.into_inner()).push(started.elapsed());
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        })
        .collect();
    let beside = load::run(&api, "other-reads", args.live_clients, secs, Pace::Closed, &other).await?;
    stop.store(true, Ordering::Relaxed);
    futures::future::join_all(readers).await;
    service.proc.stop().await;
    let rate = |l: &load::Load| l.gifts as f64 / l.elapsed.as_secs_f64().max(1e-9);
    let samples = std::mem::take(&mut *latency.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((samples, rate(&beside) / rate(&alone).max(1e-9)))
}

/// One reader: reads 300 events from somewhere in the room's last 600 as fast as it is
/// answered from its own address, until `stop` — after a 429, once its `Retry-After` has passed
/// (`honour`) or at once; counts pages, refusals and failures.
async fn hostile_reader(
    base: String,
    r: usize,
    newest: u64,
    honour: bool,
    stop: Arc<AtomicBool>,
    reads: Arc<[AtomicU64; 3]>,
) {
    let Ok(http) = reqwest::Client::builder().local_address(address(1, r)).build() else { return };
    let mut n = r as u64;
    while !stop.load(Ordering::Relaxed) {
        n += 7;
        let after = newest.saturating_sub(300 + n % 300);
        let url = format!("{base}/v1/rooms/hot/events?after_version={after}&limit=300");
        let (slot, wait) = match http.get(url).send().await {
            Ok(answer) if answer.status() == 200 => (usize::from(answer.bytes().await.is_err()) * 2, 0),
            Ok(answer) if answer.status() == 429 => {
                let seconds = answer.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok());
                (1, seconds.unwrap_or(1))
            }
            _ => (2, 0),
        };
        reads[slot].fetch_add(1, Ordering::Relaxed);
        if honour && wait > 0 {
            tokio::time::sleep(Duration::from_secs(wait)).await;
        }
    }
}

/// The `n`-th loopback address of 127.`block`.x.y (never 127.0.0.1, the gift senders').
fn address(block: u8, n: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, block, (n / 250) as u8, (n % 250) as u8 + 2))
}

/// One read on a new connection from `from`: its status (0: none) and how long it took.
async fn one_shot(port: u16, from: IpAddr, path: String) -> (u16, Duration) {
    let started = Instant::now();
    let answer = async {
        let socket = tokio::net::TcpSocket::new_v4().ok()?;
        socket.bind((from, 0).into()).ok()?;
        let mut stream = socket.connect(([127, 0, 0, 1], port).into()).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        std::str::from_utf8(answer.get(9..12)?).ok()?.parse().ok()
    };
    (answer.await.unwrap_or(0), started.elapsed())
}

/// The room's version now.
async fn version(http: &reqwest::Client, base: &str, room: &str) -> anyhow::Result<u64> {
    let room: serde_json::Value = http.get(format!("{base}/v1/rooms/{room}")).send().await?.json().await?;
    room["version"].as_u64().ok_or_else(|| anyhow::anyhow!("b13: the room has no version: {room}"))
}
