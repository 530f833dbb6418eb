//! Event consumers other than IM (SPEC §11.6): each has its own row in `room_event_consumer`
//! — its position in `room_outbox` (the highest id it has passed), a lease so that one
//! instance at a time consumes it (database clock), and its last error. A consumer's progress
//! never touches the IM columns of `room_outbox`: an event delivered to IM may not have reached
//! the audit log yet, and the other way round.
//!
//! Consumers read `room_outbox` by id. Ids are not commit order on MySQL/MariaDB (a transaction
//! holding id N may commit after N+1 was read), so a consumer only passes a missing id once
//! [`ConsumerRepository::open_writers_since`] proves that no transaction able to hold it is
//! still open, or after a grace window (see `crate::consumer::HighWater`).
//! [`ConsumerRepository`] is a supertrait of [`Repository`](crate::store::Repository); its one
//! implementation, for [`SqlRepository`] over any [`Backend`], runs the statements of `sql.rs`
//! (and the backend's own open-writers probe); its values are in `types.rs`.

mod sql;
mod types;

use std::time::Duration;

use async_trait::async_trait;

use self::sql::{ConsumerRecord, Holder};
pub use self::types::{AuditEntry, ConsumerLease, ConsumerRow, EventRow, ResetReport, ResetTo};
use crate::store::backend::open_writers;
use crate::store::backend::run::Run;
use crate::store::backend::{Backend, SqlRepository};
use crate::store::error::StoreError;

