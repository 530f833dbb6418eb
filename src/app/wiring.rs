//! The parts `main.rs` composes the publish stack from (the leaf, the rate limiter) and the
//! wallet, each built from its validated settings.

use std::sync::Arc;

use anyhow::Context;
use tower::util::Either;

use crate::config::{Settings, TencentImSettings, WalletSettings};
use crate::publish::log_sink::LogSink;
use crate::publish::rate_limit::{ClusterQuota, RateLimitLayer, RateLimitOptions};
use crate::publish::tencent::TencentImService;
use crate::redis_conn::RedisConn;
use crate::wallet::{HttpWallet, HttpWalletOptions, Wallet};

/// The rate-limit layer of the publish stack: Tencent's limits apply to the IM client only, so
/// there is none when IM is disabled (the log sink takes any rate). With `redis` (the node's
/// handle, when `redis.url` is set) the app-wide limit is shared by the cluster; without it
/// each node takes `global_per_sec / cluster.expected_nodes` (all of it on a single node).
pub fn rate_limit_layer(settings: &Settings, redis: Option<&RedisConn>) -> Option<RateLimitLayer> {
    settings.tencent_im.enabled.then(|| {
        let (app, nodes) = (settings.tencent_im.sdk_app_id, settings.cluster.expected_nodes);
        let mut options = rate_limit(settings);
        if redis.is_none() {
            options.global_per_sec = (options.global_per_sec / nodes.max(1)).max(1);
        }
        let quota = redis.map(|redis| ClusterQuota::new(redis.clone(), app, nodes));
        RateLimitLayer::new(options).with_cluster_quota(quota)
    })
}

/// The rate limits of the publish stack for `settings` (`im_rate_limit.*`, and the pause after
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

/// The leaf of the publish stack for `settings`: the Tencent IM client, or the log sink when
/// `tencent_im.enabled` is false (the same stack either way).
pub fn im_leaf(settings: &TencentImSettings) -> anyhow::Result<Either<TencentImService, LogSink>> {
    if !settings.enabled {
        return Ok(Either::Right(LogSink::new()));
    }
    Ok(Either::Left(TencentImService::new(settings).context("tencent_im")?))
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
