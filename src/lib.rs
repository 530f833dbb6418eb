//! room-service: the rooms of a live-streaming app, made durable with a transactional outbox
//! and pushed to Tencent Cloud IM through one `tower::Service` stack.
//!
//! Flow of a command: [`http`] or [`grpc`] → [`api`] (the neutral request both APIs build,
//! served here or carried as it is to the room's owner in a cluster) →
//! [`room`] (Room Cell applies a pure [`domain`] command) → [`store`] (one transaction:
//! command log + outbox rows + snapshot) → [`publish`] (the shared stack) → best-effort mark
//! delivered. The [`outbox`] worker re-publishes what the
//! synchronous push missed, through the very same stack. [`app`] wires it all together;
//! [`admin`] holds the operator commands and the retention purge; [`build`] tells what the
//! binary was built from. With `wallet.enabled`, gifts are paid through [`wallet`] before
//! they commit. The fakes of Tencent IM and the wallet are a crate of their own
//! (`room-service-fakes`), as are the benchmark and fault-matrix harnesses.
#![forbid(unsafe_code)]

pub mod admin;
pub mod api;
pub mod app;
pub mod auth;
pub mod build;
pub mod cluster;
pub mod config;
pub mod consumer;
pub mod delivery;
pub mod domain;
pub mod error_text;
pub mod grpc;
pub mod http;
pub mod outbox;
pub mod publish;
pub mod redis_conn;
pub mod room;
pub mod secret;
pub mod store;
#[cfg(test)]
mod strategies;
pub mod telemetry;
pub mod wallet;
