//! The refunds of gifts that committed nothing ([`CommandStore::record_refund`] and the
//! others), built once for both backends over a [`Backend`]: `room_payment_refund` holds one
//! row per wallet key, so that a retry under a refunded key is refused.
//!
//! [`CommandStore::record_refund`]: super::CommandStore::record_refund

use std::time::Duration;

use sqlx::QueryBuilder;

use crate::store::backend::Backend;
use crate::store::backend::bind::{insert_or_ignore, millis};

/// Records that the debit under `wallet_key` (a gift in `room_id`) was refunded; a key
/// recorded already keeps its first row.
pub(super) fn record_refund<DB: Backend>(wallet_key: &str, room_id: &str) -> QueryBuilder<DB> {
    let columns = [("wallet_key", wallet_key), ("room_id", room_id)];
    insert_or_ignore("room_payment_refund", &columns, "refunded_at_ms", "wallet_key")
}

/// The refund row of `wallet_key`, if any.
pub(super) fn find_refund<DB: Backend>(wallet_key: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT wallet_key FROM room_payment_refund WHERE wallet_key = ");
    DB::bind_str(&mut q, wallet_key);
    q
}

/// Records that the wallet confirmed the refund under `wallet_key`.
pub(super) fn finish_refund<DB: Backend>(wallet_key: &str) -> QueryBuilder<DB> {
    let mut q =
        QueryBuilder::new(format!("UPDATE room_payment_refund SET wallet_refunded_at_ms = {}", DB::NOW_MS));
    q.push(" WHERE wallet_refunded_at_ms IS NULL AND wallet_key = ");
    DB::bind_str(&mut q, wallet_key);
    q
}

/// Up to `limit` refunds decided at least `older_than` ago that the wallet has not confirmed,
/// oldest first: `(wallet_key, room_id)`.
pub(super) fn unfinished_refunds<DB: Backend>(older_than: Duration, limit: u32) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new(format!(
        "SELECT wallet_key, room_id FROM room_payment_refund WHERE wallet_refunded_at_ms IS NULL \
         AND refunded_at_ms <= {} - ",
        DB::NOW_MS
    ));
    DB::bind_i64(&mut q, millis(older_than));
    q.push(" ORDER BY refunded_at_ms LIMIT ");
    DB::bind_i64(&mut q, i64::from(limit));
    q
}
