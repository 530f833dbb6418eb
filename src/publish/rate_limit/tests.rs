use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::RateLimiter;
use governor::clock::FakeRelativeClock;
use tower::{Layer, ServiceExt, service_fn};

use super::limits::window_quota;
use super::*;
use crate::publish::filter::EventFilterLayer;
use crate::publish::tencent::ImError;
use crate::publish::test_support::message as message_for;
use crate::publish::{ErrorClass, classify};

fn options(global: u32, per_group: u32) -> RateLimitOptions {
    RateLimitOptions {
        global_per_sec: global,
        per_group_per_sec: per_group,
        worker_share: 0.5,
        pause: Duration::from_secs(60),
    }
}

/// A leaf that records when it was called and answers what `answer` says.
fn recording(
    calls: Arc<Mutex<Vec<(String, Instant)>>>,
    answer: fn(&str) -> Result<Outcome, BoxError>,
) -> impl tower::Service<Message, Response = Outcome, Error = BoxError, Future: Send> + Clone {
    service_fn(move |m: Message| {
        calls.lock().unwrap().push((m.group.clone(), Instant::now()));
        let result = answer(&m.group);
        async move { result }
    })
}

fn ok(_: &str) -> Result<Outcome, BoxError> {
    Ok(Outcome::Delivered)
}

/// Sends `n` messages of `group` on `path` one after the other through `svc`; each must be
/// delivered.
async fn deliver_each<S>(svc: &S, group: &str, path: Path, n: usize)
where
    S: tower::Service<Message, Response = Outcome, Error = BoxError> + Clone,
{
    for _ in 0..n {
        assert_eq!(svc.clone().oneshot(msg(group, path)).await.unwrap(), Outcome::Delivered);
    }
}

fn msg(group: &str, path: Path) -> Message {
    let mut m = message_for("RoomUserJoined", path);
    m.group = group.to_owned();
    m
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
async fn the_sync_path_never_waits_without_a_permit_it_is_throttled() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    // 14 per second per group: a burst of 2.
    let svc = RateLimitLayer::new(options(1000, 14)).layer(recording(calls.clone(), ok));
    deliver_each(&svc, "r1", Path::Sync, 2).await;
    let error = svc.clone().oneshot(msg("r1", Path::Sync)).await.expect_err("no permit left");
    assert_eq!(classify(error.as_ref()), ErrorClass::Throttled);
    // Another group has its own permits.
    assert_eq!(svc.clone().oneshot(msg("r2", Path::Sync)).await.unwrap(), Outcome::Delivered);
    assert_eq!(calls.lock().unwrap().len(), 3, "the throttled message never reached the leaf");
}

#[tokio::test]
async fn the_worker_waits_for_permits_and_keeps_every_window_within_the_group_limit() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = RateLimitLayer::new(options(1000, 4)).layer(recording(calls.clone(), ok));
    deliver_each(&svc, "r1", Path::Worker, 10).await;
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
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = RateLimitLayer::new(options(1000, 1000)).layer(recording(calls.clone(), dropped_in_r1));
    let error = svc.clone().oneshot(msg("r1", Path::Sync)).await.expect_err("dropped");
    assert_eq!(classify(error.as_ref()), ErrorClass::RateLimited);
    let paused = svc.clone().oneshot(msg("r1", Path::Sync)).await.expect_err("paused");
    assert_eq!(classify(paused.as_ref()), ErrorClass::Throttled, "r1 is paused");
    assert_eq!(svc.clone().oneshot(msg("r2", Path::Sync)).await.unwrap(), Outcome::Delivered);

    let _ = svc.clone().oneshot(msg("app", Path::Sync)).await.expect_err("60007");
    let paused = svc.clone().oneshot(msg("r2", Path::Sync)).await.expect_err("the whole app is paused");
    assert_eq!(classify(paused.as_ref()), ErrorClass::Throttled);
    assert_eq!(calls.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn skipped_events_take_no_permit() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = EventFilterLayer::skip(crate::domain::EventType::im_skipped())
        .layer(RateLimitLayer::new(options(1000, 1)).layer(recording(calls.clone(), ok)));
    for _ in 0..20 {
        let mut skipped = msg("r1", Path::Sync);
        skipped.events[0].event_type = "RoomHeatChanged";
        assert_eq!(svc.clone().oneshot(skipped).await.unwrap(), Outcome::Skipped);
    }
    assert_eq!(
        svc.clone().oneshot(msg("r1", Path::Sync)).await.unwrap(),
        Outcome::Delivered,
        "the permit is still there"
    );
}

