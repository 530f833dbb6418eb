//! The multi-statement transactions both backends share, written once over any [`Dialect`]:
//! the command commit and the batch mark. Each repository opens the transaction its own way
//! (SQLite takes the write lock up front) and hands it here.

use sqlx::{Executor, FromRow, IntoArguments, Transaction};

use super::rows::VersionRow;
use super::sql::{self, Dialect};
use super::types::{CommandCommit, CommitError, MarkReport, PublishResult, StoreError, group_failures};

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// Command log + outbox rows + fenced snapshot, then commit. Nothing is written on any error.
pub(super) async fn commit_command<DB>(
    mut tx: Transaction<'static, DB>,
    c: &CommandCommit,
) -> Result<(), CommitError>
where
    DB: Dialect,
    for<'r> VersionRow: FromRow<'r, DB::Row>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    if let Some((expected, state)) = &c.snapshot {
        let written = if *expected == 0 {
            match sql::insert_snapshot::<DB>(c, state).build().execute(&mut *tx).await {
                Err(e) if is_unique_violation(&e) => 0,
                other => DB::rows_affected(&other?),
            }
        } else {
            DB::rows_affected(
                &sql::update_snapshot::<DB>(c, *expected, state).build().execute(&mut *tx).await?,
            )
        };
        if written != 1 {
            return Err(CommitError::VersionConflict);
        }
    } else if !c.applied {
        // A no-op (join of a member, leave of a non-member) writes no snapshot, but it was
        // decided on the cell's state: that state must still be the committed one.
        let mut check = sql::locked_version::<DB>(&c.room_id);
        let stored = check.build_query_as::<VersionRow>().fetch_optional(&mut *tx).await?;
        if stored.map(|r| r.version) != Some(c.room_version as i64) {
            return Err(CommitError::VersionConflict);
        }
    }
    match sql::insert_command_log::<DB>(c).build().execute(&mut *tx).await {
        Err(e) if is_unique_violation(&e) => return Err(CommitError::DuplicateCommand),
        other => other?,
    };
    if !c.outbox.is_empty() {
        sql::insert_outbox::<DB>(c).build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A claimed batch's results in one transaction: one UPDATE for the delivered rows, one per
/// distinct error for the failed ones, every one fenced on this claim's `worker_id`.
pub(super) async fn finish_claimed<DB>(
    mut tx: Transaction<'static, DB>,
    worker_id: &str,
    results: &[PublishResult],
) -> Result<MarkReport, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let mut report = MarkReport::default();
    let delivered: Vec<i64> = results.iter().filter(|r| r.outcome.is_ok()).map(|r| r.id).collect();
    if !delivered.is_empty() {
        let done = sql::finish_delivered::<DB>(worker_id, &delivered).build().execute(&mut *tx).await?;
        report.delivered = DB::rows_affected(&done);
    }
    for ((error, retry_after), ids) in group_failures(results) {
        let failed = sql::finish_retryable::<DB>(worker_id, &error, retry_after, &ids)
            .build()
            .execute(&mut *tx)
            .await?;
        report.retried += DB::rows_affected(&failed);
    }
    tx.commit().await?;
    report.lease_lost = results.len() as u64 - report.delivered - report.retried;
    Ok(report)
}
