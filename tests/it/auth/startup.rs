//! Startup refuses an anonymous public API on a non-loopback listener (SPEC §12.3).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn mode_none_on_0_0_0_0_without_allow_anonymous_refuses_to_start() {
    for (key, var) in
        [("http.listen", "ROOM_SERVICE__HTTP__LISTEN"), ("grpc.listen", "ROOM_SERVICE__GRPC__LISTEN")]
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_room-service"))
            .args(["serve", "--config", "config/config.yaml"])
            .env(var, "0.0.0.0:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("{key}: the service started on 0.0.0.0 in mode none");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(!status.success(), "{key}");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(stderr.contains("auth.mode") && stderr.contains("auth.allow_anonymous"), "{key}: {stderr}");
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}
