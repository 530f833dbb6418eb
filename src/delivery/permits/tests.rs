use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::RateLimiter;
use governor::clock::FakeRelativeClock;
use tower::service_fn;

use super::limits::window_quota;
use super::*;
use crate::delivery::Outlet;
use crate::publish::error::TooLate;
use crate::publish::stack::into_publisher;
use crate::publish::tencent::ImError;
use crate::publish::test_support::message as message_for;
use crate::publish::{BoxError, ErrorClass, Event, Message, Outcome, Path, classify};

fn options(global: u32, per_group: u32) -> RateLimitOptions {
    RateLimitOptions {
        global_per_sec: global,
        per_group_per_sec: per_group,
        worker_share: 0.5,
        pause: Duration::from_secs(60),
    }
}

type Calls = Arc<Mutex<Vec<(String, Instant)>>>;

/// An outlet with `limits` over a leaf that records when it was called and answers what
/// `answer` says.
fn outlet(limits: SharedPermits, calls: Calls, answer: fn(&str) -> Result<Outcome, BoxError>) -> Outlet {
    let leaf = service_fn(move |m: Message| {
        calls.lock().unwrap().push((m.group.clone(), Instant::now()));
        let result = answer(&m.group);
        async move { result }
    });
    Outlet::new(into_publisher(leaf), limits)
}

fn ok(_: &str) -> Result<Outcome, BoxError> {
    Ok(Outcome::Delivered)
}

fn events() -> Vec<Event> {
    message_for("RoomUserJoined", Path::Sync).events
}

fn msg(group: &str, path: Path) -> Message {
    let mut m = message_for("RoomUserJoined", path);
    m.group = group.to_owned();
    m
}

fn in_an_hour() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(3600)
}

#[test]
fn no_one_second_window_ever_holds_more_than_the_limit() {
    for (limit, burst) in [(35, 1), (35, 5), (190, 9), (152, 1), (3, 3), (1, 1)] {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(window_quota(limit, burst), clock.clone());
        // Offer a cell every 100 µs for three seconds; keep the admitted instants (in µs).
        let mut admitted: Vec<u64> = Vec::new();
        for step in 0..30_000u64 {
            if limiter.check().is_ok() {
                admitted.push(step * 100);
            }
            clock.advance(Duration::from_micros(100));
        }
        let most = admitted
            .iter()
            .map(|t| admitted.iter().filter(|u| (*t..t + 1_000_000).contains(u)).count())
            .max()
            .unwrap_or(0);
        assert!(most <= limit as usize, "limit {limit}, burst {burst}: {most} in one second");
        assert!(most as f64 >= f64::from(limit) * 0.97, "limit {limit}, burst {burst}: only {most}");
    }
}

#[tokio::test]
async fn a_permit_now_is_refused_once_the_groups_burst_is_spent_and_another_group_has_its_own() {
    // 14 per second per group: a burst of 2.
    let permits = RateLimits::new(&options(1000, 14), None);
    assert!(permits.now("r1").await && permits.now("r1").await);
    assert!(!permits.now("r1").await, "no permit left now");
    assert!(permits.now("r2").await, "another group has its own permits");
}

#[tokio::test]
async fn the_worker_waits_for_permits_and_keeps_every_window_within_the_group_limit() {
    let calls = Calls::default();
    let outlet = outlet(RateLimits::shared(&options(1000, 4), None), calls.clone(), ok);
    for _ in 0..10 {
        assert_eq!(outlet.send_waiting("r1", events()).await.unwrap(), Outcome::Delivered);
    }
    let at: Vec<Instant> = calls.lock().unwrap().iter().map(|(_, t)| *t).collect();
    assert_eq!(at.len(), 10, "every message went through");
    for (i, start) in at.iter().enumerate() {
        let in_window = at[i..].iter().filter(|t| t.duration_since(*start) < Duration::from_secs(1)).count();
        assert!(in_window <= 4, "{in_window} calls within one second");
    }
}

