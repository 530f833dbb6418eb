//! The rules of SPEC §7: turns a [`RawConfig`] into [`Settings`] or reports every broken rule
//! at once, each naming its key. Outbox worker values that are non-positive are replaced by
//! their defaults here (the spec's normalisation); everything else that is wrong fails.

use std::net::SocketAddr;
use std::time::Duration;

use super::error::ConfigError;
use super::raw::{
    RawAuditConsumer, RawCluster, RawConfig, RawConsumers, RawDatabase, RawDuration, RawGrpc, RawHttp,
    RawImRateLimit, RawLog, RawOutboxWorker, RawPresence, RawRedis, RawRooms, RawTencentIm, RawWallet,
    RawWebhookConsumer,
};
use super::rules::{
    MIN_RETENTION, MIN_USERSIG_TTL, Parsed, Problems, check_base_url, check_log_level, is_valid_node_id,
    parse_duration, sanitize_node_id,
};
use super::settings::{
    Backend, ClusterSettings, ConfigSource, ConsumerSettings, ConsumersSettings, DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_POLL_INTERVAL, DEFAULT_PUBLISH_TIMEOUT, DEFAULT_STATS_INTERVAL,
    DatabaseSettings, GrpcSettings, HttpSettings, ImRateLimitSettings, LogFormat, LogSettings,
    MAX_BATCH_SIZE, MAX_COMMIT_BATCH, MAX_HTTP_LIMIT, MAX_IN_FLIGHT, OutboxWorkerSettings, PresenceSettings,
    RedisSettings, RetryStrategy, RoomsSettings, Settings, TencentImSettings, WalletSettings,
    WebhookSettings,
};
use crate::secret::Secret;

/// Applies every rule; `hostname` supplies the node id when none is configured.
pub(crate) fn validate(
    raw: RawConfig,
    source: ConfigSource,
    hostname: impl FnOnce() -> String,
) -> Result<Settings, ConfigError> {
    let mut p = Problems::default();
    let node_id = match raw.node_id.trim() {
        "" => sanitize_node_id(&hostname()),
        id if is_valid_node_id(id) => id.to_owned(),
        _ => {
            p.add("node_id", "must be 1-64 characters of [A-Za-z0-9_.-]");
            String::new()
        }
    };
    let settings = Settings {
        node_id,
        grpc: grpc(&mut p, raw.grpc, &raw.http),
        http: http(&mut p, raw.http),
        database: database(&mut p, raw.database),
        tencent_im: tencent_im(&mut p, raw.tencent_im),
        im_rate_limit: im_rate_limit(&mut p, raw.im_rate_limit),
        outbox_worker: outbox_worker(&mut p, raw.outbox_worker),
        rooms: rooms(&mut p, raw.rooms),
        presence: presence(&mut p, raw.presence),
        log: log(&mut p, raw.log),
        cluster: ClusterSettings {
            enabled: false,
            advertise_url: String::new(),
            expected_nodes: 1,
            lease_ttl: Duration::from_secs(10),
        },
        redis: redis(&mut p, raw.redis),
        wallet: wallet(&mut p, raw.wallet),
        consumers: consumers(&mut p, raw.consumers),
        source,
    };
    let backend = settings.database.backend();
    let settings = Settings { cluster: cluster(&mut p, raw.cluster, backend), ..settings };
    match ConfigError::from_list(p.0) {
        Some(error) => Err(error),
        None => Ok(settings),
    }
}

