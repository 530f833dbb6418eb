//! The open-writers probe of
//! [`ConsumerRepository::open_writers_since`](crate::store::ConsumerRepository::open_writers_since):
//! the statements a [`Backend`](super::Backend) that can count open transactions supplies
//! ([`Backend::OPEN_WRITERS`](super::Backend::OPEN_WRITERS)), and how often the consumer role
//! asks (here, not in `consumer/sql.rs`: a server-specific probe, not SQL built over the
//! backend).

use std::time::Duration;

/// The statements of [`ConsumerRepository::open_writers_since`](crate::store::ConsumerRepository::open_writers_since),
/// run in one transaction: `begin` makes the probe's own transaction visible to the server, then
/// the text `count(since_ms, tag)` returns `(the probe's own transaction, seen running the query
/// marked `tag`: 0 or 1; the others open since before the bound)`.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct OpenWriters {
    pub(in crate::store) begin: &'static str,
    pub(in crate::store) count: fn(i64, &str) -> String,
}

/// How often `open_writers_since` reads a snapshot of the open transactions that predates its
/// own before it gives up (`None`: cannot tell), and how long it waits in between (longer than
/// the 0.1 s the server's cache must go unread to be refreshed).
pub(in crate::store) const WRITER_PROBES: u32 = 5;
pub(in crate::store) const WRITER_PROBE_PAUSE: Duration = Duration::from_millis(150);

/// A tag no earlier probe of this process used (connections belong to one process).
pub(in crate::store) fn probe_tag() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("open-writers:{}:", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// MySQL/MariaDB's count. `INNODB_TRX` is served from a cache that InnoDB refreshes only once
/// nobody has read it for 0.1 s, so an answer may be older than the question. The probe's own
/// transaction dates the snapshot: only a snapshot that shows it running this very statement
/// (its `tag` — the same session may appear in an old snapshot running an earlier one) was
/// taken after it began, so after `since_ms`. Text, not a prepared statement: `trx_query` must
/// hold the tag, and each text is used once. `trx_started` has whole seconds: a writer that
/// began up to 1 s after the bound is counted too, which only delays a consumer; one that began
/// before is never missed. The join keeps the server's other databases out. Only writers count
/// (`trx_rows_modified > 0`: a transaction holding an outbox id has inserted its row), so a long
/// read-only transaction (a `mysqldump --single-transaction`) holds nobody back. `trx_started`
/// is in the server's system time zone whatever the session's (ours is UTC): it is converted
/// before the comparison, and a conversion that fails counts the writer (waiting is safe).
pub(in crate::store) fn mysql_open_writers(since_ms: i64, tag: &str) -> String {
    format!(
        "SELECT /* {tag} */ COUNT(CASE WHEN t.trx_mysql_thread_id = CONNECTION_ID() \
         AND t.trx_query LIKE '%{tag}%' THEN 1 END), \
         COUNT(CASE WHEN t.trx_mysql_thread_id <> CONNECTION_ID() AND t.trx_rows_modified > 0 THEN 1 END) \
         FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
         WHERE p.DB = DATABASE() AND (t.trx_mysql_thread_id = CONNECTION_ID() \
         OR COALESCE(UNIX_TIMESTAMP(CONVERT_TZ(t.trx_started, 'SYSTEM', @@session.time_zone)), 0) * 1000 \
         <= {since_ms})"
    )
}
