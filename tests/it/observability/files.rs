//! The files in `dashboards/` on their own: Grafana JSON structure, provisioning, alert rule
//! metadata (each alert's runbook section in `docs/RUNBOOK.md` included), and the thresholds the
//! dashboard draws matching the ones the alerts fire on.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{alert_rules, dashboard, panels};

const DATASOURCE_VARIABLE: &str = "DS_PROMETHEUS";
const DASHBOARDS_MOUNT: &str = "/var/lib/grafana/dashboards";
/// The runbook every alert's `runbook_url` points into.
const RUNBOOK: &str = "docs/RUNBOOK.md";

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}"))
}

#[test]
fn the_dashboard_parses_as_grafana_json_with_unique_panel_ids() {
    let dashboard = dashboard();
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "schemaVersion");
    assert!(dashboard["uid"].as_str().is_some_and(|u| !u.is_empty()), "uid");
    let panels = panels(&dashboard);
    assert!(panels.len() >= 8, "only {} panels", panels.len());
    let mut ids = BTreeSet::new();
    for panel in &panels {
        let id =
            panel["id"].as_u64().unwrap_or_else(|| panic!("panel without a numeric id: {}", panel["title"]));
        assert!(ids.insert(id), "panel id {id} is used twice");
        assert!(panel["gridPos"]["w"].as_u64().is_some(), "{} has no gridPos", panel["title"]);
    }
}

#[test]
fn every_panel_has_a_non_empty_promql_query() {
    for panel in panels(&dashboard()) {
        let title = &panel["title"];
        let targets = panel["targets"].as_array().unwrap_or_else(|| panic!("{title} has no targets"));
        assert!(!targets.is_empty(), "{title} has no targets");
        for target in targets {
            let expr = target["expr"].as_str().unwrap_or_default();
            assert!(!expr.trim().is_empty(), "{title}: empty query in {target}");
            assert!(target["refId"].as_str().is_some(), "{title}: target without refId");
        }
    }
}

#[test]
fn the_datasource_is_a_prometheus_template_variable_used_by_every_panel_and_query() {
    let dashboard = dashboard();
    let variables = dashboard["templating"]["list"].as_array().expect("templating.list");
    let variable = variables
        .iter()
        .find(|v| v["name"] == DATASOURCE_VARIABLE)
        .unwrap_or_else(|| panic!("no {DATASOURCE_VARIABLE} variable"));
    assert_eq!(variable["type"], "datasource");
    assert_eq!(variable["query"], "prometheus");
    let reference = format!("${{{DATASOURCE_VARIABLE}}}");
    for panel in panels(&dashboard) {
        let title = &panel["title"];
        assert_eq!(panel["datasource"]["uid"], reference.as_str(), "{title}");
        assert_eq!(panel["datasource"]["type"], "prometheus", "{title}");
        for target in panel["targets"].as_array().into_iter().flatten() {
            assert_eq!(target["datasource"]["uid"], reference.as_str(), "{title}: {target}");
        }
    }
}

/// The number after the last `>` of an alert expression.
fn alert_threshold(alert: &str) -> f64 {
    let rule =
        alert_rules().into_iter().find(|r| r.alert == alert).unwrap_or_else(|| panic!("no alert {alert}"));
    let (_, tail) = rule.expr.rsplit_once('>').unwrap_or_else(|| panic!("{alert} has no `>`"));
    tail.trim().parse().unwrap_or_else(|_| panic!("{alert}: no number after the last `>`"))
}

/// The threshold steps panel `title` draws; its queries must chart `metric`.
fn drawn_thresholds(title: &str, metric: &str) -> Vec<f64> {
    let dashboard = dashboard();
    let panel = panels(&dashboard)
        .into_iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("no panel {title}"));
    let exprs: Vec<_> =
        panel["targets"].as_array().into_iter().flatten().filter_map(|t| t["expr"].as_str()).collect();
    assert!(exprs.iter().any(|e| e.contains(metric)), "{title} does not chart {metric}: {exprs:?}");
    let defaults = &panel["fieldConfig"]["defaults"];
    let mode = defaults["custom"]["thresholdsStyle"]["mode"].as_str().unwrap_or("off");
    assert_ne!(mode, "off", "{title}: thresholds are not drawn");
    let steps = defaults["thresholds"]["steps"].as_array().cloned().unwrap_or_default();
    steps.iter().filter_map(|s| s["value"].as_f64()).collect()
}

#[test]
fn the_dashboard_draws_the_thresholds_the_alerts_fire_on() {
    let age = alert_threshold("RoomOutboxOldestPendingTooOld");
    assert_eq!(age, 60.0);
    assert_eq!(drawn_thresholds("Oldest pending age", "room_outbox_oldest_pending_age_seconds"), [age]);
    let ratio = alert_threshold("RoomOutboxPublishFailureRatioHigh");
    assert_eq!(drawn_thresholds("Publish failure ratio", "room_outbox_publish_failure_total"), [ratio]);
    let hot = alert_threshold("RoomOutboxHotRoomLagging");
    assert_eq!(hot, 20.0);
    let panel = "Most lagging room: age of its oldest undelivered event";
    assert_eq!(drawn_thresholds(panel, "room_outbox_hot_room_lag_seconds"), [hot]);
    let lag = alert_threshold("RoomConsumerLagging");
    assert_eq!(lag, 300.0);
    assert_eq!(drawn_thresholds("Consumers: lag by consumer", "room_consumer_lag_seconds"), [lag]);
}

