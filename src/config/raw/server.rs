//! The raw sections of the service's edges and infrastructure: `http`, `grpc`, `database`,
//! `redis`, `log`.

use super::*;

/// `redis.*`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawRedis {
    /// `redis://[:password@]host:port[/db]`; empty: no Redis. May hold a password.
    pub url: Secret,
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

/// `telemetry.*`
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawTelemetry {
    /// Traces exported by OTLP.
    #[serde(deserialize_with = "super::null_as_default")]
    pub otlp: RawOtlp,
}

/// `telemetry.otlp.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawOtlp {
    /// The collector's OTLP/gRPC endpoint; empty: no export.
    pub endpoint: String,
    /// The share of new traces kept, 0.0 to 1.0.
    pub sample_ratio: f64,
    /// Longest one export call may take.
    pub timeout: RawDuration,
    /// Callers' sampled traces kept beyond the ratio per second at most; 0: the ratio alone.
    pub forced_per_sec: i64,
    /// Spans waiting for export at most; beyond it new ones are dropped (and counted).
    pub max_queue_spans: i64,
}

impl Default for RawOtlp {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            sample_ratio: 1.0,
            timeout: RawDuration::new("10s"),
            forced_per_sec: 20,
            max_queue_spans: 32_768,
        }
    }
}
