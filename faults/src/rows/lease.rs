//! Row 4: two instances on one database; `a`'s worker is frozen (SIGSTOP of the process) while
//! it holds claimed rows, longer than its lease; `b` reclaims them and delivers them; then `a`
//! is thawed (SIGCONT) and its marks, made under a lease it lost, must change nothing.
//!
//! How `a` comes to hold rows: it is started with a small IM rate (`im_rate_limit`'s
//! `global_per_sec` and `per_group_per_sec` 10; its worker gets 80 % of the app-wide rate) and
//! the first load goes to it alone, so its
//! synchronous path leaves most events pending and its worker claims batches it drains
//! slowly, waiting for permits. That load ends before the freeze (a request to a frozen
//! process would hang); the second load goes to `b`. The lease is `max(3 × publish_timeout,
//! 10 s)` = 10 s.
//!
//! A stale mark accepted would show as a held row updated after the thaw (every row is
//! delivered by `b` before it), or as an event reaching IM a third time.

use std::collections::HashMap;
use std::time::Duration;

use room_service_fakes::fake_im::EventSends;
use sqlx::AssertSqlSafe;
use sqlx::mysql::MySqlPoolOptions;

use crate::load::Load;
use crate::report::RowResult;
use crate::support::{secs, wait_until};

use super::{ANSWER_BOUND, Ctx, Rig, db_now_ms};

/// Rows `a` must hold before it is frozen.
const MIN_HELD: i64 = 5;

