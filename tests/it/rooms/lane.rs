//! The room lane's hand-off to the worker where it is easiest to get wrong (SPEC §12.1, §13.1):
//! a room that moved to another node and came back, a pack waiting for its permit while that
//! happens, and a COMMIT slower than `publish_timeout`. Each test drives a [`RoomService`] over
//! a real SQLite file and real shard leases, with a publisher that records what the lane sends
//! and permits that can hold a message at its permit step; a [`CommandStore`] wrapper sees
//! each commit's claim guard and can slow its COMMIT.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use room_service::cluster::{Ownership, ShardTable, shard_of};
use room_service::delivery::Permits;
use room_service::domain::{Command, CommandId, EventType, RoomId};
use room_service::publish::{AdminApi, BoxError, Message, Outcome, Path, Publisher};
use room_service::room::{CommandResponse, Delivery, RoomOptions, RoomService, system_clock};
use room_service::store::{
    CommandKey, CommandStore, CommitError, HistoryEvent, OutboxStatus, RoomCommit, SharedRepository,
    StoreError, StoredCommand, StoredRoom,
};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{join, user};
use crate::support::TestDb;

const PUBLISH_TIMEOUT: Duration = Duration::from_secs(2);
const ROOM: &str = "lane-r1";

/// What the lane sent, and how the next send behaves.
#[derive(Default, Debug)]
struct Im {
    /// The event ids of every lane message that reached IM, as sent (packed after its permit).
    sent: Mutex<Vec<Vec<String>>>,
    /// While set, a lane message has no permit now and waits for one until `permit` is
    /// notified.
    hold: AtomicBool,
    permit: Notify,
    /// A lane message is at its permit step by now; reached while holding.
    held: Notify,
    /// While set, IM answers every message with an error.
    down: AtomicBool,
}

impl Im {
    fn publisher(self: &Arc<Self>) -> Publisher {
        let im = Arc::clone(self);
        Publisher::new(tower::service_fn(move |message: Message| {
            let im = Arc::clone(&im);
            async move {
                // Only the lane's messages reach IM.
                let skipped = EventType::im_skipped();
                if message.path != Path::Sync || skipped.contains(&message.event_type()) {
                    return Ok::<_, BoxError>(Outcome::Skipped);
                }
                if im.down.load(Ordering::SeqCst) {
                    return Err("IM is down".into());
                }
                let ids = message.events.iter().map(|e| e.event_id.clone()).collect();
                im.sent.lock().unwrap().push(ids);
                Ok(Outcome::Delivered)
            }
        }))
    }

    fn permits(self: &Arc<Self>) -> Arc<dyn Permits> {
        Arc::clone(self) as Arc<dyn Permits>
    }

    fn sent(&self) -> Vec<Vec<String>> {
        self.sent.lock().unwrap().clone()
    }

    fn ever_sent(&self, event_id: &str) -> bool {
        self.sent().iter().flatten().any(|id| id == event_id)
    }
}

/// The lane's permits: at once, or — while holding — once `permit` is notified.
impl Permits for Im {
    fn now<'a>(&'a self, _: &'a str) -> BoxFuture<'a, bool> {
        let holding = self.hold.load(Ordering::SeqCst);
        if holding {
            self.held.notify_one();
        }
        Box::pin(std::future::ready(!holding))
    }

    fn wait<'a>(&'a self, _: &'a str, _: bool) -> BoxFuture<'a, ()> {
        Box::pin(self.permit.notified())
    }

    fn pause(&self, _: &str, _: bool) {}

