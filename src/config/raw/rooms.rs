//! The raw sections of the rooms and the nodes serving them: `rooms`, `presence`, `cluster`,
//! `wallet`.

use super::*;

/// `cluster.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawCluster {
    /// Share the rooms with other nodes through shard leases in the database.
    pub enabled: bool,
    /// This node's public API origin as the other nodes reach it (`http://host:port`).
    pub advertise_url: String,
    /// Nodes expected to run; without Redis each takes `global_per_sec / expected_nodes`.
    pub expected_nodes: i64,
    /// Lifetime of a shard lease on the database clock; renewed every 3/10 of it, and a node
    /// that could not renew for 7/10 of it stops serving the shard.
    pub lease_ttl: RawDuration,
    /// The nodes' shared secret (≥ 32 bytes, from the environment only): every hop is signed
    /// with it, and only a hop it signed is served.
    pub secret: Secret,
    /// A second secret also accepted (never signed with): the other secret of a rotation.
    pub secret_previous: Secret,
}

impl Default for RawCluster {
    fn default() -> Self {
        Self {
            enabled: false,
            advertise_url: String::new(),
            expected_nodes: 1,
            lease_ttl: RawDuration::new("10s"),
            secret: Secret::default(),
            secret_previous: Secret::default(),
        }
    }
}

/// `wallet.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawWallet {
    /// Gifts debit the sender through the wallet service before they commit.
    pub enabled: bool,
    /// The wallet service's origin.
    pub base_url: String,
    /// Bound on one wallet call; a gift whose debit times out answers 503.
    pub timeout: RawDuration,
}

impl Default for RawWallet {
    fn default() -> Self {
        Self { enabled: false, base_url: String::new(), timeout: RawDuration::new("2s") }
    }
}

/// `presence.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawPresence {
    /// Run the stale-member worker.
    pub enabled: bool,
    /// A member silent for this long is removed with reason `stale`.
    pub stale_after: RawDuration,
    /// How often rooms are scanned for stale members.
    pub scan_interval: RawDuration,
}

impl Default for RawPresence {
    fn default() -> Self {
        Self { enabled: true, stale_after: RawDuration::new("60s"), scan_interval: RawDuration::new("10s") }
    }
}

/// `rooms.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawRooms {
    /// At most this many queued commands of one room are committed in one transaction
    /// (group commit); 1 commits every command alone.
    pub max_commit_batch: i64,
    /// Longest a command's answer waits for the first send of its own events to IM; `0s`
    /// never waits.
    pub sync_publish_wait: RawDuration,
    /// The room's event history (`GET /v1/rooms/{id}/events`).
    pub history: RawHistory,
    /// Most admins the owner may appoint in one room.
    pub max_admins: i64,
    /// A room with no member and no command for this long closes itself; `0s`: never.
    pub idle_close_after: RawDuration,
    /// How long a mic seat request or invitation stays pending before it expires.
    pub seat_request_ttl: RawDuration,
    /// Mic seat actions one user may make per second in one room; 0: no limit.
    pub seat_actions_per_user_per_sec: i64,
    /// The members listing (`GET /v1/rooms/{id}/members`).
    pub members: RawMembersReads,
    /// Open rooms one user may own at once (service tokens are exempt).
    pub max_open_per_owner: i64,
}

impl Default for RawRooms {
    fn default() -> Self {
        Self {
            max_commit_batch: 64,
            sync_publish_wait: RawDuration::new("1s"),
            history: RawHistory::default(),
            max_admins: 5,
            idle_close_after: RawDuration::new("0s"),
            seat_request_ttl: RawDuration::new("30s"),
            seat_actions_per_user_per_sec: 2,
            members: RawMembersReads::default(),
            max_open_per_owner: 10,
        }
    }
}

/// `rooms.members.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawMembersReads {
    /// Members reads a client (a user, or the address of an anonymous one) may make per second,
    /// a page of more than 100 members counting one per 100; 0: no limit.
    pub reads_per_sec_per_client: i64,
}

impl Default for RawMembersReads {
    fn default() -> Self {
        Self { reads_per_sec_per_client: 10 }
    }
}

/// `rooms.history.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawHistory {
    /// Each room's most recent this many IM events are kept for catching up.
    pub max_events: i64,
    /// ... younger than this.
    pub max_age: RawDuration,
    /// Bytes of history blocks each node keeps in memory for the events API.
    pub cache_bytes: i64,
    /// Database queries of the events API running at once on a node, at most.
    pub max_db_reads: i64,
    /// Events API reads a client (a user, or the address of an anonymous one) may make per
    /// second; 0: no limit.
    pub reads_per_sec_per_client: i64,
}

impl Default for RawHistory {
    fn default() -> Self {
        Self {
            max_events: 1000,
            max_age: RawDuration::new("10m"),
            cache_bytes: 64 << 20,
            max_db_reads: 4,
            reads_per_sec_per_client: 10,
        }
    }
}
