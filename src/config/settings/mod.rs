//! Validated runtime settings: what `main.rs`/`app` hand to the services. Every value here
//! has passed the rules of [`super::validate`]; durations are [`Duration`](std::time::Duration)s, addresses are
//! parsed, secrets are [`Secret`](crate::secret::Secret)s (so `Debug` never prints them).

use std::path::PathBuf;

mod auth;
mod delivery;
mod rooms;
mod server;

pub use auth::*;
pub use delivery::*;
pub use rooms::*;
pub use server::*;

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
    /// Authentication and authorization of the public API.
    pub auth: AuthSettings,
    /// The database.
    pub database: DatabaseSettings,
    /// Tencent Cloud IM; `None` when `tencent_im.enabled` is false (events go to the log sink,
    /// still through the same stack).
    pub tencent_im: Option<TencentImSettings>,
    /// The rate limiter in the publish stack.
    pub im_rate_limit: ImRateLimitSettings,
    /// How many events one IM message may carry.
    pub im_batch: ImBatchSettings,
    /// The outbox worker (its `publish_timeout` also bounds the synchronous publish).
    pub outbox_worker: OutboxWorkerSettings,
    /// The room cells and their command path.
    pub rooms: RoomsSettings,
    /// The presence (stale member) worker.
    pub presence: PresenceSettings,
    /// Logging.
    pub log: LogSettings,
    /// Traces.
    pub telemetry: TelemetrySettings,
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
