//! The keys of a JWKS endpoint (`auth.jwt.jwks_url`), by `kid`: fetched at startup, fetched
//! again in the background once `jwks_refresh` has passed since the last fetch (the request
//! that notices goes on with the keys at hand), and at once on a `kid` it does not know — at
//! most once per [`UNKNOWN_KID_REFETCH`], so tokens with made-up kids cannot make the service
//! hammer the endpoint. Keys the crate cannot use are skipped (and logged by kid).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::JwkSet;
use tokio::time::Instant;

use super::Reason;

/// Fewest time between two fetches caused by unknown kids.
pub const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(60);
/// Bound on one fetch.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest JWKS document read.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// A cached JWKS; cheap to clone.
#[derive(Clone)]
pub struct Jwks {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    client: reqwest::Client,
    refresh: Duration,
    unknown_kid_refetch: Duration,
    keys: RwLock<Arc<HashMap<String, Arc<DecodingKey>>>>,
    times: Mutex<Times>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Times {
    /// The last fetch that succeeded.
    fetched: Option<Instant>,
    /// The last fetch tried, whatever came of it.
    attempted: Option<Instant>,
    /// The last fetch tried because of an unknown kid.
    unknown_kid: Option<Instant>,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks").field("url", &self.inner.url).field("keys", &self.key_count()).finish()
    }
}

impl Jwks {
    /// A cache of `url`, fetched with `client`, refreshed every `refresh`, fetched for an unknown
    /// kid at most every `unknown_kid_refetch`. Fetches nothing yet ([`Self::fetch`]).
    pub fn new(
        url: String,
        client: reqwest::Client,
        refresh: Duration,
        unknown_kid_refetch: Duration,
    ) -> Self {
        let inner = Inner {
            url,
            client,
            refresh,
            unknown_kid_refetch,
            keys: RwLock::new(Arc::default()),
            times: Mutex::new(Times::default()),
            fetching: tokio::sync::Mutex::new(()),
        };
        Self { inner: Arc::new(inner) }
    }

    /// How many usable keys are cached.
    pub fn key_count(&self) -> usize {
        self.keys().len()
    }

