//! A private `redis-server` for tests that stop Redis mid-run (the shared one at 6379 must stay
//! up for everyone else): no persistence, on a free loopback port, killed on drop.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Spawned, free_port};

/// A running `redis-server` of the test's own.
pub struct PrivateRedis {
    child: Option<Spawned>,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl PrivateRedis {
    /// Starts one and waits until it accepts connections. Panics when `redis-server` is not
    /// installed or does not listen within 10 s.
    pub fn start() -> PrivateRedis {
        Self::start_on(free_port())
    }

    /// Like [`PrivateRedis::start`], on `port` (a Redis coming back where it was).
    pub fn start_on(port: u16) -> PrivateRedis {
        let child = Spawned::spawn(
            Command::new("redis-server")
                .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
                .stdout(Stdio::null()),
            "redis-server (Debian's redis-server package)",
        );
        let give_up = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < give_up, "redis-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        PrivateRedis { child: Some(child), port }
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// SIGKILL, as a crash would; waits for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}
