//! Validated settings of the service's edges and infrastructure: HTTP, gRPC, the database,
//! Redis, logging.

use std::net::SocketAddr;
use std::time::Duration;

use crate::secret::Secret;

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

/// Most callers' forced traces a node keeps per second (`telemetry.otlp.forced_per_sec`).
pub const MAX_FORCED_PER_SEC: u32 = 100_000;

/// Longest export queue (`telemetry.otlp.max_queue_spans`): a few hundred MiB of spans.
pub const MAX_QUEUE_SPANS: usize = 1_048_576;

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

/// Traces (SPEC §13.4).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetrySettings {
    /// OTLP export; `None` when `telemetry.otlp.endpoint` is empty (no exporter, no cost).
    pub otlp: Option<OtlpSettings>,
}

/// Where and how much of the traces go.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    /// The collector's OTLP/gRPC endpoint, e.g. `http://127.0.0.1:4317`.
    pub endpoint: String,
    /// The share of new traces kept (a caller's sampled `traceparent` too, within
    /// `forced_per_sec`).
    pub sample_ratio: f64,
    /// Longest one export call may take.
    pub timeout: Duration,
    /// Callers' sampled traces kept beyond the ratio per second at most (0: none).
    pub forced_per_sec: u32,
    /// Spans waiting for export at most (default 32,768, Quickwit's size: the SDK's 2,048
    /// fills in a second of a busy node).
    pub max_queue_spans: usize,
}

/// Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// Connection URL; may hold a password.
    pub url: Secret,
}