fn http(p: &mut Problems, raw: RawHttp) -> HttpSettings {
    let listen = raw.listen.trim().parse::<SocketAddr>().unwrap_or_else(|e| {
        p.add("http.listen", format!("{:?} is not an ip:port address ({e})", raw.listen));
        SocketAddr::from(([127, 0, 0, 1], 8080))
    });
    if raw.body_limit_bytes == 0 {
        p.add("http.body_limit_bytes", "must be greater than zero");
    }
    let admin_listen = raw.admin_listen.trim().parse::<SocketAddr>().unwrap_or_else(|e| {
        p.add("http.admin_listen", format!("{:?} is not an ip:port address ({e})", raw.admin_listen));
        SocketAddr::from(([127, 0, 0, 1], 9091))
    });
    let admin_token = Secret::new(raw.admin_token.expose().trim());
    let admin_token = (!admin_token.is_empty()).then_some(admin_token);
    if admin_token.is_none() && !admin_listen.ip().is_loopback() {
        p.add(
            "http.admin_listen",
            format!(
                "{admin_listen} is not a loopback address: set http.admin_token \
                 (ROOM_SERVICE__HTTP__ADMIN_TOKEN) or listen on 127.0.0.1"
            ),
        );
    }
    if admin_listen == listen && listen.port() != 0 {
        p.add("http.admin_listen", "must differ from http.listen");
    }
    let mut limit = |key: &str, value: i64| match usize::try_from(value) {
        Ok(n) if (1..=MAX_HTTP_LIMIT).contains(&n) => n,
        _ => {
            p.add(key, format!("{value} is not between 1 and {MAX_HTTP_LIMIT}"));
            1
        }
    };
    let max_in_flight = limit("http.max_in_flight", raw.max_in_flight);
    let max_connections = limit("http.max_connections", raw.max_connections);
    let request_timeout = p.positive("http.request_timeout", &raw.request_timeout, Duration::from_secs(10));
    let idle_timeout = p.positive("http.idle_timeout", &raw.idle_timeout, Duration::from_secs(30));
    if idle_timeout <= request_timeout {
        // A request being handled may leave the connection silent until its answer.
        p.add("http.idle_timeout", "must be longer than http.request_timeout");
    }
    HttpSettings {
        listen,
        body_limit_bytes: raw.body_limit_bytes,
        admin_listen,
        admin_token,
        request_timeout,
        max_in_flight,
        max_connections,
        idle_timeout,
        shutdown_grace: p.or_default("http.shutdown_grace", &raw.shutdown_grace, Duration::ZERO),
        shutdown_timeout: p.positive("http.shutdown_timeout", &raw.shutdown_timeout, Duration::from_secs(10)),
    }
}

fn grpc(p: &mut Problems, raw: RawGrpc, http: &RawHttp) -> GrpcSettings {
    let listen = raw.listen.trim().parse::<SocketAddr>().unwrap_or_else(|e| {
        p.add("grpc.listen", format!("{:?} is not an ip:port address ({e})", raw.listen));
        SocketAddr::from(([127, 0, 0, 1], 50051))
    });
    let taken =
        [&http.listen, &http.admin_listen].into_iter().filter_map(|a| a.trim().parse::<SocketAddr>().ok());
    if listen.port() != 0 && taken.into_iter().any(|a| a == listen) {
        p.add("grpc.listen", "must differ from http.listen and http.admin_listen");
    }
    GrpcSettings { listen }
}

fn database(p: &mut Problems, raw: RawDatabase) -> DatabaseSettings {
    // The value never goes into a message: it may carry a password.
    let url = Secret::new(raw.url.expose().trim());
    if Backend::from_url(url.expose()).is_none() {
        p.add("database.url", "must start with sqlite:, mysql:// or mariadb://");
    }
    if raw.max_connections == 0 {
        p.add("database.max_connections", "must be at least 1");
    }
    DatabaseSettings { url, max_connections: raw.max_connections, run_migrations: raw.run_migrations }
}

fn tencent_im(p: &mut Problems, raw: RawTencentIm) -> TencentImSettings {
    // Whitespace around a key (a trailing newline from a secrets file) is never part of it.
    let secret_key = Secret::new(raw.secret_key.expose().trim());
    let mut base_url = raw.base_url.trim().to_owned();
    if raw.enabled {
        match check_base_url(&base_url) {
            Ok(url) => base_url = url,
            Err(reason) => p.add("tencent_im.base_url", reason),
        }
        if raw.sdk_app_id == 0 {
            p.add("tencent_im.sdk_app_id", "must be greater than zero when tencent_im.enabled");
        }
        if raw.admin_identifier.trim().is_empty() {
            p.add("tencent_im.admin_identifier", "must not be empty when tencent_im.enabled");
        }
        if secret_key.is_empty() {
            p.add(
                "tencent_im.secret_key",
                "must not be empty when tencent_im.enabled; set ROOM_SERVICE__TENCENT_IM__SECRET_KEY",
            );
        }
    }
    let prefix = &raw.group_id_prefix;
    if !prefix.bytes().all(|b| b.is_ascii_graphic()) || prefix.starts_with("@TGS#") {
        p.add(
            "tencent_im.group_id_prefix",
            "must be printable ASCII without spaces and must not start with @TGS#",
        );
    }
    let usersig_ttl = p.positive("tencent_im.usersig_ttl", &raw.usersig_ttl, MIN_USERSIG_TTL);
    if usersig_ttl < MIN_USERSIG_TTL {
        p.add("tencent_im.usersig_ttl", "must be at least 1m");
    }
    TencentImSettings {
        enabled: raw.enabled,
        base_url,
        sdk_app_id: raw.sdk_app_id,
        admin_identifier: raw.admin_identifier.trim().to_owned(),
        secret_key,
        group_id_prefix: raw.group_id_prefix,
        usersig_ttl,
    }
}

