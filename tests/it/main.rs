//! The one integration-test binary: real loopback HTTP and real databases between our
//! components. Shared helpers live in `support/`.

mod admin;
mod adversarial;
mod api;
mod auth;
mod cluster;
mod consumers;
mod delivery;
mod grpc;
mod hostile;
mod im_e2e;
mod im_groups;
mod im_peer;
mod marker;
mod moderation;
mod observability;
mod outbox;
mod presence;
mod process;
mod recovery;
mod rooms;
mod seats;
mod store;
mod support;
mod tencent_im;
mod tencent_im_admin;
mod traces;
mod wallet;
mod wallet_http;
