//! Unit tests of the value rules of SPEC §7, one test per rule, each asserting the key named.

use std::time::Duration;

use super::{fails_on, load_yaml, ok, refuses};
use crate::config::rules::sanitize_node_id;
use crate::config::*;

#[test]
fn bad_durations_fail_naming_the_key() {
    refuses("outbox_worker: {poll_interval: \"fast\"}\n", "outbox_worker.poll_interval");
    refuses("presence: {stale_after: \"5\"}\n", "presence.stale_after");
    refuses("tencent_im: {usersig_ttl: \"\"}\n", "tencent_im.usersig_ttl");
    let s = ok("outbox_worker: {poll_interval: \"250ms\", batch_size: 10, publish_timeout: \"1m 30s\"}\n");
    assert_eq!(s.outbox_worker.poll_interval, Duration::from_millis(250));
    assert_eq!(s.outbox_worker.publish_timeout, Duration::from_secs(90));
}

#[test]
fn bad_listen_address_fails_naming_the_key() {
    refuses("http: {listen: \"localhost\"}\n", "http.listen");
    refuses("http: {body_limit_bytes: 0}\n", "http.body_limit_bytes");
    refuses("http: {body_limit_bytes: -1}\n", "http.body_limit_bytes");
}

#[test]
fn database_url_scheme_and_pool_size_are_checked() {
    refuses("database: {url: \"postgres://u:p@h/db\"}\n", "database.url");
    refuses("database: {max_connections: 0}\n", "database.max_connections");
    let s = ok("database: {url: \"mariadb://u:p@h:3306/db\"}\n");
    assert_eq!(s.database.backend(), Backend::MySql);
    let s = ok("database: {url: \"mysql://u:pw@h:3306/db?ssl-mode=required\"}\n");
    assert_eq!(s.database.backend(), Backend::MySql);
    assert_eq!(s.database.redacted_url(), "mysql://u:***@h:3306/db?ssl-mode=required");
    // An unencoded '/', '?' or '#' in the password never leaks.
    let s = ok("database: {url: \"mysql://room:p/a?s#s@db:3306/x\"}\n");
    assert_eq!(s.database.redacted_url(), "mysql://room:***@db:3306/x");
}

#[test]
fn presence_durations_must_be_positive_when_enabled() {
    refuses("presence: {stale_after: \"0s\"}\n", "presence.stale_after");
    refuses("presence: {scan_interval: \"-1s\"}\n", "presence.scan_interval");
    assert!(!ok("presence: {enabled: false, stale_after: \"0s\"}\n").presence.enabled);
}

#[test]
fn log_format_and_level_are_checked() {
    refuses("log: {format: xml}\n", "log.format");
    refuses("log: {level: infoo}\n", "log.level");
    refuses("log: {level: \"\"}\n", "log.level");
    refuses("log: {level: \"sqlx=loud\"}\n", "log.level");
    let s = ok("log: {format: Pretty, level: \"info,sqlx=warn,room_service[cmd]=debug\"}\n");
    assert_eq!(s.log.format, LogFormat::Pretty);
    assert_eq!(s.log.level, "info,sqlx=warn,room_service[cmd]=debug");
}

#[test]
fn the_otlp_endpoint_and_sample_ratio_are_checked() {
    assert_eq!(ok("telemetry: {otlp: {sample_ratio: 0.5}}\n").telemetry.otlp, None, "no endpoint: no export");
    refuses("telemetry: {otlp: {endpoint: \"jaeger:4317\"}}\n", "telemetry.otlp.endpoint");
    refuses("telemetry: {otlp: {endpoint: \"https://tempo.example:4317\"}}\n", "telemetry.otlp.endpoint");
    refuses("telemetry: {otlp: {sample_ratio: 1.5}}\n", "telemetry.otlp.sample_ratio");
    refuses("telemetry: {otlp: {sample_ratio: -0.1}}\n", "telemetry.otlp.sample_ratio");
    refuses("telemetry: {otlp: {timeout: \"0s\"}}\n", "telemetry.otlp.timeout");
    refuses("telemetry: {otlp: {forced_per_sec: -1}}\n", "telemetry.otlp.forced_per_sec");
    refuses("telemetry: {otlp: {forced_per_sec: 100001}}\n", "telemetry.otlp.forced_per_sec");
    refuses("telemetry: {otlp: {max_queue_spans: 0}}\n", "telemetry.otlp.max_queue_spans");
    refuses("telemetry: {otlp: {max_queue_spans: 1048577}}\n", "telemetry.otlp.max_queue_spans");
    let s = ok("telemetry: {otlp: {endpoint: \"http://jaeger:4317/\", sample_ratio: 0.01}}\n");
    let otlp = s.telemetry.otlp.expect("exported");
    assert_eq!((otlp.endpoint.as_str(), otlp.sample_ratio), ("http://jaeger:4317", 0.01));
    assert_eq!(otlp.timeout, Duration::from_secs(10));
    assert_eq!((otlp.forced_per_sec, otlp.max_queue_spans), (20, 32_768));
    let s = ok("telemetry: {otlp: {endpoint: \"http://c:4317\", forced_per_sec: 0, max_queue_spans: 1}}\n");
    let otlp = s.telemetry.otlp.expect("exported");
    assert_eq!((otlp.forced_per_sec, otlp.max_queue_spans), (0, 1));
}

