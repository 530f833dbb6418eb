//! The raw sections of event delivery: `tencent_im`, `im_rate_limit`, `im_batch`,
//! `outbox_worker`, `consumers` (webhook, audit).

use std::time::Duration;

use super::*;
use crate::config::settings::{OutboxWorkerSettings, RetryStrategy};

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
    /// Create and destroy each room's group and mirror its moderation on it (SPEC §14.2);
    /// false: the groups are assumed to exist.
    pub manage_groups: bool,
    /// Kick and unban call `ban_group_member` / `unban_group_member` (a paid edition's switch).
    pub avchatroom_ban: bool,
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
            manage_groups: true,
            avchatroom_ban: false,
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
    /// The validated defaults ([`OutboxWorkerSettings::default`]) as an operator would write
    /// them: the values are declared there, once.
    fn default() -> Self {
        let d = OutboxWorkerSettings::default();
        let written = |d: Duration| RawDuration::new(humantime::format_duration(d).to_string());
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        Self {
            enabled: d.enabled,
            poll_interval: written(d.poll_interval),
            batch_size: count(d.batch_size),
            publish_timeout: written(d.publish_timeout),
            retry_strategy: match d.retry_strategy {
                RetryStrategy::FixedInterval => "fixed_interval",
                RetryStrategy::Exponential => "exponential",
            }
            .into(),
            retention: d.retention.map_or_else(|| RawDuration::new(""), written),
            stats_interval: written(d.stats_interval),
            max_in_flight: count(d.max_in_flight),
            retry_base: written(d.retry_base),
            retry_max: written(d.retry_max),
            max_attempts: d.max_attempts.into(),
            rate_limit_pause: written(d.rate_limit_pause),
            config_error_pause: written(d.config_error_pause),
        }
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

/// `im_batch.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawImBatch {
    /// Most events in one message (one `TIMCustomElem` each); 1 sends one event a message.
    pub max_events: i64,
    /// Most content bytes in one message: the sum of every element's `Data` and `Desc`.
    pub max_bytes: i64,
    /// Messages of one room in flight at once; 1 keeps strict room order at IM.
    pub in_flight_per_room: i64,
}

impl Default for RawImBatch {
    fn default() -> Self {
        Self { max_events: 32, max_bytes: 11_000, in_flight_per_room: 1 }
    }
}
