//! The configuration exactly as an operator writes it (SPEC §7): serde structs that mirror the
//! YAML file key for key, with the documented defaults. Unknown keys are rejected at every
//! level. Nothing here is validated; [`super::validate`] turns a [`RawConfig`] into the
//! runtime [`super::Settings`], and no other module ever sees these types.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::secret::Secret;

/// Deserializes a section that may be written as an empty YAML mapping (`http:` with every key
/// commented out, i.e. `null`) into the section's defaults.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Deserializes a list of names written as a YAML sequence, or as one string — as an
/// environment variable carries it: `RoomGiftSent,RoomClosed` or `[RoomGiftSent, RoomClosed]`.
fn names<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Names::deserialize(deserializer)? {
        Names::List(list) => list,
        Names::Text(text) => text
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// Every key of the configuration as a dotted path (`http.listen`, ...) with its default
/// value as YAML would show it, in file order: the one list the docs and the shipped files are
/// checked against. Secrets show their real default (serializing a [`Secret`] redacts it).
#[cfg(test)]
pub(crate) fn default_keys() -> Vec<(String, serde_json::Value)> {
    fn walk(prefix: &str, value: serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let path = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
                    walk(&path, value, out);
                }
            }
            leaf => out.push((prefix.to_owned(), leaf)),
        }
    }
    let defaults = RawConfig::default();
    let secrets = [
        ("http.admin_token", &defaults.http.admin_token),
        ("database.url", &defaults.database.url),
        ("tencent_im.secret_key", &defaults.tencent_im.secret_key),
        ("redis.url", &defaults.redis.url),
        ("consumers.webhook.secret", &defaults.consumers.webhook.secret),
    ];
    let mut keys = Vec::new();
    // Serializing plain structs of strings and numbers cannot fail.
    walk("", serde_json::to_value(&defaults).unwrap_or_default(), &mut keys);
    for (key, value) in &mut keys {
        if let Some((_, secret)) = secrets.iter().find(|(name, _)| name == key) {
            *value = secret.expose().into();
        }
    }
    keys
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawConfig {
    /// Name of this instance in logs and in the outbox `worker_id`; empty means the hostname.
    pub node_id: String,
    /// The HTTP server.
    #[serde(deserialize_with = "null_as_default")]
    pub http: RawHttp,
    /// The gRPC server (`room.v1.RoomService`, health, reflection).
    #[serde(deserialize_with = "null_as_default")]
    pub grpc: RawGrpc,
    /// The database holding rooms, the command log and the outbox.
    #[serde(deserialize_with = "null_as_default")]
    pub database: RawDatabase,
    /// Tencent Cloud IM, the leaf of the publish stack.
    #[serde(deserialize_with = "null_as_default")]
    pub tencent_im: RawTencentIm,
    /// The rate limiter in the publish stack, shared by both paths.
    #[serde(deserialize_with = "null_as_default")]
    pub im_rate_limit: RawImRateLimit,
    /// The background worker that re-publishes pending outbox rows.
    #[serde(deserialize_with = "null_as_default")]
    pub outbox_worker: RawOutboxWorker,
    /// The room cells and their command path.
    #[serde(deserialize_with = "null_as_default")]
    pub rooms: RawRooms,
    /// The worker that evicts members whose heartbeats stopped.
    #[serde(deserialize_with = "null_as_default")]
    pub presence: RawPresence,
    /// Logging.
    #[serde(deserialize_with = "null_as_default")]
    pub log: RawLog,
    /// Many nodes on one database: shard leases, forwarding, the cluster-wide IM quota.
    #[serde(deserialize_with = "null_as_default")]
    pub cluster: RawCluster,
    /// Redis: the shard directory and the cluster-wide IM rate limit.
    #[serde(deserialize_with = "null_as_default")]
    pub redis: RawRedis,
    /// The wallet service gifts are paid from.
    #[serde(deserialize_with = "null_as_default")]
    pub wallet: RawWallet,
    /// Consumers of the room events besides IM, each with its own position.
    #[serde(deserialize_with = "null_as_default")]
    pub consumers: RawConsumers,
}

/// `consumers.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawConsumers {
    /// The activity webhook.
    #[serde(deserialize_with = "null_as_default")]
    pub webhook: RawWebhookConsumer,
    /// The audit log (table `room_audit_log`).
    #[serde(deserialize_with = "null_as_default")]
    pub audit: RawAuditConsumer,
    /// How often an idle consumer looks for new events.
    pub poll_interval: RawDuration,
    /// How long a missing outbox id is waited for (a transaction that holds it may still
    /// commit) when the database cannot prove it will never appear.
    pub gap_grace: RawDuration,
}

impl Default for RawConsumers {
    fn default() -> Self {
        Self {
            webhook: RawWebhookConsumer::default(),
            audit: RawAuditConsumer::default(),
            poll_interval: RawDuration::new("500ms"),
            gap_grace: RawDuration::new("60s"),
        }
    }
}

