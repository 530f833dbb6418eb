//! B14, what a trace costs a command (SPEC §13.4): B1's load (its clients, rooms and join+gift
//! pairs, over HTTP) against the real `room-service` binary, run with traces off (no endpoint:
//! the default), exported at `sample_ratio` 1.0 and at 0.01, then off again, in one
//! invocation on one database. IM is on (the fake, 0 ms, no limits; the service's rate limit
//! not binding), so every command's trace reaches its IM call. The spans go to an OTLP/gRPC
//! sink in this process (opentelemetry-proto's TraceService over tonic) that counts them.
//!
//! Figures: commands/s of each run and its ratio to the first run with traces off; the service
//! process's CPU per command (from `/proc/<pid>/stat`) and what export adds to it; spans
//! received per command. The target: at ratio 0.01, at most 10 % fewer commands/s than off.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use sqlx::mysql::MySqlPool;

use crate::Args;
use crate::command::{Plan, plan, run_service, truncate};
use crate::live::process::{NO_LIMITS, start_fake, start_service};
use crate::report::Line;
use crate::support::{BenchDb, cpu_of};

/// The OTLP sink: counts the spans it is sent.
#[derive(Clone, Default)]
struct Sink {
    spans: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize =
            request.get_ref().resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        self.spans.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

/// Starts the sink on a loopback port; returns it with its endpoint.
async fn sink() -> anyhow::Result<(Sink, String)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let sink = Sink::default();
    let server = tonic::transport::Server::builder().add_service(TraceServiceServer::new(sink.clone()));
    let incoming = tokio_stream_incoming(listener);
    tokio::spawn(server.serve_with_incoming(incoming));
    Ok((sink, endpoint))
}

/// The listener's connections as tonic's server takes them.
fn tokio_stream_incoming(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}

/// One run's figures.
struct Measured {
    rate: f64,
    cpu_per_command: Duration,
    spans: u64,
    n: usize,
}

/// Runs B14 on the fresh database `db` and returns its lines.
pub async fn run(args: &Args, db: &BenchDb) -> anyhow::Result<Vec<Line>> {
    let plans: Vec<Plan> = (0..args.clients).map(|c| plan(args, c)).collect();
    let status = MySqlPool::connect(&db.url()).await?;
    let im = start_fake(Duration::ZERO, NO_LIMITS).await?;
    let (sink, endpoint) = sink().await?;
    let modes: [(&str, Option<&str>); 4] =
        [("off", None), ("ratio 1.0", Some("1.0")), ("ratio 0.01", Some("0.01")), ("off again", None)];
    let mut measured = Vec::new();
    for (_, ratio) in modes {
        let mut vars = vec![
            ("IM_RATE_LIMIT__GLOBAL_PER_SEC", "1000000000".to_owned()),
            ("IM_RATE_LIMIT__PER_GROUP_PER_SEC", "1000000000".to_owned()),
        ];
        if let Some(ratio) = ratio {
            vars.push(("TELEMETRY__OTLP__ENDPOINT", endpoint.clone()));
            vars.push(("TELEMETRY__OTLP__SAMPLE_RATIO", ratio.to_owned()));
        }
        let service = start_service(&db.url(), Some(&im.base), 1, &vars).await?;
        let stat = std::path::PathBuf::from(format!("/proc/{}/stat", service.proc.pid()));
        let spans_before = sink.spans.load(Ordering::Relaxed);
        let cpu_before = cpu_of(&stat);
        let (run, _) = run_service(&service.base, plans.clone(), args, &status, None).await?;
        let cpu = cpu_of(&stat).saturating_sub(cpu_before);
        // The batch processor sends every second: what the run's commands made has left by now.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let spans = sink.spans.load(Ordering::Relaxed) - spans_before;
        service.proc.stop().await;
        truncate(&status).await?;
        let n = run.n.max(1);
        measured.push(Measured {
            rate: run.n as f64 / run.elapsed.as_secs_f64(),
            cpu_per_command: cpu / u32::try_from(n).unwrap_or(u32::MAX),
            spans,
            n,
        });
    }
    im.proc.stop().await;
    status.close().await;
    Ok(lines(&modes.map(|(name, _)| name), &measured))
}

fn lines(names: &[&str; 4], measured: &[Measured]) -> Vec<Line> {
    let off = &measured[0];
    let micros = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    let mut lines = Vec::new();
    for (name, m) in names.iter().zip(measured).skip(1) {
        let ratio = m.rate / off.rate;
        let added = m.cpu_per_command.as_secs_f64() - off.cpu_per_command.as_secs_f64();
        let what = format!("B14 commands/s, traces {name} (÷ off)");
        let value = format!("{:.0}/s", m.rate);
        let baseline = format!("{:.0}/s", off.rate);
        lines.push(if *name == "ratio 0.01" {
            Line::new(&what, value, baseline, format!("{ratio:.2}"), "≥ 0.90", ratio >= 0.90)
        } else {
            Line::ratio(&what, value, baseline, ratio)
        });
        lines.push(Line::info(
            &format!("B14 service CPU per command, traces {name}"),
            format!("{} ({:+.0} µs)", micros(m.cpu_per_command), added * 1e6),
            micros(off.cpu_per_command),
        ));
        lines.push(Line::info(
            &format!("B14 spans exported per command, traces {name}"),
            format!("{:.2}", m.spans as f64 / m.n as f64),
            format!("{} commands", m.n),
        ));
    }
    lines
}
