//! Helpers for the outbox tests: a fresh database per test, outbox rows written through
//! `commit_command`, the real publish stack over the fake IM server, and a worker.

use std::time::Duration;

use room_service::app::im_stack;
use room_service::config::{OutboxWorkerSettings, RetryStrategy, TencentImSettings};
use room_service::delivery::SharedPermits;
use room_service::delivery::permits::{RateLimitOptions, RateLimits};
use room_service::domain::{EventEnvelope, EventType};
use room_service::outbox::OutboxWorker;
use room_service::publish::Publisher;
use room_service::publish::tencent::TencentImService;
use room_service::secret::Secret;
use room_service::store::{
    LoggedCommand, MemberChanges, NewOutboxRow, OutboxQuery, OutboxRow, RoomCommit, SharedRepository,
    SnapshotWrite,
};
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};

use crate::support::TestDb;

pub const APP: u64 = 1_400_000_777;
pub const KEY: &str = "outbox-test-secret-key";
pub const ADMIN: &str = "administrator";
pub const PREFIX: &str = "live_";

/// Generates one `#[tokio::test]` per backend for `async fn $name(db: &Db)`.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = $crate::outbox::harness::Db::sqlite().await;
                    super::$name(&db).await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = $crate::outbox::harness::Db::mariadb().await;
                    super::$name(&db).await;
                }
            )*
        }
    };
}
pub(crate) use both_backends;

/// A fresh database for one test ([`TestDb`]: dropped or deleted at the end, its sessions
/// ended first so a failed test never blocks the cleanup).
pub struct Db {
    pub repo: SharedRepository,
    db: TestDb,
}

impl Db {
    /// A migrated SQLite file in a temporary directory.
    pub async fn sqlite() -> Db {
        Self::over(TestDb::sqlite().await)
    }

    /// A fresh, migrated MariaDB database.
    pub async fn mariadb() -> Db {
        Self::over(TestDb::mysql().await)
    }

    pub fn over(db: TestDb) -> Db {
        Db { repo: db.repo.clone(), db }
    }

    /// The database under the repository.
    pub fn test_db(&self) -> &TestDb {
        &self.db
    }

    /// Runs one statement outside the repository.
    pub async fn exec(&self, sql: &str) {
        self.db.execute(sql).await;
    }

    /// The database clock, ms since the epoch.
    pub async fn now_ms(&self) -> i64 {
        self.db.now_ms().await
    }