#[test]
fn node_id_is_checked_or_derived_from_the_hostname() {
    refuses("node_id: \"has space\"\n", "node_id");
    refuses(&format!("node_id: {}\n", "a".repeat(65)), "node_id");
    assert_eq!(ok("node_id: node-1.a_b\n").node_id, "node-1.a_b");
    assert_eq!(sanitize_node_id("my host/ü"), "my-host--");
    assert_eq!(sanitize_node_id(""), "room-service");
    assert_eq!(sanitize_node_id(&"x".repeat(100)).len(), 64);
}

#[test]
fn absurdly_long_durations_fail_naming_the_key() {
    refuses("outbox_worker: {poll_interval: \"100000y\"}\n", "outbox_worker.poll_interval");
    refuses("presence: {stale_after: \"5000y\"}\n", "presence.stale_after");
    assert_eq!(
        ok("outbox_worker: {retention: \"365d\"}\n").outbox_worker.retention,
        Some(Duration::from_secs(365 * 86400))
    );
}

#[test]
fn http_edge_keys_have_their_defaults_and_limits() {
    let s = ok("");
    assert_eq!(s.http.admin_listen.to_string(), "127.0.0.1:9091");
    assert_eq!(s.http.admin_token, None);
    assert_eq!(s.http.request_timeout, Duration::from_secs(10));
    assert_eq!(s.http.idle_timeout, Duration::from_secs(30));
    assert_eq!(s.http.shutdown_grace, Duration::ZERO);
    assert_eq!(s.http.shutdown_timeout, Duration::from_secs(10));
    assert_eq!((s.http.max_in_flight, s.http.max_connections), (512, 768));
    refuses("http: {max_in_flight: 0}\n", "http.max_in_flight");
    refuses("http: {max_connections: -5}\n", "http.max_connections");
    refuses("http: {request_timeout: \"0s\"}\n", "http.request_timeout");
    refuses("http: {shutdown_timeout: \"soon\"}\n", "http.shutdown_timeout");
    refuses("http: {admin_listen: \"nowhere\"}\n", "http.admin_listen");
    refuses("http: {admin_listen: \"127.0.0.1:8080\"}\n", "http.admin_listen");
    let message = refuses("http: {request_timeout: \"30s\", idle_timeout: \"30s\"}\n", "http.idle_timeout");
    assert!(message.contains("http.request_timeout"), "{message}");
}

#[test]
fn grpc_listen_has_its_default_and_must_be_its_own_address() {
    assert_eq!(ok("").grpc.listen.to_string(), "127.0.0.1:50051");
    let open = "grpc: {listen: \"0.0.0.0:7000\"}\nauth: {allow_anonymous: true}\n";
    assert_eq!(ok(open).grpc.listen.to_string(), "0.0.0.0:7000");
    refuses("grpc: {listen: \"nowhere\"}\n", "grpc.listen");
    refuses("grpc: {listen: \"127.0.0.1:8080\"}\n", "grpc.listen");
    refuses("grpc: {listen: \"127.0.0.1:9091\"}\n", "grpc.listen");
    // Port 0 (tests) may repeat: each bind picks its own port.
    ok("http: {listen: \"127.0.0.1:0\"}\ngrpc: {listen: \"127.0.0.1:0\"}\n");
}

