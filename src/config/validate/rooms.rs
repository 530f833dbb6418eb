//! The rules of the rooms and the nodes serving them: `rooms`, `presence`, `cluster`,
//! `wallet`.

use super::*;
use crate::config::settings::{
    MAX_ADMINS, MAX_OPEN_PER_OWNER, MAX_SEAT_ACTIONS_PER_SEC, MAX_SEAT_REQUEST_TTL,
};

pub(super) fn rooms(p: &mut Problems, raw: RawRooms) -> RoomsSettings {
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
    let max_admins = match usize::try_from(raw.max_admins) {
        Ok(n) if (1..=MAX_ADMINS).contains(&n) => n,
        _ => {
            p.add("rooms.max_admins", format!("{} is not between 1 and {MAX_ADMINS}", raw.max_admins));
            crate::domain::DEFAULT_MAX_ADMINS
        }
    };
    let idle_close_after = match crate::config::rules::parse_duration(&raw.idle_close_after) {
        Ok(crate::config::rules::Parsed::Positive(d)) if d >= Duration::from_secs(1) => Some(d),
        Ok(crate::config::rules::Parsed::Positive(_)) => {
            p.add("rooms.idle_close_after", "must be 0s (never) or at least 1s");
            None
        }
        Ok(crate::config::rules::Parsed::NonPositive) => None,
        Err(reason) => {
            p.add("rooms.idle_close_after", reason);
            None
        }
    };
    let fallback = crate::room::DEFAULT_SEAT_REQUEST_TTL;
    let mut seat_request_ttl = p.positive("rooms.seat_request_ttl", &raw.seat_request_ttl, fallback);
    if !(Duration::from_secs(1)..=MAX_SEAT_REQUEST_TTL).contains(&seat_request_ttl) {
        p.add("rooms.seat_request_ttl", "must be between 1s and 1h");
        seat_request_ttl = fallback;
    }
    let seat_actions_per_user_per_sec = match u32::try_from(raw.seat_actions_per_user_per_sec) {
        Ok(n) if n <= MAX_SEAT_ACTIONS_PER_SEC => n,
        _ => {
            p.add(
                "rooms.seat_actions_per_user_per_sec",
                format!(
                    "{} is not between 0 (no limit) and {MAX_SEAT_ACTIONS_PER_SEC}",
                    raw.seat_actions_per_user_per_sec
                ),
            );
            2
        }
    };
    let members_reads_per_sec_per_client = match u32::try_from(raw.members.reads_per_sec_per_client) {
        Ok(n) if n <= 100_000 => n,
        _ => {
            p.add(
                "rooms.members.reads_per_sec_per_client",
                format!("{} is not between 0 and 100000", raw.members.reads_per_sec_per_client),
            );
            10
        }
    };
    let max_open_per_owner = match u32::try_from(raw.max_open_per_owner) {
        Ok(n) if n <= MAX_OPEN_PER_OWNER => n,
        _ => {
            p.add(
                "rooms.max_open_per_owner",
                format!("{} is not between 0 (no limit) and {MAX_OPEN_PER_OWNER}", raw.max_open_per_owner),
            );
            10
        }
    };
    RoomsSettings {
        max_commit_batch,
        sync_publish_wait: sync_publish_wait(p, &raw.sync_publish_wait),
        history: history(p, &raw.history),
        max_admins,
        idle_close_after,
        seat_request_ttl,
        seat_actions_per_user_per_sec,
        members_reads_per_sec_per_client,
        max_open_per_owner,
    }
}

