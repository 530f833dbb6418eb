//! The rules of the delivery sections: `tencent_im`, `im_rate_limit`, `im_batch`,
//! `outbox_worker` (normalisation, limits, the lease), `consumers`.

use std::time::Duration;

use super::{IM_ON, fails_on, load_yaml, ok, refuses};
use crate::config::*;

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
    refuses("outbox_worker: {retry_base: \"2m\", retry_max: \"1m\"}\n", "outbox_worker.retry_max");
    refuses("outbox_worker: {retry_base: \"0s\"}\n", "outbox_worker.retry_base");
    refuses("outbox_worker: {max_attempts: -1}\n", "outbox_worker.max_attempts");
    refuses("outbox_worker: {rate_limit_pause: \"0s\"}\n", "outbox_worker.rate_limit_pause");
    refuses("outbox_worker: {config_error_pause: \"soon\"}\n", "outbox_worker.config_error_pause");
    refuses("im_rate_limit: {global_per_sec: 0}\n", "im_rate_limit.global_per_sec");
    refuses("im_rate_limit: {per_group_per_sec: 500}\n", "im_rate_limit.per_group_per_sec");
    refuses("im_rate_limit: {worker_share: 1.5}\n", "im_rate_limit.worker_share");
    refuses("im_rate_limit: {worker_share: 0}\n", "im_rate_limit.worker_share");
    let s = ok(
        "im_rate_limit: {global_per_sec: 100, per_group_per_sec: 10, worker_share: 0.5}\noutbox_worker: {max_attempts: 5}\n",
    );
    assert_eq!((s.im_rate_limit.global_per_sec, s.im_rate_limit.per_group_per_sec), (100, 10));
    assert_eq!((s.im_rate_limit.worker_share, s.outbox_worker.max_attempts), (0.5, 5));
}

#[test]
fn im_batch_defaults_to_32_events_and_11000_bytes_and_env_overrides_it() {
    for yaml in ["", "im_batch:\n", "im_batch: {}\n"] {
        assert_eq!(
            ok(yaml).im_batch,
            ImBatchSettings { max_events: 32, max_bytes: 11_000, in_flight_per_room: 1 },
            "{yaml:?}"
        );
    }
    let env = [("ROOM_SERVICE__IM_BATCH__MAX_EVENTS", "1"), ("ROOM_SERVICE__IM_BATCH__MAX_BYTES", "12288")];
    let s = load_yaml("im_batch: {max_events: 8, max_bytes: 2048}\n", &env).expect("env override");
    assert_eq!(s.im_batch, ImBatchSettings { max_events: 1, max_bytes: 12_288, in_flight_per_room: 1 });
    let s = ok("im_batch: {max_events: 256, max_bytes: 6144}\n");
    assert_eq!((s.im_batch.max_events, s.im_batch.max_bytes), (MAX_IM_BATCH_EVENTS, IM_BATCH_BYTES_RANGE.0));
}

