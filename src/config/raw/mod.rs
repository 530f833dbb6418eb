//! The configuration exactly as an operator writes it (SPEC §7): serde structs that mirror the
//! YAML file key for key, with the documented defaults. Unknown keys are rejected at every
//! level. Nothing here is validated; [`super::validate`] turns a [`RawConfig`] into the
//! runtime [`super::Settings`], and no other module ever sees these types.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::secret::Secret;

mod auth;
mod delivery;
mod rooms;
mod server;

pub(crate) use auth::*;
pub(crate) use delivery::*;
pub(crate) use rooms::*;
pub(crate) use server::*;

/// Deserializes a section that may be written as an empty YAML mapping (`http:` with every key
/// commented out, i.e. `null`) into the section's defaults.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Deserializes a list of names written as a YAML sequence, or as one string — as an
/// environment variable carries it: `RoomGiftSent,RoomClosed` or `[RoomGiftSent, RoomClosed]`.
fn names<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Names::deserialize(deserializer)? {
        Names::List(list) => list,
        Names::Text(text) => text
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// Every key of the configuration as a dotted path (`http.listen`, ...) with its default
/// value as YAML would show it, in file order: the one list the docs and the shipped files are
/// checked against. Secrets show their real default (serializing a [`Secret`] redacts it).
#[cfg(test)]
pub(crate) fn default_keys() -> Vec<(String, serde_json::Value)> {
    fn walk(prefix: &str, value: serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let path = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
                    walk(&path, value, out);
                }
            }
            leaf => out.push((prefix.to_owned(), leaf)),
        }
    }
    let defaults = RawConfig::default();
    let secrets = [
        ("http.admin_token", &defaults.http.admin_token),
        ("database.url", &defaults.database.url),
        ("tencent_im.secret_key", &defaults.tencent_im.secret_key),
        ("redis.url", &defaults.redis.url),
        ("consumers.webhook.secret", &defaults.consumers.webhook.secret),
        ("auth.service_tokens", &defaults.auth.service_tokens),
        ("auth.jwt.secret", &defaults.auth.jwt.secret),
    ];
    let mut keys = Vec::new();
    let tree = serde_json::to_value(&defaults).expect("plain structs of strings and numbers serialize");
    walk("", tree, &mut keys);
    for (key, value) in &mut keys {
        if let Some((_, secret)) = secrets.iter().find(|(name, _)| name == key) {
            *value = secret.expose().into();
        }
    }
    keys
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawConfig {
    /// Name of this instance in logs and in the outbox `worker_id`; empty means the hostname.
    pub node_id: String,
    /// The HTTP server.
    #[serde(deserialize_with = "null_as_default")]
    pub http: RawHttp,
    /// The gRPC server (`room.v1.RoomService`, health, reflection).
    #[serde(deserialize_with = "null_as_default")]
    pub grpc: RawGrpc,
    /// Authentication and authorization of the public API (HTTP and gRPC).
    #[serde(deserialize_with = "null_as_default")]
    pub auth: RawAuth,
    /// The database holding rooms, the command log and the outbox.
    #[serde(deserialize_with = "null_as_default")]
    pub database: RawDatabase,
    /// Tencent Cloud IM, the leaf of the publish stack.
    #[serde(deserialize_with = "null_as_default")]
    pub tencent_im: RawTencentIm,
    /// The rate limiter in the publish stack, shared by both paths.
    #[serde(deserialize_with = "null_as_default")]
    pub im_rate_limit: RawImRateLimit,
    /// How many events one IM message may carry.
    #[serde(deserialize_with = "null_as_default")]
    pub im_batch: RawImBatch,
    /// The background worker that re-publishes pending outbox rows.
    #[serde(deserialize_with = "null_as_default")]
    pub outbox_worker: RawOutboxWorker,
    /// The room cells and their command path.
    #[serde(deserialize_with = "null_as_default")]
    pub rooms: RawRooms,
    /// The worker that evicts members whose heartbeats stopped.
    #[serde(deserialize_with = "null_as_default")]
    pub presence: RawPresence,
    /// Logging.
    #[serde(deserialize_with = "null_as_default")]
    pub log: RawLog,
    /// Traces: W3C trace context, exported by OTLP when an endpoint is set.
    #[serde(deserialize_with = "null_as_default")]
    pub telemetry: RawTelemetry,
    /// Many nodes on one database: shard leases, forwarding, the cluster-wide IM quota.
    #[serde(deserialize_with = "null_as_default")]
    pub cluster: RawCluster,
    /// Redis: the shard directory and the cluster-wide IM rate limit.
    #[serde(deserialize_with = "null_as_default")]
    pub redis: RawRedis,
    /// The wallet service gifts are paid from.
    #[serde(deserialize_with = "null_as_default")]
    pub wallet: RawWallet,
    /// Consumers of the room events besides IM, each with its own position.
    #[serde(deserialize_with = "null_as_default")]
    pub consumers: RawConsumers,
}

/// A duration as written: `"1s"`, `"250ms"`, `"-1s"`, or a bare integer such as `0`.
/// Parsing (and the sign) is left to validation so that non-positive values can fall back to
/// defaults where the spec says so.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RawDuration(String);

impl RawDuration {
    /// Wraps a literal.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RawDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for RawDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;

        impl Visitor<'_> for DurationVisitor {
            type Value = RawDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"1s\" or \"250ms\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawDuration::new(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(RawDuration::new(v.to_string()))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(RawDuration::new(v.to_string()))
            }
        }

        deserializer.deserialize_any(DurationVisitor)
    }
}
