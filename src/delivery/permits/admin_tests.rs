//! The admin APIs' limiters hold their rate, each on its own and apart from the messages'.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tower::service_fn;

use super::super::{Permits, RateLimitOptions, RateLimits};
use crate::delivery::Outlet;
use crate::publish::stack::into_publisher;
use crate::publish::test_support::message;
use crate::publish::{AdminApi, AdminCall, BoxError, Message, Outcome, Path};

fn limits(global_per_sec: u32) -> RateLimits {
    let options = RateLimitOptions {
        global_per_sec,
        per_group_per_sec: 1000,
        worker_share: 1.0,
        pause: Duration::from_secs(60),
    };
    RateLimits::new(&options, None)
}

/// The most of `times` (oldest first) within any one second.
fn busiest_second(times: &[Instant]) -> usize {
    let window = |t: &Instant| times.iter().filter(|u| (*t..*t + Duration::from_secs(1)).contains(u)).count();
    times.iter().map(window).max().unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn an_admin_apis_permits_hold_its_rate_in_every_second() {
    let limits = limits(10);
    let start = Instant::now();
    let mut times = Vec::new();
    for _ in 0..35 {
        limits.admin(AdminApi::ForbidSendMsg, None).await;
        times.push(Instant::now());
    }
    assert!(busiest_second(&times) <= 10, "{} in one second", busiest_second(&times));
    assert!(start.elapsed() >= Duration::from_secs(3), "35 at 10/s took {:?}", start.elapsed());
    assert!(start.elapsed() <= Duration::from_secs(4), "35 at 10/s took {:?}", start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn each_admin_api_and_the_messages_have_limiters_of_their_own() {
    let limits = limits(5);
    // Spend the messages' app-wide permits: the next one is refused.
    let mut granted = 0;
    while limits.now(&format!("g{granted}")).await {
        granted += 1;
    }
    assert!((1..=5).contains(&granted), "{granted}");
    // create_group still has its permit at once; spend it.
    assert!(
        limits.admin(AdminApi::CreateGroup, None).now_or_never().is_some(),
        "held by the messages' limiter"
    );
    while limits.admin(AdminApi::CreateGroup, None).now_or_never().is_some() {}
    // Every other API still has its own.
    for api in AdminApi::ALL.into_iter().filter(|api| *api != AdminApi::CreateGroup) {
        assert!(limits.admin(api, None).now_or_never().is_some(), "{api:?} waited for another limiter");
    }
    // And create_group's next permit comes at its own rate.
    let start = Instant::now();
    limits.admin(AdminApi::CreateGroup, None).await;
    assert!(start.elapsed() <= Duration::from_millis(200), "{:?}", start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn the_outlet_takes_an_admin_calls_permit_before_calling_the_stack() {
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    let leaf = service_fn(move |_: Message| {
        seen.lock().unwrap().push(Instant::now());
        async { Ok::<_, BoxError>(Outcome::Delivered) }
    });
    let outlet = Outlet::new(into_publisher(leaf), Arc::new(limits(1)));
    let destroy = AdminCall {
        api: AdminApi::DestroyGroup,
        fields: Default::default(),
        until_ms: None,
        after_message: true,
        share: None,
    };
    let mut closed = message("RoomClosed", Path::Worker);
    closed.events[0].admin = Some(Arc::new(destroy));
    let start = Instant::now();
    for _ in 0..3 {
        outlet.call(closed.clone()).await.unwrap();
    }
    // One destroy_group a second; messages without a call are not held by it.
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    outlet.call(message("RoomUserJoined", Path::Worker)).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(calls.lock().unwrap().len(), 4);
}
