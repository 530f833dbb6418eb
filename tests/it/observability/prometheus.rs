//! A real Prometheus (Debian's `prometheus` binary, installed by `scripts/check-dashboards.sh`)
//! on a free loopback port scrapes the running service every second with the alert rules
//! loaded: every dashboard query is valid PromQL for it, the ones over exported metrics return
//! data, and every alert rule evaluates without error. Skips, saying why, only when the binary
//! is absent.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, Command};

use super::traffic::{eventually, healthy_traffic, scrape, start};
use super::{ALERTS, dashboard_queries, promql};
use crate::support::app::fake_im;
use crate::support::{TestDb, free_port};

/// The range Grafana would put in `$__rate_interval`, for 1 s scrapes.
const RATE_INTERVAL: &str = "10s";

fn find_prometheus() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// Percent-encodes a query parameter.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prometheus {
    base: String,
    http: reqwest::Client,
    _child: Child,
}

impl Prometheus {
    async fn start(binary: &PathBuf, dir: &std::path::Path, target: &str) -> Prometheus {
        let rules = std::env::current_dir().expect("cwd").join(ALERTS);
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {rules:?}\n\
             scrape_configs:\n  - job_name: room-service\n    static_configs:\n      - targets: [{target:?}]\n"
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus {
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _child: child,
        };
        eventually("prometheus is ready", Duration::from_secs(15), || async {
            let ready = prometheus.http.get(format!("{}/-/ready", prometheus.base)).send().await;
            ready.is_ok_and(|r| r.status().is_success()).then_some(())
        })
        .await;
        prometheus
    }

    async fn api(&self, path: &str) -> Value {
        let response = self.http.get(format!("{}{path}", self.base)).send().await.expect("prometheus api");
        response.json().await.expect("prometheus answers JSON")
    }

    /// An instant query; panics unless Prometheus accepts it.
    async fn query(&self, expr: &str) -> Vec<Value> {
        let answer = self.api(&format!("/api/v1/query?query={}", encode(expr))).await;
        assert_eq!(answer["status"], "success", "{expr}: {answer}");
        answer["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

#[tokio::test]
async fn a_real_prometheus_scraping_the_service_answers_the_dashboard_queries_and_evaluates_the_alerts() {
    let Some(binary) = find_prometheus() else {
        eprintln!("SKIPPED: no `prometheus` binary (scripts/check-dashboards.sh installs Debian's package)");
        return;
    };
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let app = start(&db, &im).await;
    healthy_traffic(&app, "prom").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let prometheus = Prometheus::start(&binary, dir.path(), &app.app.admin_addr.to_string()).await;

    let exported = scrape(&app).await;
    let queries: Vec<_> = dashboard_queries()
        .into_iter()
        .map(|(title, expr)| (title, expr.replace("$__rate_interval", RATE_INTERVAL)))
        .collect();
    for (title, expr) in &queries {
        // Every metric the query reads is exported: Prometheus must return data for it.
        if !promql::scan(expr).metrics.iter().all(|m| exported.has(m)) {
            prometheus.query(expr).await;
            continue;
        }
        eventually(&format!("data for panel {title:?}: {expr}"), Duration::from_secs(20), || async {
            healthy_traffic_tick(&app).await;
            (!prometheus.query(expr).await.is_empty()).then_some(())
        })
        .await;
    }

    let rules = eventually("every alert rule evaluated", Duration::from_secs(10), || async {
        let answer = prometheus.api("/api/v1/rules").await;
        let rules: Vec<Value> = answer["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let evaluated =
            rules.iter().all(|r| r["lastEvaluation"].as_str().is_some_and(|t| !t.starts_with("0001")));
        (evaluated && !rules.is_empty()).then_some(rules)
    })
    .await;
    assert_eq!(rules.len(), super::alert_rules().len());
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
    drop(prometheus);
    app.stop().await;
}

/// One cheap request, so counters keep moving while Prometheus scrapes.
async fn healthy_traffic_tick(app: &crate::support::app::TestApp) {
    let _ = app.get("/v1/rooms/prom").await;
}