#[tokio::test]
async fn a_rate_limited_answer_pauses_its_group_and_an_app_wide_one_every_group() {
    fn dropped_in_r1(group: &str) -> Result<Outcome, BoxError> {
        match group {
            "r1" => Err(ImError::Dropped("MsgDropReason".into()).into()),
            "app" => Err(ImError::im(60007, "frequency").into()),
            _ => Ok(Outcome::Delivered),
        }
    }
    let calls = Calls::default();
    let outlet = outlet(RateLimits::shared(&options(1000, 1000), None), calls.clone(), dropped_in_r1);
    let error = outlet.call(msg("r1", Path::Sync)).await.expect_err("dropped");
    assert_eq!(classify(error.as_ref()), ErrorClass::RateLimited);
    assert!(!outlet.permits.now("r1").await, "r1 is paused");
    assert!(outlet.permits.now("r2").await);

    let _ = outlet.call(msg("app", Path::Sync)).await.expect_err("60007");
    assert!(!outlet.permits.now("r2").await, "the whole app is paused");
    assert_eq!(calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_pause_that_starts_while_the_worker_waits_for_permits_holds_its_calls_back() {
    fn app_wide_once(group: &str) -> Result<Outcome, BoxError> {
        match group {
            "first" => Err(ImError::im(60007, "frequency").into()),
            _ => Ok(Outcome::Delivered),
        }
    }
    let calls = Calls::default();
    let limits = RateLimitOptions { pause: Duration::from_millis(600), ..options(5, 1000) };
    let outlet = outlet(RateLimits::shared(&limits, None), calls.clone(), app_wide_once);
    // Several worker publishes queue on the 5/s app-wide limiter; the first call is refused
    // app-wide while the others wait.
    let send = |group: String| {
        let outlet = outlet.clone();
        tokio::spawn(async move { outlet.send_waiting(&group, events()).await })
    };
    let mut waiting = vec![send("first".into())];
    for n in 0..4 {
        waiting.push(send(format!("r{n}")));
    }
    for task in waiting {
        let _ = task.await.unwrap();
    }
    let calls = calls.lock().unwrap();
    let refused_at = calls.iter().find(|(g, _)| g == "first").unwrap().1;
    for (group, at) in calls.iter().filter(|(g, _)| g != "first") {
        assert!(
            at.duration_since(refused_at) >= Duration::from_millis(600),
            "{group} went out {:?} after the app-wide refusal, inside the pause",
            at.duration_since(refused_at)
        );
    }
}

#[tokio::test]
async fn with_the_cluster_quota_a_permit_one_node_took_is_gone_for_the_other() {
    use crate::redis_conn::RedisConn;
    use crate::secret::Secret;
    let url =
        std::env::var("ROOM_SERVICE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let key = format!("room-service-test:layer:{{{}}}", uuid::Uuid::now_v7());
    let node = || {
        let redis = RedisConn::open(&Secret::new(url.as_str())).unwrap();
        let quota = ClusterQuota { redis, key: key.clone(), expected_nodes: 2 };
        // 2 calls per second app-wide, a burst of 1: one permit now, the next in half a second.
        RateLimits::new(&options(2, 1000), Some(&quota))
    };
    let (a, b) = (node(), node());
    assert!(a.now("r1").await);
    assert!(!b.now("r2").await, "the app's permit is taken");
    // The worker waits for the next one instead.
    tokio::time::timeout(Duration::from_secs(5), b.wait("r2", true)).await.expect("the next permit comes");
}

#[tokio::test]
async fn a_lane_without_a_permit_now_is_told_then_waits_for_it() {
    let outlet = outlet(RateLimits::shared(&options(2, 1000), None), Calls::default(), ok);
    let told = AtomicBool::new(false);
    // The burst of one goes at once, untold.
    outlet.permit_by("r1", in_an_hour(), || told.store(true, Ordering::SeqCst)).await.unwrap();
    assert!(!told.load(Ordering::SeqCst), "a message with a permit now is not told to wait");
    // The next has none now: it is told, then has its permit once one comes.
    outlet.permit_by("r1", in_an_hour(), || told.store(true, Ordering::SeqCst)).await.unwrap();
    assert!(told.load(Ordering::SeqCst), "told it must wait");
}

#[tokio::test]
async fn rooms_waiting_for_the_app_wide_quota_take_turns() {
    let calls = Calls::default();
    let outlet = outlet(RateLimits::shared(&options(20, 1000), None), calls.clone(), ok);
    // A hot room sends one message after another; four quiet rooms each send one a moment
    // later, while the hot room keeps the quota busy.
    let hot = {
        let outlet = outlet.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                outlet.send_by("hot", events(), in_an_hour()).await.unwrap();
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let quiet: Vec<_> = (0..4)
        .map(|n| {
            let outlet = outlet.clone();
            tokio::spawn(async move { outlet.send_by(&format!("q{n}"), events(), in_an_hour()).await })
        })
        .collect();
    for task in quiet {
        task.await.unwrap().unwrap();
    }
    hot.await.unwrap();
    let calls = calls.lock().unwrap();
    let last_quiet = calls.iter().rposition(|(g, _)| g.starts_with('q')).unwrap();
    let hot_before: usize = calls[..last_quiet].iter().filter(|(g, _)| g == "hot").count();
    // First come, first served: each quiet room waits behind at most one more hot message
    // than it found queued (a few went out before they came), never the hot room's whole run.
    assert!(hot_before <= 10, "the quiet rooms waited behind {hot_before} of the hot room's 20: {calls:?}");
}

#[tokio::test]
async fn a_lane_message_whose_permit_comes_after_its_deadline_is_not_sent() {
    let calls = Calls::default();
    let outlet = outlet(RateLimits::shared(&options(1000, 1), None), calls.clone(), ok);
    assert_eq!(outlet.send_by("r1", events(), in_an_hour()).await.unwrap(), Outcome::Delivered);
    // The group's next permit is a second away; this message must be sent within 100 ms.
    let soon = tokio::time::Instant::now() + Duration::from_millis(100);
    let error = outlet.send_by("r1", events(), soon).await.unwrap_err();
    assert!(error.is::<TooLate>(), "{error}");
    assert_eq!(classify(error.as_ref()), ErrorClass::Throttled);
    assert_eq!(calls.lock().unwrap().len(), 1, "the late message never reached the sink");
    // One whose deadline the permit meets is sent.
    let later = tokio::time::Instant::now() + Duration::from_secs(5);
    assert_eq!(outlet.send_by("r1", events(), later).await.unwrap(), Outcome::Delivered);
    assert_eq!(calls.lock().unwrap().len(), 2);
}
