//! The publish stack `main.rs` serves with and the parts it is composed from (the leaf), the
//! delivery core's rate-limit permits, the wallet and the public API's authenticator, each
//! built from its validated settings.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tower::Layer;
use tower::util::Either;

use crate::auth::Auth;
use crate::config::{AuthMode, AuthSettings, Settings, WalletSettings};
use crate::delivery::SharedPermits;
use crate::delivery::pack::PackLimits;
use crate::delivery::permits::{ClusterQuota, RateLimitOptions, RateLimits, Unlimited};
use crate::domain::EventType;
use crate::publish::filter::EventFilterLayer;
use crate::publish::log_sink::LogSink;
use crate::publish::stack::{PublishLayers, into_publisher};
use crate::publish::tencent::TencentImService;
use crate::publish::{BoxError, Message, Outcome, Publisher};
use crate::redis_conn::RedisConn;
use crate::wallet::{HttpWallet, HttpWalletOptions, Wallet};

/// The rate-limit permits the lanes and the worker take before each IM message: Tencent's
/// limits apply to the IM client only, so there are none when IM is disabled (the log sink
/// takes any rate). With `redis` (the node's handle, when `redis.url` is set) the app-wide
/// limit is shared by the cluster; without it each node takes `global_per_sec /
/// cluster.expected_nodes` (all of it on a single node).
pub fn permits(settings: &Settings, redis: Option<&RedisConn>) -> SharedPermits {
    let Some(im) = settings.tencent_im.as_ref() else { return Arc::new(Unlimited) };
    let (app, nodes) = (im.sdk_app_id, settings.cluster.expected_nodes);
    let mut options = rate_limit(settings);
    if redis.is_none() {
        options.global_per_sec = (options.global_per_sec / nodes.max(1)).max(1);
    }
    let quota = redis.map(|redis| ClusterQuota::new(redis.clone(), app, nodes));
    RateLimits::shared(&options, quota.as_ref())
}

/// The rate limits of the permits for `settings` (`im_rate_limit.*`, and the pause after
/// a rate-limited answer).
pub fn rate_limit(settings: &Settings) -> RateLimitOptions {
    let limits = &settings.im_rate_limit;
    RateLimitOptions {
        global_per_sec: limits.global_per_sec,
        per_group_per_sec: limits.per_group_per_sec,
        worker_share: limits.worker_share,
        pause: settings.outbox_worker.rate_limit_pause,
    }
}

/// The leaf of the publish stack for `settings`: the Tencent IM client (refusing content over
/// `im_batch.max_bytes`), or the log sink when IM is disabled (the same stack either way).
pub fn im_leaf(settings: &Settings) -> anyhow::Result<Either<TencentImService, LogSink>> {
    let Some(im) = settings.tencent_im.as_ref() else { return Ok(Either::Right(LogSink::new())) };
    let client = TencentImService::new(im).context("tencent_im")?;
    Ok(Either::Left(client.with_max_content_bytes(settings.im_batch.max_bytes)))
}

/// How many of a room's events one IM message carries (`im_batch.*`), on both paths.
pub fn pack_limits(settings: &Settings) -> PackLimits {
    PackLimits { max_events: settings.im_batch.max_events, max_bytes: settings.im_batch.max_bytes }
}

/// The wallet gifts are paid from: the HTTP client when `wallet.enabled`, else none (gifts
/// are free).
pub fn wallet(settings: &WalletSettings) -> anyhow::Result<Option<Arc<dyn Wallet>>> {
    if !settings.enabled {
        return Ok(None);
    }
    let options = HttpWalletOptions { base_url: settings.base_url.clone(), timeout: settings.timeout };
    let wallet = HttpWallet::new(options).context("wallet")?;
    tracing::info!(base_url = %settings.base_url, timeout = ?settings.timeout, "Gifts are paid through the wallet");
    Ok(Some(Arc::new(wallet)))
}

/// The publish stack of the command path and the outbox worker for `settings` (the one
/// `main.rs` serves with): the IM leaf ([`im_leaf`]) in [`im_stack`]. Tencent's rate limits are
/// the delivery core's ([`permits`]), taken before a message is built.
pub fn publisher(settings: &Settings) -> anyhow::Result<Publisher> {
    let leaf = im_leaf(settings)?;
    Ok(im_stack(leaf, settings.outbox_worker.publish_timeout))
}

/// The IM publish stack around `leaf` ([`PublishLayers`], the filter skipping the event types
/// that do not reach IM, from the domain), calls bounded by `publish_timeout`: [`publisher`]'s,
/// and the one tests and benchmarks build around their own leaves.
pub fn im_stack<L>(leaf: L, publish_timeout: Duration) -> Publisher
where
    L: tower::Service<Message, Response = Outcome> + Clone + Send + Sync + 'static,
    L::Error: Into<BoxError> + 'static,
    L::Future: Send + 'static,
{
    let skip = EventFilterLayer::skip(EventType::im_skipped());
    let no_limit: Option<tower::layer::util::Identity> = None;
    into_publisher(PublishLayers { skip, rate_limit: no_limit, timeout: publish_timeout }.layer(leaf))
}

/// The authenticator of the public API (`auth.*`): reads the JWT key file, fetches the JWKS
/// once (its client bounds a fetch at 5 s) and logs which mode is in force.
pub async fn auth(settings: &AuthSettings) -> anyhow::Result<Auth> {
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(2))
        .build()
        .context("JWKS client")?;
    let auth = Auth::from_settings(settings, client).await?;
    let mode = match &settings.mode {
        AuthMode::None => "none",
        AuthMode::Jwt(_) => "jwt",
        AuthMode::UserSig(_) => "usersig",
    };
    tracing::info!(
        mode,
        service_tokens = settings.service_tokens.len(),
        public_reads = settings.public_reads,
        per_user_commands_per_sec = settings.per_user_commands_per_sec,
        "Public API authentication"
    );
    Ok(auth)
}
