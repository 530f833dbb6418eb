//! The dashboards and alert rules in `dashboards/` against the service that feeds them: the
//! Grafana JSON is well formed, every metric and label its queries and the alert rules use is
//! exported by a running service (after traffic that makes IM fail and recover), every declared
//! metric is charted or alerted on, the backlog gauges rise and fall back to zero, and a real
//! Prometheus scraping the service answers the dashboard's queries.
//!
//! `promtool check rules` / `promtool test rules` run in `scripts/check-dashboards.sh`.

pub(crate) mod exposition;
mod promql;
mod traffic;

mod backlog;
mod drift;
mod files;
mod fresh;
mod prometheus;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The Grafana dashboard, relative to the package root (the tests' working directory).
pub const DASHBOARD: &str = "dashboards/room-service.json";
/// The Prometheus alert rules.
pub const ALERTS: &str = "dashboards/alerts.yml";

/// The dashboard JSON.
pub fn dashboard() -> Value {
    let text = std::fs::read_to_string(DASHBOARD).expect("read the dashboard");
    serde_json::from_str(&text).expect("the dashboard is valid JSON")
}

/// Every panel, those nested in collapsed rows included.
pub fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels is an array") {
        out.push(panel);
        out.extend(panel["panels"].as_array().into_iter().flatten());
    }
    out
}

/// `(panel title, expr)` of every dashboard target.
pub fn dashboard_queries() -> Vec<(String, String)> {
    let dashboard = dashboard();
    let mut out = Vec::new();
    for panel in panels(&dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            out.push((title, target["expr"].as_str().unwrap_or_default().to_owned()));
        }
    }
    out
}

/// `dashboards/alerts.yml`.
#[derive(Debug, Deserialize)]
pub struct RuleFile {
    /// Rule groups.
    pub groups: Vec<RuleGroup>,
}

/// One rule group.
#[derive(Debug, Deserialize)]
pub struct RuleGroup {
    /// Its rules.
    pub rules: Vec<AlertRule>,
}

/// One alerting rule.
#[derive(Debug, Deserialize)]
pub struct AlertRule {
    /// Alert name.
    pub alert: String,
    /// PromQL.
    pub expr: String,
    /// How long the condition holds before firing.
    #[serde(rename = "for")]
    pub for_: Option<String>,
    /// Labels (severity).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations (summary, description).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Every alerting rule of `dashboards/alerts.yml`.
pub fn alert_rules() -> Vec<AlertRule> {
    let text = std::fs::read_to_string(ALERTS).expect("read the alert rules");
    let file: RuleFile = serde_saphyr::from_str(&text).expect("the alert rules are valid YAML");
    file.groups.into_iter().flat_map(|g| g.rules).collect()
}

/// `(where, expr)` of every dashboard query and alert expression.
pub fn all_queries() -> Vec<(String, String)> {
    let alerts = alert_rules().into_iter().map(|r| (format!("alert {}", r.alert), r.expr));
    dashboard_queries()
        .into_iter()
        .map(|(title, expr)| (format!("panel {title:?}"), expr))
        .chain(alerts)
        .collect()
}
