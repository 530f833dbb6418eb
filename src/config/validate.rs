//! The rules of SPEC §7: turns a [`RawConfig`] into [`Settings`] or reports every broken rule
//! at once, each naming its key. Outbox worker values that are non-positive are replaced by
//! their defaults here (the spec's normalisation); everything else that is wrong fails.

use std::net::SocketAddr;
use std::time::Duration;

use super::error::ConfigError;
use super::raw::RawConfig;
use super::rules::{
    MIN_USERSIG_TTL, Problems, check_base_url, check_log_level, is_valid_node_id, sanitize_node_id,
};
use super::settings::{
    Backend, ConfigSource, DEFAULT_BATCH_SIZE, DEFAULT_POLL_INTERVAL, DEFAULT_PUBLISH_TIMEOUT,
    DatabaseSettings, HttpSettings, LogFormat, LogSettings, MAX_BATCH_SIZE, MAX_LEASE,
    OutboxWorkerSettings, PresenceSettings, RetryStrategy, Settings, TencentImSettings,
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

    let listen = raw
        .http
        .listen
        .trim()
        .parse::<SocketAddr>()
        .unwrap_or_else(|e| {
            p.add(
                "http.listen",
                format!("{:?} is not an ip:port address ({e})", raw.http.listen),
            );
            SocketAddr::from(([127, 0, 0, 1], 8080))
        });
    if raw.http.body_limit_bytes == 0 {
        p.add("http.body_limit_bytes", "must be greater than zero");
    }

    let url = Secret::new(raw.database.url.expose().trim());
    if Backend::from_url(url.expose()).is_none() {
        p.add(
            "database.url",
            "must start with sqlite:, mysql:// or mariadb://",
        );
    }
    if raw.database.max_connections == 0 {
        p.add("database.max_connections", "must be at least 1");
    }

    let im = raw.tencent_im;
    let secret_key = Secret::new(im.secret_key.expose().trim());
    let mut base_url = im.base_url.trim().to_owned();
    if im.enabled {
        match check_base_url(&base_url) {
            Ok(url) => base_url = url,
            Err(reason) => p.add("tencent_im.base_url", reason),
        }
        if im.sdk_app_id == 0 {
            p.add(
                "tencent_im.sdk_app_id",
                "must be greater than zero when tencent_im.enabled",
            );
        }
        if im.admin_identifier.trim().is_empty() {
            p.add(
                "tencent_im.admin_identifier",
                "must not be empty when tencent_im.enabled",
            );
        }
        if secret_key.is_empty() {
            p.add(
                "tencent_im.secret_key",
                "must not be empty when tencent_im.enabled; set ROOM_SERVICE__TENCENT_IM__SECRET_KEY",
            );
        }
    }
    if !im.group_id_prefix.bytes().all(|b| b.is_ascii_graphic())
        || im.group_id_prefix.starts_with("@TGS#")
    {
        p.add(
            "tencent_im.group_id_prefix",
            "must be printable ASCII without spaces and must not start with @TGS#",
        );
    }
    let usersig_ttl = p.positive("tencent_im.usersig_ttl", &im.usersig_ttl, MIN_USERSIG_TTL);
    if usersig_ttl < MIN_USERSIG_TTL {
        p.add("tencent_im.usersig_ttl", "must be at least 1m");
    }

    let ow = raw.outbox_worker;
    let poll_interval = p.or_default(
        "outbox_worker.poll_interval",
        &ow.poll_interval,
        DEFAULT_POLL_INTERVAL,
    );
    let publish_timeout = p.or_default(
        "outbox_worker.publish_timeout",
        &ow.publish_timeout,
        DEFAULT_PUBLISH_TIMEOUT,
    );
    let batch_size = match usize::try_from(ow.batch_size) {
        Ok(0) | Err(_) => DEFAULT_BATCH_SIZE,
        Ok(n) if n > MAX_BATCH_SIZE => {
            p.add(
                "outbox_worker.batch_size",
                format!("{n} is above the maximum of {MAX_BATCH_SIZE}"),
            );
            DEFAULT_BATCH_SIZE
        }
        Ok(n) => n,
    };
    let batch_time = publish_timeout.saturating_mul(u32::try_from(batch_size).unwrap_or(u32::MAX));
    if batch_time > MAX_LEASE {
        p.add(
            "outbox_worker.publish_timeout",
            format!(
                "batch_size × publish_timeout is {}, above the {} limit on a claim lease; lower outbox_worker.batch_size or outbox_worker.publish_timeout",
                humantime::format_duration(batch_time),
                humantime::format_duration(MAX_LEASE)
            ),
        );
    }
    let retry_strategy = match ow.retry_strategy.as_str() {
        "" | "fixed_interval" => RetryStrategy::FixedInterval,
        other => {
            p.add(
                "outbox_worker.retry_strategy",
                format!("{other:?} is not supported; use \"fixed_interval\""),
            );
            RetryStrategy::FixedInterval
        }
    };

    let pr = raw.presence;
    let (stale_after, scan_interval) = if pr.enabled {
        (
            p.positive(
                "presence.stale_after",
                &pr.stale_after,
                Duration::from_secs(60),
            ),
            p.positive(
                "presence.scan_interval",
                &pr.scan_interval,
                Duration::from_secs(10),
            ),
        )
    } else {
        (
            p.or_default(
                "presence.stale_after",
                &pr.stale_after,
                Duration::from_secs(60),
            ),
            p.or_default(
                "presence.scan_interval",
                &pr.scan_interval,
                Duration::from_secs(10),
            ),
        )
    };

    let format = match raw.log.format.trim().to_ascii_lowercase().as_str() {
        "json" => LogFormat::Json,
        "pretty" => LogFormat::Pretty,
        _ => {
            p.add(
                "log.format",
                format!("{:?} is neither \"json\" nor \"pretty\"", raw.log.format),
            );
            LogFormat::Json
        }
    };
    let level = raw.log.level.trim().to_owned();
    if let Err(reason) = check_log_level(&level) {
        p.add("log.level", reason);
    }

    if let Some(error) = ConfigError::from_list(p.0) {
        return Err(error);
    }
    Ok(Settings {
        node_id,
        http: HttpSettings {
            listen,
            body_limit_bytes: raw.http.body_limit_bytes,
        },
        database: DatabaseSettings {
            url,
            max_connections: raw.database.max_connections,
            run_migrations: raw.database.run_migrations,
        },
        tencent_im: TencentImSettings {
            enabled: im.enabled,
            base_url,
            sdk_app_id: im.sdk_app_id,
            admin_identifier: im.admin_identifier.trim().to_owned(),
            secret_key,
            group_id_prefix: im.group_id_prefix,
            usersig_ttl,
        },
        outbox_worker: OutboxWorkerSettings {
            enabled: ow.enabled,
            poll_interval,
            batch_size,
            publish_timeout,
            retry_strategy,
        },
        presence: PresenceSettings {
            enabled: pr.enabled,
            stale_after,
            scan_interval,
        },
        log: LogSettings { format, level },
        source,
    })
}