/// Row 4.
pub async fn frozen_worker(ctx: &Ctx<'_>) -> anyhow::Result<RowResult> {
    let mut row = RowResult::new(4, "worker a SIGSTOP past its lease, b reclaims, SIGCONT", ANSWER_BOUND, 2);
    let slow = vec![
        ("ROOM_SERVICE__IM_RATE_LIMIT__GLOBAL_PER_SEC".to_owned(), "10".to_owned()),
        ("ROOM_SERVICE__IM_RATE_LIMIT__PER_GROUP_PER_SEC".to_owned(), "10".to_owned()),
    ];
    let rig = Rig::start(ctx, 4, &[("a", slow), ("b", Vec::new())]).await?;
    let pool = MySqlPoolOptions::new().max_connections(2).connect(&rig.db.url()).await?;
    let (a, b) = (&rig.services[0], &rig.services[1]);

    // The backlog: commands to a alone.
    let to_a = Load::start(&ctx.plan("l", vec![a.base_url()]))?;
    tokio::time::sleep(ctx.pick(Duration::from_secs(4), Duration::from_secs(3))).await;
    let mut report = to_a.finish(ctx.give_up_grace()).await;
    let held_by_a = "SELECT COUNT(*) FROM room_outbox WHERE status = 'delivering' AND worker_id LIKE 'a-%'";
    let holding =
        wait_until("a holds claimed rows", Duration::from_secs(10), || {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(held_by_a).fetch_one(&pool).await.is_ok_and(|n| n >= MIN_HELD)
            }
        })
        .await;
    if let Err(error) = holding {
        anyhow::bail!("{error}: the row could not set up its fault");
    }

    a.freeze()?;
    let held: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, event_id FROM room_outbox WHERE status = 'delivering' AND worker_id LIKE 'a-%'",
    )
    .fetch_all(&pool)
    .await?;
    // Only what a held can be sent twice — what it had sent before the freeze, or sends after —
    // and what IM took from it but it had not marked yet (a lane's last pack: b takes those
    // rows after their guard).
    let unmarked: Vec<String> =
        sqlx::query_scalar("SELECT event_id FROM room_outbox WHERE status <> 'delivered'")
            .fetch_all(&pool)
            .await?;
    let at_freeze = rig.im.sends_by_event();
    let held_ids: std::collections::HashSet<&str> = held.iter().map(|(_, e)| e.as_str()).collect();
    let sent_unmarked = unmarked
        .iter()
        .filter(|e| {
            !held_ids.contains(e.as_str()) && at_freeze.get(e.as_str()).is_some_and(|s| s.received > 0)
        })
        .count();
    row.in_flight = Some((held.len() + sent_unmarked) as u64);
    let to_b = Load::start(&ctx.plan("m", vec![b.base_url()]))?;
    let ids: Vec<String> = held.iter().map(|(id, _)| id.to_string()).collect();
    let still_undelivered =
        format!("SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered' AND id IN ({})", ids.join(","));
    let takeover = wait_until("b delivers the rows a held", Duration::from_secs(40), || {
        let (pool, sql) = (pool.clone(), still_undelivered.clone());
        async move {
            sqlx::query_scalar::<_, i64>(AssertSqlSafe(sql)).fetch_one(&pool).await.is_ok_and(|n| n == 0)
        }
    })
    .await;
    let thawed_ms = db_now_ms(&pool).await?;
    // b has delivered every held row by now: whatever IM takes of them later comes from a.
    let before_thaw = rig.im.sends_by_event();
    a.thaw()?;
    let takeover = takeover?;
    row.recovery = Some(takeover);
    // a runs on: its in-flight publishes end, its queued rows go out, its marks are fenced.
    tokio::time::sleep(ctx.pick(Duration::from_secs(4), Duration::from_secs(2))).await;
    report.merge(to_b.finish(ctx.give_up_grace()).await);
    // a marks every row it held once, each mark refused by the fence and counted: wait until
    // it has (it drains at its slow rate), so the stale check below sees all of them.
    let marked = wait_until("a has marked every row it held", Duration::from_secs(30), || async {
        a.metric("room_outbox_lease_lost_total").await.is_ok_and(|n| n >= held.len() as f64)
    })
    .await;
    if let Err(error) = marked {
        row.notes.push(format!("{error} (the stale check covers the marks made so far)"));
    }

    let stale_sql = format!(
        "SELECT COUNT(*) FROM room_outbox WHERE id IN ({}) AND (status <> 'delivered' OR updated_at_ms > {thawed_ms})",
        ids.join(",")
    );
    let stale: i64 = sqlx::query_scalar(AssertSqlSafe(stale_sql)).fetch_one(&pool).await?;
    let lease_lost = a.metric("room_outbox_lease_lost_total").await?;
    pool.close().await;
    let sends = rig.im.sends_by_event();
    let received =
        |by: &HashMap<String, EventSends>, event_id: &str| by.get(event_id).map(|s| s.received).unwrap_or(0);
    let held_sends: HashMap<u32, usize> = held.iter().fold(HashMap::new(), |mut by, (_, event_id)| {
        *by.entry(received(&sends, event_id)).or_default() += 1;
        by
    });
    let resent_after_thaw =
        held.iter().filter(|(_, e)| received(&sends, e) > received(&before_thaw, e)).count();
    row.notes.push(format!(
        "a held {} claimed rows when frozen, and IM had taken {sent_unmarked} more rows not marked delivered yet; b had delivered them all {} later (lease 10 s); \
         stale marks accepted: {stale}; marks of a refused by the fence (room_outbox_lease_lost_total on a): {lease_lost}; \
         held rows by times IM took them: {:?}; of them sent again by a after the thaw: {resent_after_thaw}",
        held.len(),
        secs(takeover),
        sorted(held_sends)
    ));
    if stale > 0 {
        row.failures.push(format!("{stale} rows a held were changed after its lease was lost"));
    }
    // On waking, a knows its leases may be gone and publishes none of its queued rows: only the
    // publishes already in flight when it froze (at most outbox_worker.max_in_flight packs of
    // up to im_batch.max_events rows each) go out.
    if resent_after_thaw > MAX_IN_FLIGHT_ROWS {
        row.failures.push(format!(
            "a sent {resent_after_thaw} rows again after the thaw, more than the {MAX_IN_FLIGHT_ROWS} it could have had in flight"
        ));
    }
    rig.finish(&mut row, report).await?;
    Ok(row)
}

/// Rows the services can have in flight: `outbox_worker.max_in_flight` packs (the default) of
/// at most `im_batch.max_events` rows each (the default).
const MAX_IN_FLIGHT_ROWS: usize =
    room_service::config::DEFAULT_MAX_IN_FLIGHT * room_service::delivery::pack::DEFAULT_MAX_EVENTS;

/// `(sends, rows)` pairs, fewest sends first.
fn sorted(by: HashMap<u32, usize>) -> Vec<(u32, usize)> {
    let mut pairs: Vec<(u32, usize)> = by.into_iter().collect();
    pairs.sort_unstable();
    pairs
}
