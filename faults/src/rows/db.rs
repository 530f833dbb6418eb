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

use crate::load::{Load, LoadReport};
use crate::mariadb::MariaDb;
use crate::report::RowResult;
use crate::support::secs;

use super::{ANSWER_BOUND, Ctx, Rig};

/// Row 1's bound on any answer: the pool's acquire timeout (5 s) is what a command waits for
/// a connection, well inside it.
const ROW1_ANSWER_BOUND: Duration = Duration::from_secs(10);

/// Row 1.
pub async fn kill9(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let down = ctx.pick(Duration::from_secs(5), Duration::from_secs(1));
    let row = RowResult::new(
        1,
        format!("MariaDB kill -9, restart after {} s", down.as_secs()),
        ROW1_ANSWER_BOUND,
        2,
    );
    let outage = async |db: &mut MariaDb| {
        db.kill9();
        tokio::time::sleep(down).await;
        db.restart().await
    };
    under_load(ctx, row, "k", outage, |restart, _, _| {
        format!(
            "MariaDB took {} to accept connections again (crash recovery); no room-service restart",
            secs(restart)
        )
    })
    .await
}

/// Row 2.
pub async fn freeze(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let frozen = ctx.pick(Duration::from_secs(10), Duration::from_secs(2));
    let row = RowResult::new(2, format!("MariaDB SIGSTOP for {}, SIGCONT", secs(frozen)), ANSWER_BOUND, 2);
    let outage = async |db: &mut MariaDb| {
        db.freeze()?;
        let stopped = Instant::now();
        tokio::time::sleep(frozen).await;
        db.thaw()?;
        Ok(stopped)
    };
    under_load(ctx, row, "s", outage, |stopped, report, back| {
        let gap = report.longest_ack_gap(stopped, back + Duration::from_secs(1));
        format!("no command acknowledged for {} around the freeze", secs(gap))
    })
    .await
}

/// Row `row` with one instance under load (client tag `tag`): after a few seconds `outage` runs
/// on the database and returns once it is back, then the load runs on. Recovery counts from
/// then; `note` words what `outage` measured, seeing the load's report and the time it was back.
async fn under_load<T>(
    ctx: &Ctx<'_>,
    mut row: RowResult,
    tag: &str,
    outage: impl AsyncFnOnce(&mut MariaDb) -> anyhow::Result<T>,
    note: impl FnOnce(T, &LoadReport, Instant) -> String,
) -> anyhow::Result<RowResult> {
    let mut rig = Rig::start(ctx, row.id, &[("a", Vec::new())]).await?;
    let load = Load::start(&ctx.plan(tag, rig.targets()))?;
    tokio::time::sleep(ctx.pick(Duration::from_secs(5), Duration::from_millis(1500))).await;
    let super::Database::One(db) = &mut rig.db else { anyhow::bail!("rows 1 and 2 run on one server") };
    let measured = outage(db).await?;
    let back = Instant::now();
    tokio::time::sleep(ctx.pick(Duration::from_secs(10), Duration::from_secs(3))).await;
    let report = load.finish(ctx.give_up_grace()).await;
    row.recovery = report.first_ack_after(back).map(|t| t - back);
    row.notes.push(note(measured, &report, back));
    still_running(&mut rig, &mut row);
    rig.finish(&mut row, report).await?;
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
