//! Helpers shared by every test of the `it` binary.
//!
//! - [`db`]: a fresh, migrated repository per test on each backend ([`TestDb`],
//!   [`backends`]), with raw SQL access for assertions.
//! - [`redis`]: a private `redis-server` a test may kill ([`PrivateRedis`]).
//! - [`process`]: child processes killed with their whole process group when the test ends
//!   ([`Spawned`]).

pub mod app;
pub mod db;
pub mod process;
pub mod redis;

pub use db::{TestDb, backends};
pub use process::Spawned;
pub use redis::PrivateRedis;

/// A loopback port free right now (for a child process to bind).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
