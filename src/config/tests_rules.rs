//! Unit tests of the value rules of SPEC §7, one test per rule, each asserting the key named.

use std::time::Duration;

use super::rules::sanitize_node_id;
use super::tests::{IM_ON, fails_on, load_yaml, ok};
use super::*;

#[test]
fn bad_durations_fail_naming_the_key() {
    fails_on("outbox_worker: {poll_interval: \"fast\"}\n", &[], "outbox_worker.poll_interval");
    fails_on("presence: {stale_after: \"5\"}\n", &[], "presence.stale_after");
    fails_on("tencent_im: {usersig_ttl: \"\"}\n", &[], "tencent_im.usersig_ttl");
    let s = ok("outbox_worker: {poll_interval: \"250ms\", batch_size: 10, publish_timeout: \"1m 30s\"}\n");
    assert_eq!(s.outbox_worker.poll_interval, Duration::from_millis(250));
    assert_eq!(s.outbox_worker.publish_timeout, Duration::from_secs(90));
}

#[test]
fn bad_listen_address_fails_naming_the_key() {
    fails_on("http: {listen: \"localhost\"}\n", &[], "http.listen");
    fails_on("http: {body_limit_bytes: 0}\n", &[], "http.body_limit_bytes");
    fails_on("http: {body_limit_bytes: -1}\n", &[], "http.body_limit_bytes");
}

#[test]
fn retry_strategy_is_fixed_interval_or_exponential() {
    let key = "outbox_worker.retry_strategy";
    let message = fails_on("outbox_worker: {retry_strategy: linear}\n", &[], key);
    assert!(message.contains("linear") && message.contains("exponential"), "{message}");
    let s = ok("outbox_worker: {retry_strategy: \"\"}\n");
    assert_eq!(s.outbox_worker.retry_strategy, RetryStrategy::FixedInterval);
    let s = ok("outbox_worker: {retry_strategy: exponential, retry_base: \"2s\", retry_max: \"1m\"}\n");
    assert_eq!(s.outbox_worker.retry_strategy, RetryStrategy::Exponential);
    assert_eq!(
        (s.outbox_worker.retry_base, s.outbox_worker.retry_max),
        (Duration::from_secs(2), Duration::from_secs(60))
    );
}

#[test]
fn delivery_policy_values_are_checked_by_key() {
    fails_on("outbox_worker: {retry_base: \"2m\", retry_max: \"1m\"}\n", &[], "outbox_worker.retry_max");
    fails_on("outbox_worker: {retry_base: \"0s\"}\n", &[], "outbox_worker.retry_base");
    fails_on("outbox_worker: {max_attempts: -1}\n", &[], "outbox_worker.max_attempts");
    fails_on("outbox_worker: {rate_limit_pause: \"0s\"}\n", &[], "outbox_worker.rate_limit_pause");
    fails_on("outbox_worker: {config_error_pause: \"soon\"}\n", &[], "outbox_worker.config_error_pause");
    fails_on("im_rate_limit: {global_per_sec: 0}\n", &[], "im_rate_limit.global_per_sec");
    fails_on("im_rate_limit: {per_group_per_sec: 500}\n", &[], "im_rate_limit.per_group_per_sec");
    fails_on("im_rate_limit: {worker_share: 1.5}\n", &[], "im_rate_limit.worker_share");
    fails_on("im_rate_limit: {worker_share: 0}\n", &[], "im_rate_limit.worker_share");
    let s = ok(
        "im_rate_limit: {global_per_sec: 100, per_group_per_sec: 10, worker_share: 0.5}\noutbox_worker: {max_attempts: 5}\n",
    );
    assert_eq!((s.im_rate_limit.global_per_sec, s.im_rate_limit.per_group_per_sec), (100, 10));
    assert_eq!((s.im_rate_limit.worker_share, s.outbox_worker.max_attempts), (0.5, 5));
}

#[test]
fn non_positive_outbox_values_become_defaults() {
    for (poll, batch, timeout) in
        [("\"0s\"", "0", "\"-1s\""), ("0", "-5", "-3"), ("\"-2ms\"", "-1", "\"0ms\"")]
    {
        let yaml = format!(
            "outbox_worker: {{poll_interval: {poll}, batch_size: {batch}, publish_timeout: {timeout}}}\n"
        );
        let ow = ok(&yaml).outbox_worker;
        assert_eq!(ow.poll_interval, DEFAULT_POLL_INTERVAL, "{yaml}");
        assert_eq!(ow.batch_size, DEFAULT_BATCH_SIZE, "{yaml}");
        assert_eq!(ow.publish_timeout, DEFAULT_PUBLISH_TIMEOUT, "{yaml}");
    }
}

