//! Unit tests of the fake's bookkeeping (dedup, limits), on tokio's paused clock.

use super::*;

fn state(per_group: Option<u32>, global: Option<u32>) -> FakeState {
    FakeState::new(FakeImOptions {
        per_group_limit_per_sec: per_group,
        global_limit_per_sec: global,
        ..FakeImOptions::new(1, "key", "admin")
    })
}

fn candidate(group: &str, random: u32) -> Candidate {
    Candidate {
        group: group.into(),
        random,
        elements: vec![Element {
            event_id: Some(format!("e{random}")),
            data: "{}".into(),
            desc: "RoomUserJoined".into(),
        }],
        priority: Some("Normal".into()),
    }
}

#[tokio::test(start_paused = true)]
async fn duplicates_are_answered_but_recorded_once_for_five_minutes() {
    let s = state(None, None);
    let t0 = Instant::now();
    assert_eq!(s.admit(t0, 0, candidate("g", 7)), Admission::Recorded { msg_seq: 1 });
    assert_eq!(s.admit(t0, 0, candidate("g", 7)), Admission::Duplicate { msg_seq: 1 });
    // Same Random in another group is another message.
    assert_eq!(s.admit(t0, 0, candidate("h", 7)), Admission::Recorded { msg_seq: 1 });
    let later = t0 + DEDUP_WINDOW - Duration::from_millis(1);
    assert_eq!(s.admit(later, 0, candidate("g", 7)), Admission::Duplicate { msg_seq: 1 });
    let after = t0 + DEDUP_WINDOW;
    assert_eq!(s.admit(after, 0, candidate("g", 7)), Admission::Recorded { msg_seq: 2 });
    assert_eq!(s.recorded(Some("g")).len(), 2);
    assert_eq!(s.stats().duplicates, 2);
}

#[tokio::test(start_paused = true)]
async fn per_group_limit_drops_within_a_second() {
    let s = state(Some(2), None);
    let t0 = Instant::now();
    assert!(matches!(s.admit(t0, 0, candidate("g", 1)), Admission::Recorded { .. }));
    assert!(matches!(s.admit(t0, 0, candidate("g", 2)), Admission::Recorded { .. }));
    assert_eq!(s.admit(t0, 0, candidate("g", 3)), Admission::Dropped);
    assert!(matches!(s.admit(t0, 0, candidate("other", 3)), Admission::Recorded { .. }));
    let t1 = t0 + Duration::from_secs(1);
    assert!(matches!(s.admit(t1, 0, candidate("g", 3)), Admission::Recorded { .. }));
    assert_eq!(s.stats().dropped, 1);
    assert_eq!(s.recorded(None).len(), 4);
}

#[tokio::test(start_paused = true)]
async fn global_limit_counts_every_call() {
    let s = state(None, Some(3));
    let t0 = Instant::now();
    assert!((0..3).all(|_| s.take_global_slot(t0)));
    assert!(!s.take_global_slot(t0 + Duration::from_millis(999)));
    assert!(s.take_global_slot(t0 + Duration::from_secs(1)));
}

#[tokio::test]
async fn clear_forgets_everything_but_latency() {
    let s = state(None, None);
    s.set_latency(Duration::from_millis(5));
    s.inject(Fault::Http502, 2);
    s.admit(Instant::now(), 0, candidate("g", 1));
    s.clear();
    assert_eq!(s.stats(), FakeStats::default());
    assert!(s.recorded(None).is_empty());
    assert_eq!(s.latency(), Duration::from_millis(5));
    assert!(matches!(s.admit(Instant::now(), 0, candidate("g", 1)), Admission::Recorded { .. }));
}

#[tokio::test(start_paused = true)]
async fn sends_count_every_call_and_what_im_took() {
    let s = state(Some(1), None);
    let t0 = Instant::now();
    assert_eq!(s.begin_call(&["e7".to_owned()]), None);
    assert!(matches!(s.admit(t0, 0, candidate("g", 7)), Admission::Recorded { .. }));
    s.begin_call(&["e7".to_owned()]);
    assert!(matches!(s.admit(t0, 0, candidate("g", 7)), Admission::Duplicate { .. }));
    // Dropped over the per-group limit: a call, not received.
    s.begin_call(&["e8".to_owned()]);
    assert_eq!(s.admit(t0, 0, candidate("g", 8)), Admission::Dropped);
    // A faulted call never reaches admit.
    s.inject(Fault::Http502, 1);
    assert_eq!(s.begin_call(&["e8".to_owned()]), Some(Fault::Http502));
    s.begin_call(&[]);
    let sends = s.sends_by_event();
    assert_eq!(sends["e7"], EventSends { calls: 2, received: 2 });
    assert_eq!(sends["e8"], EventSends { calls: 2, received: 0 });
    assert_eq!(sends.len(), 2);
}
