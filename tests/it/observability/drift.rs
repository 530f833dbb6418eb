//! Drift between the service and what charts and alerts on it: every metric name and label the
//! dashboard queries and the alert rules use is exported by a running service, and every metric
//! the service declares (`names::ALL`) is charted, alerted on, or deliberately left out. What
//! Prometheus makes itself (`up`, the `job` and `instance` target labels) is not asked of the
//! service.

use std::collections::BTreeSet;

use room_service::telemetry::names;

use super::exposition::Exposition;
use super::traffic::{a_parked_row, healthy_traffic, im_outage, im_recovery, sample, scrape, start};
use super::{all_queries, promql};
use crate::support::TestDb;
use crate::support::app::fake_im;

/// Metrics of `names::ALL` that neither the dashboard nor the alert rules use, on purpose. A
/// metric added to `names.rs` must be charted, alerted on, or listed here.
const NOT_CHARTED: &[&str] = &[
    // The address-space limit: 0 (unlimited) on every deployment we know of.
    names::PROCESS_VIRTUAL_MEMORY_MAX_BYTES,
    // Exported only with redis.url set (the drift test's service runs without Redis); the
    // runbook reads it when the IM quota looks split.
    names::IM_QUOTA_FALLBACK,
    // Refusals of one caller's excess (a seat flapper, a members reader over its share) and of
    // calls of the hop no node sealed: read from /metrics by the runbook's checks, not charted
    // yet.
    names::SEAT_ACTIONS_LIMITED_TOTAL,
    names::MEMBERS_READS_LIMITED_TOTAL,
    names::HOPS_REFUSED_TOTAL,
];

/// Series Prometheus makes itself for every scrape target, never exported by the service
/// (the target-down alerts read `up`).
const SCRAPE_METRICS: &[&str] = &["up"];

/// Labels Prometheus adds to every scraped series (target labels).
const TARGET_LABELS: &[&str] = &["job", "instance"];

/// The declared metric a series name belongs to: a histogram's `_bucket`, `_sum` and `_count`
/// series belong to the histogram.
fn declared_name(series: &str) -> &str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = series.strip_suffix(suffix).filter(|b| names::histograms().any(|(h, _)| h == *b))
        {
            return base;
        }
    }
    series
}

#[test]
fn every_declared_metric_is_charted_or_alerted_on_and_nothing_undeclared_is_queried() {
    let referenced: BTreeSet<String> = all_queries()
        .iter()
        .flat_map(|(_, expr)| promql::scan(expr).metrics)
        .map(|series| declared_name(&series).to_owned())
        .collect();
    let undeclared: Vec<_> = referenced
        .iter()
        .filter(|m| !names::ALL.contains(&m.as_str()) && !SCRAPE_METRICS.contains(&m.as_str()))
        .collect();
    assert!(undeclared.is_empty(), "queried but not declared in telemetry::names: {undeclared:?}");
    let uncharted: Vec<_> =
        names::ALL.iter().filter(|m| !referenced.contains(**m) && !NOT_CHARTED.contains(m)).collect();
    assert!(
        uncharted.is_empty(),
        "declared but neither charted, alerted on nor in NOT_CHARTED: {uncharted:?}"
    );
    for name in NOT_CHARTED {
        assert!(names::ALL.contains(name), "NOT_CHARTED lists {name}, which is not declared");
        assert!(!referenced.contains(*name), "NOT_CHARTED lists {name}, which is charted");
    }
}

#[tokio::test]
async fn every_metric_and_label_the_dashboard_and_alerts_use_is_exported_after_traffic() {
    let db = TestDb::mysql().await;
    let im = fake_im().await;
    let app = start(&db, &im).await;
    healthy_traffic(&app, "drift").await;
    im_outage(&app, &im, "drift", &["carol", "dave"]).await;
    im_recovery(&app, &im).await;
    a_parked_row(&app, &im, "drift-gone").await;
    sample(&app).await;
    let exported = scrape(&app).await;

    let problems = unmet_queries(&exported);
    let exported_names: Vec<_> = exported.names().collect();
    assert!(problems.is_empty(), "{problems:#?}\nexported: {exported_names:?}");
    app.stop().await;
}

/// What the dashboard queries and the alert rules ask of `exported` and do not find there: a
/// metric name, a label a matcher or a grouping uses, or a series with the value an `=`
/// matcher (or one of the plain alternatives of an `=~` matcher) asks for. Prometheus' own series and target labels are not asked of the service.
pub(super) fn unmet_queries(exported: &Exposition) -> Vec<String> {
    let mut problems = Vec::new();
    for (place, expr) in all_queries() {
        let refs = promql::scan(&expr);
        for metric in refs.metrics.iter().filter(|m| !SCRAPE_METRICS.contains(&m.as_str())) {
            if !exported.has(metric) {
                problems.push(format!("{place}: {metric} is not exported"));
            }
        }
        let scraped = |metric: &str| SCRAPE_METRICS.contains(&metric);
        for m in
            refs.matchers.iter().filter(|m| !scraped(&m.metric) && !TARGET_LABELS.contains(&m.label.as_str()))
        {
            if !exported.label_keys(&m.metric).contains(m.label.as_str()) {
                problems.push(format!("{place}: {} has no label {}", m.metric, m.label));
            } else if m.op == "=" && !exported.has_label_value(&m.metric, &m.label, &m.value) {
                problems.push(format!("{place}: no {} series has {}={:?}", m.metric, m.label, m.value));
            } else if m.op == "=~"
                && m.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
                && !m.value.split('|').any(|v| exported.has_label_value(&m.metric, &m.label, v))
            {
                problems.push(format!("{place}: no {} series has {}=~{:?}", m.metric, m.label, m.value));
            }
        }
        for grouping in refs.groupings.iter().filter(|g| !TARGET_LABELS.contains(&g.label.as_str())) {
            for metric in grouping.metrics.iter().filter(|m| !scraped(m)) {
                if !exported.label_keys(metric).contains(grouping.label.as_str()) {
                    problems.push(format!(
                        "{place}: groups {metric} by {}, a label it does not have",
                        grouping.label
                    ));
                }
            }
        }
    }
    problems
}
