//! Configuration: the first step of startup (SPEC §6, §7).
//!
//! A YAML file (`--config PATH`, default [`DEFAULT_CONFIG_PATH`]) is read through figment with
//! serde-saphyr, then every `ROOM_SERVICE__SECTION__KEY` environment variable overrides the key
//! `section.key` (segments split on `__`, lowercased). The result is deserialized into a raw
//! serde struct that rejects unknown keys, and then validated into [`Settings`], the only type
//! the rest of the service sees. Any problem fails startup with a [`ConfigError`] naming the
//! key; secrets (the Tencent key, the database URL) never appear in errors or `Debug` output.
//!
//! ```text
//! config.yaml ─┐
//!              ├─ figment ─▶ raw::RawConfig ─▶ validate ─▶ Settings ─▶ app
//! ROOM_SERVICE__* ┘
//! ```

mod error;
mod raw;
mod rules;
mod settings;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;

use figment::Figment;
use figment::providers::{Format, Serialized};
use figment::value::Value;
use serde_saphyr::figment::Yaml;

pub use error::ConfigError;
pub use settings::{
    AuthMode, AuthSettings, Backend, ClusterSettings, ConfigSource, ConsumerSettings, ConsumersSettings,
    DEFAULT_BATCH_SIZE, DEFAULT_MAX_IN_FLIGHT, DEFAULT_POLL_INTERVAL, DEFAULT_PUBLISH_TIMEOUT,
    DEFAULT_STATS_INTERVAL, DatabaseSettings, GrpcSettings, HistorySettings, HopSecrets, HttpSettings,
    IM_BATCH_BYTES_RANGE, ImBatchSettings, ImRateLimitSettings, JwtSettings, LogFormat, LogSettings,
    MAX_BATCH_SIZE, MAX_COMMIT_BATCH, MAX_FORCED_PER_SEC, MAX_HISTORY_AGE, MAX_HISTORY_EVENTS,
    MAX_IM_BATCH_EVENTS, MAX_IN_FLIGHT, MAX_IN_FLIGHT_PER_ROOM, MAX_QUEUE_SPANS, MAX_SYNC_PUBLISH_WAIT,
    MIN_CONSUMER_LEASE, MIN_LEASE, OtlpSettings, OutboxWorkerSettings, PresenceSettings, RedisSettings,
    RetryStrategy, RoomsSettings, ServiceToken, Settings, TelemetrySettings, TencentImSettings,
    UserSigSettings, WalletSettings, WebhookSettings,
};

use error::Origins;
use raw::RawConfig;

/// The config file used when `--config` is not given. If no file exists there, the built-in
/// defaults apply (a missing file at any other path is an error).
pub const DEFAULT_CONFIG_PATH: &str = "config/config.yaml";

/// Prefix of the environment variables that override config keys.
pub const ENV_PREFIX: &str = "ROOM_SERVICE__";

/// Loads and validates the configuration from `path` and the process environment.
///
/// A missing file is an error naming the path, except at exactly [`DEFAULT_CONFIG_PATH`],
/// where the built-in defaults are used and [`Settings::source`] says so (log it). Environment
/// variables override file values; a non-UTF-8 value of a `ROOM_SERVICE__*` variable fails.
pub fn load(path: &Path) -> Result<Settings, ConfigError> {
    load_with_env(path, env_vars()?)
}

