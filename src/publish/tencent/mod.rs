//! The Tencent Cloud IM leaf of the publish stack: [`TencentImService`] sends one [`Message`]
//! as one custom group message (`send_group_msg`, SPEC §8 and §12.1: one element per event),
//! then the group admin calls its events carry (SPEC §14.2, [`admin_wire`]), and answers
//! [`Outcome::Delivered`] or an [`ImError`] that knows its [`crate::publish::ErrorClass`].
//!
//! It sits below the timeout layer, so it sets only a connect timeout of its own; the usersig
//! comes from a [`usersig::UserSigCache`] that is invalidated when Tencent answers 70001/70052.

pub mod admin_wire;
mod call;
pub mod error;
pub mod usersig;
pub mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::Url;

pub use error::ImError;
use usersig::{Clock, UserSigCache};

use crate::config::TencentImSettings;
use crate::publish::{AdminApi, BoxError, Message, Outcome};

/// TCP/TLS connect timeout of the IM client; the whole call is bounded by the timeout layer
/// above.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Sends messages to Tencent IM. Cheap to clone: clones share the HTTP connection pool and the
/// usersig cache.
#[derive(Clone, Debug)]
pub struct TencentImService {
    inner: Arc<Inner>,
}

#[derive(Debug, Clone)]
struct Inner {
    client: reqwest::Client,
    /// `send_group_msg`'s URL, without its query.
    endpoint: Url,
    /// Each admin API's URL, without its query.
    admin_endpoints: HashMap<AdminApi, Url>,
    sdk_app_id: String,
    admin_identifier: String,
    group_id_prefix: String,
    /// Most content bytes of one message (`im_batch.max_bytes`).
    max_content_bytes: usize,
    usersig: UserSigCache,
}

impl TencentImService {
    /// A service for the validated `tencent_im.*` settings (whether IM is `enabled` is the
    /// caller's choice of leaf, not read here), on the system clock.
    pub fn new(settings: &TencentImSettings) -> Result<Self, ImError> {
        Self::with_clock(settings, Arc::new(usersig::system_now_secs))
    }

    /// A service whose usersigs are dated by `clock` (Unix seconds).
    pub fn with_clock(settings: &TencentImSettings, clock: Clock) -> Result<Self, ImError> {
        let endpoint = api_url(&settings.base_url, wire::SEND_GROUP_MSG_PATH)?;
        let admin_endpoints = AdminApi::ALL
            .into_iter()
            .map(|api| Ok((api, api_url(&settings.base_url, &api.path())?)))
            .collect::<Result<_, ImError>>()?;
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_keepalive(Duration::from_secs(30))
            // A redirect would carry the usersig to another place; treat it as an error.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ImError::InvalidOptions(ImError::from_reqwest(e).to_string()))?;
        let usersig = UserSigCache::with_clock(
            settings.secret_key.clone(),
            settings.sdk_app_id,
            settings.admin_identifier.clone(),
            settings.usersig_ttl,
            clock,
        );
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                endpoint,
                admin_endpoints,
                sdk_app_id: settings.sdk_app_id.to_string(),
                admin_identifier: settings.admin_identifier.clone(),
                group_id_prefix: settings.group_id_prefix.clone(),
                max_content_bytes: crate::publish::DEFAULT_MAX_BYTES,
                usersig,
            }),
        })
    }

    /// Refuses (before sending) a message whose content passes `bytes` (`im_batch.max_bytes`;
    /// [`crate::publish::DEFAULT_MAX_BYTES`] otherwise).
    pub fn with_max_content_bytes(self, bytes: usize) -> Self {
        let mut inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Inner::clone(&shared));
        inner.max_content_bytes = bytes;
        Self { inner: Arc::new(inner) }
    }

    /// The usersig cache (shared by all clones), e.g. to watch regenerations in tests.
    pub fn usersig_cache(&self) -> &UserSigCache {
        &self.inner.usersig
    }
}

/// The URL of the API at `path` under `base_url`: http or https only.
fn api_url(base_url: &str, path: &str) -> Result<Url, ImError> {
    let url = Url::parse(&format!("{}{path}", base_url.trim_end_matches('/')))
        .map_err(|_| ImError::InvalidOptions("base_url is not a URL".into()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ImError::InvalidOptions("base_url must be http or https".into()));
    }
    Ok(url)
}

impl tower::Service<Message> for TencentImService {
    type Response = Outcome;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Outcome, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, message: Message) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { Ok(inner.deliver(message).await?) })
    }
}
