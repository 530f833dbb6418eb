//! Rows 11, 12 and 13: the database is a 3-node MariaDB Galera cluster behind HAProxy
//! (docs/DEPLOY-HA.md), and the node HAProxy writes to fails under load, one instance serving.
//!
//! - Row 11: the writer `kill -9`; HAProxy's check marks it down (2 failed checks, 1 s apart)
//!   and sends new connections to the next node; 5 s later the node restarts from its
//!   recovered position and rejoins by IST, and HAProxy moves the writes back to it (the
//!   backup's sessions cut: one writer at a time).
//! - Row 12: the writer SIGSTOP for 10 s, past HAProxy's check and the group's suspect timeout
//!   (5 s): the others evict it and carry on; on SIGCONT it rejoins.
//! - Row 13: the writer cut off the group for 10 s (`gmcast.isolate`): it loses quorum and
//!   refuses every query (`WSREP has not yet prepared node for application use`) while its
//!   client port still answers; then it rejoins.
//!
//! Recovery is the longest time without an acknowledged command from the fault on (the
//! cluster goes on without the node: nothing waits for it to come back). Beside the common checks: room order
//! at IM across the switch is the check's own (every room's versions in order), and the 5xx
//! answers during the switch are counted (503 only: a retry of the same command is safe).

use std::time::{Duration, Instant};

use crate::galera::Galera;
use crate::load::Load;
use crate::report::RowResult;
use crate::support::secs;

use super::{ANSWER_BOUND, Ctx, Database, Rig};

/// Row 11.
pub async fn kill_writer(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let down = ctx.pick(Duration::from_secs(5), Duration::from_secs(2));
    let fault = format!("Galera: the writer kill -9, back after {} s", down.as_secs());
    let row = RowResult::new(11, fault, ANSWER_BOUND, 2);
    under_load(ctx, row, "gk", async |cluster: &mut Galera, writer| {
        cluster.kill9(writer);
        tokio::time::sleep(down).await;
        let rejoined = cluster.restart(writer).await?;
        Ok(format!(
            "{} rejoined in {} by {} ({} s after its kill)",
            cluster.name(writer),
            secs(rejoined),
            cluster.last_transfer(writer),
            down.as_secs()
        ))
    })
    .await
}

/// Row 12.
pub async fn freeze_writer(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let frozen = ctx.pick(Duration::from_secs(10), Duration::from_secs(7));
    let fault = format!("Galera: the writer SIGSTOP for {}, SIGCONT", secs(frozen));
    let row = RowResult::new(12, fault, ANSWER_BOUND, 2);
    under_load(ctx, row, "gs", async |cluster: &mut Galera, writer| {
        cluster.freeze(writer)?;
        tokio::time::sleep(frozen).await;
        cluster.thaw(writer)?;
        let rejoined = cluster.wait_synced(writer).await?;
        Ok(format!("{} Synced again {} after SIGCONT", cluster.name(writer), secs(rejoined)))
    })
    .await
}

/// Row 13.
pub async fn isolate_writer(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let cut = ctx.pick(Duration::from_secs(10), Duration::from_secs(4));
    let fault = format!("Galera: the writer cut off the group for {} (gmcast.isolate)", secs(cut));
    let row = RowResult::new(13, fault, ANSWER_BOUND, 2);
    under_load(ctx, row, "gp", async |cluster: &mut Galera, writer| {
        cluster.isolate(writer, true).await?;
        tokio::time::sleep(cut).await;
        cluster.isolate(writer, false).await?;
        let rejoined = cluster.wait_synced(writer).await?;
        Ok(format!("{} Synced again {} after it was let back", cluster.name(writer), secs(rejoined)))
    })
    .await
}

/// Row `row` with one instance under load (client tag `tag`) on a Galera cluster: after a few
/// seconds `fault` runs on the node HAProxy writes to and returns once the node is back (its
/// note), then the load runs on.
async fn under_load(
    ctx: &Ctx<'_>,
    mut row: RowResult,
    tag: &str,
    fault: impl AsyncFnOnce(&mut Galera, usize) -> anyhow::Result<String>,
) -> anyhow::Result<RowResult> {
    let mut rig = Rig::start_galera(ctx, row.id, &[("a", Vec::new())]).await?;
    let load = Load::start(&ctx.plan(tag, rig.targets()))?;
    tokio::time::sleep(ctx.pick(Duration::from_secs(5), Duration::from_millis(1500))).await;
    let Database::Galera(cluster) = &mut rig.db else { anyhow::bail!("rows 11-13 run on Galera") };
    let writer = cluster.writer().await?;
    let at = Instant::now();
    let note = fault(cluster, writer).await?;
    tokio::time::sleep(ctx.pick(Duration::from_secs(10), Duration::from_secs(4))).await;
    let report = load.finish(ctx.give_up_grace()).await;
    // What the clients saw of the switch: the longest time without an acknowledged command.
    let gap = report.longest_ack_gap(at, Instant::now());
    row.recovery = Some(gap);
    row.notes.push(format!(
        "{note}; commands acknowledged again {} into the fault at most; 503 answers {}, other 5xx {}",
        secs(gap),
        report.count(503),
        report.other_5xx()
    ));
    for service in &mut rig.services {
        if !service.running() {
            row.failures.push(format!("service {} exited during the fault", service.node_id()));
        }
    }
    rig.finish(&mut row, report).await?;
    Ok(row)
}