    fn admin<'a>(&'a self, _: AdminApi, _: Option<&'a str>) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// The command store, seeing each commit's claim guard and able to slow its COMMIT.
struct Watched {
    repo: SharedRepository,
    guards: Mutex<Vec<Duration>>,
    slow_commit: Mutex<Option<Duration>>,
}

#[async_trait]
impl CommandStore for Watched {
    async fn load_room(&self, room_id: &str) -> Result<Option<StoredRoom>, StoreError> {
        self.repo.load_room(room_id).await
    }
    async fn room_version(&self, room_id: &str) -> Result<Option<u64>, StoreError> {
        self.repo.room_version(room_id).await
    }
    async fn open_rooms_owned(&self, owner_id: &str, except_room: &str) -> Result<u64, StoreError> {
        self.repo.open_rooms_owned(owner_id, except_room).await
    }
    async fn find_command(&self, key: &CommandKey) -> Result<Vec<StoredCommand>, StoreError> {
        self.repo.find_command(key).await
    }
    async fn find_commands(&self, command_ids: &[String]) -> Result<Vec<StoredCommand>, StoreError> {
        self.repo.find_commands(command_ids).await
    }
    async fn record_refund(&self, wallet_key: &str, room_id: &str) -> Result<(), StoreError> {
        self.repo.record_refund(wallet_key, room_id).await
    }
    async fn is_refunded(&self, wallet_key: &str) -> Result<bool, StoreError> {
        self.repo.is_refunded(wallet_key).await
    }
    async fn finish_refund(&self, wallet_key: &str) -> Result<(), StoreError> {
        self.repo.finish_refund(wallet_key).await
    }
    async fn unfinished_refunds(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.repo.unfinished_refunds(older_than, limit).await
    }
    async fn mark_delivered(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        self.repo.mark_delivered(event_ids).await
    }
    async fn release_pending(&self, event_ids: &[String]) -> Result<u64, StoreError> {
        self.repo.release_pending(event_ids).await
    }
    async fn park_pending(&self, event_id: &str, reason: &str, error: &str) -> Result<bool, StoreError> {
        self.repo.park_pending(event_id, reason, error).await
    }
    async fn extend_guard(&self, event_ids: &[String], guard: Duration) -> Result<u64, StoreError> {
        self.repo.extend_guard(event_ids, guard).await
    }
    async fn has_undelivered(&self, room_id: &str) -> Result<bool, StoreError> {
        self.repo.has_undelivered(room_id).await
    }
    async fn room_events_after(
        &self,
        room_id: &str,
        after: u64,
        up_to: u64,
    ) -> Result<Vec<HistoryEvent>, StoreError> {
        self.repo.room_events_after(room_id, after, up_to).await
    }
    async fn outbox_statuses(&self, event_ids: &[String]) -> Result<Vec<(String, OutboxStatus)>, StoreError> {
        self.repo.outbox_statuses(event_ids).await
    }
    async fn prune_restrictions(&self) -> Result<u64, StoreError> {
        self.repo.prune_restrictions().await
    }

    async fn idle_rooms(
        &self,
        idle_after: Duration,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.repo.idle_rooms(idle_after, after, limit).await
    }

    async fn due_seat_requests(
        &self,
        now_ms: i64,
        after: (&str, &str),
        limit: u32,
    ) -> Result<Vec<room_service::store::DueSeatRequest>, StoreError> {
        self.repo.due_seat_requests(now_ms, after, limit).await
    }

    async fn commit_room(&self, commit: &RoomCommit) -> Result<(), CommitError> {
        self.guards.lock().unwrap().push(commit.claim_after);
        let slow = *self.slow_commit.lock().unwrap();
        let done = self.repo.commit_room(commit).await;
        if let Some(slow) = slow {
            // The rows' guard started at their INSERT; the answer comes this much later.
            tokio::time::sleep(slow).await;
        }
        done
    }
}

/// One node of the room: its leases, its store and its room service, publishing to `im`.
struct Node {
    name: &'static str,
    table: Arc<ShardTable>,
    store: Arc<Watched>,
    rooms: RoomService,
}

impl Node {
    fn new(db: &TestDb, name: &'static str, im: &Arc<Im>) -> Self {
        let table = Arc::new(ShardTable::default());
        let store = Arc::new(Watched {
            repo: db.repo.clone(),
            guards: Mutex::default(),
            slow_commit: Mutex::default(),
        });
        let mut options = RoomOptions::new(PUBLISH_TIMEOUT);
        options.sync_publish_wait = Duration::from_secs(5);
        options.ownership = Ownership::Leased(Arc::clone(&table));
        options.permits = im.permits();
        let rooms = RoomService::new(store.clone(), im.publisher(), options, system_clock());
        Self { name, table, store, rooms }
    }

