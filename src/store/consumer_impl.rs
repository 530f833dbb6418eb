//! [`ConsumerRepository`] for [`SqlRepository`] over any [`Backend`], running the SQL of
//! `consumer_sql.rs` (kept apart from it so that each file stays short; `lease_sql.rs` holds both
//! halves of the shard leases).

use std::time::Duration;

use async_trait::async_trait;

use super::backend::{Backend, Run};
use super::consumer::{
    AuditEntry, ConsumerLease, ConsumerRepository, ConsumerRow, EventRow, ResetReport, ResetTo,
};
use super::consumer_sql::{self as cs, ConsumerRecord, Holder};
use super::open_writers_sql as ow;
use super::repository::SqlRepository;
use super::types::StoreError;

#[async_trait]
impl<DB: Backend> ConsumerRepository for SqlRepository<DB> {
    async fn acquire_consumer(&self, lease: ConsumerLease<'_>) -> Result<Option<i64>, StoreError> {
        let name = lease.name;
        if cs::take::<DB>(lease).execute(&self.pool).await? == 0 {
            // Held by another instance (a standby's every poll: reads only), or missing.
            if cs::holder::<DB>(name).fetch_optional::<Holder>(&self.pool).await?.is_some() {
                return Ok(None);
            }
            cs::create::<DB>(name).execute(&self.pool).await?;
            if cs::take::<DB>(lease).execute(&self.pool).await? == 0 {
                return Ok(None);
            }
        }
        // Read back, fenced on the owner: a lease lost since the UPDATE is not won.
        let held = cs::holder::<DB>(name).fetch_optional::<Holder>(&self.pool).await?;
        Ok(held.filter(|h| h.owner.as_deref() == Some(lease.owner)).map(|h| h.position))
    }

    async fn advance_consumer(
        &self,
        lease: ConsumerLease<'_>,
        from: i64,
        to: i64,
    ) -> Result<bool, StoreError> {
        let mut q = cs::advance::<DB>(lease, from, to);
        Ok(q.execute(&self.pool).await? > 0)
    }

    async fn record_consumer_error(&self, lease: ConsumerLease<'_>, error: &str) -> Result<bool, StoreError> {
        let mut q = cs::record_error::<DB>(lease, error);
        Ok(q.execute(&self.pool).await? > 0)
    }

    async fn release_consumer(&self, lease: ConsumerLease<'_>) -> Result<(), StoreError> {
        cs::release::<DB>(lease).execute(&self.pool).await?;
        Ok(())
    }

    async fn events_after(&self, position: i64, limit: u32) -> Result<Vec<EventRow>, StoreError> {
        let mut q = cs::events_after::<DB>(position, limit);
        Ok(q.fetch_all(&self.pool).await?)
    }

    async fn consumer_lag(&self, position: i64) -> Result<Option<Duration>, StoreError> {
        let mut q = cs::lag::<DB>(position);
        let age: Option<(i64,)> = q.fetch_optional(&self.pool).await?;
        Ok(age.map(|(ms,)| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    async fn database_now_ms(&self) -> Result<i64, StoreError> {
        let (now,) = cs::now::<DB>().fetch_one(&self.pool).await?;
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
        for attempt in 0..ow::WRITER_PROBES {
            if attempt > 0 {
                tokio::time::sleep(ow::WRITER_PROBE_PAUSE).await;
            }
            let text = (probe.count)(since_ms, &ow::probe_tag());
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
        let rows = cs::list::<DB>().fetch_all::<ConsumerRecord>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn reset_consumer(&self, name: &str, to: ResetTo) -> Result<ResetReport, StoreError> {
        let mut target = cs::reset_target::<DB>(to)?;
        let mut tx = self.pool.begin_with(DB::BEGIN_WRITE).await?;
        let before: Option<(i64,)> = cs::locked_position::<DB>(name).fetch_optional(&mut *tx).await?;
        let (after,): (i64,) = target.fetch_one(&mut *tx).await?;
        cs::reset::<DB>(name, after).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(ResetReport { before: before.map(|(position,)| position), after })
    }

    async fn consumers_floor(&self, enabled: &[&str]) -> Result<Option<i64>, StoreError> {
        let stored: Vec<(String, i64)> = cs::positions::<DB>().fetch_all(&self.pool).await?;
        Ok(cs::floor(&stored, enabled))
    }

    async fn retire_consumer(&self, name: &str) -> Result<bool, StoreError> {
        let mut q = cs::retire::<DB>(name);
        Ok(q.execute(&self.pool).await? > 0)
    }

    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        cs::append_audit::<DB>(entries).execute(&self.pool).await?;
        Ok(())
    }

    async fn audit_entries(&self, room_id: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let mut q = cs::audit_entries::<DB>(room_id, limit);
        Ok(q.fetch_all(&self.pool).await?)
    }
}