/// Non-positive values become defaults (SPEC §5 normalisation); a batch size above
/// [`MAX_BATCH_SIZE`] fails, and so does every delivery-policy value that makes no sense.
fn outbox_worker(p: &mut Problems, raw: RawOutboxWorker) -> OutboxWorkerSettings {
    let poll_interval =
        p.or_default("outbox_worker.poll_interval", &raw.poll_interval, DEFAULT_POLL_INTERVAL);
    let publish_timeout =
        p.or_default("outbox_worker.publish_timeout", &raw.publish_timeout, DEFAULT_PUBLISH_TIMEOUT);
    let batch_size = match usize::try_from(raw.batch_size) {
        Ok(0) | Err(_) => DEFAULT_BATCH_SIZE,
        Ok(n) if n > MAX_BATCH_SIZE => {
            p.add("outbox_worker.batch_size", format!("{n} is above the maximum of {MAX_BATCH_SIZE}"));
            DEFAULT_BATCH_SIZE
        }
        Ok(n) => n,
    };
    let retry_strategy = match raw.retry_strategy.as_str() {
        "" | "fixed_interval" => RetryStrategy::FixedInterval,
        "exponential" => RetryStrategy::Exponential,
        other => {
            p.add(
                "outbox_worker.retry_strategy",
                format!("{other:?} is not supported; use \"fixed_interval\" or \"exponential\""),
            );
            RetryStrategy::FixedInterval
        }
    };
    let retry_base = p.positive("outbox_worker.retry_base", &raw.retry_base, Duration::from_secs(1));
    let retry_max = p.positive("outbox_worker.retry_max", &raw.retry_max, Duration::from_secs(300));
    if retry_max < retry_base {
        p.add("outbox_worker.retry_max", "must be at least outbox_worker.retry_base");
    }
    let max_attempts = u32::try_from(raw.max_attempts).unwrap_or_else(|_| {
        p.add("outbox_worker.max_attempts", "must be 0 (retry forever) or a positive number of attempts");
        0
    });
    let rate_limit_pause =
        p.positive("outbox_worker.rate_limit_pause", &raw.rate_limit_pause, Duration::from_secs(1));
    let config_error_pause =
        p.positive("outbox_worker.config_error_pause", &raw.config_error_pause, Duration::from_secs(30));
    let retention = retention(p, &raw.retention);
    let max_in_flight = match usize::try_from(raw.max_in_flight) {
        Ok(0) | Err(_) => DEFAULT_MAX_IN_FLIGHT,
        Ok(n) if n > MAX_IN_FLIGHT => {
            p.add("outbox_worker.max_in_flight", format!("{n} is above the maximum of {MAX_IN_FLIGHT}"));
            DEFAULT_MAX_IN_FLIGHT
        }
        Ok(n) => n,
    };
    let stats_interval =
        p.or_default("outbox_worker.stats_interval", &raw.stats_interval, DEFAULT_STATS_INTERVAL);
    OutboxWorkerSettings {
        enabled: raw.enabled,
        poll_interval,
        batch_size,
        publish_timeout,
        retry_strategy,
        retention,
        stats_interval,
        max_in_flight,
        retry_base,
        retry_max,
        max_attempts,
        rate_limit_pause,
        config_error_pause,
    }
}

fn im_rate_limit(p: &mut Problems, raw: RawImRateLimit) -> ImRateLimitSettings {
    let mut rate = |key: &str, value: i64, fallback: u32| match u32::try_from(value) {
        Ok(n) if n > 0 => n,
        _ => {
            p.add(key, format!("{value} is not a positive number of calls per second"));
            fallback
        }
    };
    let global_per_sec = rate("im_rate_limit.global_per_sec", raw.global_per_sec, 190);
    let per_group_per_sec = rate("im_rate_limit.per_group_per_sec", raw.per_group_per_sec, 35);
    if per_group_per_sec > global_per_sec {
        p.add("im_rate_limit.per_group_per_sec", "must not be above im_rate_limit.global_per_sec");
    }
    let worker_share = raw.worker_share;
    if !(worker_share > 0.0 && worker_share <= 1.0) {
        p.add("im_rate_limit.worker_share", format!("{worker_share} is not in (0, 1]"));
    }
    ImRateLimitSettings { global_per_sec, per_group_per_sec, worker_share: worker_share.clamp(0.01, 1.0) }
}

