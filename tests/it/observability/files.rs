//! The files in `dashboards/` on their own: Grafana JSON structure, provisioning, alert rule
//! metadata, and the thresholds the dashboard draws matching the ones the alerts fire on.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{alert_rules, dashboard, panels};

const DATASOURCE_VARIABLE: &str = "DS_PROMETHEUS";
const DASHBOARDS_MOUNT: &str = "/var/lib/grafana/dashboards";

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
}

#[test]
fn the_alerts_hold_for_their_durations_with_a_severity_a_summary_and_a_description() {
    let rules = alert_rules();
    let holds: Vec<_> = rules.iter().map(|r| (r.alert.as_str(), r.for_.as_deref())).collect();
    assert_eq!(
        holds,
        [
            ("RoomOutboxOldestPendingTooOld", Some("5m")),
            ("RoomOutboxPublishFailureRatioHigh", Some("10m")),
            ("RoomOutboxLeaseLost", None),
            ("RoomOutboxStalled", Some("10m")),
            ("RoomOutboxRowsParked", None),
            ("RoomOutboxPublishPaused", Some("2m")),
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
