//! The Tencent Cloud IM leaf of the publish stack: [`TencentImService`] sends one [`Message`]
//! as one custom group message (`send_group_msg`, SPEC §8 and §12.1: one element per event) and answers [`Outcome::Delivered`] or
//! an [`ImError`] that knows its [`crate::publish::ErrorClass`].
//!
//! It sits below the timeout layer, so it sets only a connect timeout of its own; the usersig
//! comes from a [`usersig::UserSigCache`] that is invalidated when Tencent answers 70001/70052.

pub mod error;
pub mod usersig;
pub mod wire;

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::Url;

pub use error::ImError;
use usersig::{Clock, UserSigCache};
use wire::SendGroupMsg;

use crate::config::TencentImSettings;
use crate::publish::{BoxError, Message, Outcome};
use crate::telemetry::traces;

/// Largest answer body read; Tencent's answers are a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

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
    endpoint: Url,
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
        let endpoint =
            Url::parse(&format!("{}{}", settings.base_url.trim_end_matches('/'), wire::SEND_GROUP_MSG_PATH))
                .map_err(|_| ImError::InvalidOptions("base_url is not a URL".into()))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(ImError::InvalidOptions("base_url must be http or https".into()));
        }
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

impl Inner {
    /// The request URL; it carries the usersig, so it never leaves this module.
    fn url(&self, random: u32) -> Url {
        let mut url = self.endpoint.clone();
        let usersig = self.usersig.get();
        url.query_pairs_mut()
            .append_pair("sdkappid", &self.sdk_app_id)
            .append_pair("identifier", &self.admin_identifier)
            .append_pair("usersig", usersig.expose())
            .append_pair("random", &random.to_string())
            .append_pair("contenttype", "json");
        url
    }

    /// One call, in an `im` span of the message's trace when traces are exported: the pack's
    /// size in bytes and events, Tencent's HTTP status and `ErrorCode`.
    async fn send(&self, body: Vec<u8>, random: u32, events: usize) -> Result<Outcome, ImError> {
        use tracing::Instrument;
        let span = traces::span_if_on(|| {
            let bytes = body.len();
            tracing::info_span!(
                "im",
                bytes,
                events,
                error_code = tracing::field::Empty,
                status = tracing::field::Empty
            )
        });
        let sent = self.call_im(body, random).instrument(span.clone()).await;
        if let Err(error) = &sent {
            if let Some(code) = error.im_code() {
                span.record("error_code", code);
            }
            span.record("status", tracing::field::display(error));
        }
        sent
    }

    async fn call_im(&self, body: Vec<u8>, random: u32) -> Result<Outcome, ImError> {
        let mut response = self
            .client
            .post(self.url(random))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(ImError::from_reqwest)?;
        let status = response.status().as_u16();
        let mut answer = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(ImError::from_reqwest)? {
            if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(if status == 200 {
                    ImError::Undecodable("answer too large")
                } else {
                    ImError::HttpStatus(status)
                });
            }
            answer.extend_from_slice(&chunk);
        }
        match wire::interpret(status, &answer) {
            Ok(()) => Ok(Outcome::Delivered),
            Err(err) => {
                if let Some(code @ (70001 | 70052)) = err.im_code() {
                    tracing::warn!(code, "Usersig rejected; regenerating it");
                    self.usersig.invalidate();
                }
                Err(err)
            }
        }
    }
}

impl tower::Service<Message> for TencentImService {
    type Response = Outcome;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Outcome, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, message: Message) -> Self::Future {
        let request = SendGroupMsg::for_message(&self.inner.group_id_prefix, &message);
        let inner = self.inner.clone();
        let events = message.events.len();
        Box::pin(async move {
            // Refused before anything is sent.
            let body = request.to_bytes(inner.max_content_bytes)?;
            match inner.send(body.clone(), request.random, events).await {
                // The usersig expired or was revoked: one immediate retry with a fresh one,
                // within the same attempt (same body and Random, so Tencent dedups a repeat).
                Err(err) if matches!(err.im_code(), Some(70001 | 70052)) => {
                    Ok(inner.send(body, request.random, events).await?)
                }
                other => Ok(other?),
            }
        })
    }
}
