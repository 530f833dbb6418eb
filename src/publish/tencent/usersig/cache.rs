//! [`UserSigCache`]: the admin usersig, generated once and reused until half of its TTL is
//! gone or Tencent rejects it (70001/70052).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{generate, system_now_secs};
use crate::secret::Secret;

/// A source of "now" in Unix seconds; injected so tests control expiry.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

struct Cached {
    sig: Secret,
    time: u64,
}

/// Generates the admin usersig once and reuses it; regenerates it when less than half of its
/// TTL remains, or on the next call after [`UserSigCache::invalidate`] (IM error 70001/70052).
/// Cloning shares the cache.
#[derive(Clone)]
pub struct UserSigCache {
    inner: Arc<CacheInner>,
}

struct CacheInner {
    secret_key: Secret,
    sdk_app_id: u64,
    identifier: String,
    ttl_secs: u64,
    clock: Clock,
    cached: Mutex<Option<Cached>>,
    generations: AtomicU64,
}

impl std::fmt::Debug for UserSigCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSigCache")
            .field("sdk_app_id", &self.inner.sdk_app_id)
            .field("identifier", &self.inner.identifier)
            .field("ttl_secs", &self.inner.ttl_secs)
            .field("generations", &self.generations())
            .finish_non_exhaustive()
    }
}

impl UserSigCache {
    /// A cache on the system clock. A TTL under one second is raised to one second.
    pub fn new(secret_key: Secret, sdk_app_id: u64, identifier: impl Into<String>, ttl: Duration) -> Self {
        Self::with_clock(secret_key, sdk_app_id, identifier, ttl, Arc::new(system_now_secs))
    }

    /// A cache reading "now" from `clock`.
    pub fn with_clock(
        secret_key: Secret,
        sdk_app_id: u64,
        identifier: impl Into<String>,
        ttl: Duration,
        clock: Clock,
    ) -> Self {
        Self {
            inner: Arc::new(CacheInner {
                secret_key,
                sdk_app_id,
                identifier: identifier.into(),
                ttl_secs: ttl.as_secs().max(1),
                clock,
                cached: Mutex::new(None),
                generations: AtomicU64::new(0),
            }),
        }
    }

    /// The current usersig, generating a fresh one if none is cached, the cached one has less
    /// than half of its TTL left, or the clock went backwards.
    pub fn get(&self) -> Secret {
        let inner = &self.inner;
        let now = (inner.clock)();
        let mut cached = inner.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cached.as_ref() {
            let fresh = now >= c.time && now - c.time < inner.ttl_secs.div_ceil(2);
            if fresh {
                return c.sig.clone();
            }
        }
        let sig = Secret::new(generate(
            inner.secret_key.expose(),
            inner.sdk_app_id,
            &inner.identifier,
            inner.ttl_secs,
            now,
        ));
        inner.generations.fetch_add(1, Ordering::Relaxed);
        *cached = Some(Cached { sig: sig.clone(), time: now });
        sig
    }

    /// Drops the cached usersig; the next [`UserSigCache::get`] generates a new one.
    pub fn invalidate(&self) {
        *self.inner.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// How many usersigs this cache has generated so far.
    pub fn generations(&self) -> u64 {
        self.inner.generations.load(Ordering::Relaxed)
    }
}
