//! `room-service-faults`: the fault matrix (docs/RELIABILITY.md).
//!
//! Each row starts its own MariaDB (a copy of a data directory initialised once per run, on a
//! free port), the fake Tencent IM in this process and the real `room-service` binary in child
//! processes, runs a load across a fault and its recovery, then checks three sources against
//! each other: what the clients were acknowledged, what the database holds, and what IM
//! received. It prints one Markdown table and exits non-zero when any row breaks a promise:
//! something lost, a message nobody committed, an event sent more often than its bound, a 5xx
//! other than 503, a panic in a service log, or a request hanging beyond its bound.
//!
//! Build both binaries first: `cargo build --locked -p room-service -p
//! room-service-faults`, then `cargo run --locked -p room-service-faults -- [--rows 1,2,4,7]
//! [--smoke]`.

mod check;
mod galera;
mod load;
mod mariadb;
mod report;
mod rows;
mod service;
mod support;

use std::time::Instant;

use clap::Parser;
use futures::future::BoxFuture;

use report::RowResult;
use rows::Ctx;

/// The fault matrix of room-service.
#[derive(Debug, Clone, Parser)]
#[command(name = "room-service-faults")]
struct Args {
    /// Rows to run, comma-separated (1, 2, 4, 7, and 11-13 on Galera: the rows built so far); all when absent.
    #[arg(long, value_delimiter = ',')]
    rows: Vec<u8>,
    /// Small sizes, a few seconds per row: proves the harness works.
    #[arg(long)]
    smoke: bool,
    /// Keep the data directories and logs (printed at the end) even when every row holds.
    #[arg(long)]
    keep: bool,
    /// Run no row: start the rows' Galera cluster (three nodes on loopback, HAProxy in front),
    /// print its URL and keep it up until SIGTERM or Ctrl-C (for B1 on Galera, or a look).
    #[arg(long)]
    serve_galera: bool,
}

/// A row's runner.
type Runner = for<'a> fn(&'a Ctx<'a>) -> BoxFuture<'a, anyhow::Result<RowResult>>;

/// The rows built so far: number, fault, runner.
const ROWS: [(u8, &str, Runner); 7] = [
    (1, "MariaDB kill -9", |c| Box::pin(rows::db::kill9(c))),
    (2, "MariaDB SIGSTOP", |c| Box::pin(rows::db::freeze(c))),
    (4, "worker frozen past its lease", |c| Box::pin(rows::lease::frozen_worker(c))),
    (7, "SIGTERM and SIGKILL of the service", |c| Box::pin(rows::restarts::term_and_kill(c))),
    (11, "Galera: the writer kill -9", |c| Box::pin(rows::galera::kill_writer(c))),
    (12, "Galera: the writer SIGSTOP", |c| Box::pin(rows::galera::freeze_writer(c))),
    (13, "Galera: the writer cut off", |c| Box::pin(rows::galera::isolate_writer(c))),
];

/// Runs the rows asked for (all when `wanted` is empty), in order; a row that cannot run is
/// a row that breaks its promises.
async fn run_rows(ctx: &Ctx<'_>, wanted: &[u8]) -> Vec<RowResult> {
    let mut results = Vec::new();
    for (id, what, run) in ROWS {
        if !wanted.is_empty() && !wanted.contains(&id) {
            continue;
        }
        eprintln!("row {id} ({what})...");
        let row_started = Instant::now();
        let mut result = run(ctx).await.unwrap_or_else(|error| RowResult::error(id, what, &error));
        result.elapsed = row_started.elapsed();
        eprintln!("row {id} done in {}", support::secs(result.elapsed));
        results.push(result);
    }
    results
}

/// Completes on SIGTERM or SIGINT (a CI timeout, Ctrl-C), naming it; never when the
/// handlers cannot be installed.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// `--serve-galera`: the cluster of rows 11-13, up until interrupted.
async fn serve_galera() -> anyhow::Result<()> {
    let scratch = support::ScratchDir::new()?;
    let template = mariadb::Template::install(&scratch.path().join("template"))?;
    let mut cluster = galera::Galera::start(&template, &scratch.path().join("galera")).await?;
    println!("{}", cluster.url());
    eprintln!(
        "Galera: 3 nodes Synced, HAProxy in front (data in {}); Ctrl-C stops it",
        scratch.path().display()
    );
    let signal = interrupted().await;
    eprintln!("{signal}: stopping the cluster");
    cluster.stop().await;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    for wanted in &args.rows {
        anyhow::ensure!(
            ROWS.iter().any(|(id, _, _)| id == wanted),
            "row {wanted} is not built (rows: 1, 2, 4, 7, 11, 12, 13; see docs/RELIABILITY.md)"
        );
    }
    if args.serve_galera {
        return serve_galera().await;
    }
    service::binary()?;
    let started = Instant::now();
    let mut scratch = support::ScratchDir::new()?;
    let template = mariadb::Template::install(&scratch.path().join("template"))?;
    eprintln!("mariadb-install-db: {}", support::secs(template.install_time));
    let ctx = Ctx { template: &template, root: scratch.path(), smoke: args.smoke };
    let results = tokio::select! {
        results = run_rows(&ctx, &args.rows) => results,
        signal = interrupted() => {
            // The rows' processes were killed when their future was dropped, above.
            eprintln!("{signal}: stopped, every MariaDB and service of the run killed");
            drop(scratch);
            std::process::exit(130);
        }
    };
    println!(
        "room-service-faults{}: {} cores, mariadb-install-db {} (once per run, copied per row)\n",
        if args.smoke { " --smoke" } else { "" },
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        support::secs(template.install_time)
    );
    println!("{}", report::render(&results));
    print!("{}", report::notes(&results));
    println!("\ntotal {}", support::secs(started.elapsed()));
    if args.keep {
        scratch.keep();
        eprintln!("data directories and service logs kept in {}", scratch.path().display());
    }
    let broken = results.iter().filter(|r| !r.broken().is_empty()).count();
    if broken > 0 {
        scratch.keep();
        eprintln!(
            "{broken} row(s) broke a promise; data directories and service logs kept in {}",
            scratch.path().display()
        );
        drop(scratch);
        std::process::exit(1);
    }
    Ok(())
}
