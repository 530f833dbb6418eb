//! The lane's packing: a quarantined sender's event goes alone, from the front of the queue
//! and when a message packs what was queued while it waited for its permit.

use tokio::sync::oneshot;

use super::*;
use crate::publish::Priority;
use crate::room::command::decide::Reply;
use crate::room::command::outcome::CommandResponse;
use crate::room::publish::waiting::Waiting;

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
            seated: Default::default(),
            trace: None,
            admin: None,
        },
        start_by: Instant::now() + Duration::from_secs(10),
        waiting: Waiting::new(response, Vec::new(), Reply::new(reply), tracing::Span::none()),
        index: 0,
    }
}

fn ids(events: &[LaneEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.event_id.as_str()).collect()
}

/// Opens a message and takes its pack at once (its permit came now).
fn next(lane: &Lane, quarantine: &Quarantine) -> Option<Vec<LaneEvent>> {
    let Some(Ok(opened)) = lane.open() else { return None };
    let pack = lane.take_pack(&opened, PackLimits::default(), quarantine);
    lane.sent();
    Some(pack)
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
    while let Some(pack) = next(&lane, &quarantine) {
        packs.push(ids(&pack).join(","));
    }
    assert_eq!(packs, ["a,b", "m1", "c,d"], "before it, it alone, after it");
}

#[tokio::test(start_paused = true)]
async fn a_message_that_waited_for_its_permit_packs_what_came_meanwhile_up_to_a_quarantined_sender() {
    let quarantine = Quarantine::default();
    quarantine.hold("mallory", Path::Sync);
    let lane = Lane::default();
    lane.queue("r1", vec![event("a", "honest")]);
    let Some(Ok(opened)) = lane.open() else { panic!("a message") };
    assert!(!lane.may_open(4), "none opens beside a message waiting for its permit");
    lane.queue("r1", vec![event("b", "honest"), event("m1", "mallory"), event("c", "honest")]);
    let pack = lane.take_pack(&opened, PackLimits::default(), &quarantine);
    assert_eq!(ids(&pack), ["a", "b"], "what came meanwhile, up to the quarantined event");
    assert!(lane.may_open(4), "its permit in hand, the next may open");
    lane.sent();
    assert_eq!(
        ids(&next(&lane, &quarantine).unwrap()),
        ["m1"],
        "nothing joins a quarantined sender's message"
    );
    assert_eq!(ids(&next(&lane, &quarantine).unwrap()), ["c"]);
}

#[tokio::test(start_paused = true)]
async fn a_permit_under_another_epoch_packs_only_what_was_queued_when_its_message_opened() {
    let quarantine = Quarantine::default();
    let lane = Lane::default();
    lane.queue("r1", vec![event("a", "honest")]);
    let Some(Ok(opened)) = lane.open() else { panic!("a message") };
    lane.route.enter_epoch(7);
    lane.queue("r1", vec![event("b", "honest")]);
    let pack = lane.take_pack(&opened, PackLimits::default(), &quarantine);
    assert_eq!(ids(&pack), ["a"], "b came under another epoch");
}