    /// Commits one command whose outbox rows carry `envelopes` (event_id, event_type name,
    /// envelope JSON), claimable after `claim_after`.
    pub async fn insert_rows(
        &self,
        room: &str,
        envelopes: Vec<(String, &'static str, String)>,
        claim_after: Duration,
    ) {
        // A room commit moves the room on by one version each time.
        let expected_version = self.repo.room_version(room).await.expect("room version").unwrap_or(0);
        let version = expected_version + 1;
        let commit = RoomCommit {
            room_id: room.into(),
            expected_version,
            snapshot: Some(SnapshotWrite {
                version,
                status: "open",
                state: "{}".into(),
                owner_id: "owner".into(),
            }),
            commands: vec![LoggedCommand {
                command_id: format!("cmd-{:016x}", rand::random::<u64>()),
                caller: String::new(),
                command_type: "JoinRoom",
                fingerprint: "f".repeat(64),
                request_id: "req-test".into(),
                applied: true,
                room_version: version,
                outcome: "{}".into(),
            }],
            members: MemberChanges::default(),
            seat_requests: Default::default(),
            gift_totals: Vec::new(),
            restrictions: Default::default(),
            attributes: Default::default(),
            outbox: envelopes
                .into_iter()
                .map(|(event_id, event_type, envelope)| NewOutboxRow {
                    event_id,
                    event_type,
                    envelope,
                    room_version: None,
                    trace_context: None,
                })
                .collect(),
            claim_after,
            shard: room_service::cluster::shard_of(room),
            fence: None,
        };
        self.repo.commit_room(&commit).await.expect("commit command");
    }

    /// Commits one command with a well-formed event of each type, claimable at once; returns
    /// the event ids in order.
    pub async fn insert_events(&self, room: &str, types: &[EventType]) -> Vec<String> {
        let rows: Vec<_> = types
            .iter()
            .map(|t| {
                let id = new_event_id();
                (id.clone(), t.as_str(), envelope(&id, *t, room))
            })
            .collect();
        let ids = rows.iter().map(|r| r.0.clone()).collect();
        self.insert_rows(room, rows, Duration::ZERO).await;
        ids
    }

    /// Every outbox row, by id.
    pub async fn rows(&self) -> Vec<OutboxRow> {
        let query = OutboxQuery { status: None, after_id: 0, limit: 10_000 };
        self.repo.list_outbox(&query).await.expect("list outbox")
    }

    /// The row of `event_id`.
    pub async fn row(&self, event_id: &str) -> OutboxRow {
        self.rows().await.into_iter().find(|r| r.event_id == event_id).expect("row exists")
    }
}

/// A fresh UUIDv7 string.
pub fn new_event_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A well-formed envelope JSON.
pub fn envelope(event_id: &str, event_type: EventType, room: &str) -> String {
    let envelope = EventEnvelope {
        event_id: event_id.into(),
        event_type,
        room_id: room.into(),
        room_version: 1,
        command_id: "cmd-1".into(),
        request_id: "req-test".into(),
        occurred_at_ms: 1_700_000_000_000,
        payload: serde_json::json!({"user_id": "u-1"}),
    };
    serde_json::to_string(&envelope).expect("serialise envelope")
}

/// The fake IM server, with no rate limits so bulk tests are deterministic, and every group
/// there: these tests insert a room's rows straight into the outbox, no RoomCreated among them
/// (the groups' lifecycle is `tests/it/im_groups.rs`').
pub async fn fake() -> FakeIm {
    let options = FakeImOptions {
        per_group_limit_per_sec: None,
        global_limit_per_sec: None,
        require_groups: false,
        ..FakeImOptions::new(APP, KEY, ADMIN)
    };
    FakeIm::start(options).await
}

/// The production stack over the real IM leaf pointed at `fake`.
pub fn stack(fake: &FakeIm, publish_timeout: Duration) -> Publisher {
    let leaf = TencentImService::new(&TencentImSettings {
        base_url: fake.base_url(),
        sdk_app_id: APP,
        admin_identifier: ADMIN.into(),
        secret_key: Secret::new(KEY),
        group_id_prefix: PREFIX.into(),
        usersig_ttl: Duration::from_secs(3600),
        manage_groups: true,
        avchatroom_ban: false,
    })
    .expect("valid IM options");
    im_stack(leaf, publish_timeout)
}

/// The permits of these rate limits, for a worker ([`OutboxWorker::with_permits`]).
pub fn permits(limits: RateLimitOptions) -> SharedPermits {
    RateLimits::shared(&limits, None)
}

/// Options for tests: short poll interval and timeout.
pub fn options(
    batch_size: usize,
    poll_interval: Duration,
    publish_timeout: Duration,
) -> OutboxWorkerSettings {
    OutboxWorkerSettings {
        poll_interval,
        batch_size,
        publish_timeout,
        retry_strategy: RetryStrategy::FixedInterval,
        max_in_flight: 4,
        ..OutboxWorkerSettings::default()
    }
}

/// A worker of node `node` over `db`, publishing to `fake`.
pub fn worker(db: &Db, fake: &FakeIm, node: &str, options: OutboxWorkerSettings) -> OutboxWorker {
    OutboxWorker::new(db.repo.clone(), stack(fake, options.publish_timeout), node, options)
}

/// The IM group of a room.
pub fn group(room: &str) -> String {
    format!("{PREFIX}{room}")
}

/// Waits (up to 10 s) until `check` holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
