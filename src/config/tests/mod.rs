//! Unit tests of loading (defaults, file, environment overrides, unknown keys, secrets), on YAML
//! written to temporary files and an injected environment. Beside them: the value rules
//! (`rules.rs`), authentication (`auth.rs`), delivery (`delivery.rs`), the config files shipped
//! (`files.rs`) and the documentation of every key (`docs.rs`).

mod auth;
mod delivery;
mod docs;
mod files;
mod rules;

use std::io::Write;
use std::time::Duration;

use super::rules::is_valid_node_id;
use super::*;

/// Loads `yaml` from a temporary file with `env` as the environment.
pub(super) fn load_yaml(yaml: &str, env: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(yaml.as_bytes()).expect("write temp file");
    let vars = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    load_with_env(file.path(), vars)
}

pub(super) fn ok(yaml: &str) -> Settings {
    match load_yaml(yaml, &[]) {
        Ok(settings) => settings,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

/// Asserts that loading fails, that `key` is among the keys named, and that the message
/// mentions it; returns the message.
pub(super) fn fails_on(yaml: &str, env: &[(&str, &str)], key: &str) -> String {
    let error = load_yaml(yaml, env).expect_err("expected the config to be refused");
    let message = error.to_string();
    assert!(error.keys().contains(&key), "keys {:?} lack {key}: {message}", error.keys());
    assert!(message.contains(&format!("`{key}`")), "message does not name {key}: {message}");
    message
}

/// [`fails_on`] without environment overrides.
pub(super) fn refuses(yaml: &str, key: &str) -> String {
    fails_on(yaml, &[], key)
}

pub(super) const IM_ON: &str =
    "tencent_im: {enabled: true, sdk_app_id: 1400000000, base_url: \"http://127.0.0.1:9000\"}\n";

#[test]
fn enabled_im_takes_the_spec_defaults_for_what_it_leaves_out() {
    let env = [("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "k")];
    let s = load_yaml("tencent_im: {enabled: true, sdk_app_id: 1400000000}\n", &env).expect("valid");
    let im = s.tencent_im.expect("IM on");
    assert_eq!(im.base_url, "https://console.tim.qq.com");
    assert_eq!((im.sdk_app_id, im.admin_identifier.as_str()), (1_400_000_000, "administrator"));
    assert!(im.group_id_prefix.is_empty());
    assert_eq!(im.usersig_ttl, Duration::from_secs(24 * 3600));
}

#[test]
fn empty_file_gives_the_spec_defaults() {
    for yaml in ["", "{}\n", "# only a comment\n"] {
        let s = ok(yaml);
        assert!(is_valid_node_id(&s.node_id), "node id {:?}", s.node_id);
        assert_eq!(s.http.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(s.http.body_limit_bytes, 65_536);
        assert_eq!(s.database.url.expose(), "sqlite://data/room-service.db?mode=rwc");
        assert_eq!(s.database.backend(), Backend::Sqlite);
        assert_eq!((s.database.max_connections, s.database.run_migrations), (16, true));
        assert_eq!(s.tencent_im, None, "IM is off");
        let ow = &s.outbox_worker;
        assert!(ow.enabled);
        assert_eq!((ow.poll_interval, ow.batch_size), (Duration::from_secs(1), 500));
        assert_eq!(ow.publish_timeout, Duration::from_secs(3));
        assert_eq!(ow.retry_strategy, RetryStrategy::FixedInterval);
        assert_eq!(ow.retention, None, "retention is off unless configured");
        assert_eq!(ow.lease(), Duration::from_secs(10), "three publish timeouts, at least 10s");
        assert_eq!(
            (ow.retry_base, ow.retry_max, ow.max_attempts),
            (Duration::from_secs(1), Duration::from_secs(300), 0)
        );
        assert_eq!(
            (ow.rate_limit_pause, ow.config_error_pause),
            (Duration::from_secs(1), Duration::from_secs(30))
        );
        let limits = &s.im_rate_limit;
        assert_eq!((limits.global_per_sec, limits.per_group_per_sec, limits.worker_share), (190, 35, 0.8));
        assert!(s.presence.enabled);
        assert_eq!(s.presence.stale_after, Duration::from_secs(60));
        assert_eq!(s.presence.scan_interval, Duration::from_secs(10));
        assert_eq!((s.log.format, s.log.level.as_str()), (LogFormat::Json, "info"));
        assert!(matches!(s.source, ConfigSource::File(_)));
    }
}

#[test]
fn empty_sections_mean_defaults() {
    let s = ok("http:\noutbox_worker:\n");
    assert_eq!(s.http.body_limit_bytes, 65_536);
    assert_eq!(s.outbox_worker.batch_size, 500);
}

#[test]
fn missing_explicit_file_fails_naming_the_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nope.yaml");
    let error = load_with_env(&path, Vec::new()).expect_err("missing file must fail");
    assert_eq!(error, ConfigError::FileNotFound { path: path.clone() });
    assert!(error.to_string().contains(&path.display().to_string()));
}

#[test]
fn missing_default_file_falls_back_to_defaults_with_env_applied() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("config.yaml");
    let env = [("ROOM_SERVICE__HTTP__BODY_LIMIT_BYTES".to_owned(), "1024".to_owned())];
    let (s, _) = super::load_from(&path, true, env).expect("defaults are valid");
    assert_eq!(s.source, ConfigSource::Defaults);
    assert_eq!(s.http.body_limit_bytes, 1024);
    assert_eq!(s.http.listen.to_string(), "127.0.0.1:8080");
}

#[test]
fn env_overrides_win_over_the_file_and_are_typed_per_key() {
    let yaml = format!(
        "node_id: from-file\nhttp: {{listen: \"127.0.0.1:1\"}}\noutbox_worker: {{batch_size: 5}}\n{IM_ON}"
    );
    let env = [
        ("ROOM_SERVICE__NODE_ID", "from-env"),
        ("ROOM_SERVICE__HTTP__LISTEN", "0.0.0.0:9999"),
        ("ROOM_SERVICE__AUTH__ALLOW_ANONYMOUS", "true"),
        ("ROOM_SERVICE__OUTBOX_WORKER__BATCH_SIZE", "7"),
        ("ROOM_SERVICE__OUTBOX_WORKER__ENABLED", "false"),
        ("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "123456"),
        ("ROOM_SERVICE__LOG__FORMAT", "pretty"),
        ("OTHER_APP__NODE_ID", "ignored"),
    ];
    let s = load_yaml(&yaml, &env).expect("valid");
    assert_eq!(s.node_id, "from-env");
    assert_eq!(s.http.listen.to_string(), "0.0.0.0:9999");
    assert_eq!(s.outbox_worker.batch_size, 7);
    assert!(!s.outbox_worker.enabled);
    let im = s.tencent_im.expect("IM on");
    assert_eq!(im.secret_key.expose(), "123456", "a numeric secret stays a string");
    assert_eq!(s.log.format, LogFormat::Pretty);
}

#[test]
fn unknown_top_level_key_fails_naming_it() {
    refuses("node_id: a\nlisten: \"0.0.0.0:1\"\n", "listen");
}

#[test]
fn unknown_nested_key_fails_naming_it() {
    refuses("http:\n  listn: \"0.0.0.0:1\"\n", "http.listn");
    let message = fails_on("", &[("ROOM_SERVICE__HTTP__LISTN", "x")], "http.listn");
    assert!(message.contains("ROOM_SERVICE__HTTP__LISTN"), "{message}");
    fails_on("", &[("ROOM_SERVICE__NOPE", "x")], "nope");
}

#[test]
fn secrets_never_reach_debug_or_errors() {
    let env = [
        ("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "sup3r-s3cret-key"),
        ("ROOM_SERVICE__DATABASE__URL", "mysql://room:hunter2pw@db:3306/x"),
    ];
    let s = load_yaml(IM_ON, &env).expect("valid");
    let debug = format!("{s:?}");
    assert!(!debug.contains("sup3r-s3cret-key") && !debug.contains("hunter2pw"), "{debug}");
    // Wrongly typed secrets and a bad database URL: the values stay out of the message.
    let yaml = "tencent_im: {secret_key: 987654321}\ndatabase: {url: \"postgres://u:hunter2pw@h/db\"}\n";
    let message = refuses(yaml, "tencent_im.secret_key");
    assert!(!message.contains("987654321"), "{message}");
    let message = refuses("database: {url: \"hunter2pw\"}\n", "database.url");
    assert!(!message.contains("hunter2pw"), "{message}");
    let message = refuses("database: {url: [\"hunter2pw\"]}\n", "database.url");
    assert!(!message.contains("hunter2pw"), "{message}");
    let message = refuses("database: \"mysql://u:hunter2pw@h/db\"\n", "database");
    assert!(!message.contains("hunter2pw"), "{message}");
    let error = load_yaml("\"hunter2pw\"\n", &[]).expect_err("a scalar is not a config");
    assert!(!error.to_string().contains("hunter2pw"), "{error}");
}

#[test]
fn all_problems_are_reported_together_and_bad_types_name_the_key() {
    let yaml = "http: {listen: nope}\nlog: {format: xml}\noutbox_worker: {batch_size: many}\n";
    let error = load_yaml(yaml, &[]).expect_err("invalid");
    assert_eq!(error.keys(), ["outbox_worker.batch_size"], "type errors come first");
    let error = load_yaml("http: {listen: nope}\nlog: {format: xml}\n", &[]).expect_err("invalid");
    assert_eq!(error.keys(), ["http.listen", "log.format"]);
    fails_on("", &[("ROOM_SERVICE__DATABASE__RUN_MIGRATIONS", "perhaps")], "database.run_migrations");
}

#[test]
fn yaml_syntax_errors_are_reported() {
    let error = load_yaml("http: {listen: \"unterminated\n", &[]).expect_err("syntax error");
    assert!(matches!(error, ConfigError::Unreadable { .. }), "{error:?}");
}

#[test]
fn the_seat_action_rate_defaults_to_two_takes_zero_for_off_and_refuses_out_of_range() {
    assert_eq!(ok("").rooms.seat_actions_per_user_per_sec, 2);
    assert_eq!(ok("rooms: {seat_actions_per_user_per_sec: 0}\n").rooms.seat_actions_per_user_per_sec, 0);
    let env = [("ROOM_SERVICE__ROOMS__SEAT_ACTIONS_PER_USER_PER_SEC", "5")];
    assert_eq!(load_yaml("", &env).expect("valid").rooms.seat_actions_per_user_per_sec, 5);
    for bad in ["-1", "1001"] {
        refuses(
            &format!("rooms: {{seat_actions_per_user_per_sec: {bad}}}\n"),
            "rooms.seat_actions_per_user_per_sec",
        );
    }
}
