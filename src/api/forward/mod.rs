//! The cluster hop (SPEC §11.4): a [`RoomRequest`] for a room this node does not own is carried
//! once to the owner, which runs it through the very code both edges use here
//! ([`super::serve`]), and the owner's [`Outcome`] or refusal comes back as it answered it.
//! The hop carries the operation itself ([`wire`]: one internal HTTP route, the neutral
//! request as one JSON body), whichever edge it came in by, so neither edge re-encodes its
//! requests as the other's.
//!
//! The owner is found through the Redis directory, or the lease table when Redis misses or its
//! entry proved stale (the hop is refused `not_owner`, or the node does not answer): the owner
//! the table names is then tried once more. A hop is never forwarded again (a misrouted one
//! answers 503 `not_owner`, and the client's retry is routed afresh). Each forwarded request
//! counts in `room_commands_forwarded_total{result}`.

pub mod seal;
pub mod wire;

use std::time::Duration;

use bytes::Bytes;

use super::error::ApiError;
use super::operation::{Outcome, RoomRequest};
use crate::cluster::{Cluster, Located, Owner};
use crate::telemetry::{names, traces};

pub use seal::Seal;
pub use wire::{FORWARDED_BY, HOP_PATH, hop_limit};

/// Longest wait for a shard between owners (a handoff, or a dead owner's lease expiring is
/// not waited for: that answers 503 `not_owner` at once after this).
const SETTLE_PATIENCE: Duration = Duration::from_secs(3);

/// What an owner answered: the operation's outcome, or its refusal.
type Answered = Result<Outcome, ApiError>;

/// The forwarding client, the limits of a hop and its [`Seal`].
#[derive(Debug, Clone)]
pub struct Forwarder {
    cluster: Cluster,
    client: reqwest::Client,
    body_limit: usize,
    seal: Seal,
}

impl Forwarder {
    /// Forwards through `cluster` with hops bounded by `timeout`; a hop's body up to
    /// `body_limit` ([`hop_limit`] of `http.body_limit_bytes`, as the owner's route takes),
    /// each sealed with `seal` (which also verifies the hops this node serves).
    pub fn new(cluster: Cluster, timeout: Duration, body_limit: usize, seal: Seal) -> reqwest::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(1))
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(Self { cluster, client, body_limit, seal })
    }

    /// The cluster routed through.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The seal hops are signed and verified with.
    pub fn seal(&self) -> &Seal {
        &self.seal
    }

    /// The largest hop body.
    pub fn body_limit(&self) -> usize {
        self.body_limit
    }

    /// Carries `request` to its room's owner: its answer, or the error this node answers in
    /// its stead (`not_owner`, `owner_unavailable`, `too_large`, storage). A stale directory
    /// entry (the hop is refused, or the node is gone) is looked up again in the lease table
    /// and tried once more.
    pub async fn forward(&self, request: &RoomRequest) -> Answered {
        let room_id = request.room_id.as_str();
        let body = wire::encode(request, self.body_limit)?;
        let owner = match self.cluster.locate_settled(room_id, SETTLE_PATIENCE).await {
            Ok(Located::There(owner)) => owner,
            // The shard came here meanwhile, or has no owner yet: the client's retry is routed.
            Ok(Located::Here | Located::Nobody) => return count(Err(ApiError::not_owner()), false),
            Err(error) => return count(Err(ApiError::from(error)), false),
        };
        let first = match self.hop(&owner, request, body.clone()).await {
            Some(answer) if !is_not_owner(&answer) => return count(answer, true),
            first => first,
        };
        tracing::info!(room_id, node = %owner.node_id, "The owner the directory named refused or did not answer");
        if let Ok(Located::There(fresh)) = self.cluster.locate(room_id, true).await
            && fresh != owner
        {
            return match self.hop(&fresh, request, body).await {
                Some(answer) => count(answer, true),
                None => count(Err(ApiError::owner_unavailable()), false),
            };
        }
        count(first.unwrap_or_else(|| Err(ApiError::owner_unavailable())), false)
    }

    /// One hop to `owner`: a `forward` span of the request's trace when traces are exported,
    /// its context passed on as `traceparent` so the owner's spans continue the trace. `None`
    /// when the owner did not answer.
    async fn hop(&self, owner: &Owner, request: &RoomRequest, body: Bytes) -> Option<Answered> {
        use tracing::Instrument;
        let span = traces::span_if_on(|| tracing::info_span!("forward", node = %owner.node_id));
        self.send(owner, request, body).instrument(span).await
    }

    async fn send(&self, owner: &Owner, request: &RoomRequest, body: Bytes) -> Option<Answered> {
        let mut headers = wire::headers(request, self.cluster.node_id());
        self.seal.sign(&body, std::time::SystemTime::now(), &mut headers);
        let hop = self.client.post(format!("{}{HOP_PATH}", owner.url)).headers(headers).body(body);
        let answered = async {
            let response = hop.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            Ok::<_, reqwest::Error>((status, headers, response.bytes().await?))
        };
        match answered.await {
            Ok((status, headers, body)) => Some(wire::decode(status, &headers, &body)),
            Err(error) => {
                tracing::warn!(node = %owner.node_id, error = %error.without_url(), "Forwarding failed");
                None
            }
        }
    }
}

fn is_not_owner(answer: &Answered) -> bool {
    matches!(answer, Err(error) if error.code == "not_owner")
}

/// Counts a forwarded request's `outcome` as `ok` or not.
fn count<T>(outcome: T, ok: bool) -> T {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!(names::COMMANDS_FORWARDED_TOTAL, names::LABEL_RESULT => result).increment(1);
    outcome
}
