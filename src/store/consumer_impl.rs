//! [`impl_consumer_repository`]: [`ConsumerRepository`](super::ConsumerRepository) for a
//! repository with a `pool`, running the SQL of `consumer_sql.rs` (kept apart from it so that
//! each file stays short; `lease_sql.rs` holds both halves of the shard leases).

/// [`ConsumerRepository`](super::ConsumerRepository) for a repository with a `pool` of `$db`.
macro_rules! impl_consumer_repository {
    ($repo:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ConsumerRepository for $repo {
            async fn acquire_consumer(
                &self,
                lease: $crate::store::ConsumerLease<'_>,
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                use $crate::store::consumer_sql as cs;
                let name = lease.name;
                let taken = cs::take::<$db>(lease).build().execute(&self.pool).await?;
                if taken.rows_affected() == 0 {
                    // Held by another instance (a standby's every poll: reads only), or missing.
                    let mut q = cs::holder::<$db>(name);
                    if q.build_query_as::<cs::Holder>().fetch_optional(&self.pool).await?.is_some() {
                        return Ok(None);
                    }
                    cs::create::<$db>(name).build().execute(&self.pool).await?;
                    let taken = cs::take::<$db>(lease).build().execute(&self.pool).await?;
                    if taken.rows_affected() == 0 {
                        return Ok(None);
                    }
                }
                // Read back, fenced on the owner: a lease lost since the UPDATE is not won.
                let mut q = cs::holder::<$db>(name);
                let held = q.build_query_as::<cs::Holder>().fetch_optional(&self.pool).await?;
                Ok(held.filter(|h| h.owner.as_deref() == Some(lease.owner)).map(|h| h.position))
            }

            async fn advance_consumer(
                &self,
                lease: $crate::store::ConsumerLease<'_>,
                from: i64,
                to: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::advance::<$db>(lease, from, to);
                Ok(q.build().execute(&self.pool).await?.rows_affected() > 0)
            }

            async fn record_consumer_error(
                &self,
                lease: $crate::store::ConsumerLease<'_>,
                error: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::record_error::<$db>(lease, error);
                Ok(q.build().execute(&self.pool).await?.rows_affected() > 0)
            }

            async fn release_consumer(
                &self,
                lease: $crate::store::ConsumerLease<'_>,
            ) -> Result<(), $crate::store::StoreError> {
                $crate::store::consumer_sql::release::<$db>(lease).build().execute(&self.pool).await?;
                Ok(())
            }

            async fn events_after(
                &self,
                position: i64,
                limit: u32,
            ) -> Result<Vec<$crate::store::EventRow>, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::events_after::<$db>(position, limit);
                Ok(q.build_query_as::<$crate::store::EventRow>().fetch_all(&self.pool).await?)
            }

            async fn consumer_lag(
                &self,
                position: i64,
            ) -> Result<Option<std::time::Duration>, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::lag::<$db>(position);
                let age: Option<i64> = q.build_query_scalar().fetch_optional(&self.pool).await?;
                Ok(age.map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
            }

            async fn database_now_ms(&self) -> Result<i64, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::now::<$db>();
                Ok(q.build_query_scalar().fetch_one(&self.pool).await?)
            }

            async fn open_writers_since(
                &self,
                since_ms: i64,
            ) -> Result<Option<u64>, $crate::store::StoreError> {
                use sqlx::Row;
                use $crate::store::open_writers_sql as ow;
                use $crate::store::sql::Dialect;
                let Some(probe) = <$db>::OPEN_WRITERS else {
                    return Ok(Some(0));
                };
                let denied = |error: sqlx::Error| {
                    if <$db>::access_denied(&error) { Ok(None) } else { Err(error.into()) }
                };
                let mut tx = self.pool.begin().await?;
                if let Err(error) = sqlx::query(probe.begin).execute(&mut *tx).await {
                    return denied(error);
                }
                for attempt in 0..ow::WRITER_PROBES {
                    if attempt > 0 {
                        tokio::time::sleep(ow::WRITER_PROBE_PAUSE).await;
                    }
                    let text = (probe.count)(since_ms, &ow::probe_tag());
                    let counted = sqlx::raw_sql(sqlx::AssertSqlSafe(text)).fetch_one(&mut *tx).await;
                    match counted.and_then(|row| Ok((row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?))) {
                        Ok((own, others)) if own > 0 => return Ok(Some(others.max(0) as u64)),
                        Ok(_) => {}
                        Err(error) => return denied(error),
                    }
                }
                Ok(None)
            }

            async fn list_consumers(
                &self,
            ) -> Result<Vec<$crate::store::ConsumerRow>, $crate::store::StoreError> {
                use $crate::store::consumer_sql as cs;
                let rows =
                    cs::list::<$db>().build_query_as::<cs::ConsumerRecord>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn reset_consumer(
                &self,
                name: &str,
                to: $crate::store::ResetTo,
            ) -> Result<$crate::store::ResetReport, $crate::store::StoreError> {
                use $crate::store::consumer_sql as cs;
                use $crate::store::sql::Dialect;
                let mut target = cs::reset_target::<$db>(to)?;
                let mut tx = self.pool.begin_with(<$db>::BEGIN_WRITE).await?;
                let mut q = cs::locked_position::<$db>(name);
                let before: Option<i64> = q.build_query_scalar().fetch_optional(&mut *tx).await?;
                let after: i64 = target.build_query_scalar().fetch_one(&mut *tx).await?;
                cs::reset::<$db>(name, after).build().execute(&mut *tx).await?;
                tx.commit().await?;
                Ok($crate::store::ResetReport { before, after })
            }

            async fn consumers_floor(
                &self,
                enabled: &[&str],
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::positions::<$db>();
                let stored: Vec<(String, i64)> = q.build_query_as().fetch_all(&self.pool).await?;
                Ok($crate::store::consumer_sql::floor(&stored, enabled))
            }

            async fn retire_consumer(&self, name: &str) -> Result<bool, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::retire::<$db>(name);
                Ok(q.build().execute(&self.pool).await?.rows_affected() > 0)
            }

            async fn append_audit(
                &self,
                entries: &[$crate::store::AuditEntry],
            ) -> Result<(), $crate::store::StoreError> {
                if entries.is_empty() {
                    return Ok(());
                }
                $crate::store::consumer_sql::append_audit::<$db>(entries).build().execute(&self.pool).await?;
                Ok(())
            }

            async fn audit_entries(
                &self,
                room_id: Option<&str>,
                limit: u32,
            ) -> Result<Vec<$crate::store::AuditEntry>, $crate::store::StoreError> {
                let mut q = $crate::store::consumer_sql::audit_entries::<$db>(room_id, limit);
                Ok(q.build_query_as::<$crate::store::AuditEntry>().fetch_all(&self.pool).await?)
            }
        }
    };
}

pub(super) use impl_consumer_repository;