#[test]
fn a_non_loopback_admin_listener_needs_a_token() {
    let message = refuses("http: {admin_listen: \"0.0.0.0:9091\"}\n", "http.admin_listen");
    assert!(message.contains("http.admin_token"), "{message}");
    refuses("http: {admin_listen: \"[::]:9091\"}\n", "http.admin_listen");
    // A whitespace-only token is no token.
    fails_on(
        "http: {admin_listen: \"0.0.0.0:9091\"}\n",
        &[("ROOM_SERVICE__HTTP__ADMIN_TOKEN", "  ")],
        "http.admin_listen",
    );
    let s = load_yaml(
        "http: {admin_listen: \"0.0.0.0:9091\"}\n",
        &[("ROOM_SERVICE__HTTP__ADMIN_TOKEN", "s3cret")],
    )
    .expect("a token allows any address");
    assert_eq!(s.http.admin_token.as_ref().map(crate::secret::Secret::expose), Some("s3cret"));
    assert!(!format!("{s:?}").contains("s3cret"), "Debug shows the token");
}

#[test]
fn config_check_renders_every_key_with_secrets_redacted() {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    std::io::Write::write_all(&mut file, b"database: {url: \"mysql://room:pw-in-url@db:3306/rooms\"}\n")
        .unwrap();
    let (settings, yaml) = crate::config::check_with_env(
        file.path(),
        vec![
            ("ROOM_SERVICE__HTTP__ADMIN_TOKEN".to_owned(), "tok-secret".to_owned()),
            ("ROOM_SERVICE__TENCENT_IM__SECRET_KEY".to_owned(), "im-secret".to_owned()),
        ],
    )
    .expect("valid");
    assert_eq!(settings.database.backend(), Backend::MySql);
    for secret in ["pw-in-url", "tok-secret", "im-secret"] {
        assert!(!yaml.contains(secret), "{secret} printed:\n{yaml}");
    }
    assert!(yaml.contains("mysql://room:***@db:3306/rooms"), "{yaml}");
    assert!(yaml.contains("admin_token: <redacted>"), "{yaml}");
    assert!(yaml.contains("max_commit_batch: 64"), "{yaml}");
    assert!(yaml.contains("sync_publish_wait: 1s"), "{yaml}");
    assert!(
        yaml.contains("im_batch:\n  in_flight_per_room: 1\n  max_bytes: 11000\n  max_events: 32\n"),
        "{yaml}"
    );
    assert!(yaml.contains(&format!("node_id: {}", settings.node_id)), "{yaml}");
}

#[test]
fn rooms_sync_publish_wait_defaults_to_1s_takes_zero_and_is_capped_at_10s() {
    let key = "rooms.sync_publish_wait";
    assert_eq!(ok("").rooms.sync_publish_wait, Duration::from_secs(1));
    assert_eq!(ok("rooms:\n").rooms.sync_publish_wait, Duration::from_secs(1));
    for never in ["\"0s\"", "0", "\"0ms\""] {
        let s = ok(&format!("rooms: {{sync_publish_wait: {never}}}\n"));
        assert_eq!(s.rooms.sync_publish_wait, Duration::ZERO, "{never}");
    }
    assert_eq!(
        ok("rooms: {sync_publish_wait: \"250ms\"}\n").rooms.sync_publish_wait,
        Duration::from_millis(250)
    );
    assert_eq!(ok("rooms: {sync_publish_wait: \"10s\"}\n").rooms.sync_publish_wait, MAX_SYNC_PUBLISH_WAIT);
    let message = refuses("rooms: {sync_publish_wait: \"10001ms\"}\n", key);
    assert!(message.contains("10s"), "{message}");
    refuses("rooms: {sync_publish_wait: \"1m\"}\n", key);
    refuses("rooms: {sync_publish_wait: \"-1s\"}\n", key);
    refuses("rooms: {sync_publish_wait: -5}\n", key);
    refuses("rooms: {sync_publish_wait: \"soon\"}\n", key);
    refuses("rooms: {sync_publish_wait: \"2\"}\n", key);
    let s = load_yaml(
        "rooms: {sync_publish_wait: \"2s\"}\n",
        &[("ROOM_SERVICE__ROOMS__SYNC_PUBLISH_WAIT", "300ms")],
    )
    .expect("env override");
    assert_eq!(s.rooms.sync_publish_wait, Duration::from_millis(300));
    assert_eq!(s.rooms.max_commit_batch, 64);
    let message = fails_on("", &[("ROOM_SERVICE__ROOMS__SYNC_PUBLISH_WAIT", "11s")], key);
    assert!(message.contains("ROOM_SERVICE__ROOMS__SYNC_PUBLISH_WAIT"), "{message}");
}

const MYSQL: &str = "database: {url: \"mysql://root@127.0.0.1:3306/test\"}\n";

