//! `TencentImService` against the fake IM server over loopback HTTP: delivery, dedup of
//! retries, every error class, timeouts, dropped connections, usersig refresh, size limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use room_service::config::TencentImSettings;
use room_service::publish::tencent::usersig::{Clock, system_now_secs};
use room_service::publish::tencent::wire::random_for;
use room_service::publish::tencent::{ImError, TencentImService};
use room_service::publish::{BoxError, ErrorClass, Event, Message, Outcome, Path, Priority, classify};
use room_service::secret::Secret;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions, Fault};
use tower::{Service, ServiceExt};

pub(crate) const APP: u64 = 1_400_000_123;
pub(crate) const KEY: &str = "integration-secret-key";
pub(crate) const ADMIN: &str = "administrator";
const PREFIX: &str = "live_";

/// The fake, every group there: these tests are the leaf's messages alone (its group calls
/// are `tencent_im_admin.rs`').
async fn fake() -> FakeIm {
    FakeIm::start(any_group()).await
}

/// The fake's options under which every group exists.
fn any_group() -> FakeImOptions {
    FakeImOptions { require_groups: false, ..FakeImOptions::new(APP, KEY, ADMIN) }
}

pub(crate) fn options(fake: &FakeIm) -> TencentImSettings {
    TencentImSettings {
        base_url: fake.base_url(),
        sdk_app_id: APP,
        admin_identifier: ADMIN.into(),
        secret_key: Secret::new(KEY),
        group_id_prefix: PREFIX.into(),
        usersig_ttl: Duration::from_secs(3600),
        manage_groups: true,
        avchatroom_ban: false,
    }
}

fn service(fake: &FakeIm) -> TencentImService {
    TencentImService::new(&options(fake)).expect("valid options")
}

fn message(event_id: &str, body: &str) -> Message {
    let event = Event {
        event_id: event_id.into(),
        event_type: "RoomGiftSent",
        priority: Priority::High,
        body: body.into(),
        sender: None,
        seated: Default::default(),
        trace: None,
        admin: None,
    };
    Message::new("room-1".into(), Path::Sync, vec![event])
}

async fn publish(svc: &TencentImService, msg: Message) -> Result<Outcome, BoxError> {
    svc.clone().oneshot(msg).await
}

/// Publishes, expects a failure, returns its class and the leaf error's text.
async fn fail(svc: &TencentImService, msg: Message) -> (ErrorClass, String) {
    let err = publish(svc, msg).await.expect_err("publish should fail");
    (classify(err.as_ref()), err.to_string())
}

/// A clock the test moves.
fn manual_clock(start: u64) -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(start));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::Relaxed)))
}

#[tokio::test]
async fn delivered_message_is_recorded_and_a_retry_is_deduped() {
    let fake = fake().await;
    let svc = service(&fake);
    let body = r#"{"event_id":"ev-1","event_type":"RoomGiftSent","payload":{"n":1}}"#;
    assert_eq!(publish(&svc, message("ev-1", body)).await.unwrap(), Outcome::Delivered);
    assert_eq!(publish(&svc, message("ev-1", body)).await.unwrap(), Outcome::Delivered);

    let recorded = fake.messages("live_room-1");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let m = &recorded[0];
    assert_eq!(m.data, body);
    assert_eq!(m.desc, "RoomGiftSent");
    assert_eq!(m.event_id.as_deref(), Some("ev-1"));
    assert_eq!(m.priority.as_deref(), Some("High"));
    assert_eq!(m.random, random_for("ev-1"));
    let stats = fake.stats();
    assert_eq!((stats.calls, stats.accepted, stats.duplicates), (2, 1, 1));

    // Another event is another message.
    publish(&svc, message("ev-2", "{}")).await.unwrap();
    assert_eq!(fake.all_messages().len(), 2);
}

#[tokio::test]
async fn injected_codes_map_to_their_classes() {
    let fake = fake().await;
    let svc = service(&fake);
    let cases = [
        (10002, ErrorClass::Transient),
        (90994, ErrorClass::Transient),
        (10006, ErrorClass::RateLimited),
        (60007, ErrorClass::RateLimited),
        (70052, ErrorClass::AuthRefresh),
        (60002, ErrorClass::Configuration),
        (70014, ErrorClass::Configuration),
        (10004, ErrorClass::Permanent),
        (80002, ErrorClass::Permanent),
        (123_456, ErrorClass::Transient),
    ];
    for (code, class) in cases {
        // An auth-refresh code is retried once at once with a fresh usersig: fail both.
        let times = if class == ErrorClass::AuthRefresh { 2 } else { 1 };
        fake.inject(Fault::ErrorCode(code), times);
        let (got, text) = fail(&svc, message(&format!("ev-{code}"), "{}")).await;
        assert_eq!(got, class, "code {code}: {text}");
        assert!(text.contains(&code.to_string()), "{text}");
    }
    assert!(fake.all_messages().is_empty());
}

#[tokio::test]
async fn http_502_is_transient() {
    let fake = fake().await;
    let svc = service(&fake);
    fake.inject(Fault::Http502, 1);
    let (class, text) = fail(&svc, message("ev-1", "{}")).await;
    assert_eq!(class, ErrorClass::Transient);
    assert!(text.contains("502"), "{text}");
    assert!(!text.contains("Bad Gateway"), "raw body leaked: {text}");
}