/// `consumers.webhook.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawWebhookConsumer {
    /// POST the room events to `url`.
    pub enabled: bool,
    /// The activity service's endpoint.
    pub url: String,
    /// HMAC-SHA256 key of the `X-Room-Signature` header.
    pub secret: Secret,
    /// Event types sent; empty: every type.
    #[serde(deserialize_with = "names")]
    pub event_types: Vec<String>,
    /// Events read, delivered and acknowledged per round.
    pub batch_size: i64,
    /// Bound on one POST.
    pub timeout: RawDuration,
    /// Events per second at most (0: unlimited).
    pub rate_limit_per_sec: i64,
}

impl Default for RawWebhookConsumer {
    fn default() -> Self {
        Self {
            enabled: false,
            url: String::new(),
            secret: Secret::default(),
            event_types: Vec::new(),
            batch_size: 100,
            timeout: RawDuration::new("3s"),
            rate_limit_per_sec: 500,
        }
    }
}

/// `consumers.audit.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAuditConsumer {
    /// Append the room events to `room_audit_log`.
    pub enabled: bool,
    /// Event types recorded; empty: every type.
    #[serde(deserialize_with = "names")]
    pub event_types: Vec<String>,
    /// Events read, recorded and acknowledged per round.
    pub batch_size: i64,
    /// Bound on one append.
    pub timeout: RawDuration,
    /// Appends per second at most (0: unlimited).
    pub rate_limit_per_sec: i64,
}

impl Default for RawAuditConsumer {
    fn default() -> Self {
        Self {
            enabled: false,
            event_types: Vec::new(),
            batch_size: 100,
            timeout: RawDuration::new("3s"),
            rate_limit_per_sec: 0,
        }
    }
}

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
}

impl Default for RawCluster {
    fn default() -> Self {
        Self {
            enabled: false,
            advertise_url: String::new(),
            expected_nodes: 1,
            lease_ttl: RawDuration::new("10s"),
        }
    }
}

/// `redis.*`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawRedis {
    /// `redis://[:password@]host:port[/db]`; empty: no Redis. May hold a password.
    pub url: Secret,
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

/// `http.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawHttp {
    /// Socket address of the public API (`/v1/*`, `/healthz`, `/readyz`), `ip:port`.
    pub listen: String,
    /// Largest accepted request body in bytes (413 above it).
    pub body_limit_bytes: usize,
    /// Socket address of the admin listener (`/admin/*`, `/metrics`), `ip:port`.
    pub admin_listen: String,
    /// Bearer token every admin route requires when set; from `ROOM_SERVICE__HTTP__ADMIN_TOKEN`.
    pub admin_token: Secret,
    /// A request not answered in this time gets 503 `request_timeout`.
    pub request_timeout: RawDuration,
    /// Most `/v1/*` requests handled at once; beyond it, 503 `overloaded` at once.
    pub max_in_flight: i64,
    /// Most open connections per listener; beyond it, new ones get a 503 and are closed.
    pub max_connections: i64,
    /// A connection that sends nothing (or stalls mid-body) for this long is closed.
    pub idle_timeout: RawDuration,
    /// After SIGTERM, `/readyz` answers 503 this long while commands are still served.
    pub shutdown_grace: RawDuration,
    /// Longest wait for open requests at shutdown; then connections are dropped.
    pub shutdown_timeout: RawDuration,
}

impl Default for RawHttp {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            body_limit_bytes: 65_536,
            admin_listen: "127.0.0.1:9091".into(),
            admin_token: Secret::default(),
            request_timeout: RawDuration::new("10s"),
            max_in_flight: 512,
            max_connections: 768,
            idle_timeout: RawDuration::new("30s"),
            shutdown_grace: RawDuration::new("0s"),
            shutdown_timeout: RawDuration::new("10s"),
        }
    }
}

/// `grpc.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawGrpc {
    /// Socket address of the gRPC API (`room.v1.RoomService`, `grpc.health.v1`, reflection),
    /// `ip:port`. Its limits (message size, timeout, connections, shutdown) are `http.*`'s.
    pub listen: String,
}

impl Default for RawGrpc {
    fn default() -> Self {
        Self { listen: "127.0.0.1:50051".into() }
    }
}

/// `database.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawDatabase {
    /// `sqlite:...`, `mysql://user:pass@host:3306/db` or `mariadb://...`; may hold a password.
    pub url: Secret,
    /// Upper bound of the connection pool.
    pub max_connections: u32,
    /// Run the embedded migrations at startup.
    pub run_migrations: bool,
}

impl Default for RawDatabase {
    fn default() -> Self {
        Self {
            url: Secret::new("sqlite://data/room-service.db?mode=rwc"),
            max_connections: 16,
            run_migrations: true,
        }
    }
}

