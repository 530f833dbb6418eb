//! Validated runtime settings: what `main.rs`/`app` hand to the services. Every value here
//! has passed the rules of [`super::validate`]; durations are [`Duration`]s, addresses are
//! parsed, secrets are [`Secret`]s (so `Debug` never prints them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::secret::Secret;

/// Default `outbox_worker.poll_interval`, also used when the configured one is non-positive.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default `outbox_worker.batch_size`, also used when the configured one is non-positive.
pub const DEFAULT_BATCH_SIZE: usize = 100;
/// Largest accepted `outbox_worker.batch_size`; a larger value fails startup (it is not
/// clamped, so an operator never gets a batch size other than the one they asked for).
pub const MAX_BATCH_SIZE: usize = 1000;
/// Default `outbox_worker.publish_timeout`, also used when the configured one is non-positive.
pub const DEFAULT_PUBLISH_TIMEOUT: Duration = Duration::from_secs(3);

/// Default `outbox_worker.max_in_flight`: 8 publishes at a typical 40 ms IM call stay under
/// Tencent's 200 calls/s per app.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;
/// Largest accepted `outbox_worker.max_in_flight`.
pub const MAX_IN_FLIGHT: usize = 64;

/// Default `outbox_worker.stats_interval`.
pub const DEFAULT_STATS_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest claim lease. A lease is renewed every quarter of it while its claim holds rows, so it
/// only needs to outlast one publish (`publish_timeout`) and a renewal; rows of a crashed
/// worker return after it.
pub const MIN_LEASE: Duration = Duration::from_secs(10);

/// Everything the service needs at runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// This instance's name (`[A-Za-z0-9_.-]{1,64}`): the configured one, or the sanitized
    /// hostname.
    pub node_id: String,
    /// The HTTP server.
    pub http: HttpSettings,
    /// The gRPC server.
    pub grpc: GrpcSettings,
    /// The database.
    pub database: DatabaseSettings,
    /// Tencent Cloud IM.
    pub tencent_im: TencentImSettings,
    /// The rate limiter in the publish stack.
    pub im_rate_limit: ImRateLimitSettings,
    /// The outbox worker (its `publish_timeout` also bounds the synchronous publish).
    pub outbox_worker: OutboxWorkerSettings,
    /// The room cells and their command path.
    pub rooms: RoomsSettings,
    /// The presence (stale member) worker.
    pub presence: PresenceSettings,
    /// Logging.
    pub log: LogSettings,
    /// Many nodes on one database.
    pub cluster: ClusterSettings,
    /// Redis (`None`: not configured).
    pub redis: Option<RedisSettings>,
    /// The wallet gifts are paid from.
    pub wallet: WalletSettings,
    /// Consumers of the room events besides IM.
    pub consumers: ConsumersSettings,
    /// Where the values came from, for the first log line after startup.
    pub source: ConfigSource,
}

/// Where a [`Settings`] was loaded from (environment overrides apply in both cases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The YAML file at this path.
    File(PathBuf),
    /// No file existed at the default path; built-in defaults were used.
    Defaults,
}

/// The HTTP server: the public listener, the admin listener, and the limits of both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Address of the public API (`/v1/*`, `/healthz`, `/readyz`).
    pub listen: SocketAddr,
    /// Largest accepted request body in bytes (> 0).
    pub body_limit_bytes: usize,
    /// Address of the admin listener (`/admin/*`, `/metrics`).
    pub admin_listen: SocketAddr,
    /// Bearer token of the admin routes; `None` leaves them open (loopback only).
    pub admin_token: Option<Secret>,
    /// A request not answered in this time gets 503 `request_timeout`.
    pub request_timeout: Duration,
    /// Most `/v1/*` requests handled at once (load shedding beyond it).
    pub max_in_flight: usize,
    /// Most open connections per listener.
    pub max_connections: usize,
    /// A connection silent this long (no request, or a stalled body) is closed; longer than
    /// `request_timeout`.
    pub idle_timeout: Duration,
    /// How long `/readyz` answers 503 before draining starts (may be zero).
    pub shutdown_grace: Duration,
    /// Longest wait for open requests at shutdown.
    pub shutdown_timeout: Duration,
}