#[test]
fn the_alerts_hold_for_their_durations_with_a_severity_a_summary_and_a_description() {
    let rules = alert_rules();
    let holds: Vec<_> = rules.iter().map(|r| (r.alert.as_str(), r.for_.as_deref())).collect();
    assert_eq!(
        holds,
        [
            ("RoomOutboxOldestPendingTooOld", Some("5m")),
            ("RoomOutboxHotRoomLagging", Some("2m")),
            ("RoomOutboxPublishFailureRatioHigh", Some("10m")),
            ("RoomOutboxLeaseLost", None),
            ("RoomOutboxStalled", Some("10m")),
            ("RoomOutboxRowsParked", None),
            ("RoomOutboxPublishPaused", Some("2m")),
            ("RoomConsumerLagging", Some("10m")),
            ("RoomServiceTargetDown", Some("2m")),
            ("RoomServiceTargetsAbsent", Some("5m")),
            ("RoomDbPoolAcquireTimeouts", None),
            ("RoomClusterShardsUnowned", Some("2m")),
            ("RoomTraceSpansDropped", Some("10m")),
        ]
    );
    let names: BTreeSet<_> = rules.iter().map(|r| r.alert.as_str()).collect();
    assert_eq!(names.len(), rules.len(), "duplicate alert names");
    for rule in &rules {
        let severity = rule.labels.get("severity").map(String::as_str);
        assert!(matches!(severity, Some("warning" | "critical")), "{}: severity {severity:?}", rule.alert);
        for key in ["summary", "description"] {
            assert!(
                rule.annotations.get(key).is_some_and(|a| !a.trim().is_empty()),
                "{}: no {key}",
                rule.alert
            );
        }
    }
}

#[test]
fn grafana_provisioning_loads_the_prometheus_datasource_and_the_mounted_dashboard() {
    let datasources = yaml("dashboards/provisioning/datasources/prometheus.yml");
    let datasource = &datasources["datasources"][0];
    assert_eq!(datasource["type"], "prometheus");
    assert_eq!(datasource["isDefault"], true, "the DS_PROMETHEUS variable defaults to it");
    assert!(datasource["url"].as_str().is_some_and(|u| u.starts_with("http")), "{datasource}");

    let providers = yaml("dashboards/provisioning/dashboards/room-service.yml");
    let provider = &providers["providers"][0];
    assert_eq!(provider["type"], "file");
    assert_eq!(provider["options"]["path"], DASHBOARDS_MOUNT);
    // The compose file (when present) mounts the dashboard where the provider looks.
    if let Ok(compose) = std::fs::read_to_string("docker-compose.yml") {
        let mount = format!("./dashboards/room-service.json:{DASHBOARDS_MOUNT}/");
        assert!(compose.contains(&mount), "docker-compose.yml does not mount {mount}");
    }
}

/// The anchor GitHub gives a Markdown heading: lower case, spaces to `-`, every other
/// character but letters, digits, `-` and `_` dropped.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of the headings of a Markdown text (fenced code left out), a repeated anchor
/// getting GitHub's `-1`, `-2`, ... suffix.
fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !in_fence) else { continue };
        let base = github_anchor(heading.trim_start_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while !anchors.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    anchors
}

#[test]
fn heading_anchors_follow_github() {
    let anchors = heading_anchors(
        "# Runbook\n## RoomOutboxRowsParked\n```sh\n# not a heading\n```\n## Before you start\n## Before you start\n",
    );
    let expected = ["runbook", "roomoutboxrowsparked", "before-you-start", "before-you-start-1"];
    assert_eq!(anchors, expected.iter().map(|a| a.to_string()).collect());
}

#[test]
fn every_alert_links_its_runbook_section_by_name() {
    let runbook = std::fs::read_to_string(RUNBOOK).unwrap_or_else(|e| panic!("read {RUNBOOK}: {e}"));
    let anchors = heading_anchors(&runbook);
    for rule in alert_rules() {
        let alert = &rule.alert;
        let url = rule.annotations.get("runbook_url").unwrap_or_else(|| panic!("{alert}: no runbook_url"));
        let (path, anchor) = url.split_once('#').unwrap_or_else(|| panic!("{alert}: {url} has no #anchor"));
        assert_eq!(path, RUNBOOK, "{alert}: the runbook_url leaves the repository's runbook");
        assert_eq!(anchor, alert.to_lowercase(), "{alert}: the anchor is the alert name in lower case");
        assert!(anchors.contains(anchor), "{alert}: {RUNBOOK} has no heading with anchor #{anchor}");
    }
}
