//! One caller harms only itself (SPEC §13.1): each row of the adversarial review run as a
//! hostile client would — over HTTP and gRPC, against the real binary or the service over real
//! MariaDB and SQLite, with the fake IM and the fake wallet — asserting the promise to the
//! other callers, not the mechanism.

mod content_sender;
mod grpc_flood;
mod hop;
mod money;
mod packs;
mod readers;
mod request_ids;
mod unknown_rooms;
