//! Row 7: SIGTERM and SIGKILL under load, five times each, alternating between two instances
//! on one database (each restarted on the same ports right after, while the other serves).
//!
//! Cycle `i` hits instance `i % 2` with SIGTERM when `i % 4` is 0 or 3 and SIGKILL otherwise,
//! so each instance gets both. A SIGTERM must end the process (status 0) within the bound of
//! its stop order; the clients retry a refused or cut request on the other instance with the
//! same command id. Recovery is the longest a victim took from its signal to `/readyz`
//! answering 200 again.

use std::time::{Duration, Instant};

use crate::load::Load;
use crate::report::RowResult;
use crate::support::secs;

use super::{ANSWER_BOUND, Ctx, Rig, TERM_BOUND};

/// Row 7.
pub async fn term_and_kill(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let cycles: u32 = ctx.pick(10, 2);
    let mut row = RowResult::new(
        7,
        format!("SIGTERM ×{} and SIGKILL ×{}, a and b in turn", cycles.div_ceil(2), cycles / 2),
        ANSWER_BOUND,
        cycles + 1,
    );
    let mut rig = Rig::start(ctx, 7, &[("a", Vec::new()), ("b", Vec::new())]).await?;
    let load = Load::start(&ctx.plan("r", rig.targets()))?;
    let first_signal = Instant::now() + ctx.pick(Duration::from_secs(3), Duration::from_millis(1500));
    tokio::time::sleep_until(first_signal.into()).await;
    let mut restarts = Vec::new();
    let mut term_exits = Vec::new();
    for i in 0..cycles {
        let victim = &mut rig.services[(i % 2) as usize];
        let signalled = Instant::now();
        if matches!(i % 4, 0 | 3) {
            match victim.terminate(TERM_BOUND).await {
                Ok(Some(took)) => term_exits.push(took),
                Ok(None) => row
                    .failures
                    .push(format!("{} did not stop within {TERM_BOUND:?} of SIGTERM", victim.node_id())),
                Err(error) => row.failures.push(format!("{} after SIGTERM: {error:#}", victim.node_id())),
            }
        } else {
            victim.kill();
        }
        victim.restart().await?;
        restarts.push(signalled.elapsed());
        tokio::time::sleep(ctx.pick(Duration::from_secs(1), Duration::from_millis(500))).await;
    }
    let last_restart = Instant::now();
    tokio::time::sleep(ctx.pick(Duration::from_secs(3), Duration::from_secs(1))).await;
    let report = load.finish(ctx.give_up_grace()).await;
    row.recovery = restarts.iter().max().copied();
    let slowest_exit = term_exits.iter().max().copied().unwrap_or_default();
    row.notes.push(format!(
        "signal → ready again: {}; slowest exit after SIGTERM {}; longest time without an acknowledged command {}",
        restarts.iter().map(|d| secs(*d)).collect::<Vec<_>>().join(", "),
        secs(slowest_exit),
        secs(report.longest_ack_gap(first_signal, last_restart))
    ));
    rig.finish(&mut row, report).await?;
    Ok(row)
}