#[tokio::test]
async fn slow_answer_times_out_in_the_timeout_layer() {
    let fake = fake().await;
    fake.inject(Fault::Delay(Duration::from_secs(2)), 1);
    let svc = tower::timeout::Timeout::new(service(&fake), Duration::from_millis(200));
    let started = std::time::Instant::now();
    let err = svc.oneshot(message("ev-1", "{}")).await.expect_err("times out");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(classify(err.as_ref()), ErrorClass::Timeout);
}

#[tokio::test]
async fn dropped_connection_is_a_transient_transport_error_without_the_usersig() {
    let fake = fake().await;
    let svc = service(&fake);
    // Warm the pool so the drop happens on a connection that carried a request before.
    publish(&svc, message("ev-0", "{}")).await.unwrap();
    fake.inject(Fault::DropConnection, 1);
    let err = publish(&svc, message("ev-1", "{}")).await.expect_err("dropped");
    assert_eq!(classify(err.as_ref()), ErrorClass::Transient);
    let im = err.downcast_ref::<ImError>().expect("an ImError");
    assert!(matches!(im, ImError::Transport(_)), "{im:?}");
    let sig = svc.usersig_cache().get();
    let text = format!("{err} {err:?}");
    assert!(!text.contains(sig.expose()) && !text.contains("usersig"), "{text}");
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(fake.all_messages().len(), 1);
}

#[tokio::test]
async fn unreachable_server_is_transient() {
    let fake = fake().await;
    let opts = options(&fake);
    fake.shutdown().await.unwrap();
    let svc = TencentImService::new(&opts).unwrap();
    let (class, text) = fail(&svc, message("ev-1", "{}")).await;
    assert_eq!(class, ErrorClass::Transient, "{text}");
}

#[tokio::test]
async fn frequency_control_drop_is_rate_limited_and_not_recorded() {
    let opts = FakeImOptions { per_group_limit_per_sec: Some(1), ..any_group() };
    let fake = FakeIm::start(opts).await;
    let svc = service(&fake);
    publish(&svc, message("ev-1", "{}")).await.unwrap();
    let (class, text) = fail(&svc, message("ev-2", "{}")).await;
    assert_eq!(class, ErrorClass::RateLimited);
    assert!(text.contains("dropped"), "{text}");
    assert_eq!(fake.all_messages().len(), 1);
    assert_eq!(fake.stats().dropped, 1);
}

#[tokio::test]
async fn injected_70001_is_retried_at_once_with_a_fresh_usersig() {
    let fake = fake().await;
    let start = system_now_secs();
    let (now, clock) = manual_clock(start);
    let svc = TencentImService::with_clock(&options(&fake), clock).unwrap();
    let first_sig = svc.usersig_cache().get();
    assert_eq!(svc.usersig_cache().generations(), 1);
    now.store(start + 1, Ordering::Relaxed);

    // The same attempt: refused once, then sent again with a regenerated sig (far from half
    // the TTL, so only the invalidation explains a new one).
    fake.inject(Fault::ErrorCode(70001), 1);
    assert_eq!(publish(&svc, message("ev-1", "{}")).await.unwrap(), Outcome::Delivered);
    assert_eq!(svc.usersig_cache().generations(), 2);
    assert_ne!(svc.usersig_cache().get(), first_sig);
    assert_eq!((fake.stats().calls, fake.all_messages().len()), (2, 1));

    // Refused twice: one retry only, then the error (class auth_refresh) goes up the stack.
    fake.inject(Fault::ErrorCode(70052), 2);
    let (class, _) = fail(&svc, message("ev-2", "{}")).await;
    assert_eq!(class, ErrorClass::AuthRefresh);
    assert_eq!(fake.stats().calls, 4);
}

#[tokio::test]
async fn really_expired_usersig_is_refused_then_refreshed() {
    let fake = fake().await;
    let real_now = system_now_secs();
    // The service's clock is two TTLs behind: the sig it makes is already expired.
    let (now, clock) = manual_clock(real_now - 7200);
    let svc = TencentImService::with_clock(&options(&fake), clock).unwrap();
    let (class, text) = fail(&svc, message("ev-1", "{}")).await;
    assert_eq!(class, ErrorClass::AuthRefresh, "{text}");
    assert!(text.contains("70001"), "{text}");
    now.store(real_now, Ordering::Relaxed);
    assert_eq!(publish(&svc, message("ev-1", "{}")).await.unwrap(), Outcome::Delivered);
    // The first sig, the one retried at once (still expired by that clock), and a good one.
    assert_eq!(svc.usersig_cache().generations(), 3);
}

#[tokio::test]
async fn oversized_message_is_refused_before_sending() {
    let fake = fake().await;
    let mut svc = service(&fake);
    // Content = the envelope and its type name; the default limit is 11,000 bytes.
    let body = format!(r#"{{"blob":"{}"}}"#, "x".repeat(11_000));
    std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
    let err = svc.call(message("ev-big", &body)).await.expect_err("too large");
    assert_eq!(classify(err.as_ref()), ErrorClass::Permanent);
    assert!(matches!(err.downcast_ref::<ImError>(), Some(ImError::TooLarge { .. })), "{err}");
    assert_eq!(fake.stats().calls, 0);
    // Just under the limit goes through.
    let body = format!(r#"{{"blob":"{}"}}"#, "x".repeat(10_900));
    publish(&svc, message("ev-ok", &body)).await.unwrap();
    assert_eq!(fake.stats().calls, 1);
}