#[test]
fn im_batch_limits_outside_their_range_are_refused() {
    for events in ["0", "-1", "257", "100000"] {
        let message = refuses(&format!("im_batch: {{max_events: {events}}}\n"), "im_batch.max_events");
        assert!(message.contains("between 1 and 256"), "{message}");
    }
    for bytes in ["0", "6143", "12289", "-5"] {
        let message = refuses(&format!("im_batch: {{max_bytes: {bytes}}}\n"), "im_batch.max_bytes");
        assert!(message.contains("between 6144 and 12288"), "{message}");
    }
    for k in ["0", "-2", "17"] {
        let message =
            refuses(&format!("im_batch: {{in_flight_per_room: {k}}}\n"), "im_batch.in_flight_per_room");
        assert!(message.contains("between 1 and 16"), "{message}");
    }
    assert_eq!(ok("im_batch: {in_flight_per_room: 4}\n").im_batch.in_flight_per_room, 4);
    refuses("im_batch: {max_events: many}\n", "im_batch.max_events");
    refuses("im_batch: {max_event: 4}\n", "im_batch.max_event");
    let message = fails_on("", &[("ROOM_SERVICE__IM_BATCH__MAX_BYTES", "20000")], "im_batch.max_bytes");
    assert!(message.contains("ROOM_SERVICE__IM_BATCH__MAX_BYTES"), "{message}");
    let error = load_yaml("im_batch: {max_events: 0, max_bytes: 99999}\n", &[]).expect_err("two problems");
    assert_eq!(error.keys(), ["im_batch.max_events", "im_batch.max_bytes"]);
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
    refuses("outbox_worker: {batch_size: 1001}\n", "outbox_worker.batch_size");
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
    refuses(IM_ON, "tencent_im.secret_key");
    let env = [("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "  k3y \n")];
    let s = load_yaml(IM_ON, &env).expect("valid with the secret from env");
    assert_eq!(s.tencent_im.expect("IM on").secret_key.expose(), "k3y");
    let yaml = "tencent_im: {enabled: true, sdk_app_id: 0, admin_identifier: \"\", base_url: \"ftp://x\"}\n";
    let error = load_yaml(yaml, &env).expect_err("three problems");
    assert_eq!(error.keys(), ["tencent_im.base_url", "tencent_im.sdk_app_id", "tencent_im.admin_identifier"]);
    fails_on("tencent_im: {enabled: true, base_url: \"not a url\"}\n", &env, "tencent_im.base_url");
    refuses("tencent_im: {usersig_ttl: \"59s\"}\n", "tencent_im.usersig_ttl");
    refuses("tencent_im: {group_id_prefix: \"@TGS#x\"}\n", "tencent_im.group_id_prefix");
    // Disabled IM accepts the placeholders.
    assert_eq!(ok("tencent_im: {enabled: false, sdk_app_id: 0}\n").tencent_im, None);
}

#[test]
fn group_management_is_on_and_bans_off_by_default_and_bans_need_it() {
    let env = [("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "k")];
    let im = load_yaml(IM_ON, &env).expect("valid").tencent_im.expect("IM on");
    assert!(im.manage_groups && !im.avchatroom_ban);
    let yaml = "tencent_im: {enabled: true, sdk_app_id: 1, manage_groups: false}\n";
    assert!(!load_yaml(yaml, &env).expect("valid").tencent_im.expect("IM on").manage_groups);
    let env_on = [env[0], ("ROOM_SERVICE__TENCENT_IM__AVCHATROOM_BAN", "true")];
    assert!(load_yaml(IM_ON, &env_on).expect("valid").tencent_im.expect("IM on").avchatroom_ban);
    let message =
        refuses("tencent_im: {manage_groups: false, avchatroom_ban: true}\n", "tencent_im.avchatroom_ban");
    assert!(message.contains("tencent_im.manage_groups"), "{message}");
    refuses("tencent_im: {manage_groups: \"sometimes\"}\n", "tencent_im.manage_groups");
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
    refuses("outbox_worker: {stats_interval: \"soon\"}\n", "outbox_worker.stats_interval");
}

#[test]
fn max_in_flight_defaults_and_is_capped() {
    assert_eq!(ok("{}\n").outbox_worker.max_in_flight, 8);
    assert_eq!(ok("outbox_worker: {max_in_flight: 3}\n").outbox_worker.max_in_flight, 3);
    assert_eq!(ok("outbox_worker: {max_in_flight: 0}\n").outbox_worker.max_in_flight, 8);
    assert_eq!(ok("outbox_worker: {max_in_flight: -2}\n").outbox_worker.max_in_flight, 8);
    refuses("outbox_worker: {max_in_flight: 65}\n", "outbox_worker.max_in_flight");
}

#[test]
fn an_enabled_webhook_needs_a_url_without_credentials_and_a_secret() {
    const HOOK: &str = "url: \"http://hooks:8000/rooms\", secret: \"s3cret\"";
    refuses("consumers: {webhook: {enabled: true, secret: \"s\"}}\n", "consumers.webhook.url");
    refuses("consumers: {webhook: {enabled: true, url: \"http://h/x\"}}\n", "consumers.webhook.secret");
    let message = refuses(
        "consumers: {webhook: {enabled: true, url: \"http://u:hunter2@h/x\", secret: \"s\"}}\n",
        "consumers.webhook.url",
    );
    assert!(!message.contains("hunter2"), "{message}");
    refuses(
        &format!("consumers: {{webhook: {{enabled: true, {HOOK}, event_types: [Nope]}}}}\n"),
        "consumers.webhook.event_types",
    );
    refuses(
        &format!("consumers: {{webhook: {{enabled: true, {HOOK}, batch_size: 0}}}}\n"),
        "consumers.webhook.batch_size",
    );
    refuses("consumers: {audit: {rate_limit_per_sec: -1}}\n", "consumers.audit.rate_limit_per_sec");
    refuses("consumers: {gap_grace: \"0s\"}\n", "consumers.gap_grace");
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

#[test]
fn the_empty_outbox_section_is_the_default() {
    assert_eq!(ok("{}\n").outbox_worker, crate::config::OutboxWorkerSettings::default());
}

#[test]
fn leases_are_three_timeouts_and_at_least_their_minimum() {
    use crate::config::{MIN_CONSUMER_LEASE, MIN_LEASE, OutboxWorkerSettings};
    let worker =
        |secs| OutboxWorkerSettings { publish_timeout: Duration::from_secs(secs), ..Default::default() };
    assert_eq!(worker(5).lease(), Duration::from_secs(15));
    assert_eq!(worker(1).lease(), MIN_LEASE);
    let absurd = OutboxWorkerSettings { publish_timeout: Duration::MAX, ..Default::default() };
    assert_eq!(absurd.lease(), Duration::MAX, "saturates");
    let consumer = |timeout| crate::config::ConsumerSettings {
        event_types: Vec::new(),
        batch_size: 10,
        timeout,
        rate_limit_per_sec: None,
    };
    assert_eq!(consumer(Duration::from_secs(10)).lease(), Duration::from_secs(30));
    assert_eq!(consumer(Duration::from_secs(1)).lease(), MIN_CONSUMER_LEASE);
}