    /// Takes the room's shard in the database (a new epoch) and serves it.
    async fn take(&self, db: &TestDb) {
        let shard = shard_of(ROOM);
        let won =
            db.repo.acquire_shards(self.name, "http://127.0.0.1:9", &[shard], Duration::from_secs(60)).await;
        let won = won.expect("acquire");
        assert_eq!(won.len(), 1, "{} takes the shard", self.name);
        self.table.confirm(&[(shard, won[0].epoch)], Instant::now(), Duration::from_secs(60));
    }

    /// Gives the shard up, in the database and here.
    async fn release(&self, db: &TestDb) {
        let shard = shard_of(ROOM);
        db.repo.release_shards(self.name, &[shard]).await.expect("release");
        self.table.remove(&[shard]);
    }

    async fn run(&self, command_id: &str, command: Command) -> CommandResponse {
        let room = RoomId::parse(ROOM).unwrap();
        let id = CommandId::parse(command_id).unwrap();
        self.rooms.execute(room, id, "test".into(), command).await.expect("command commits")
    }

    /// The guard of the node's last commit.
    fn last_guard(&self) -> Duration {
        *self.store.guards.lock().unwrap().last().expect("a commit")
    }
}

fn created() -> Command {
    Command::CreateRoom { owner_id: user("owner"), title: "Live".into(), seats: Default::default() }
}

/// The id of the one IM event of a join.
fn joined_event(answer: &CommandResponse) -> String {
    let im: Vec<_> = answer.events.iter().filter(|e| e.event_type == "RoomUserJoined").collect();
    assert_eq!(im.len(), 1, "{:?}", answer.events);
    im[0].event_id.clone()
}

/// Waits for the lane to have sent (or given up) everything.
async fn settled(im: &Im, count: usize) {
    for _ in 0..100 {
        if im.sent().len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the lane sent {:?}, expected {count} messages", im.sent());
}

/// Waits for the delivery marker to have marked `event_id` delivered.
async fn marked(db: &TestDb, event_id: &str) {
    for _ in 0..100 {
        if db.outbox_row(event_id).await.status == "delivered" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{event_id} is not marked delivered");
}

/// Room `ROOM` created on `a`, with alice's join sent by a's lane (which owns the room now).
async fn room_on(db: &TestDb, a: &Node, im: &Arc<Im>) {
    a.take(db).await;
    for event in a.run("create", created()).await.events {
        // Marked before the next command, so the lane takes the room at once.
        marked(db, &event.event_id).await;
    }
    let alice = a.run("j-alice", join("alice")).await;
    settled(im, 1).await;
    assert_eq!(im.sent(), vec![vec![joined_event(&alice)]], "a's lane sends alice's join");
    marked(db, &joined_event(&alice)).await;
}

#[tokio::test]
async fn the_first_commit_after_a_room_comes_back_goes_to_the_worker_while_another_owner_left_events_undelivered()
 {
    let db = TestDb::sqlite().await;
    let im = Arc::new(Im::default());
    let (a, b) = (Node::new(&db, "a", &im), Node::new(&db, "b", &im));
    room_on(&db, &a, &im).await;

    // The room moves to b, whose join of bob IM refuses: bob's event stays for the worker.
    a.release(&db).await;
    b.take(&db).await;
    im.down.store(true, Ordering::SeqCst);
    let bob = b.run("j-bob", join("bob")).await;
    let bob_event = joined_event(&bob);
    im.down.store(false, Ordering::SeqCst);
    assert_eq!(db.outbox_row(&bob_event).await.status, "pending");

    // Back on a, under a new epoch: a's cell last saw its lane clear, but the room's order now
    // runs through bob's undelivered event, so carol's must not be the lane's.
    b.release(&db).await;
    a.take(&db).await;
    let carol = a.run("j-carol", join("carol")).await;
    let carol_event = joined_event(&carol);
    assert_eq!(carol.events.iter().find(|e| e.event_id == carol_event).unwrap().delivery, Delivery::Pending);
    assert_eq!(
        a.last_guard(),
        Duration::ZERO,
        "carol's rows are committed claimable at once, for the worker that sends bob's first"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!im.ever_sent(&carol_event), "a's lane never sends carol's join ahead of bob's: {:?}", im.sent());
}

#[tokio::test]
async fn a_pack_waiting_for_its_permit_takes_on_nothing_committed_after_the_room_moved_away_and_back() {
    let db = TestDb::sqlite().await;
    let im = Arc::new(Im::default());
    let (a, b) = (Node::new(&db, "a", &im), Node::new(&db, "b", &im));
    room_on(&db, &a, &im).await;

    // dave's join waits for its permit on a's lane.
    im.hold.store(true, Ordering::SeqCst);
    let held = im.held.notified();
    let dave = a.run("j-dave", join("dave")).await;
    held.await;
    let dave_event = joined_event(&dave);

    // Meanwhile the room moves to b and back; b's worker delivered everything of the room,
    // dave's row too (its guard ran out), so a's lane takes the room again at once.
    a.release(&db).await;
    b.take(&db).await;
    db.repo
        .mark_delivered(std::slice::from_ref(&dave_event))
        .await
        .expect("b's worker delivered dave's join");
    im.hold.store(false, Ordering::SeqCst);
    let erin = b.run("j-erin", join("erin")).await;
    settled(&im, 2).await;
    marked(&db, &joined_event(&erin)).await;
    b.release(&db).await;
    a.take(&db).await;
    let frank = a.run("j-frank", join("frank")).await;
    let frank_event = joined_event(&frank);

    // dave's permit comes: the pack was started under the old epoch, so it stays dave's alone.
    im.permit.notify_one();
    settled(&im, 3).await;
    let sent = im.sent();
    assert_eq!(sent[1], vec![joined_event(&erin)], "b's lane sent erin's join");
    assert_eq!(sent[2], vec![dave_event], "dave's pack takes on nothing of the new epoch");
    settled(&im, 4).await;
    assert_eq!(im.sent()[3], vec![frank_event], "frank's join goes in a message of its own");
}

#[tokio::test]
async fn a_commit_slower_than_publish_timeout_leaves_its_events_to_the_worker() {
    let db = TestDb::sqlite().await;
    let im = Arc::new(Im::default());
    let a = Node::new(&db, "a", &im);
    room_on(&db, &a, &im).await;

    // The COMMIT answers after the lane's deadline for the rows (publish_timeout from before
    // their INSERT, inside their claim guard): a send started now could outlast the guard and
    // race the worker's, so the lane must not start it.
    *a.store.slow_commit.lock().unwrap() = Some(PUBLISH_TIMEOUT + Duration::from_millis(200));
    let gina = a.run("j-gina", join("gina")).await;
    let gina_event = joined_event(&gina);
    assert_eq!(gina.events.iter().find(|e| e.event_id == gina_event).unwrap().delivery, Delivery::Pending);
    assert!(a.last_guard() > PUBLISH_TIMEOUT, "the rows were committed for the lane, guarded");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!im.ever_sent(&gina_event), "the lane left gina's join to the worker: {:?}", im.sent());
    let row = db.outbox_row(&gina_event).await;
    assert_eq!((row.status.as_str(), row.lock_until_ms), ("pending", Some(0)), "released for the worker now");
}