/// The gRPC server: its address; its limits are those of [`HttpSettings`] (the largest request
/// message is `body_limit_bytes`, a call is bounded by `request_timeout` and by the client's
/// deadline, connections by `max_connections`, shutdown by `shutdown_timeout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcSettings {
    /// Address of the gRPC API.
    pub listen: SocketAddr,
}

/// Largest accepted `http.max_in_flight` and `http.max_connections`.
pub const MAX_HTTP_LIMIT: usize = 1_000_000;

/// The database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSettings {
    /// Connection URL; a secret because it may carry a password.
    pub url: Secret,
    /// Pool size (>= 1).
    pub max_connections: u32,
    /// Run migrations at startup.
    pub run_migrations: bool,
}

/// Which database engine a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `mysql://` or `mariadb://`.
    MySql,
    /// `sqlite:`.
    Sqlite,
}

impl Backend {
    /// The backend named by the URL's scheme, or `None` for any other scheme.
    pub fn from_url(url: &str) -> Option<Self> {
        // Lowercase only, as the database driver expects it.
        let url = url.trim_start();
        if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Some(Self::MySql)
        } else {
            None
        }
    }
}

impl DatabaseSettings {
    /// The engine of [`DatabaseSettings::url`] (validation guarantees a known scheme).
    pub fn backend(&self) -> Backend {
        Backend::from_url(self.url.expose()).unwrap_or(Backend::Sqlite)
    }

    /// The URL with any password replaced by `***`, fit for a log line.
    pub fn redacted_url(&self) -> String {
        let url = self.url.expose();
        let Some((scheme, rest)) = url.split_once("://") else {
            return url.to_owned();
        };
        // Everything up to the last '@' is user info, even when an unencoded password holds
        // '/', '?' or '#': never print any of it but the user name.
        match rest.rsplit_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                let user = user.split(['/', '?', '#']).next().unwrap_or_default();
                format!("{scheme}://{user}:***@{host}")
            }
            None => url.to_owned(),
        }
    }
}

/// Tencent Cloud IM. When `enabled`, every field has been checked to be usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TencentImSettings {
    /// False: events go to the log sink.
    pub enabled: bool,
    /// `http(s)://host[:port]` without a trailing slash.
    pub base_url: String,
    /// SDKAppID (> 0 when enabled).
    pub sdk_app_id: u64,
    /// Administrator account of the REST calls.
    pub admin_identifier: String,
    /// UserSig signing key (non-empty when enabled; surrounding whitespace removed).
    pub secret_key: Secret,
    /// IM GroupId = prefix + room_id.
    pub group_id_prefix: String,
    /// Lifetime of a generated UserSig (>= 1 minute).
    pub usersig_ttl: Duration,
}

/// How failed outbox rows are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryStrategy {
    /// Retry after one poll interval (the seed's V1).
    #[default]
    FixedInterval,
    /// `retry_base × 2^(attempt-1)`, capped at `retry_max`, times a jitter in [0.5, 1.0].
    Exponential,
}

/// The rate limiter of the publish stack (`im_rate_limit.*`): every limit holds in every
/// sliding one-second window.
#[derive(Debug, Clone, PartialEq)]
pub struct ImRateLimitSettings {
    /// App-wide calls per second, both paths together (Tencent: 200 per SDKAppID).
    pub global_per_sec: u32,
    /// Messages per second into one group (Tencent: 40).
    pub per_group_per_sec: u32,
    /// Share of `global_per_sec` the worker may use, in (0, 1].
    pub worker_share: f64,
}

