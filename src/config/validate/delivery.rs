//! The rules of event delivery: `tencent_im`, `im_rate_limit`, `im_batch`, `outbox_worker`
//! (normalised here, once), `consumers`.

use super::*;

/// The IM settings when `tencent_im.enabled` (`None` otherwise); the prefix and the UserSig
/// lifetime are checked either way, so a mistake shows before IM is turned on.
pub(super) fn tencent_im(p: &mut Problems, raw: RawTencentIm) -> Option<TencentImSettings> {
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
    if raw.avchatroom_ban && !raw.manage_groups {
        p.add(
            "tencent_im.avchatroom_ban",
            "needs tencent_im.manage_groups: without it the service calls no group admin API",
        );
    }
    raw.enabled.then(|| TencentImSettings {
        base_url,
        sdk_app_id: raw.sdk_app_id,
        admin_identifier: raw.admin_identifier.trim().to_owned(),
        secret_key,
        group_id_prefix: raw.group_id_prefix,
        usersig_ttl,
        manage_groups: raw.manage_groups,
        avchatroom_ban: raw.avchatroom_ban,
    })
}

/// Non-positive values become defaults (SPEC §5 normalisation); a batch size above
/// [`MAX_BATCH_SIZE`] fails, and so does every delivery-policy value that makes no sense.
///
/// This is the one place the worker's limits are normalised: the worker takes the result as is.
pub(super) fn outbox_worker(p: &mut Problems, raw: RawOutboxWorker) -> OutboxWorkerSettings {
    let d = OutboxWorkerSettings::default();
    let poll_interval = p.or_default("outbox_worker.poll_interval", &raw.poll_interval, d.poll_interval);
    let publish_timeout =
        p.or_default("outbox_worker.publish_timeout", &raw.publish_timeout, d.publish_timeout);
    let batch_size = count(p, "outbox_worker.batch_size", raw.batch_size, d.batch_size, MAX_BATCH_SIZE);
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
    let retry_base = p.positive("outbox_worker.retry_base", &raw.retry_base, d.retry_base);
    let retry_max = p.positive("outbox_worker.retry_max", &raw.retry_max, d.retry_max);
    if retry_max < retry_base {
        p.add("outbox_worker.retry_max", "must be at least outbox_worker.retry_base");
    }
    let max_attempts = u32::try_from(raw.max_attempts).unwrap_or_else(|_| {
        p.add("outbox_worker.max_attempts", "must be 0 (retry forever) or a positive number of attempts");
        0
    });
    let rate_limit_pause =
        p.positive("outbox_worker.rate_limit_pause", &raw.rate_limit_pause, d.rate_limit_pause);
    let config_error_pause =
        p.positive("outbox_worker.config_error_pause", &raw.config_error_pause, d.config_error_pause);
    let retention = retention(p, &raw.retention);
    let max_in_flight =
        count(p, "outbox_worker.max_in_flight", raw.max_in_flight, d.max_in_flight, MAX_IN_FLIGHT);
    let stats_interval = p.or_default("outbox_worker.stats_interval", &raw.stats_interval, d.stats_interval);
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

pub(super) fn im_rate_limit(p: &mut Problems, raw: RawImRateLimit) -> ImRateLimitSettings {
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

/// Both limits are refused outside their range (not clamped: the operator gets the message size
/// they asked for or none).
pub(super) fn im_batch(p: &mut Problems, raw: RawImBatch) -> ImBatchSettings {
    let mut within =
        |key: &str, value: i64, (min, max): (usize, usize), fallback: usize| match usize::try_from(value) {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                p.add(key, format!("{value} is not between {min} and {max}"));
                fallback
            }
        };
    let max_events = within("im_batch.max_events", raw.max_events, (1, MAX_IM_BATCH_EVENTS), 1);
    let max_bytes = within("im_batch.max_bytes", raw.max_bytes, IM_BATCH_BYTES_RANGE, IM_BATCH_BYTES_RANGE.0);
    let in_flight_per_room =
        within("im_batch.in_flight_per_room", raw.in_flight_per_room, (1, MAX_IN_FLIGHT_PER_ROOM), 1);
    ImBatchSettings { max_events, max_bytes, in_flight_per_room }
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

/// A count of the worker: non-positive takes `default`; above `max` fails naming `key` (it is
/// not clamped, so an operator never gets another value than the one asked for).
fn count(p: &mut Problems, key: &str, raw: i64, default: usize, max: usize) -> usize {
    match usize::try_from(raw) {
        Ok(0) | Err(_) => default,
        Ok(n) if n > max => {
            p.add(key, format!("{n} is above the maximum of {max}"));
            default
        }
        Ok(n) => n,
    }
}

/// The [`ConsumerRaw`] of a raw consumer section: `RawWebhookConsumer` and `RawAuditConsumer`
/// name these keys alike but cannot share a sub-struct (serde's `flatten` does not work with
/// `deny_unknown_fields`), so they are picked out by name, once.
macro_rules! consumer_keys {
    ($raw:expr) => {
        ConsumerRaw {
            event_types: &$raw.event_types,
            batch_size: $raw.batch_size,
            timeout: &$raw.timeout,
            rate_limit_per_sec: $raw.rate_limit_per_sec,
        }
    };
}

pub(super) fn consumers(p: &mut Problems, raw: RawConsumers) -> ConsumersSettings {
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
    let consumer = consumer(p, "consumers.webhook", consumer_keys!(raw));
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
    let consumer = consumer(p, "consumers.audit", consumer_keys!(raw));
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