#[tokio::test]
async fn a_pause_that_starts_while_the_worker_waits_for_permits_holds_its_calls_back() {
    fn app_wide_once(group: &str) -> Result<Outcome, BoxError> {
        match group {
            "first" => Err(ImError::im(60007, "frequency").into()),
            _ => Ok(Outcome::Delivered),
        }
    }
    let calls = Arc::new(Mutex::new(Vec::new()));
    let limits = RateLimitOptions { pause: Duration::from_millis(600), ..options(5, 1000) };
    let svc = RateLimitLayer::new(limits).layer(recording(calls.clone(), app_wide_once));
    // Several worker publishes queue on the 5/s app-wide limiter; the first call is refused
    // app-wide while the others wait.
    let mut waiting = vec![tokio::spawn(svc.clone().oneshot(msg("first", Path::Worker)))];
    for n in 0..4 {
        waiting.push(tokio::spawn(svc.clone().oneshot(msg(&format!("r{n}"), Path::Worker))));
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
    let layer = |calls| {
        let redis = RedisConn::open(&Secret::new(url.as_str())).unwrap();
        let quota = ClusterQuota { redis, key: key.clone(), expected_nodes: 2 };
        // 2 calls per second app-wide, a burst of 1: one permit now, the next in half a second.
        RateLimitLayer::new(options(2, 1000)).with_cluster_quota(Some(quota)).layer(recording(calls, ok))
    };
    let calls = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (layer(calls.clone()), layer(calls.clone()));
    assert_eq!(a.clone().oneshot(msg("r1", Path::Sync)).await.unwrap(), Outcome::Delivered);
    let error = b.clone().oneshot(msg("r2", Path::Sync)).await.expect_err("the app's permit is taken");
    assert_eq!(classify(error.as_ref()), ErrorClass::Throttled);
    // The worker path waits for the next one instead.
    assert_eq!(b.clone().oneshot(msg("r2", Path::Worker)).await.unwrap(), Outcome::Delivered);
    assert_eq!(calls.lock().unwrap().len(), 2);
}

/// A lane's sync message: it waits for its permit after telling its notice, may be called for
/// an hour, and takes on nothing.
fn waiting_msg(group: &str, notice: &Arc<tokio::sync::Notify>) -> Message {
    turn_msg(group, notice, Duration::from_secs(3600), |_| {})
}

/// A lane's sync message with a turn: told through `notice`, called by `call_within` from now,
/// refilled by `refill`.
fn turn_msg(
    group: &str,
    notice: &Arc<tokio::sync::Notify>,
    call_within: Duration,
    refill: impl Fn(&mut Vec<crate::publish::Event>) + Send + Sync + 'static,
) -> Message {
    let mut m = msg(group, Path::Sync);
    let call_by = tokio::time::Instant::now() + call_within;
    m.turn = Some(crate::publish::Turn::new(Arc::clone(notice), call_by, refill, || {}));
    m
}

#[tokio::test]
async fn a_sync_message_with_a_notice_is_told_then_waits_for_its_permit() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = RateLimitLayer::new(options(2, 1000)).layer(recording(calls.clone(), ok));
    let notice = Arc::new(tokio::sync::Notify::new());
    // The burst of one goes at once, untold.
    assert_eq!(svc.clone().oneshot(waiting_msg("r1", &notice)).await.unwrap(), Outcome::Delivered);
    let told = tokio::time::timeout(Duration::from_millis(1), notice.notified()).await;
    assert!(told.is_err(), "a message with a permit now is not told to wait");
    // The next has none now: it is told, then delivered once one comes (not throttled).
    let next = tokio::spawn(svc.clone().oneshot(waiting_msg("r1", &notice)));
    tokio::time::timeout(Duration::from_secs(1), notice.notified()).await.expect("told it must wait");
    assert_eq!(next.await.unwrap().unwrap(), Outcome::Delivered);
    assert_eq!(calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn rooms_waiting_for_the_app_wide_quota_take_turns() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = RateLimitLayer::new(options(20, 1000)).layer(recording(calls.clone(), ok));
    let notice = Arc::new(tokio::sync::Notify::new());
    // A hot room sends one message after another; four quiet rooms each send one a moment
    // later, while the hot room keeps the quota busy.
    let hot = {
        let (svc, notice) = (svc.clone(), notice.clone());
        tokio::spawn(async move {
            for _ in 0..20 {
                svc.clone().oneshot(waiting_msg("hot", &notice)).await.unwrap();
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let quiet: Vec<_> =
        (0..4).map(|n| tokio::spawn(svc.clone().oneshot(waiting_msg(&format!("q{n}"), &notice)))).collect();
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
async fn a_message_whose_permit_comes_after_its_call_by_is_not_sent() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = RateLimitLayer::new(options(1000, 1)).layer(recording(calls.clone(), ok));
    let notice = Arc::new(tokio::sync::Notify::new());
    assert_eq!(svc.clone().oneshot(waiting_msg("r1", &notice)).await.unwrap(), Outcome::Delivered);
    // The group's next permit is a second away; this message may be called for 100 ms only.
    let late = turn_msg("r1", &notice, Duration::from_millis(100), |_| {});
    let error = svc.clone().oneshot(late).await.unwrap_err();
    assert!(error.is::<crate::publish::turn::TooLate>(), "{error}");
    assert_eq!(classify(error.as_ref()), ErrorClass::Throttled);
    assert_eq!(calls.lock().unwrap().len(), 1, "the late message never reached the sink");
    // One whose call_by the permit meets is sent.
    let in_time = turn_msg("r1", &notice, Duration::from_secs(5), |_| {});
    assert_eq!(svc.clone().oneshot(in_time).await.unwrap(), Outcome::Delivered);
    assert_eq!(calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_message_that_waited_takes_on_its_refill_and_one_that_did_not_never_runs_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let leaf = {
        let seen = seen.clone();
        service_fn(move |m: Message| {
            seen.lock().unwrap().push(m.events.iter().map(|e| e.event_id.clone()).collect::<Vec<_>>());
            async move { Ok::<_, BoxError>(Outcome::Delivered) }
        })
    };
    let svc = RateLimitLayer::new(options(1000, 1)).layer(leaf);
    let notice = Arc::new(tokio::sync::Notify::new());
    let refill = |id: &'static str| {
        move |events: &mut Vec<crate::publish::Event>| {
            let mut more = events[0].clone();
            more.event_id = id.to_owned();
            events.push(more);
        }
    };
    // A permit now: sent as it is, the refill never runs.
    let first = turn_msg("r1", &notice, Duration::from_secs(3600), refill("never"));
    svc.clone().oneshot(first).await.unwrap();
    // The group's next permit is a second away: the refill runs when it comes.
    let second = turn_msg("r1", &notice, Duration::from_secs(3600), refill("added"));
    let own = second.events[0].event_id.clone();
    svc.clone().oneshot(second).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].len(), 1, "no refill without a wait: {seen:?}");
    assert_eq!(seen[1], [own, "added".to_owned()], "{seen:?}");
}

#[tokio::test]
async fn a_turn_is_told_when_its_message_passes_at_once_or_after_its_wait_and_never_when_too_late() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let svc = RateLimitLayer::new(options(1000, 1)).layer(recording(calls.clone(), ok));
    let notice = Arc::new(tokio::sync::Notify::new());
    let passed = Arc::new(Mutex::new(Vec::new()));
    let message = |name: &'static str, call_within: Duration| {
        let mut m = msg("r1", Path::Sync);
        let (passed, calls) = (Arc::clone(&passed), Arc::clone(&calls));
        let call_by = tokio::time::Instant::now() + call_within;
        m.turn = Some(crate::publish::Turn::new(
            Arc::clone(&notice),
            call_by,
            |_| {},
            move || {
                passed.lock().unwrap().push((name, calls.lock().unwrap().len()));
            },
        ));
        m
    };
    // A permit now: passed before its call.
    svc.clone().oneshot(message("at once", Duration::from_secs(3600))).await.unwrap();
    // The group's next permit is a second away: one whose call_by it misses never passes.
    svc.clone().oneshot(message("too late", Duration::from_millis(100))).await.unwrap_err();
    // One that waits for it passes when it comes, before its call.
    svc.clone().oneshot(message("after a wait", Duration::from_secs(3600))).await.unwrap();
    assert_eq!(*passed.lock().unwrap(), [("at once", 0), ("after a wait", 1)]);
    assert_eq!(calls.lock().unwrap().len(), 2);
}