/// Consumer positions and leases, and the reads consumers make; times are the database's.
#[async_trait]
pub trait ConsumerRepository: Send + Sync {
    /// Takes (or renews) `lease` when it is free, expired or already its owner's; creates the
    /// consumer's row at position 0 when missing. Returns the position to resume after, or
    /// `None` when another instance holds the lease.
    async fn acquire_consumer(&self, lease: ConsumerLease<'_>) -> Result<Option<i64>, StoreError>;

    /// Records that every event up to `to` was passed, clears `last_error` and renews the lease
    /// — fenced on the owner still holding the row and on the position still being `from` (what
    /// this owner read). `false`: the lease was lost (taken over, or the consumer reset by an
    /// operator); nothing changed.
    async fn advance_consumer(
        &self,
        lease: ConsumerLease<'_>,
        from: i64,
        to: i64,
    ) -> Result<bool, StoreError>;

    /// Records a failed delivery (`error` is truncated to fit) and renews the lease, fenced on
    /// the owner as [`ConsumerRepository::advance_consumer`] is. `false`: the lease was lost.
    async fn record_consumer_error(&self, lease: ConsumerLease<'_>, error: &str) -> Result<bool, StoreError>;

    /// Frees `lease` if its owner holds it (a stopping instance), so another takes over at once.
    async fn release_consumer(&self, lease: ConsumerLease<'_>) -> Result<(), StoreError>;

    /// Up to `limit` events with an id above `position`, by ascending id.
    async fn events_after(&self, position: i64, limit: u32) -> Result<Vec<EventRow>, StoreError>;

    /// How long ago (database clock) the first event after `position` committed: the
    /// consumer's lag. `None`: nothing is left to consume.
    async fn consumer_lag(&self, position: i64) -> Result<Option<Duration>, StoreError>;

    /// The database clock now, in ms: taken when a consumer first sees a missing id.
    async fn database_now_ms(&self) -> Result<i64, StoreError>;

    /// How many write transactions that began at or before `since_ms` (database clock) are still
    /// open. Zero proves that an id missing at `since_ms` was rolled back (or deleted) and will
    /// never appear. `None`: this database cannot tell (MySQL without the PROCESS privilege,
    /// or a server whose transaction list stayed older than the question for about 0.6 s — its
    /// `INNODB_TRX` cache is refreshed only once nobody has read it for 0.1 s); the consumer then
    /// waits out its grace window. On MySQL the count may include writers that began up to a
    /// second after `since_ms` (whole-second start times): it errs towards waiting. SQLite always answers `Some(0)`: ids are
    /// handed out under its one write lock, so a reader never sees an id above one still open.
    async fn open_writers_since(&self, since_ms: i64) -> Result<Option<u64>, StoreError>;

    /// Every consumer row, by name.
    async fn list_consumers(&self) -> Result<Vec<ConsumerRow>, StoreError>;

    /// Moves consumer `name` (creating its row when missing) and frees its lease, so a running
    /// instance loses its fence and resumes from the new position.
    async fn reset_consumer(&self, name: &str, to: ResetTo) -> Result<ResetReport, StoreError>;

    /// The lowest position among every stored consumer and the `enabled` ones (an enabled
    /// consumer without a row yet counts as 0): retention deletes no event above it. Every
    /// stored row counts, whichever node's configuration enables it, so a node that does not
    /// know a consumer (a rolling deploy, an operator's file) never purges what it still needs;
    /// [`ConsumerRepository::retire_consumer`] lets a consumer go for good. `None`: no consumer.
    async fn consumers_floor(&self, enabled: &[&str]) -> Result<Option<i64>, StoreError>;

    /// Deletes the row of `name`: it no longer holds retention back, and if it is enabled again
    /// it starts from the oldest stored event. `false`: there was none.
    async fn retire_consumer(&self, name: &str) -> Result<bool, StoreError>;

    /// Appends `entries` to the audit log in one statement, in order, stamped with the database
    /// clock. An entry whose event is already there (a redelivery after a crash between the
    /// append and the consumer's advance) is left as it is.
    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError>;

    /// Up to `limit` audit entries (of `room_id` only, when given), oldest first: the order
    /// they were recorded in.
    async fn audit_entries(&self, room_id: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError>;
}

#[async_trait]
impl<DB: Backend> ConsumerRepository for SqlRepository<DB> {
    async fn acquire_consumer(&self, lease: ConsumerLease<'_>) -> Result<Option<i64>, StoreError> {
        let name = lease.name;
        if sql::take::<DB>(lease).execute(&self.pool).await? == 0 {
            // Held by another instance (a standby's every poll: reads only), or missing.
            if sql::holder::<DB>(name).fetch_optional::<Holder>(&self.pool).await?.is_some() {
                return Ok(None);
            }
            sql::create::<DB>(name).execute(&self.pool).await?;
            if sql::take::<DB>(lease).execute(&self.pool).await? == 0 {
                return Ok(None);
            }
        }
        // Read back, fenced on the owner: a lease lost since the UPDATE is not won.
        let held = sql::holder::<DB>(name).fetch_optional::<Holder>(&self.pool).await?;
        Ok(held.filter(|h| h.owner.as_deref() == Some(lease.owner)).map(|h| h.position))
    }

    async fn advance_consumer(
        &self,
        lease: ConsumerLease<'_>,
        from: i64,
        to: i64,
    ) -> Result<bool, StoreError> {
        let mut q = sql::advance::<DB>(lease, from, to);
        Ok(q.execute(&self.pool).await? > 0)
    }

    async fn record_consumer_error(&self, lease: ConsumerLease<'_>, error: &str) -> Result<bool, StoreError> {
        let mut q = sql::record_error::<DB>(lease, error);
        Ok(q.execute(&self.pool).await? > 0)
    }

    async fn release_consumer(&self, lease: ConsumerLease<'_>) -> Result<(), StoreError> {
        sql::release::<DB>(lease).execute(&self.pool).await?;
        Ok(())
    }

    async fn events_after(&self, position: i64, limit: u32) -> Result<Vec<EventRow>, StoreError> {
        let mut q = sql::events_after::<DB>(position, limit);
        Ok(q.fetch_all(&self.pool).await?)
    }

    async fn consumer_lag(&self, position: i64) -> Result<Option<Duration>, StoreError> {
        let mut q = sql::lag::<DB>(position);
        let age: Option<(i64,)> = q.fetch_optional(&self.pool).await?;
        Ok(age.map(|(ms,)| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    async fn database_now_ms(&self) -> Result<i64, StoreError> {
        let (now,) = sql::now::<DB>().fetch_one(&self.pool).await?;
        Ok(now)
    }

    async fn open_writers_since(&self, since_ms: i64) -> Result<Option<u64>, StoreError> {
        let Some(probe) = DB::OPEN_WRITERS else {
            return Ok(Some(0));
        };
        let denied =
            |error: sqlx::Error| if DB::access_denied(&error) { Ok(None) } else { Err(error.into()) };
        let mut tx = self.pool.begin().await?;
        if let Err(error) = sqlx::query(probe.begin).execute(DB::on_conn(&mut tx)).await {
            return denied(error);
        }
        for attempt in 0..open_writers::WRITER_PROBES {
            if attempt > 0 {
                tokio::time::sleep(open_writers::WRITER_PROBE_PAUSE).await;
            }
            let text = (probe.count)(since_ms, &open_writers::probe_tag());
            let counted = sqlx::raw_sql(sqlx::AssertSqlSafe(text)).fetch_one(DB::on_conn(&mut tx)).await;
            match counted.and_then(|row| DB::decode::<(i64, i64)>(&row)) {
                Ok((own, others)) if own > 0 => return Ok(Some(others.max(0) as u64)),
                Ok(_) => {}
                Err(error) => return denied(error),
            }
        }
        Ok(None)
    }

    async fn list_consumers(&self) -> Result<Vec<ConsumerRow>, StoreError> {
        let rows = sql::list::<DB>().fetch_all::<ConsumerRecord>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn reset_consumer(&self, name: &str, to: ResetTo) -> Result<ResetReport, StoreError> {
        let mut target = sql::reset_target::<DB>(to)?;
        let mut tx = self.pool.begin_with(DB::BEGIN_WRITE).await?;
        let before: Option<(i64,)> = sql::locked_position::<DB>(name).fetch_optional(&mut *tx).await?;
        let (after,): (i64,) = target.fetch_one(&mut *tx).await?;
        sql::reset::<DB>(name, after).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(ResetReport { before: before.map(|(position,)| position), after })
    }

    async fn consumers_floor(&self, enabled: &[&str]) -> Result<Option<i64>, StoreError> {
        let stored: Vec<(String, i64)> = sql::positions::<DB>().fetch_all(&self.pool).await?;
        Ok(sql::floor(&stored, enabled))
    }

    async fn retire_consumer(&self, name: &str) -> Result<bool, StoreError> {
        let mut q = sql::retire::<DB>(name);
        Ok(q.execute(&self.pool).await? > 0)
    }

    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        sql::append_audit::<DB>(entries).execute(&self.pool).await?;
        Ok(())
    }

    async fn audit_entries(&self, room_id: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let mut q = sql::audit_entries::<DB>(room_id, limit);
        Ok(q.fetch_all(&self.pool).await?)
    }
}
