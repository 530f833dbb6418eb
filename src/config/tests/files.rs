//! Loads the three files shipped in `config/` (SPEC §7) with the environment they expect and
//! checks their key values, so a broken or drifting shipped file fails the build.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::*;

const SECRET_VAR: &str = "ROOM_SERVICE__TENCENT_IM__SECRET_KEY";

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config").join(name)
}

fn with_secret() -> Vec<(String, String)> {
    vec![(SECRET_VAR.to_owned(), "test-secret-key".to_owned())]
}

#[test]
fn local_config_uses_sqlite_and_no_im() {
    let s = load_with_env(&shipped("config.yaml"), Vec::new()).expect("config.yaml is valid");
    assert_eq!(s.http.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(s.auth, AuthSettings::default());
    assert_eq!(s.database.url.expose(), "sqlite://data/room-service.db?mode=rwc");
    assert_eq!(s.database.backend(), Backend::Sqlite);
    assert_eq!(s.tencent_im, None);
    assert!(s.outbox_worker.enabled);
    assert_eq!(s.outbox_worker.publish_timeout, Duration::from_secs(3));
    assert_eq!(s.outbox_worker.retention, Some(Duration::from_secs(7 * 24 * 3600)));
    assert_eq!(s.im_batch, ImBatchSettings { max_events: 32, max_bytes: 11_000, in_flight_per_room: 1 });
    assert_eq!(s.rooms.sync_publish_wait, Duration::from_secs(1));
    assert_eq!(s.source, ConfigSource::File(shipped("config.yaml")));
}

#[test]
fn docker_config_uses_compose_services_and_needs_the_secret_from_env() {
    let path = shipped("config.docker.yaml");
    let error = load_with_env(&path, Vec::new()).expect_err("IM enabled without the key");
    // The admin listener is reachable from the compose network: it needs its token too.
    assert_eq!(error.keys(), ["http.admin_listen", "tencent_im.secret_key"]);

    let mut env = with_secret();
    env.push(("ROOM_SERVICE__HTTP__ADMIN_TOKEN".to_owned(), "test-admin-token".to_owned()));
    let s = load_with_env(&path, env).expect("config.docker.yaml is valid");
    assert_eq!(s.http.listen.to_string(), "0.0.0.0:8080");
    assert_eq!(s.http.admin_listen.to_string(), "0.0.0.0:9091");
    assert_eq!(s.http.shutdown_grace, Duration::from_secs(5));
    assert_eq!(s.database.url.expose(), "mysql://room:room@mysql:3306/room_service");
    assert_eq!(s.database.backend(), Backend::MySql);
    let im = s.tencent_im.as_ref().expect("IM on");
    assert_eq!(im.base_url, "http://fake-im:9000");
    assert_eq!(im.sdk_app_id, 1_400_000_000);
    assert_eq!(im.secret_key.expose(), "test-secret-key");
    assert_eq!(s.outbox_worker.retention, Some(Duration::from_secs(7 * 24 * 3600)));
    assert_eq!(s.outbox_worker.retry_strategy, crate::config::RetryStrategy::Exponential);
    assert_eq!(s.log.format, LogFormat::Json);
    // The demo says it runs without authentication, on purpose.
    assert_eq!((&s.auth.mode, s.auth.allow_anonymous), (&AuthMode::None, true));
}

#[test]
fn tencent_example_points_at_tencent_and_needs_the_secret_from_env() {
    let path = shipped("config.tencent.example.yaml");
    let error = load_with_env(&path, Vec::new()).expect_err("IM enabled without the key");
    assert_eq!(error.keys(), ["tencent_im.secret_key"]);

    let s = load_with_env(&path, with_secret()).expect("the Tencent example is valid");
    let im = s.tencent_im.as_ref().expect("IM on");
    assert_eq!(im.base_url, "https://console.tim.qq.com");
    assert!(im.sdk_app_id > 0);
    assert_eq!(im.admin_identifier, "administrator");
    assert_eq!(im.usersig_ttl, Duration::from_secs(24 * 3600));
    assert_eq!(s.outbox_worker.retention, Some(Duration::from_secs(7 * 24 * 3600)));
    assert_eq!(s.outbox_worker.retry_strategy, crate::config::RetryStrategy::Exponential);
    assert_eq!(s.database.backend(), Backend::MySql);
    // Clients send the UserSig they log in to IM with.
    let AuthMode::UserSig(sig) = &s.auth.mode else { panic!("usersig expected: {:?}", s.auth.mode) };
    assert_eq!(sig.sdk_app_id, im.sdk_app_id);
}

#[test]
fn every_shipped_file_sets_and_documents_every_key() {
    let sections = [
        "http",
        "grpc",
        "auth",
        "  jwt",
        "database",
        "tencent_im",
        "im_rate_limit",
        "im_batch",
        "outbox_worker",
        "rooms",
        "  history",
        "  members",
        "presence",
        "log",
        "telemetry",
        "  otlp",
        "cluster",
        "redis",
        "wallet",
        "consumers",
        "  webhook",
        "  audit",
    ];
    for name in ["config.yaml", "config.docker.yaml", "config.tencent.example.yaml"] {
        let text = std::fs::read_to_string(shipped(name)).expect("shipped file is readable");
        let lines: Vec<&str> = text.lines().collect();
        let mut leaves = 0;
        for (i, line) in lines.iter().enumerate() {
            let Some((key, _)) = line.split_once(':') else {
                continue;
            };
            if line.trim_start().starts_with('#') || sections.contains(&key) {
                continue;
            }
            leaves += 1;
            let above = i.checked_sub(1).and_then(|j| lines.get(j)).map(|l| l.trim_start());
            assert!(above.is_some_and(|l| l.starts_with('#')), "{name}: `{line}` has no comment");
        }
        let keys = crate::config::raw::default_keys().len();
        assert_eq!(leaves, keys, "{name} must set all {keys} keys explicitly");
    }
}
