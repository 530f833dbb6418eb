//! Rows 1 and 2: the database goes away under load, one instance serving.
//!
//! - Row 1: MariaDB `kill -9`, restarted after 5 s on the same data directory and port.
//!   Commands answer 503 (the pool's acquire timeout is 5 s) and never hang; the service
//!   recovers alone, with no restart of room-service.
//! - Row 2: MariaDB SIGSTOP for 10 s, then SIGCONT: the server keeps its sockets but answers
//!   nothing, so statements under way wait; requests are answered 503 `request_timeout` by
//!   the edge at 10 s at worst.
//!
//! Recovery is the time from the end of the fault (the server accepting connections again,
//! or SIGCONT) to the first acknowledged command.

use std::time::{Duration, Instant};

use crate::load::Load;
use crate::report::RowResult;
use crate::support::secs;

use super::{ANSWER_BOUND, Ctx, Rig};

/// Row 1's bound on any answer: the pool's acquire timeout (5 s) is what a command waits for
/// a connection, well inside it.
const ROW1_ANSWER_BOUND: Duration = Duration::from_secs(10);

/// Row 1.
pub async fn kill9(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let started = Instant::now();
    let mut row = RowResult {
        id: 1,
        fault: "MariaDB kill -9, restart after 5 s".into(),
        latency_bound: ROW1_ANSWER_BOUND,
        sends_bound: 2,
        ..RowResult::default()
    };
    let down = ctx.pick(Duration::from_secs(5), Duration::from_secs(1));
    if ctx.smoke {
        row.fault = format!("MariaDB kill -9, restart after {}", secs(down));
    }
    let mut rig = Rig::start(ctx, 1, &[("a", Vec::new())]).await?;
    let load = Load::start(&ctx.plan("k", rig.targets()))?;
    tokio::time::sleep(ctx.pick(Duration::from_secs(5), Duration::from_millis(1500))).await;
    rig.db.kill9();
    tokio::time::sleep(down).await;
    let restart = rig.db.restart().await?;
    let back = Instant::now();
    tokio::time::sleep(ctx.pick(Duration::from_secs(10), Duration::from_secs(3))).await;
    let report = load.finish(ctx.give_up_grace()).await;
    row.recovery = report.first_ack_after(back).map(|t| t - back);
    row.notes.push(format!(
        "MariaDB took {} to accept connections again (crash recovery); no room-service restart",
        secs(restart)
    ));
    still_running(&mut rig, &mut row);
    rig.finish(&mut row, report).await?;
    row.elapsed = started.elapsed();
    Ok(row)
}

/// Row 2.
pub async fn freeze(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let started = Instant::now();
    let frozen = ctx.pick(Duration::from_secs(10), Duration::from_secs(2));
    let mut row = RowResult {
        id: 2,
        fault: format!("MariaDB SIGSTOP for {}, SIGCONT", secs(frozen)),
        latency_bound: ANSWER_BOUND,
        sends_bound: 2,
        ..RowResult::default()
    };
    let mut rig = Rig::start(ctx, 2, &[("a", Vec::new())]).await?;
    let load = Load::start(&ctx.plan("s", rig.targets()))?;
    tokio::time::sleep(ctx.pick(Duration::from_secs(5), Duration::from_millis(1500))).await;
    rig.db.freeze()?;
    let stopped = Instant::now();
    tokio::time::sleep(frozen).await;
    rig.db.thaw()?;
    let back = Instant::now();
    tokio::time::sleep(ctx.pick(Duration::from_secs(10), Duration::from_secs(3))).await;
    let report = load.finish(ctx.give_up_grace()).await;
    row.recovery = report.first_ack_after(back).map(|t| t - back);
    row.notes.push(format!(
        "no command acknowledged for {} around the freeze",
        secs(report.longest_ack_gap(stopped, back + Duration::from_secs(1)))
    ));
    still_running(&mut rig, &mut row);
    rig.finish(&mut row, report).await?;
    row.elapsed = started.elapsed();
    Ok(row)
}

/// The service must ride the outage out in the same process: nothing restarts it.
fn still_running(rig: &mut Rig, row: &mut RowResult) {
    for service in &mut rig.services {
        if !service.running() {
            row.failures.push(format!("service {} exited during the database outage", service.node_id()));
        }
    }
}
