//! Validated settings of event delivery: Tencent IM, the rate limits, the outbox worker (its
//! defaults and limits declared here, once; the one lease formula), the other consumers.

use std::time::Duration;

use crate::secret::Secret;

/// Default `outbox_worker.poll_interval`, also used when the configured one is non-positive.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default `outbox_worker.batch_size`, also used when the configured one is non-positive.
pub const DEFAULT_BATCH_SIZE: usize = 500;
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

/// Tencent Cloud IM, enabled: every field has been checked to be usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TencentImSettings {
    /// `http(s)://host[:port]` without a trailing slash.
    pub base_url: String,
    /// SDKAppID (> 0).
    pub sdk_app_id: u64,
    /// Administrator account of the REST calls.
    pub admin_identifier: String,
    /// UserSig signing key (non-empty; surrounding whitespace removed).
    pub secret_key: Secret,
    /// IM GroupId = prefix + room_id.
    pub group_id_prefix: String,
    /// Lifetime of a generated UserSig (>= 1 minute).
    pub usersig_ttl: Duration,
    /// The service creates each room's group before its first message, destroys it after its
    /// close message, and mirrors mutes, mute-all and room info on it (SPEC §14.2); false: it
    /// assumes the groups exist and calls no admin API.
    pub manage_groups: bool,
    /// Kicks and unbans call `ban_group_member` / `unban_group_member` (a paid edition's
    /// feature; only with `manage_groups`). False: clients act on the High-priority
    /// `RoomUserKicked` and the service refuses the rejoin.
    pub avchatroom_ban: bool,
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

/// Most events one IM message may carry (`im_batch.max_events`).
pub const MAX_IM_BATCH_EVENTS: usize = 256;
/// Most messages of one room in flight at once (`im_batch.in_flight_per_room`).
pub const MAX_IN_FLIGHT_PER_ROOM: usize = 16;
/// Fewest and most content bytes one IM message may be given (`im_batch.max_bytes`); Tencent
/// allows 12 KB.
pub const IM_BATCH_BYTES_RANGE: (usize, usize) = (crate::domain::LARGEST_IM_EVENT_BYTES, 12 * 1024);

/// How many events one IM message may carry (`im_batch.*`): a room's consecutive events go
/// into one `send_group_msg` call, one `TIMCustomElem` per event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImBatchSettings {
    /// Most events in one message, 1..=[`MAX_IM_BATCH_EVENTS`]; 1 = one event a message.
    pub max_events: usize,
    /// Most content bytes in one message (the sum of every element's `Data` and `Desc`),
    /// within [`IM_BATCH_BYTES_RANGE`].
    pub max_bytes: usize,
    /// Messages of one room a lane keeps in flight at once, 1..=[`MAX_IN_FLIGHT_PER_ROOM`]:
    /// 1 keeps strict room order at IM; above, messages may reach IM out of order and clients
    /// reorder by `room_version` (docs/CLIENT.md).
    pub in_flight_per_room: usize,
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

impl Default for OutboxWorkerSettings {
    /// What an empty `outbox_worker` section validates into; also the fallback of every
    /// non-positive value.
    fn default() -> Self {
        Self {
            enabled: true,
            poll_interval: DEFAULT_POLL_INTERVAL,
            batch_size: DEFAULT_BATCH_SIZE,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            retry_strategy: RetryStrategy::FixedInterval,
            retention: None,
            stats_interval: DEFAULT_STATS_INTERVAL,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            max_attempts: 0,
            rate_limit_pause: Duration::from_secs(1),
            config_error_pause: Duration::from_secs(30),
        }
    }
}

impl OutboxWorkerSettings {
    /// The lease a claim takes, renewed every quarter of it while the claim still holds rows (a
    /// row may wait long for rate-limit permits): three publish timeouts, at least
    /// [`MIN_LEASE`] — rows of a crashed worker return that soon.
    pub fn lease(&self) -> Duration {
        lease(self.publish_timeout, MIN_LEASE)
    }
}

/// The one lease formula (the outbox worker's claims, a consumer's row): three of the
/// `timeout` it must outlast, at least `floor`, saturating.
fn lease(timeout: Duration, floor: Duration) -> Duration {
    timeout.saturating_mul(3).max(floor)
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

impl ConsumerSettings {
    /// The lease on the consumer's row: it must outlast a delivery and the renewals around it
    /// (three timeouts, at least [`MIN_CONSUMER_LEASE`]).
    pub fn lease(&self) -> Duration {
        lease(self.timeout, MIN_CONSUMER_LEASE)
    }
}

/// Shortest lease on a consumer's row.
pub const MIN_CONSUMER_LEASE: Duration = Duration::from_secs(15);

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
