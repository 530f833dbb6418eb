//! `grpc.health.v1.Health` following readiness, as `/readyz` does: `SERVING` while the service
//! is ready and its database answers a ping (the ping `/readyz` shares, reused for 250 ms:
//! [`crate::api::readiness`]); `NOT_SERVING` once it leaves or drains (after
//! SIGTERM) or while the database is away. The overall status (`""`) and
//! `room.v1.RoomService` answer the same; any other name is `NOT_FOUND`. `Watch` sends the
//! status at once, then each change (checked every [`WATCH_INTERVAL`]); it ends once the
//! service drains, so it never holds the shutdown.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::Health;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::api::AppState;

/// How often a `Watch` stream re-checks readiness.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// The health service over the app's readiness.
#[derive(Clone)]
pub struct Readiness {
    state: AppState,
}

impl Readiness {
    /// Follows `state`'s lifecycle and database.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    async fn status(&self) -> ServingStatus {
        let ready = self.state.lifecycle.is_ready() && self.state.db_ping.check().await.is_ok();
        if ready { ServingStatus::Serving } else { ServingStatus::NotServing }
    }
}

fn known(service: &str) -> Result<(), Status> {
    match service {
        "" | super::SERVICE_NAME => Ok(()),
        other => Err(Status::not_found(format!("unknown service {other:?}"))),
    }
}

fn answer(status: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse { status: status.into() }
}

#[tonic::async_trait]
impl Health for Readiness {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        known(&request.get_ref().service)?;
        Ok(Response::new(answer(self.status().await)))
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        known(&request.get_ref().service)?;
        let this = self.clone();
        let changes = futures::stream::unfold((this, None), |(this, last)| async move {
            loop {
                if last.is_some() {
                    // Once NOT_SERVING was sent while draining, the stream ends: an open watch
                    // must not hold the graceful shutdown for http.shutdown_timeout.
                    if last == Some(ServingStatus::NotServing) && this.state.lifecycle.is_draining() {
                        return None;
                    }
                    tokio::time::sleep(WATCH_INTERVAL).await;
                }
                let now = this.status().await;
                if last != Some(now) {
                    return Some((Ok(answer(now)), (this, Some(now))));
                }
            }
        });
        Ok(Response::new(Box::pin(changes)))
    }
}
