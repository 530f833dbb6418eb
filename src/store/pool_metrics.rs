//! Database pool gauges: connections in use and idle, and the pool's upper bound, sampled
//! ([`PoolStats`]) from the repository every few seconds (`app`'s metrics upkeep). Acquisitions
//! that timed out are counted where the error is converted
//! ([`StoreError`](crate::store::StoreError)).

use crate::telemetry::names;

/// A sample of the connection pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Open connections, idle ones included.
    pub size: u32,
    /// Open connections not in use.
    pub idle: u32,
    /// The most connections the pool opens (`database.max_connections`).
    pub max: u32,
}

impl PoolStats {
    /// Open connections in use.
    pub fn in_use(&self) -> u32 {
        self.size.saturating_sub(self.idle)
    }

    /// Reads `pool` (no round trip: the pool's own counters).
    pub fn of<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) -> PoolStats {
        PoolStats {
            size: pool.size(),
            idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
            max: pool.options().get_max_connections(),
        }
    }
}

/// Sets the pool gauges from one sample.
pub fn record_pool_stats(stats: PoolStats) {
    for (state, count) in [("idle", stats.idle), ("in_use", stats.in_use())] {
        metrics::gauge!(names::DB_POOL_CONNECTIONS, names::LABEL_STATE => state).set(f64::from(count));
    }
    metrics::gauge!(names::DB_POOL_MAX_CONNECTIONS).set(f64::from(stats.max));
}

/// Counts one connection acquisition that timed out.
pub fn count_acquire_timeout() {
    metrics::counter!(names::DB_POOL_ACQUIRE_TIMEOUTS_TOTAL).increment(1);
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;
    use crate::store::StoreError;

    #[test]
    fn a_store_error_from_a_pool_timeout_is_counted_and_no_other() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let timed_out = StoreError::from(sqlx::Error::PoolTimedOut);
            assert!(matches!(timed_out, StoreError::Database(sqlx::Error::PoolTimedOut)));
            let _ = StoreError::from(sqlx::Error::RowNotFound);
            let _ = StoreError::from(sqlx::Error::PoolClosed);
        });
        let counted: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
            .collect();
        assert_eq!(counted, vec![(names::DB_POOL_ACQUIRE_TIMEOUTS_TOTAL.to_owned(), DebugValue::Counter(1))]);
    }

    #[test]
    fn the_gauges_split_open_connections_into_idle_and_in_use() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            record_pool_stats(PoolStats { size: 5, idle: 2, max: 16 });
            count_acquire_timeout();
        });
        let mut values: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let labels: Vec<_> =
                    key.key().labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
                (format!("{}{labels:?}", key.key().name()), value)
            })
            .collect();
        values.sort_by(|a, b| a.0.cmp(&b.0));
        let gauge = |v: f64| DebugValue::Gauge(v.into());
        assert_eq!(
            values,
            vec![
                ("room_db_pool_acquire_timeouts_total[]".to_owned(), DebugValue::Counter(1)),
                ("room_db_pool_connections[\"state=idle\"]".to_owned(), gauge(2.0)),
                ("room_db_pool_connections[\"state=in_use\"]".to_owned(), gauge(3.0)),
                ("room_db_pool_max_connections[]".to_owned(), gauge(16.0)),
            ]
        );
    }
}
