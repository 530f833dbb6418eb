//! The lane's packing: a quarantined sender's event goes alone, from the front of the queue
//! and when a waiting message is topped up.

use tokio::sync::oneshot;

use super::*;
use crate::publish::Priority;
use crate::room::decide::Reply;
use crate::room::outcome::CommandResponse;

fn event(id: &str, sender: &str) -> LaneEvent {
    let response =
        CommandResponse { applied: true, room_version: 1, replayed: false, room: None, events: Vec::new() };
    let (reply, _) = oneshot::channel();
    LaneEvent {
        event: Event {
            event_id: id.into(),
            event_type: "RoomGiftSent",
            priority: Priority::High,
            body: "{}".into(),
            sender: Some(sender.into()),
            trace: None,
        },
        start_by: Instant::now() + Duration::from_secs(10),
        waiting: Waiting::new(response, Vec::new(), Reply::new(reply), tracing::Span::none()),
        index: 0,
    }
}

fn ids(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.event_id.as_str()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_quarantined_senders_event_leaves_the_queue_alone() {
    let quarantine = Quarantine::default();
    quarantine.hold("mallory", Path::Sync);
    let lane = Lane::default();
    let queued = ["a", "b", "m1", "c", "d"]
        .map(|id| event(id, if id.starts_with('m') { "mallory" } else { "honest" }));
    lane.queue("r1", queued.into());
    let mut packs = Vec::new();
    while let Some(Ok((pack, events))) = lane.next_pack(PackLimits::default(), &quarantine) {
        lane.sent(&pack);
        packs.push(ids(&events).join(","));
    }
    assert_eq!(packs, ["a,b", "m1", "c,d"], "before it, it alone, after it");
}

#[tokio::test(start_paused = true)]
async fn a_top_up_never_joins_a_quarantined_sender_to_a_pack() {
    let quarantine = Quarantine::default();
    quarantine.hold("mallory", Path::Sync);
    let lane = Lane::default();
    lane.queue("r1", vec![event("a", "honest")]);
    let Some(Ok((pack, mut events))) = lane.next_pack(PackLimits::default(), &quarantine) else {
        panic!("a pack")
    };
    lane.queue("r1", vec![event("b", "honest"), event("m1", "mallory"), event("c", "honest")]);
    lane.top_up(&pack, &mut events, PackLimits::default(), &quarantine);
    assert_eq!(ids(&events), ["a", "b"], "topped up to the quarantined event, not past it");
    lane.sent(&pack);
    let Some(Ok((alone, mut events))) = lane.next_pack(PackLimits::default(), &quarantine) else {
        panic!("a pack")
    };
    lane.top_up(&alone, &mut events, PackLimits::default(), &quarantine);
    assert_eq!(ids(&events), ["m1"], "nothing joins a quarantined sender's message");
}
