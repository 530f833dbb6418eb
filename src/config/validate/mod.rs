//! The rules of SPEC §7: turns a [`RawConfig`] into [`Settings`] or reports every broken rule
//! at once, each naming its key. Outbox worker values that are non-positive are replaced by
//! their defaults here (the spec's normalisation); everything else that is wrong fails.

use std::net::SocketAddr;
use std::time::Duration;

use super::error::ConfigError;
use super::raw::{
    RawAuditConsumer, RawCluster, RawConfig, RawConsumers, RawDatabase, RawDuration, RawGrpc, RawHistory,
    RawHttp, RawImBatch, RawImRateLimit, RawLog, RawOutboxWorker, RawPresence, RawRedis, RawRooms,
    RawTelemetry, RawTencentIm, RawWallet, RawWebhookConsumer,
};
use super::rules::{
    MIN_RETENTION, MIN_USERSIG_TTL, Parsed, Problems, check_base_url, check_log_level, is_valid_node_id,
    parse_duration, sanitize_node_id,
};
use super::settings::{
    AuthSettings, Backend, ClusterSettings, ConfigSource, ConsumerSettings, ConsumersSettings,
    DEFAULT_BATCH_SIZE, DEFAULT_PUBLISH_TIMEOUT, DatabaseSettings, GrpcSettings, HistorySettings, HopSecrets,
    HttpSettings, IM_BATCH_BYTES_RANGE, ImBatchSettings, ImRateLimitSettings, LogFormat, LogSettings,
    MAX_BATCH_SIZE, MAX_COMMIT_BATCH, MAX_FORCED_PER_SEC, MAX_HISTORY_AGE, MAX_HISTORY_EVENTS,
    MAX_HTTP_LIMIT, MAX_IM_BATCH_EVENTS, MAX_IN_FLIGHT, MAX_IN_FLIGHT_PER_ROOM, MAX_QUEUE_SPANS,
    MAX_SYNC_PUBLISH_WAIT, OtlpSettings, OutboxWorkerSettings, PresenceSettings, RedisSettings,
    RetryStrategy, RoomsSettings, Settings, TelemetrySettings, TencentImSettings, WalletSettings,
    WebhookSettings,
};
use crate::secret::Secret;

mod auth;
mod delivery;
mod rooms;
mod server;

use auth::*;
use delivery::*;
use rooms::*;
use server::*;

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
        auth: AuthSettings::default(),
        http: http(&mut p, raw.http),
        database: database(&mut p, raw.database),
        tencent_im: tencent_im(&mut p, raw.tencent_im),
        im_rate_limit: im_rate_limit(&mut p, raw.im_rate_limit),
        im_batch: im_batch(&mut p, raw.im_batch),
        outbox_worker: outbox_worker(&mut p, raw.outbox_worker),
        rooms: rooms(&mut p, raw.rooms),
        presence: presence(&mut p, raw.presence),
        log: log(&mut p, raw.log),
        telemetry: telemetry(&mut p, raw.telemetry),
        cluster: ClusterSettings {
            enabled: false,
            advertise_url: String::new(),
            expected_nodes: 1,
            lease_ttl: Duration::from_secs(10),
            hop_secrets: HopSecrets::default(),
        },
        redis: redis(&mut p, raw.redis),
        wallet: wallet(&mut p, raw.wallet),
        consumers: consumers(&mut p, raw.consumers),
        source,
    };
    let backend = settings.database.backend();
    let auth = auth(&mut p, raw.auth, &settings.http, &settings.grpc, settings.tencent_im.as_ref());
    let settings = Settings { cluster: cluster(&mut p, raw.cluster, backend), auth, ..settings };
    match ConfigError::from_list(p.0) {
        Some(error) => Err(error),
        None => Ok(settings),
    }
}