#[test]
fn batch_size_above_the_maximum_fails_and_the_maximum_passes() {
    fails_on("outbox_worker: {batch_size: 1001}\n", &[], "outbox_worker.batch_size");
    assert_eq!(ok("outbox_worker: {batch_size: 1000}\n").outbox_worker.batch_size, MAX_BATCH_SIZE);
}

#[test]
fn the_lease_outlasts_three_publishes_whatever_the_batch() {
    // Leases are renewed while a claim holds rows, so a large batch needs no long lease.
    let s = ok("outbox_worker: {batch_size: 1000, publish_timeout: \"4s\"}\n");
    assert_eq!(s.outbox_worker.lease(), Duration::from_secs(12));
}

#[test]
fn enabled_im_requires_its_keys() {
    fails_on(IM_ON, &[], "tencent_im.secret_key");
    let env = [("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "  k3y \n")];
    let s = load_yaml(IM_ON, &env).expect("valid with the secret from env");
    assert_eq!(s.tencent_im.secret_key.expose(), "k3y");
    let yaml = "tencent_im: {enabled: true, sdk_app_id: 0, admin_identifier: \"\", base_url: \"ftp://x\"}\n";
    let error = load_yaml(yaml, &env).expect_err("three problems");
    assert_eq!(error.keys(), ["tencent_im.base_url", "tencent_im.sdk_app_id", "tencent_im.admin_identifier"]);
    fails_on("tencent_im: {enabled: true, base_url: \"not a url\"}\n", &env, "tencent_im.base_url");
    fails_on("tencent_im: {usersig_ttl: \"59s\"}\n", &[], "tencent_im.usersig_ttl");
    fails_on("tencent_im: {group_id_prefix: \"@TGS#x\"}\n", &[], "tencent_im.group_id_prefix");
    // Disabled IM accepts the placeholders.
    assert!(!ok("tencent_im: {enabled: false, sdk_app_id: 0}\n").tencent_im.enabled);
}

#[test]
fn database_url_scheme_and_pool_size_are_checked() {
    fails_on("database: {url: \"postgres://u:p@h/db\"}\n", &[], "database.url");
    fails_on("database: {max_connections: 0}\n", &[], "database.max_connections");
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
    fails_on("presence: {stale_after: \"0s\"}\n", &[], "presence.stale_after");
    fails_on("presence: {scan_interval: \"-1s\"}\n", &[], "presence.scan_interval");
    assert!(!ok("presence: {enabled: false, stale_after: \"0s\"}\n").presence.enabled);
}

#[test]
fn log_format_and_level_are_checked() {
    fails_on("log: {format: xml}\n", &[], "log.format");
    fails_on("log: {level: infoo}\n", &[], "log.level");
    fails_on("log: {level: \"\"}\n", &[], "log.level");
    fails_on("log: {level: \"sqlx=loud\"}\n", &[], "log.level");
    let s = ok("log: {format: Pretty, level: \"info,sqlx=warn,room_service[cmd]=debug\"}\n");
    assert_eq!(s.log.format, LogFormat::Pretty);
    assert_eq!(s.log.level, "info,sqlx=warn,room_service[cmd]=debug");
}

#[test]
fn node_id_is_checked_or_derived_from_the_hostname() {
    fails_on("node_id: \"has space\"\n", &[], "node_id");
    fails_on(&format!("node_id: {}\n", "a".repeat(65)), &[], "node_id");
    assert_eq!(ok("node_id: node-1.a_b\n").node_id, "node-1.a_b");
    assert_eq!(sanitize_node_id("my host/ü"), "my-host--");
    assert_eq!(sanitize_node_id(""), "room-service");
    assert_eq!(sanitize_node_id(&"x".repeat(100)).len(), 64);
}

#[test]
fn retention_is_off_when_empty_or_non_positive_and_fails_when_bad_or_tiny() {
    let key = "outbox_worker.retention";
    for off in ["\"\"", "\"0s\"", "0", "\"-1h\"", "\"  \""] {
        let s = ok(&format!("outbox_worker: {{retention: {off}}}\n"));
        assert_eq!(s.outbox_worker.retention, None, "{off}");
    }
    let s = ok("outbox_worker: {retention: \"7d\"}\n");
    assert_eq!(s.outbox_worker.retention, Some(Duration::from_secs(7 * 24 * 3600)));
    let s = ok("outbox_worker: {retention: \"90m\"}\n");
    assert_eq!(s.outbox_worker.retention, Some(Duration::from_secs(90 * 60)));
    fails_on("outbox_worker: {retention: \"a week\"}\n", &[], key);
    fails_on("outbox_worker: {retention: \"7\"}\n", &[], key);
    let message = fails_on("outbox_worker: {retention: \"30s\"}\n", &[], key);
    assert!(message.contains("1m"), "{message}");
    let s = load_yaml("", &[("ROOM_SERVICE__OUTBOX_WORKER__RETENTION", "2d")]).expect("env override");
    assert_eq!(s.outbox_worker.retention, Some(Duration::from_secs(2 * 24 * 3600)));
}

#[test]
fn stats_interval_defaults_and_non_positive_means_the_default() {
    assert_eq!(ok("{}\n").outbox_worker.stats_interval, Duration::from_secs(5));
    assert_eq!(
        ok("outbox_worker: {stats_interval: \"250ms\"}\n").outbox_worker.stats_interval,
        Duration::from_millis(250)
    );
    assert_eq!(
        ok("outbox_worker: {stats_interval: \"0s\"}\n").outbox_worker.stats_interval,
        Duration::from_secs(5)
    );
    fails_on("outbox_worker: {stats_interval: \"soon\"}\n", &[], "outbox_worker.stats_interval");
}

#[test]
fn max_in_flight_defaults_and_is_capped() {
    assert_eq!(ok("{}\n").outbox_worker.max_in_flight, 8);
    assert_eq!(ok("outbox_worker: {max_in_flight: 3}\n").outbox_worker.max_in_flight, 3);
    assert_eq!(ok("outbox_worker: {max_in_flight: 0}\n").outbox_worker.max_in_flight, 8);
    assert_eq!(ok("outbox_worker: {max_in_flight: -2}\n").outbox_worker.max_in_flight, 8);
    fails_on("outbox_worker: {max_in_flight: 65}\n", &[], "outbox_worker.max_in_flight");
}

#[test]
fn absurdly_long_durations_fail_naming_the_key() {
    fails_on("outbox_worker: {poll_interval: \"100000y\"}\n", &[], "outbox_worker.poll_interval");
    fails_on("presence: {stale_after: \"5000y\"}\n", &[], "presence.stale_after");
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
    fails_on("http: {max_in_flight: 0}\n", &[], "http.max_in_flight");
    fails_on("http: {max_connections: -5}\n", &[], "http.max_connections");
    fails_on("http: {request_timeout: \"0s\"}\n", &[], "http.request_timeout");
    fails_on("http: {shutdown_timeout: \"soon\"}\n", &[], "http.shutdown_timeout");
    fails_on("http: {admin_listen: \"nowhere\"}\n", &[], "http.admin_listen");
    fails_on("http: {admin_listen: \"127.0.0.1:8080\"}\n", &[], "http.admin_listen");
    let message =
        fails_on("http: {request_timeout: \"30s\", idle_timeout: \"30s\"}\n", &[], "http.idle_timeout");
    assert!(message.contains("http.request_timeout"), "{message}");
}

#[test]
fn grpc_listen_has_its_default_and_must_be_its_own_address() {
    assert_eq!(ok("").grpc.listen.to_string(), "127.0.0.1:50051");
    assert_eq!(ok("grpc: {listen: \"0.0.0.0:7000\"}\n").grpc.listen.to_string(), "0.0.0.0:7000");
    fails_on("grpc: {listen: \"nowhere\"}\n", &[], "grpc.listen");
    fails_on("grpc: {listen: \"127.0.0.1:8080\"}\n", &[], "grpc.listen");
    fails_on("grpc: {listen: \"127.0.0.1:9091\"}\n", &[], "grpc.listen");
    // Port 0 (tests) may repeat: each bind picks its own port.
    ok("http: {listen: \"127.0.0.1:0\"}\ngrpc: {listen: \"127.0.0.1:0\"}\n");
}

#[test]
fn a_non_loopback_admin_listener_needs_a_token() {
    let message = fails_on("http: {admin_listen: \"0.0.0.0:9091\"}\n", &[], "http.admin_listen");
    assert!(message.contains("http.admin_token"), "{message}");
    fails_on("http: {admin_listen: \"[::]:9091\"}\n", &[], "http.admin_listen");
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
    let (settings, yaml) = super::check_with_env(
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
    assert!(yaml.contains(&format!("node_id: {}", settings.node_id)), "{yaml}");
}

const MYSQL: &str = "database: {url: \"mysql://root@127.0.0.1:3306/test\"}\n";

#[test]
fn cluster_needs_a_shared_mysql_database_and_an_advertised_url() {
    fails_on("cluster: {enabled: true, advertise_url: \"http://127.0.0.1:8080\"}\n", &[], "cluster.enabled");
    fails_on(&format!("{MYSQL}cluster: {{enabled: true}}\n"), &[], "cluster.advertise_url");
    fails_on(
        &format!("{MYSQL}cluster: {{enabled: true, advertise_url: \"tcp://x\"}}\n"),
        &[],
        "cluster.advertise_url",
    );
    fails_on("cluster: {expected_nodes: 0}\n", &[], "cluster.expected_nodes");
    fails_on("cluster: {lease_ttl: \"10m\"}\n", &[], "cluster.lease_ttl");
    let s = ok(&format!(
        "{MYSQL}cluster: {{enabled: true, advertise_url: \"http://10.0.0.5:8080/\", expected_nodes: 3}}\n"
    ));
    assert!(s.cluster.enabled);
    assert_eq!(s.cluster.advertise_url, "http://10.0.0.5:8080");
    assert_eq!(s.cluster.expected_nodes, 3);
    assert_eq!(s.cluster.renew_every(), Duration::from_secs(3));
    assert_eq!(s.cluster.self_fence_after(), Duration::from_secs(7));
}

#[test]
fn redis_url_is_checked_and_never_echoed() {
    let message = fails_on("redis: {url: \"http://:hunter2@cache:6379\"}\n", &[], "redis.url");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(ok("").redis.is_none());
    let s = load_yaml("", &[("ROOM_SERVICE__REDIS__URL", "redis://:pw@127.0.0.1:6379/0")]).expect("valid");
    assert_eq!(s.redis.map(|r| r.url.expose().to_owned()).as_deref(), Some("redis://:pw@127.0.0.1:6379/0"));
}

#[test]
fn an_enabled_wallet_needs_its_url() {
    fails_on("wallet: {enabled: true}\n", &[], "wallet.base_url");
    fails_on("wallet: {timeout: \"0s\"}\n", &[], "wallet.timeout");
    let s = ok("wallet: {enabled: true, base_url: \"http://127.0.0.1:7000/\", timeout: \"500ms\"}\n");
    assert_eq!(s.wallet.base_url, "http://127.0.0.1:7000");
    assert_eq!(s.wallet.timeout, Duration::from_millis(500));
}

#[test]
fn an_enabled_webhook_needs_a_url_without_credentials_and_a_secret() {
    const HOOK: &str = "url: \"http://hooks:8000/rooms\", secret: \"s3cret\"";
    fails_on("consumers: {webhook: {enabled: true, secret: \"s\"}}\n", &[], "consumers.webhook.url");
    fails_on("consumers: {webhook: {enabled: true, url: \"http://h/x\"}}\n", &[], "consumers.webhook.secret");
    let message = fails_on(
        "consumers: {webhook: {enabled: true, url: \"http://u:hunter2@h/x\", secret: \"s\"}}\n",
        &[],
        "consumers.webhook.url",
    );
    assert!(!message.contains("hunter2"), "{message}");
    fails_on(
        &format!("consumers: {{webhook: {{enabled: true, {HOOK}, event_types: [Nope]}}}}\n"),
        &[],
        "consumers.webhook.event_types",
    );
    fails_on(
        &format!("consumers: {{webhook: {{enabled: true, {HOOK}, batch_size: 0}}}}\n"),
        &[],
        "consumers.webhook.batch_size",
    );
    fails_on("consumers: {audit: {rate_limit_per_sec: -1}}\n", &[], "consumers.audit.rate_limit_per_sec");
    fails_on("consumers: {gap_grace: \"0s\"}\n", &[], "consumers.gap_grace");
    let s = ok(&format!(
        "consumers: {{webhook: {{enabled: true, {HOOK}, event_types: [RoomGiftSent, RoomClosed]}}}}\n"
    ));
    let webhook = s.consumers.webhook.clone().expect("enabled");
    assert_eq!(webhook.url, "http://hooks:8000/rooms");
    assert_eq!(webhook.secret.expose(), "s3cret");
    assert_eq!(
        webhook.consumer.event_types,
        [crate::domain::EventType::RoomGiftSent, crate::domain::EventType::RoomClosed]
    );
    assert_eq!(webhook.consumer.rate_limit_per_sec, Some(500));
    assert!(s.consumers.audit.is_none());
    assert_eq!(s.consumers.enabled_names(), ["webhook"]);
    assert!(!format!("{:?}", s.consumers).contains("s3cret"), "the secret is redacted");
}

#[test]
fn consumer_event_types_come_from_the_environment_as_one_string() {
    for value in ["RoomGiftSent,RoomClosed", "[RoomGiftSent, RoomClosed]"] {
        let s = load_yaml(
            "",
            &[
                ("ROOM_SERVICE__CONSUMERS__AUDIT__EVENT_TYPES", value),
                ("ROOM_SERVICE__CONSUMERS__AUDIT__ENABLED", "true"),
            ],
        )
        .expect("valid");
        let audit = s.consumers.audit.expect("enabled");
        assert_eq!(
            audit.event_types,
            [crate::domain::EventType::RoomGiftSent, crate::domain::EventType::RoomClosed],
            "{value}"
        );
        assert_eq!(audit.rate_limit_per_sec, None, "0 is unlimited");
    }
}