/// As [`load`], with the environment given as `(name, value)` pairs instead of read from the
/// process; names without the [`ENV_PREFIX`] are ignored.
pub fn load_with_env(
    path: &Path,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Settings, ConfigError> {
    load_from(path, path == Path::new(DEFAULT_CONFIG_PATH), vars).map(|(settings, _)| settings)
}

/// As [`load`], but a missing file is an error at every path, the default one included: for
/// commands that act on an existing database, where the built-in defaults would silently point
/// at another one.
pub fn load_existing(path: &Path) -> Result<Settings, ConfigError> {
    load_from(path, false, env_vars()?).map(|(settings, _)| settings)
}

/// Validates the configuration at `path` (a missing file is an error) with the process
/// environment, and renders the effective configuration as YAML: every key with the value in
/// force after the file and the `ROOM_SERVICE__*` overrides, secrets redacted (the database URL
/// keeps everything but its password).
pub fn check(path: &Path) -> Result<(Settings, String), ConfigError> {
    check_with_env(path, env_vars()?)
}

/// As [`check`], with the environment given as `(name, value)` pairs.
pub fn check_with_env(
    path: &Path,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<(Settings, String), ConfigError> {
    let (settings, raw) = load_from(path, false, vars)?;
    let mut value = serde_json::to_value(&raw)
        .map_err(|e| ConfigError::Unreadable { origin: None, message: e.to_string() })?;
    value["node_id"] = settings.node_id.clone().into();
    value["database"]["url"] = settings.database.redacted_url().into();
    // As in force: a blank token is no token.
    value["http"]["admin_token"] = if settings.http.admin_token.is_some() { "<redacted>" } else { "" }.into();
    let yaml = serde_saphyr::to_string(&value)
        .map_err(|e| ConfigError::Unreadable { origin: None, message: e.to_string() })?;
    Ok((settings, yaml))
}

/// The `ROOM_SERVICE__*` variables of the process; a non-UTF-8 value is an error naming it.
fn env_vars() -> Result<Vec<(String, String)>, ConfigError> {
    let mut vars = Vec::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str().filter(|n| n.starts_with(ENV_PREFIX)).map(str::to_owned) else {
            continue;
        };
        match value.into_string() {
            Ok(value) => vars.push((name, value)),
            Err(_) => {
                return Err(ConfigError::Unreadable {
                    origin: Some(format!("environment variable {name}")),
                    message: "value is not valid UTF-8".into(),
                });
            }
        }
    }
    Ok(vars)
}

/// The loader; `missing_ok` lets a missing file fall back to the defaults. Returns the raw
/// configuration too (after overrides), for [`check`].
fn load_from(
    path: &Path,
    missing_ok: bool,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<(Settings, RawConfig), ConfigError> {
    let (mut figment, source, file) = match std::fs::metadata(path) {
        Ok(_) => (
            Figment::new().merge(Yaml::file_exact(path)),
            ConfigSource::File(path.to_owned()),
            Some(path.to_owned()),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_ok => {
            (Figment::new(), ConfigSource::Defaults, None)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::FileNotFound { path: path.to_owned() });
        }
        Err(e) => {
            return Err(ConfigError::Unreadable {
                origin: Some(format!("file {}", path.display())),
                message: e.to_string(),
            });
        }
    };

    let mut env = HashMap::new();
    let mut vars: Vec<_> = vars.into_iter().filter(|(name, _)| name.starts_with(ENV_PREFIX)).collect();
    vars.sort();
    for (name, value) in vars {
        let key = env_key(&name)?;
        figment = figment.merge(Serialized::default(&key, Value::from(value)));
        env.insert(key, name);
    }
    let origins = Origins { env, file };

    let raw: RawConfig = figment.extract_lossy().map_err(|e| origins.map_figment(e))?;
    env_only_secrets(&raw, &origins)?;
    let settings = validate::validate(raw.clone(), source, hostname).map_err(|e| origins.annotate(e))?;
    Ok((settings, raw))
}

/// The cluster's secrets come from the environment only: one in a file (committed, copied
/// into images) is refused, naming the key.
fn env_only_secrets(raw: &RawConfig, origins: &Origins) -> Result<(), ConfigError> {
    let set =
        [("cluster.secret", &raw.cluster.secret), ("cluster.secret_previous", &raw.cluster.secret_previous)];
    let mut in_file: Vec<ConfigError> = set
        .into_iter()
        .filter(|(key, value)| !value.is_empty() && !origins.env.contains_key(*key))
        .map(|(key, _)| ConfigError::InvalidValue {
            key: key.to_owned(),
            origin: origins.file.as_ref().map(|f| format!("file {}", f.display())),
            reason: format!(
                "set it from the environment only ({ENV_PREFIX}{}), never in a file",
                key.replace('.', "__").to_ascii_uppercase()
            ),
        })
        .collect();
    match in_file.pop() {
        None => Ok(()),
        Some(one) if in_file.is_empty() => Err(one),
        Some(last) => {
            in_file.push(last);
            Err(ConfigError::Multiple(in_file))
        }
    }
}

/// `ROOM_SERVICE__TENCENT_IM__SECRET_KEY` → `tencent_im.secret_key`.
fn env_key(name: &str) -> Result<String, ConfigError> {
    let rest = name.strip_prefix(ENV_PREFIX).unwrap_or(name);
    let segments: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
    let valid = segments.iter().all(|s| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    });
    if !valid {
        return Err(ConfigError::UnknownKey {
            key: segments.join("."),
            origin: Some(format!("environment variable {name}")),
        });
    }
    Ok(segments.join("."))
}

/// This machine's hostname (lossy: it is sanitized into a node id anyway).
fn hostname() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}