/// `outbox_worker.retention`: empty or non-positive disables the purge (`None`); anything
/// else must be a duration of at least [`MIN_RETENTION`].
fn retention(p: &mut Problems, raw: &RawDuration) -> Option<Duration> {
    const KEY: &str = "outbox_worker.retention";
    if raw.as_str().trim().is_empty() {
        return None;
    }
    match parse_duration(raw) {
        Ok(Parsed::NonPositive) => None,
        Ok(Parsed::Positive(d)) if d < MIN_RETENTION => {
            p.add(KEY, "must be at least 1m (or empty / \"0s\" to keep delivered rows forever)");
            None
        }
        Ok(Parsed::Positive(d)) => Some(d),
        Err(reason) => {
            p.add(KEY, reason);
            None
        }
    }
}

fn rooms(p: &mut Problems, raw: RawRooms) -> RoomsSettings {
    let max_commit_batch = match usize::try_from(raw.max_commit_batch) {
        Ok(n) if (1..=MAX_COMMIT_BATCH).contains(&n) => n,
        _ => {
            p.add(
                "rooms.max_commit_batch",
                format!("{} is not between 1 and {MAX_COMMIT_BATCH}", raw.max_commit_batch),
            );
            1
        }
    };
    RoomsSettings { max_commit_batch }
}

/// Durations must be positive when the worker runs; a disabled worker tolerates zero.
fn presence(p: &mut Problems, raw: RawPresence) -> PresenceSettings {
    let (stale, scan) = (Duration::from_secs(60), Duration::from_secs(10));
    let (stale_after, scan_interval) = if raw.enabled {
        (
            p.positive("presence.stale_after", &raw.stale_after, stale),
            p.positive("presence.scan_interval", &raw.scan_interval, scan),
        )
    } else {
        (
            p.or_default("presence.stale_after", &raw.stale_after, stale),
            p.or_default("presence.scan_interval", &raw.scan_interval, scan),
        )
    };
    PresenceSettings { enabled: raw.enabled, stale_after, scan_interval }
}

fn log(p: &mut Problems, raw: RawLog) -> LogSettings {
    let format = match raw.format.trim().to_ascii_lowercase().as_str() {
        "json" => LogFormat::Json,
        "pretty" => LogFormat::Pretty,
        _ => {
            p.add("log.format", format!("{:?} is neither \"json\" nor \"pretty\"", raw.format));
            LogFormat::Json
        }
    };
    let level = raw.level.trim().to_owned();
    if let Err(reason) = check_log_level(&level) {
        p.add("log.level", reason);
    }
    LogSettings { format, level }
}

/// Shortest and longest `cluster.lease_ttl`.
const LEASE_TTL_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));

/// A cluster shares one MySQL/MariaDB database (SQLite is one process's file) and tells the
/// other nodes where it listens.
fn cluster(p: &mut Problems, raw: RawCluster, backend: Backend) -> ClusterSettings {
    let lease_ttl = p.positive("cluster.lease_ttl", &raw.lease_ttl, Duration::from_secs(10));
    if !(LEASE_TTL_RANGE.0..=LEASE_TTL_RANGE.1).contains(&lease_ttl) {
        p.add("cluster.lease_ttl", "must be between 1s and 5m");
    }
    let expected_nodes = match u32::try_from(raw.expected_nodes) {
        Ok(n) if (1..=1024).contains(&n) => n,
        _ => {
            p.add("cluster.expected_nodes", format!("{} is not between 1 and 1024", raw.expected_nodes));
            1
        }
    };
    let mut advertise_url = raw.advertise_url.trim().to_owned();
    if raw.enabled {
        if backend != Backend::MySql {
            p.add(
                "cluster.enabled",
                "needs a MySQL/MariaDB database.url: the nodes of a cluster share one database",
            );
        }
        if advertise_url.is_empty() {
            p.add(
                "cluster.advertise_url",
                "must be this node's public API origin (http://host:port) when cluster.enabled",
            );
        } else {
            match check_base_url(&advertise_url) {
                Ok(url) => advertise_url = url,
                Err(reason) => p.add("cluster.advertise_url", reason),
            }
        }
    }
    ClusterSettings { enabled: raw.enabled, advertise_url, expected_nodes, lease_ttl }
}

fn redis(p: &mut Problems, raw: RawRedis) -> Option<RedisSettings> {
    // The value never goes into a message: it may carry a password.
    let url = Secret::new(raw.url.expose().trim());
    if url.is_empty() {
        return None;
    }
    if !["redis://", "rediss://", "unix://", "redis+unix://"].iter().any(|s| url.expose().starts_with(s)) {
        p.add("redis.url", "must start with redis://, rediss:// or unix://");
    }
    Some(RedisSettings { url })
}