/// The outbox worker, normalised: every value is positive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxWorkerSettings {
    /// Run the worker in this instance.
    pub enabled: bool,
    /// Time between batches (> 0).
    pub poll_interval: Duration,
    /// Rows per claim, 1..=[`MAX_BATCH_SIZE`].
    pub batch_size: usize,
    /// Bound on one publish (> 0), on both the sync and the worker path.
    pub publish_timeout: Duration,
    /// Retry policy.
    pub retry_strategy: RetryStrategy,
    /// Delivered rows older than this are purged in the background; `None`: never purged.
    pub retention: Option<Duration>,
    /// How often `room_outbox_rows` and the oldest pending age are refreshed (> 0).
    pub stats_interval: Duration,
    /// Most worker publishes in flight, 1..=[`MAX_IN_FLIGHT`]; rows of one room stay in order.
    pub max_in_flight: usize,
    /// `exponential`: first retry delay (> 0).
    pub retry_base: Duration,
    /// `exponential`: longest retry delay (>= `retry_base`).
    pub retry_max: Duration,
    /// Failed attempts after which a row is parked as `failed`; 0 = never.
    pub max_attempts: u32,
    /// Least delay after a rate-limited answer (> 0).
    pub rate_limit_pause: Duration,
    /// Publishing stops this long after a configuration error (> 0).
    pub config_error_pause: Duration,
}

impl OutboxWorkerSettings {
    /// The lease a claim takes (renewed while the claim holds rows): see [`lease_for`].
    pub fn lease(&self) -> Duration {
        lease_for(self.publish_timeout)
    }
}

/// Three publish timeouts, at least [`MIN_LEASE`], saturating.
pub fn lease_for(publish_timeout: Duration) -> Duration {
    publish_timeout.saturating_mul(3).max(MIN_LEASE)
}

/// Largest accepted `rooms.max_commit_batch`.
pub const MAX_COMMIT_BATCH: usize = 1000;

/// The room cells and their command path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomsSettings {
    /// Most queued commands of one room committed in one transaction (1..=[`MAX_COMMIT_BATCH`]).
    pub max_commit_batch: usize,
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

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable, for a terminal.
    Pretty,
}

/// Logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// Output format.
    pub format: LogFormat,
    /// An `EnvFilter` directive list (a level name such as `info` is one).
    pub level: String,
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

/// Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// Connection URL; may hold a password.
    pub url: Secret,
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

/// The consumers of room events besides IM (`consumers.*`); a disabled one is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumersSettings {
    /// The activity webhook.
    pub webhook: Option<WebhookSettings>,
    /// The audit log.
    pub audit: Option<ConsumerSettings>,
    /// How often an idle consumer looks for new events.
    pub poll_interval: Duration,
    /// How long a missing outbox id is waited for when the database cannot prove it is gone.
    pub gap_grace: Duration,
}

impl ConsumersSettings {
    /// Names of the enabled consumers: retention keeps every event one of them has not passed.
    pub fn enabled_names(&self) -> Vec<&'static str> {
        let webhook = self.webhook.as_ref().map(|_| "webhook");
        let audit = self.audit.as_ref().map(|_| "audit");
        webhook.into_iter().chain(audit).collect()
    }
}

/// What every consumer has: its event filter, batch, timeout and rate limit.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerSettings {
    /// Event types delivered (the others are skipped); empty: every type.
    pub event_types: Vec<crate::domain::EventType>,
    /// Events read, delivered and acknowledged per round (1..=[`MAX_BATCH_SIZE`]).
    pub batch_size: usize,
    /// Bound on one delivery.
    pub timeout: Duration,
    /// Deliveries per second at most; `None`: unlimited.
    pub rate_limit_per_sec: Option<u32>,
}

/// The activity webhook.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSettings {
    /// Endpoint the events are POSTed to.
    pub url: String,
    /// HMAC-SHA256 key of the signature header.
    pub secret: Secret,
    /// Filter, batch, timeout and rate limit.
    pub consumer: ConsumerSettings,
}
