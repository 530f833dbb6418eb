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
pub use process::{Spawned, rss_kb, wait_ready};
pub use redis::PrivateRedis;

/// A loopback port free right now, for a child process to bind a moment later: one below the
/// kernel's ephemeral range (`ip_local_port_range`, 32768–60999 by default), so none of the
/// suite's many outgoing connections can take it meanwhile, as they could take a port that
/// `bind(0)` handed out (a cluster node then failed to start in one CI run).
pub fn free_port() -> u16 {
    use rand::Rng;
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_from > 12_000 {
        let mut rng = rand::rng();
        for _ in 0..1_000 {
            let port = rng.random_range(10_000..ephemeral_from);
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
