//! Validated settings of the rooms and the nodes serving them.

use std::time::Duration;

use crate::secret::Secret;

/// Largest accepted `rooms.max_commit_batch`.
pub const MAX_COMMIT_BATCH: usize = 1000;
/// Longest accepted `rooms.sync_publish_wait`.
pub const MAX_SYNC_PUBLISH_WAIT: Duration = Duration::from_secs(10);

/// Largest accepted `rooms.history.max_events`.
pub const MAX_HISTORY_EVENTS: u64 = 1_000_000;
/// Longest accepted `rooms.history.max_age`.
pub const MAX_HISTORY_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The room cells and their command path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomsSettings {
    /// Most queued commands of one room committed in one transaction (1..=[`MAX_COMMIT_BATCH`]).
    pub max_commit_batch: usize,
    /// Longest a command's answer waits for the first send of its own events to IM
    /// (0..=[`MAX_SYNC_PUBLISH_WAIT`]; zero: never); when the room's IM lane is behind it
    /// answers at once with delivery `pending`.
    pub sync_publish_wait: Duration,
    /// The room's event history a client catches up from.
    pub history: HistorySettings,
    /// Most admins of one room (1..=`MAX_ADMINS`).
    pub max_admins: usize,
    /// A room with no member and no command for this long closes itself (`None`: never).
    pub idle_close_after: Option<Duration>,
    /// How long a seat request or invitation stays pending (1s..=`MAX_SEAT_REQUEST_TTL`).
    pub seat_request_ttl: Duration,
    /// Mic seat actions per second of one user in one room
    /// (0..=`MAX_SEAT_ACTIONS_PER_SEC`; 0: no limit).
    pub seat_actions_per_user_per_sec: u32,
    /// Members listing reads per second per client, a page of more than 100 members counting
    /// one per 100 (0: no limit; at most 100,000).
    pub members_reads_per_sec_per_client: u32,
    /// Open rooms one user may own at once (0: no limit; at most `MAX_OPEN_PER_OWNER`);
    /// service tokens are exempt.
    pub max_open_per_owner: u32,
}

/// Largest accepted `rooms.max_open_per_owner`.
pub const MAX_OPEN_PER_OWNER: u32 = 1_000_000;

/// Largest accepted `rooms.seat_actions_per_user_per_sec`.
pub const MAX_SEAT_ACTIONS_PER_SEC: u32 = 1000;

/// Longest accepted `rooms.seat_request_ttl`.
pub const MAX_SEAT_REQUEST_TTL: Duration = Duration::from_secs(3600);

/// Largest accepted `rooms.max_admins`.
pub const MAX_ADMINS: usize = 100;

/// What each room's event history keeps (SPEC §13.2): its most recent `max_events` IM events
/// younger than `max_age`; a catch-up from further back answers `recovered: false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistorySettings {
    /// 1..=[`MAX_HISTORY_EVENTS`].
    pub max_events: u64,
    /// 1s..=[`MAX_HISTORY_AGE`].
    pub max_age: Duration,
    /// Bytes of history blocks kept in memory on each node (1 MiB..=4 GiB).
    pub cache_bytes: u64,
    /// The events API's database queries running at once on a node (1..=64): the rest of the
    /// pool is the writers'.
    pub max_db_reads: u32,
    /// Reads per second per client (0: no limit).
    pub reads_per_sec_per_client: u32,
}

impl Default for HistorySettings {
    fn default() -> Self {
        Self {
            max_events: 1000,
            max_age: Duration::from_secs(600),
            cache_bytes: 64 << 20,
            max_db_reads: 4,
            reads_per_sec_per_client: 10,
        }
    }
}

/// The presence worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceSettings {
    /// Run the stale-member worker.
    pub enabled: bool,
    /// Silence after which a member is removed (> 0 when enabled).
    pub stale_after: Duration,
    /// Scan period (> 0 when enabled).
    pub scan_interval: Duration,
}

/// Many nodes sharing one database: each owns the rooms of the shards it leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// False: this node owns every room (no lease traffic).
    pub enabled: bool,
    /// This node's public API origin for the other nodes (no trailing slash).
    pub advertise_url: String,
    /// Nodes expected to run (>= 1): the local share of the IM quota when Redis is away.
    pub expected_nodes: u32,
    /// Lifetime of a shard lease (database clock).
    pub lease_ttl: Duration,
    /// The secrets of the cluster hop: the one hops are signed with, and any also accepted
    /// (empty without a cluster).
    pub hop_secrets: HopSecrets,
}

/// The secrets of the cluster hop (`cluster.secret`, `cluster.secret_previous`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HopSecrets {
    /// Signs every hop this node sends, and is accepted.
    pub signing: Secret,
    /// Also accepted, never signed with (a rotation's other secret).
    pub previous: Option<Secret>,
}

impl ClusterSettings {
    /// How often held leases are renewed (and shards rebalanced): 3/10 of the TTL.
    pub fn renew_every(&self) -> Duration {
        self.lease_ttl * 3 / 10
    }

    /// A node that could not renew for this long stops serving the shard: 7/10 of the TTL.
    pub fn self_fence_after(&self) -> Duration {
        self.lease_ttl * 7 / 10
    }
}

/// The wallet service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletSettings {
    /// Gifts debit their sender before they commit.
    pub enabled: bool,
    /// Origin of the wallet service (no trailing slash).
    pub base_url: String,
    /// Bound on one wallet call.
    pub timeout: Duration,
}
