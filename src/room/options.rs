//! The settings of the room service, its clock, and what it reports about its commits.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::cluster::Ownership;
use crate::config::HistorySettings;
use crate::delivery::pack::PackLimits;
use crate::delivery::permits::Unlimited;
use crate::delivery::{Quarantine, SharedPermits};
use crate::domain::RoomState;
use crate::wallet::Wallet;

/// A condition on the room, checked at the command's turn right before it applies.
pub type StillHolds = dyn Fn(&RoomState) -> bool + Send + Sync;

/// Default `rooms.max_commit_batch`.
pub const DEFAULT_MAX_COMMIT_BATCH: usize = 64;

/// Default `rooms.sync_publish_wait`.
pub const DEFAULT_SYNC_PUBLISH_WAIT: Duration = Duration::from_secs(1);

/// Settings of the room service.
#[derive(Debug, Clone)]
pub struct RoomOptions {
    /// Bounds the synchronous publish of one command; outbox rows are not claimable by the
    /// worker before it has passed.
    pub publish_timeout: Duration,
    /// Longest a command's answer waits for the first send of its own events
    /// (`rooms.sync_publish_wait`); it answers `pending` at once when its room's lane is
    /// behind.
    pub sync_publish_wait: Duration,
    /// How many of a room's events one IM message carries (`im_batch.*`).
    pub pack: PackLimits,
    /// At most this many queued commands of one room are committed in one transaction
    /// (1: one command per transaction).
    pub max_commit_batch: usize,
    /// Longest room id IM can carry (`GroupId` = prefix + room id, 48 bytes at most); `None`
    /// when IM is disabled. CreateRoom refuses longer ids.
    pub max_room_id_bytes: Option<usize>,
    /// Notified when the synchronous path leaves events pending, so the worker claims them now.
    pub worker_wake: Option<Arc<Notify>>,
    /// Which rooms this node may serve (every room without a cluster); commits are fenced on
    /// the shard lease's epoch.
    pub ownership: Ownership,
    /// The wallet gifts are paid from (`wallet.enabled`); `None`: gifts are free.
    pub wallet: Option<Arc<dyn Wallet>>,
    /// What the rooms' event history serves (`rooms.history.*`).
    pub history: HistorySettings,
    /// Messages of one room its lane keeps in flight at once (`im_batch.in_flight_per_room`;
    /// 1: strict room order at IM).
    pub in_flight_per_room: usize,
    /// The senders whose events the lanes send alone (SPEC §13.1); the app shares it with the
    /// outbox worker.
    pub quarantine: Arc<Quarantine>,
    /// Where the lanes take their rate-limit permits (Tencent's limits with IM on); the app
    /// shares them with the outbox worker.
    pub permits: SharedPermits,
    /// Most admins a room may have (`rooms.max_admins`).
    pub max_admins: usize,
    /// How long a seat request or invitation stays pending (`rooms.seat_request_ttl`).
    pub seat_request_ttl: Duration,
    /// A room with no member and no command for this long closes itself
    /// (`rooms.idle_close_after`; `None`: never).
    pub idle_close_after: Option<Duration>,
    /// The IM group operations the rooms' events carry (`tencent_im.manage_groups`,
    /// `tencent_im.avchatroom_ban`); none with IM off.
    pub groups: crate::delivery::groups::Groups,
}

/// Default `rooms.seat_request_ttl`.
pub const DEFAULT_SEAT_REQUEST_TTL: Duration =
    Duration::from_millis(crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS as u64);

impl RoomOptions {
    /// Options with the default batch size, answer wait, packs and history, no room id limit,
    /// no worker to wake, no wallet, a quarantine of its own and no rate limit.
    pub fn new(publish_timeout: Duration) -> Self {
        Self {
            publish_timeout,
            sync_publish_wait: DEFAULT_SYNC_PUBLISH_WAIT,
            pack: PackLimits::default(),
            max_commit_batch: DEFAULT_MAX_COMMIT_BATCH,
            max_room_id_bytes: None,
            worker_wake: None,
            ownership: Ownership::Single,
            wallet: None,
            history: HistorySettings::default(),
            in_flight_per_room: 1,
            quarantine: Arc::default(),
            permits: Arc::new(Unlimited),
            max_admins: crate::domain::DEFAULT_MAX_ADMINS,
            seat_request_ttl: DEFAULT_SEAT_REQUEST_TTL,
            idle_close_after: None,
            groups: crate::delivery::groups::Groups::NONE,
        }
    }
}

/// How the command path has committed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Room transactions committed.
    pub transactions: u64,
    /// Commands logged by them (applied or no-op).
    pub commands: u64,
}

/// Wall clock in milliseconds since the epoch; injectable so presence tests control time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    })
}