/// `rooms.history.*`: a positive count and age, each within its maximum.
fn history(p: &mut Problems, raw: &RawHistory) -> HistorySettings {
    let fallback = HistorySettings::default();
    let max_events = match u64::try_from(raw.max_events) {
        Ok(n) if (1..=MAX_HISTORY_EVENTS).contains(&n) => n,
        _ => {
            p.add(
                "rooms.history.max_events",
                format!("{} is not between 1 and {MAX_HISTORY_EVENTS}", raw.max_events),
            );
            fallback.max_events
        }
    };
    let mut max_age = p.positive("rooms.history.max_age", &raw.max_age, fallback.max_age);
    if !(Duration::from_secs(1)..=MAX_HISTORY_AGE).contains(&max_age) {
        p.add("rooms.history.max_age", "must be between 1s and 7d");
        max_age = fallback.max_age;
    }
    let mut within = |key: &'static str, value: i64, range: std::ops::RangeInclusive<i64>, fallback: u64| {
        if range.contains(&value) {
            value as u64
        } else {
            p.add(key, format!("{value} is not between {} and {}", range.start(), range.end()));
            fallback
        }
    };
    let cache_bytes =
        within("rooms.history.cache_bytes", raw.cache_bytes, (1 << 20)..=(4 << 30), fallback.cache_bytes);
    let max_db_reads =
        within("rooms.history.max_db_reads", raw.max_db_reads, 1..=64, fallback.max_db_reads.into()) as u32;
    let reads_per_sec_per_client = within(
        "rooms.history.reads_per_sec_per_client",
        raw.reads_per_sec_per_client,
        0..=100_000,
        fallback.reads_per_sec_per_client.into(),
    ) as u32;
    HistorySettings { max_events, max_age, cache_bytes, max_db_reads, reads_per_sec_per_client }
}

/// `rooms.sync_publish_wait`: zero (never wait) up to [`MAX_SYNC_PUBLISH_WAIT`]; a negative
/// duration is refused rather than read as zero.
fn sync_publish_wait(p: &mut Problems, raw: &RawDuration) -> Duration {
    const KEY: &str = "rooms.sync_publish_wait";
    let fallback = Duration::from_secs(1);
    match parse_duration(raw) {
        Ok(Parsed::NonPositive) if raw.as_str().trim().starts_with('-') => {
            p.add(KEY, "must not be negative (\"0s\": answer without waiting)");
            fallback
        }
        Ok(Parsed::NonPositive) => Duration::ZERO,
        Ok(Parsed::Positive(d)) if d > MAX_SYNC_PUBLISH_WAIT => {
            let max = humantime::format_duration(MAX_SYNC_PUBLISH_WAIT);
            p.add(KEY, format!("{} is above the maximum of {max}", raw.as_str().trim()));
            fallback
        }
        Ok(Parsed::Positive(d)) => d,
        Err(reason) => {
            p.add(KEY, reason);
            fallback
        }
    }
}

/// Durations must be positive when the worker runs; a disabled worker tolerates zero.
pub(super) fn presence(p: &mut Problems, raw: RawPresence) -> PresenceSettings {
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

/// Shortest and longest `cluster.lease_ttl`.
const LEASE_TTL_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(300));

/// A cluster shares one MySQL/MariaDB database (SQLite is one process's file) and tells the
/// other nodes where it listens.
pub(super) fn cluster(p: &mut Problems, raw: RawCluster, backend: Backend) -> ClusterSettings {
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
    let hop_secrets = hop_secrets(p, raw.enabled, raw.secret, raw.secret_previous);
    ClusterSettings { enabled: raw.enabled, advertise_url, expected_nodes, lease_ttl, hop_secrets }
}

/// Shortest `cluster.secret` (and `cluster.secret_previous`), in bytes: an HMAC-SHA256 key.
pub const MIN_CLUSTER_SECRET_BYTES: usize = 32;

/// `cluster.secret` is required with a cluster, and both secrets are at least
/// [`MIN_CLUSTER_SECRET_BYTES`] long (the loader refuses either from a file).
fn hop_secrets(p: &mut Problems, enabled: bool, secret: Secret, previous: Secret) -> HopSecrets {
    let blank = |s: Secret| Some(s).filter(|s| !s.expose().trim().is_empty());
    let (secret, previous) = (blank(secret), blank(previous));
    for (key, value) in [("cluster.secret", &secret), ("cluster.secret_previous", &previous)] {
        if value.as_ref().is_some_and(|s| s.expose().len() < MIN_CLUSTER_SECRET_BYTES) {
            p.add(key, format!("must be at least {MIN_CLUSTER_SECRET_BYTES} bytes (a random secret, the same on every node)"));
        }
    }
    if enabled && secret.is_none() {
        p.add(
            "cluster.secret",
            "required when cluster.enabled: the nodes' shared secret that signs every hop \
             (ROOM_SERVICE__CLUSTER__SECRET, at least 32 bytes)",
        );
    }
    HopSecrets { signing: secret.unwrap_or_default(), previous }
}

pub(super) fn wallet(p: &mut Problems, raw: RawWallet) -> WalletSettings {
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