#[test]
fn cluster_needs_a_shared_mysql_database_and_an_advertised_url() {
    refuses("cluster: {enabled: true, advertise_url: \"http://127.0.0.1:8080\"}\n", "cluster.enabled");
    refuses(&format!("{MYSQL}cluster: {{enabled: true}}\n"), "cluster.advertise_url");
    refuses(
        &format!("{MYSQL}cluster: {{enabled: true, advertise_url: \"tcp://x\"}}\n"),
        "cluster.advertise_url",
    );
    refuses("cluster: {expected_nodes: 0}\n", "cluster.expected_nodes");
    refuses("cluster: {lease_ttl: \"10m\"}\n", "cluster.lease_ttl");
    let cluster = "cluster: {enabled: true, advertise_url: \"http://10.0.0.5:8080/\", expected_nodes: 3}\n";
    let secret = ("ROOM_SERVICE__CLUSTER__SECRET", "0123456789abcdef0123456789abcdef");
    let message = fails_on(&format!("{MYSQL}{cluster}"), &[], "cluster.secret");
    assert!(message.contains("ROOM_SERVICE__CLUSTER__SECRET"), "{message}");
    fails_on(
        &format!("{MYSQL}{cluster}"),
        &[("ROOM_SERVICE__CLUSTER__SECRET", "too short")],
        "cluster.secret",
    );
    fails_on(
        &format!("{MYSQL}{cluster}"),
        &[secret, ("ROOM_SERVICE__CLUSTER__SECRET_PREVIOUS", "short")],
        "cluster.secret_previous",
    );
    // From a file never, even a good one; and it is never echoed.
    let in_file = "cluster: {secret: \"0123456789abcdef0123456789abcdef-file\"}\n";
    let message = fails_on(in_file, &[], "cluster.secret");
    assert!(message.contains("environment") && !message.contains("abcdef"), "{message}");
    let s = load_yaml(&format!("{MYSQL}{cluster}"), &[secret]).expect("a cluster with its secret");
    assert_eq!(s.cluster.hop_secrets.signing.expose(), secret.1);
    assert!(!format!("{:?}", s.cluster).contains(secret.1), "never printed");
    assert!(s.cluster.enabled);
    assert_eq!(s.cluster.advertise_url, "http://10.0.0.5:8080");
    assert_eq!(s.cluster.expected_nodes, 3);
    assert_eq!(s.cluster.renew_every(), Duration::from_secs(3));
    assert_eq!(s.cluster.self_fence_after(), Duration::from_secs(7));
}

#[test]
fn redis_url_is_checked_and_never_echoed() {
    let message = refuses("redis: {url: \"http://:hunter2@cache:6379\"}\n", "redis.url");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(ok("").redis.is_none());
    let s = load_yaml("", &[("ROOM_SERVICE__REDIS__URL", "redis://:pw@127.0.0.1:6379/0")]).expect("valid");
    assert_eq!(s.redis.map(|r| r.url.expose().to_owned()).as_deref(), Some("redis://:pw@127.0.0.1:6379/0"));
}

#[test]
fn an_enabled_wallet_needs_its_url() {
    refuses("wallet: {enabled: true}\n", "wallet.base_url");
    refuses("wallet: {timeout: \"0s\"}\n", "wallet.timeout");
    let s = ok("wallet: {enabled: true, base_url: \"http://127.0.0.1:7000/\", timeout: \"500ms\"}\n");
    assert_eq!(s.wallet.base_url, "http://127.0.0.1:7000");
    assert_eq!(s.wallet.timeout, Duration::from_millis(500));
}

#[test]
fn rooms_history_defaults_to_1000_events_and_10m_and_refuses_what_is_out_of_range() {
    let history = ok("").rooms.history;
    assert_eq!((history.max_events, history.max_age), (1000, Duration::from_secs(600)));
    let set = ok("rooms: {history: {max_events: 100000, max_age: \"1h\"}}\n").rooms.history;
    assert_eq!((set.max_events, set.max_age), (100_000, Duration::from_secs(3600)));
    for events in ["0", "-1", "1000001"] {
        refuses(&format!("rooms: {{history: {{max_events: {events}}}}}\n"), "rooms.history.max_events");
    }
    for age in ["\"0s\"", "\"-1m\"", "\"8d\"", "\"soon\""] {
        refuses(&format!("rooms: {{history: {{max_age: {age}}}}}\n"), "rooms.history.max_age");
    }
    refuses("rooms: {history: {max_rows: 5}}\n", "rooms.history.max_rows");
}