fn wallet(p: &mut Problems, raw: RawWallet) -> WalletSettings {
    let timeout = p.positive("wallet.timeout", &raw.timeout, Duration::from_secs(2));
    let mut base_url = raw.base_url.trim().to_owned();
    if raw.enabled {
        match check_base_url(&base_url) {
            Ok(url) => base_url = url,
            Err(reason) => p.add("wallet.base_url", reason),
        }
    }
    WalletSettings { enabled: raw.enabled, base_url, timeout }
}

fn consumers(p: &mut Problems, raw: RawConsumers) -> ConsumersSettings {
    let poll_interval = p.positive("consumers.poll_interval", &raw.poll_interval, Duration::from_millis(500));
    let gap_grace = p.positive("consumers.gap_grace", &raw.gap_grace, Duration::from_secs(60));
    ConsumersSettings {
        webhook: webhook(p, raw.webhook),
        audit: audit(p, raw.audit),
        poll_interval,
        gap_grace,
    }
}

fn webhook(p: &mut Problems, raw: RawWebhookConsumer) -> Option<WebhookSettings> {
    let consumer = consumer(
        p,
        "consumers.webhook",
        ConsumerRaw {
            event_types: &raw.event_types,
            batch_size: raw.batch_size,
            timeout: &raw.timeout,
            rate_limit_per_sec: raw.rate_limit_per_sec,
        },
    );
    if !raw.enabled {
        return None;
    }
    let url = raw.url.trim();
    match reqwest::Url::parse(url) {
        // Not echoed: it may hold a password.
        Ok(parsed) if !parsed.username().is_empty() || parsed.password().is_some() => p.add(
            "consumers.webhook.url",
            "must not carry credentials (receivers verify consumers.webhook.secret's signature)",
        ),
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => {}
        Ok(_) => p.add("consumers.webhook.url", "must be an http:// or https:// URL with a host"),
        Err(e) => p.add("consumers.webhook.url", format!("is not a URL ({e})")),
    }
    // The value never goes into a message.
    if raw.secret.expose().trim().is_empty() {
        p.add(
            "consumers.webhook.secret",
            "must be set when consumers.webhook.enabled (receivers verify the signature with it)",
        );
    }
    Some(WebhookSettings { url: url.to_owned(), secret: raw.secret, consumer })
}

fn audit(p: &mut Problems, raw: RawAuditConsumer) -> Option<ConsumerSettings> {
    let consumer = consumer(
        p,
        "consumers.audit",
        ConsumerRaw {
            event_types: &raw.event_types,
            batch_size: raw.batch_size,
            timeout: &raw.timeout,
            rate_limit_per_sec: raw.rate_limit_per_sec,
        },
    );
    raw.enabled.then_some(consumer)
}

/// The keys every consumer has.
struct ConsumerRaw<'a> {
    event_types: &'a [String],
    batch_size: i64,
    timeout: &'a RawDuration,
    rate_limit_per_sec: i64,
}

fn consumer(p: &mut Problems, section: &str, raw: ConsumerRaw<'_>) -> ConsumerSettings {
    let mut event_types = Vec::new();
    for name in raw.event_types {
        match name.trim().parse::<crate::domain::EventType>() {
            Ok(t) if !event_types.contains(&t) => event_types.push(t),
            Ok(_) => {}
            Err(reason) => p.add(&format!("{section}.event_types"), reason),
        }
    }
    let batch_size = match usize::try_from(raw.batch_size) {
        Ok(n) if (1..=MAX_BATCH_SIZE).contains(&n) => n,
        _ => {
            p.add(
                &format!("{section}.batch_size"),
                format!("{} is not between 1 and {MAX_BATCH_SIZE}", raw.batch_size),
            );
            DEFAULT_BATCH_SIZE
        }
    };
    let timeout = p.positive(&format!("{section}.timeout"), raw.timeout, DEFAULT_PUBLISH_TIMEOUT);
    let rate_limit_per_sec = match u32::try_from(raw.rate_limit_per_sec) {
        Ok(0) => None,
        Ok(n) => Some(n),
        Err(_) => {
            p.add(
                &format!("{section}.rate_limit_per_sec"),
                format!("{} is negative or too large", raw.rate_limit_per_sec),
            );
            None
        }
    };
    ConsumerSettings { event_types, batch_size, timeout, rate_limit_per_sec }
}