/// `tencent_im.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawTencentIm {
    /// False: events go to a log sink, still through the same stack.
    pub enabled: bool,
    /// REST API origin: a regional Tencent domain, or a loopback fake in tests.
    pub base_url: String,
    /// The application's SDKAppID.
    pub sdk_app_id: u64,
    /// The app administrator account the REST calls are made as.
    pub admin_identifier: String,
    /// Key used to sign UserSigs; comes from `ROOM_SERVICE__TENCENT_IM__SECRET_KEY`.
    pub secret_key: Secret,
    /// IM GroupId = prefix + room_id.
    pub group_id_prefix: String,
    /// Lifetime of a generated UserSig.
    pub usersig_ttl: RawDuration,
}

impl Default for RawTencentIm {
    fn default() -> Self {
        Self {
            enabled: false,
            base_url: "https://console.tim.qq.com".into(),
            sdk_app_id: 0,
            admin_identifier: "administrator".into(),
            secret_key: Secret::default(),
            group_id_prefix: String::new(),
            usersig_ttl: RawDuration::new("24h"),
        }
    }
}

/// `outbox_worker.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawOutboxWorker {
    /// Run the worker in this instance.
    pub enabled: bool,
    /// Time between two batches; non-positive means the default.
    pub poll_interval: RawDuration,
    /// Rows claimed per batch; non-positive means the default.
    pub batch_size: i64,
    /// Bound on one IM call, sync and worker path alike; non-positive means the default.
    pub publish_timeout: RawDuration,
    /// `""` or `fixed_interval`.
    pub retry_strategy: String,
    /// Delivered rows older than this are purged; `""` or non-positive disables the purge.
    pub retention: RawDuration,
    /// How often the backlog gauges are refreshed; non-positive means the default.
    pub stats_interval: RawDuration,
    /// Most worker publishes in flight at once (rows of one room stay in order); non-positive
    /// means the default.
    pub max_in_flight: i64,
    /// `exponential`: first retry delay.
    pub retry_base: RawDuration,
    /// `exponential`: longest retry delay.
    pub retry_max: RawDuration,
    /// Park a row as `failed` after this many failed attempts; 0 = retry forever.
    pub max_attempts: i64,
    /// Least delay after a rate-limited answer; the group (or app) is paused as long.
    pub rate_limit_pause: RawDuration,
    /// How long publishing stops after a configuration error.
    pub config_error_pause: RawDuration,
}

impl Default for RawOutboxWorker {
    fn default() -> Self {
        Self {
            enabled: true,
            poll_interval: RawDuration::new("1s"),
            batch_size: 100,
            publish_timeout: RawDuration::new("3s"),
            retry_strategy: "fixed_interval".into(),
            retention: RawDuration::new(""),
            stats_interval: RawDuration::new("5s"),
            max_in_flight: 8,
            retry_base: RawDuration::new("1s"),
            retry_max: RawDuration::new("5m"),
            max_attempts: 0,
            rate_limit_pause: RawDuration::new("1s"),
            config_error_pause: RawDuration::new("30s"),
        }
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

/// `im_rate_limit.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawImRateLimit {
    /// App-wide IM calls per second, both paths together.
    pub global_per_sec: i64,
    /// Messages per second into one group.
    pub per_group_per_sec: i64,
    /// Share of `global_per_sec` the worker may use.
    pub worker_share: f64,
}

impl Default for RawImRateLimit {
    fn default() -> Self {
        Self { global_per_sec: 190, per_group_per_sec: 35, worker_share: 0.8 }
    }
}

/// `rooms.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawRooms {
    /// At most this many queued commands of one room are committed in one transaction
    /// (group commit); 1 commits every command alone.
    pub max_commit_batch: i64,
}

impl Default for RawRooms {
    fn default() -> Self {
        Self { max_commit_batch: 64 }
    }
}

/// `log.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawLog {
    /// `json` or `pretty`.
    pub format: String,
    /// A level name or an `EnvFilter` directive list.
    pub level: String,
}

impl Default for RawLog {
    fn default() -> Self {
        Self { format: "json".into(), level: "info".into() }
    }
}

/// A duration as written: `"1s"`, `"250ms"`, `"-1s"`, or a bare integer such as `0`.
/// Parsing (and the sign) is left to validation so that non-positive values can fall back to
/// defaults where the spec says so.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RawDuration(String);

impl RawDuration {
    /// Wraps a literal.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RawDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for RawDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl Visitor<'_> for DurationVisitor {
            type Value = RawDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"1s\" or \"250ms\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawDuration::new(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(RawDuration::new(v.to_string()))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(RawDuration::new(v.to_string()))
            }
        }

        deserializer.deserialize_any(DurationVisitor)
    }
}
