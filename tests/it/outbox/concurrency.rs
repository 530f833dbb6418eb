//! In-flight publishes: rooms go in parallel up to `max_in_flight`, the rows of one room stay
//! in order, one after another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use room_service::config::OutboxWorkerSettings;
use room_service::domain::EventType;
use room_service::outbox::OutboxWorker;
use room_service::publish::stack::into_publisher;
use room_service::publish::{BoxError, Message, Outcome};

use super::harness::*;

/// Records what a publisher saw: the most calls in flight at once, and each group's order.
#[derive(Default)]
struct Probe {
    in_flight: usize,
    max_in_flight: usize,
    per_group: HashMap<String, Vec<String>>,
    overlapping_in_a_group: bool,
    busy_groups: Vec<String>,
}

fn probing_worker(db: &Db, max_in_flight: usize) -> (OutboxWorker, Arc<Mutex<Probe>>) {
    let probe = Arc::new(Mutex::new(Probe::default()));
    let seen = probe.clone();
    let leaf = tower::service_fn(move |message: Message| {
        let seen = seen.clone();
        async move {
            {
                let mut p = seen.lock().unwrap();
                p.in_flight += 1;
                p.max_in_flight = p.max_in_flight.max(p.in_flight);
                if p.busy_groups.contains(&message.group) {
                    p.overlapping_in_a_group = true;
                }
                p.busy_groups.push(message.group.clone());
                p.per_group
                    .entry(message.group.clone())
                    .or_default()
                    .extend(message.events.iter().map(|e| e.event_id.clone()));
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            let mut p = seen.lock().unwrap();
            p.in_flight -= 1;
            let i = p.busy_groups.iter().position(|g| *g == message.group).unwrap();
            p.busy_groups.remove(i);
            Ok::<_, BoxError>(Outcome::Delivered)
        }
    });
    let options = OutboxWorkerSettings {
        max_in_flight,
        ..options(100, Duration::from_millis(100), Duration::from_secs(2))
    };
    (OutboxWorker::new(db.repo.clone(), into_publisher(leaf), "node-c", options), probe)
}

async fn rooms_go_in_parallel_and_each_room_stays_in_order(db: &Db) {
    let mut expected: HashMap<String, Vec<String>> = HashMap::new();
    for round in 0..3 {
        for room in ["r1", "r2", "r3", "r4", "r5", "r6"] {
            let ids = db.insert_events(room, &[EventType::RoomUserJoined]).await;
            expected.entry(room.to_owned()).or_default().extend(ids);
            let _ = round;
        }
    }
    let (worker, probe) = probing_worker(db, 4);
    let report = worker.process_pending_outbox().await.unwrap();
    assert_eq!((report.claimed, report.delivered), (18, 18));

    let probe = probe.lock().unwrap();
    assert_eq!(probe.max_in_flight, 4, "four rooms in flight at once, never more");
    assert!(!probe.overlapping_in_a_group, "two rows of one room were in flight together");
    assert_eq!(probe.per_group, expected, "each room's rows in id order");
}

async fn one_in_flight_publishes_one_row_at_a_time(db: &Db) {
    for room in ["a", "b", "c"] {
        db.insert_events(room, &[EventType::RoomUserJoined]).await;
    }
    let (worker, probe) = probing_worker(db, 1);
    worker.process_pending_outbox().await.unwrap();
    assert_eq!(probe.lock().unwrap().max_in_flight, 1);
}

both_backends!(rooms_go_in_parallel_and_each_room_stays_in_order, one_in_flight_publishes_one_row_at_a_time);
