//! Routing in a cluster (SPEC §11.4), the part both APIs share: a request for a room this node
//! does not own is forwarded once to the owner's HTTP API, and the owner's answer passed
//! through. The hop carries [`FORWARDED_BY`], and a forwarded request is never forwarded again
//! (a misrouted one answers 503 `not_owner`, and the client's retry is routed afresh). The
//! owner is found through the Redis directory, or the lease table when Redis misses or its
//! entry proved stale.
//!
//! The HTTP routes come here through their middleware (`http::forward`), which passes the
//! answer on as it is; the gRPC calls as the request of their twin HTTP route
//! (`grpc::forward`), which map the answer back onto the RPC's.

use std::time::Duration;

use ::http::{HeaderMap, Request, StatusCode, header};
use bytes::Bytes;

use super::ApiError;
use crate::cluster::{Cluster, Located, Owner};
use crate::telemetry::{names, traces};

/// Header of a forwarded request: the forwarding node's id (the loop guard).
pub const FORWARDED_BY: &str = "x-room-forwarded-by";

/// Headers a hop carries over, each way: the caller's credential too, which the owner
/// verifies again (SPEC §12.3).
const REQUEST_HEADERS: [header::HeaderName; 3] =
    [header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION];
const REQUEST_ID: &str = "x-request-id";

/// Longest wait for a shard between owners (a handoff, or a dead owner's lease expiring is
/// not waited for: that answers 503 `not_owner` at once after this).
const SETTLE_PATIENCE: Duration = Duration::from_secs(3);

/// The forwarding client and the limits of a hop.
#[derive(Debug, Clone)]
pub struct Forwarder {
    cluster: Cluster,
    client: reqwest::Client,
    body_limit: usize,
}

impl Forwarder {
    /// Forwards through `cluster` with hops bounded by `timeout`; bodies up to `body_limit`.
    pub fn new(cluster: Cluster, timeout: Duration, body_limit: usize) -> reqwest::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(1))
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(Self { cluster, client, body_limit })
    }

    /// The cluster routed through.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The largest body a hop carries.
    pub fn body_limit(&self) -> usize {
        self.body_limit
    }
}

/// Forwards to the owner; a stale directory entry (the hop is refused, or the node is gone)
/// is looked up again in the lease table and tried once more. The owner's answer, as received,
/// or the error this node answers in its stead (`not_owner`, `owner_unavailable`, storage).
pub(crate) async fn forward(
    forwarder: &Forwarder,
    room_id: &str,
    request: &Request<()>,
    body: Bytes,
) -> Result<Answer, ApiError> {
    let cluster = &forwarder.cluster;
    let owner = match cluster.locate_settled(room_id, SETTLE_PATIENCE).await {
        Ok(Located::There(owner)) => owner,
        // The shard came here meanwhile, or has no owner yet: the client's retry is routed.
        Ok(Located::Here | Located::Nobody) => return count(Err(ApiError::not_owner()), false),
        Err(error) => return count(Err(ApiError::from(error)), false),
    };
    let first = match hop(forwarder, &owner, request, body.clone()).await {
        Ok(answer) if !is_not_owner(&answer) => return count(Ok(answer), true),
        first => first,
    };
    tracing::info!(room_id, node = %owner.node_id, "The owner the directory named refused or did not answer");
    if let Ok(Located::There(fresh)) = cluster.locate(room_id, true).await
        && fresh != owner
    {
        return match hop(forwarder, &fresh, request, body).await {
            Ok(answer) => count(Ok(answer), true),
            Err(_) => count(Err(ApiError::owner_unavailable()), false),
        };
    }
    match first {
        Ok(answer) => count(Ok(answer), false),
        Err(_) => count(Err(ApiError::owner_unavailable()), false),
    }
}

/// The owner's answer, as received.
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

fn is_not_owner(answer: &Answer) -> bool {
    answer.status == StatusCode::SERVICE_UNAVAILABLE
        && serde_json::from_slice::<serde_json::Value>(&answer.body)
            .is_ok_and(|v| v["error"]["code"] == "not_owner")
}

/// One hop to `owner`: a `forward` span of the request's trace when traces are exported, its
/// context passed on as `traceparent` so the owner's spans continue the trace.
async fn hop(
    forwarder: &Forwarder,
    owner: &Owner,
    request: &Request<()>,
    body: Bytes,
) -> Result<Answer, reqwest::Error> {
    use tracing::Instrument;
    let span = traces::span_if_on(|| tracing::info_span!("forward", node = %owner.node_id));
    send(forwarder, owner, request, body).instrument(span).await
}

async fn send(
    forwarder: &Forwarder,
    owner: &Owner,
    request: &Request<()>,
    body: Bytes,
) -> Result<Answer, reqwest::Error> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", owner.url);
    let mut headers = HeaderMap::new();
    for name in REQUEST_HEADERS.iter().map(header::HeaderName::as_str).chain([REQUEST_ID]) {
        if let Some(value) = request.headers().get(name) {
            headers.insert(name, value.clone());
        }
    }
    traces::inject_current(&mut headers);
    let hop = forwarder
        .client
        .request(request.method().clone(), url)
        .header(FORWARDED_BY, forwarder.cluster.node_id())
        .headers(headers)
        .body(body);
    let response = hop.send().await.map_err(|e| {
        let e = e.without_url();
        tracing::warn!(node = %owner.node_id, error = %e, "Forwarding failed");
        e
    })?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await?;
    Ok(Answer { status, headers, body })
}

/// Counts a forwarded request's `outcome` as `ok` or not.
fn count<T>(outcome: T, ok: bool) -> T {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!(names::COMMANDS_FORWARDED_TOTAL, names::LABEL_RESULT => result).increment(1);
    outcome
}