    fn keys(&self) -> Arc<HashMap<String, Arc<DecodingKey>>> {
        self.inner.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.inner.times.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The key of `kid`: from the cache, or from a fetch made now when the kid is unknown (at
    /// most once per `unknown_kid_refetch`).
    pub async fn key(&self, kid: Option<&str>) -> Result<Arc<DecodingKey>, Reason> {
        let kid = kid.ok_or(Reason::UnknownKid)?;
        self.refresh_if_due();
        if let Some(key) = self.keys().get(kid) {
            return Ok(key.clone());
        }
        let now = Instant::now();
        let may_fetch = {
            let mut times = self.times();
            let due =
                times.unknown_kid.is_none_or(|at| now.duration_since(at) >= self.inner.unknown_kid_refetch);
            if due {
                times.unknown_kid = Some(now);
            }
            due
        };
        if may_fetch {
            self.fetch().await;
        }
        let keys = self.keys();
        match keys.get(kid) {
            Some(key) => Ok(key.clone()),
            None if keys.is_empty() => Err(Reason::KeysUnavailable),
            None => Err(Reason::UnknownKid),
        }
    }

    /// Starts a background fetch when the last one that succeeded is older than `refresh` (and,
    /// after a failure, no other was tried for `refresh` or `unknown_kid_refetch`, whichever is
    /// shorter).
    fn refresh_if_due(&self) {
        let due = {
            let times = self.times();
            let stale = times.fetched.is_none_or(|at| at.elapsed() >= self.inner.refresh);
            let retry = self.inner.refresh.min(self.inner.unknown_kid_refetch);
            stale && times.attempted.is_none_or(|at| at.elapsed() >= retry)
        };
        if due && let Ok(guard) = self.inner.fetching.try_lock() {
            drop(guard);
            let jwks = self.clone();
            tokio::spawn(async move { jwks.fetch().await });
        }
    }

    /// Fetches the key set now (one fetch at a time: a caller arriving during another's waits for
    /// it instead); a failure keeps the keys at hand and is logged.
    pub async fn fetch(&self) {
        let started = Instant::now();
        let _one = self.inner.fetching.lock().await;
        if self.times().fetched.is_some_and(|at| at >= started) {
            return;
        }
        self.times().attempted = Some(Instant::now());
        match self.download().await {
            Ok(set) => {
                let keys = usable(&set);
                tracing::info!(keys = keys.len(), "JWKS fetched");
                *self.inner.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
                self.times().fetched = Some(Instant::now());
            }
            Err(error) => tracing::warn!(%error, "JWKS fetch failed; keeping the keys at hand"),
        }
    }

    async fn download(&self) -> Result<JwkSet, String> {
        let response = self
            .inner
            .client
            .get(&self.inner.url)
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| e.without_url().to_string())?;
        let body = response.bytes().await.map_err(|e| e.without_url().to_string())?;
        if body.len() > MAX_JWKS_BYTES {
            return Err(format!("the key set is larger than {MAX_JWKS_BYTES} bytes"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("not a JWKS document ({e})"))
    }
}

/// The keys of `set` that have a kid and that the crate can verify with.
fn usable(set: &JwkSet) -> HashMap<String, Arc<DecodingKey>> {
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else {
            tracing::warn!("JWKS key without a kid skipped");
            continue;
        };
        match DecodingKey::from_jwk(jwk) {
            Ok(key) => {
                keys.insert(kid, Arc::new(key));
            }
            Err(error) => tracing::warn!(kid, %error, "JWKS key skipped: it cannot verify"),
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;

    use axum::routing::get;
    use serde_json::{Value, json};

    use super::*;

    /// A JWKS endpoint on loopback serving whatever `keys` holds, counting fetches.
    async fn endpoint(keys: Arc<StdMutex<Value>>, fetches: Arc<std::sync::atomic::AtomicUsize>) -> String {
        let app = axum::Router::new().route(
            "/jwks",
            get(move || {
                let keys = keys.clone();
                let fetches = fetches.clone();
                async move {
                    fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    axum::Json(keys.lock().unwrap().clone())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/jwks")
    }

    fn oct(kid: &str) -> Value {
        json!({"kty": "oct", "kid": kid, "k": "c2VjcmV0LWtleS1vZi1hdC1sZWFzdC0zMi1ieXRlcyEh"})
    }

    #[tokio::test]
    async fn an_unknown_kid_fetches_again_at_most_once_per_interval() {
        let keys = Arc::new(StdMutex::new(json!({"keys": [oct("a")]})));
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let url = endpoint(keys.clone(), fetches.clone()).await;
        let hour = Duration::from_secs(3600);
        let jwks = Jwks::new(url.clone(), reqwest::Client::new(), hour, hour);
        jwks.fetch().await;
        assert_eq!(jwks.key_count(), 1);
        assert!(jwks.key(Some("a")).await.is_ok());
        assert_eq!(jwks.key(None).await.err(), Some(Reason::UnknownKid));
        // The key set rotates: the first unknown kid fetches it, the next one does not.
        keys.lock().unwrap()["keys"] = json!([oct("a"), oct("b")]);
        assert!(jwks.key(Some("b")).await.is_ok(), "the unknown kid fetched the rotated set");
        keys.lock().unwrap()["keys"] = json!([oct("a"), oct("b"), oct("c")]);
        assert_eq!(jwks.key(Some("c")).await.err(), Some(Reason::UnknownKid), "within the interval");
        assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 2);

        // With a zero interval every unknown kid fetches.
        let eager = Jwks::new(url, reqwest::Client::new(), hour, Duration::ZERO);
        assert!(eager.key(Some("c")).await.is_ok());
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_leaves_no_keys_and_says_so() {
        let jwks = Jwks::new(
            "http://127.0.0.1:1/jwks".into(),
            reqwest::Client::new(),
            Duration::from_secs(60),
            Duration::ZERO,
        );
        jwks.fetch().await;
        assert_eq!(jwks.key(Some("a")).await.err(), Some(Reason::KeysUnavailable));
    }

    #[tokio::test]
    async fn keys_without_a_kid_or_unusable_are_skipped() {
        let set: JwkSet = serde_json::from_value(json!({"keys": [
            oct("a"),
            {"kty": "oct", "k": "c2VjcmV0"},
        ]}))
        .unwrap();
        assert_eq!(usable(&set).keys().collect::<Vec<_>>(), ["a"]);
    }
}
