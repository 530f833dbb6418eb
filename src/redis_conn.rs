//! The one Redis connection of a node, shared by the shard directory ([`crate::cluster`]) and
//! the cluster-wide IM quota ([`crate::delivery::permits`]). Redis is never the source of
//! truth: every caller has a fallback, so every call is short-bounded and a node starts and
//! keeps serving while Redis is down (the connection is made lazily and remade on demand).

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::RedisSettings;
use crate::secret::Secret;

/// Bound on connecting and on one answer: past it the caller falls back.
pub const REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// A cheap-to-clone handle to the node's Redis connection.
#[derive(Clone)]
pub struct RedisConn {
    manager: ConnectionManager,
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password: never printed.
        f.debug_struct("RedisConn").finish_non_exhaustive()
    }
}

impl RedisConn {
    /// A handle to the Redis at `url`; connects on first use, so Redis may be down now.
    /// Fails only on a URL that cannot be parsed (the message never repeats the URL).
    pub fn open(url: &Secret) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url.expose())
            .map_err(|e| redis::RedisError::from((e.kind(), "redis.url cannot be used")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(100));
        Ok(Self { manager: ConnectionManager::new_lazy_with_config(client, config)? })
    }

    /// The node's handle when `redis.url` is set (`None` without Redis).
    pub fn from_settings(redis: Option<&RedisSettings>) -> Result<Option<Self>, redis::RedisError> {
        redis.map(|r| Self::open(&r.url)).transpose()
    }

    /// A connection to run commands on (clones share one multiplexed socket).
    pub fn connection(&self) -> ConnectionManager {
        self.manager.clone()
    }

    /// `PING`, bounded by [`REDIS_TIMEOUT`].
    pub async fn ping(&self) -> Result<(), redis::RedisError> {
        let mut conn = self.connection();
        redis::cmd("PING").query_async::<String>(&mut conn).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_down_redis_fails_fast_and_a_bad_url_is_not_echoed() {
        let conn = RedisConn::open(&Secret::new("redis://127.0.0.1:1/")).expect("a valid URL opens lazily");
        let started = std::time::Instant::now();
        assert!(conn.ping().await.is_err());
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        let err = RedisConn::open(&Secret::new("nope://:hunter2@x")).expect_err("bad scheme");
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
