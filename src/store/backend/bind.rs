//! The pieces of statement text every role builds alike over a [`Backend`]: a bound list of
//! values, a duration in milliseconds, and the insert-or-ignore of a keyed row.

use std::time::Duration;

use sqlx::QueryBuilder;

use super::Backend;

/// `INSERT INTO table (columns, stamp) VALUES (values, now)`, leaving the row as it is when one
/// with the same `key` exists: the upsert sets the key to itself, an insert-or-ignore that
/// (unlike `INSERT IGNORE`) still fails on anything but the duplicate key.
pub(in crate::store) fn insert_or_ignore<DB: Backend>(
    table: &str,
    columns: &[(&str, &str)],
    stamp: &str,
    key: &str,
) -> QueryBuilder<DB> {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let mut q = QueryBuilder::new(format!("INSERT INTO {table} ({}, {stamp}) VALUES (", names.join(", ")));
    for (i, (_, value)) in columns.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        DB::bind_str(&mut q, value);
    }
    q.push(format!(", {})", DB::NOW_MS));
    q.push(DB::upsert(key, &[key]));
    q
}

/// `d` in whole milliseconds, as SQL adds it to the database clock.
pub(in crate::store) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Appends `(v1, v2, ...)` binding each value.
pub(in crate::store) fn push_list<DB: Backend, T>(
    q: &mut QueryBuilder<DB>,
    values: &[T],
    bind: fn(&mut QueryBuilder<DB>, &T),
) {
    q.push("(");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        bind(q, v);
    }
    q.push(")");
}

/// Appends `(id, ...)`.
pub(in crate::store) fn push_ids<DB: Backend>(q: &mut QueryBuilder<DB>, ids: &[i64]) {
    push_list(q, ids, |q, id| DB::bind_i64(q, *id));
}

/// Appends `('value', ...)`.
pub(in crate::store) fn push_strs<DB: Backend>(q: &mut QueryBuilder<DB>, values: &[String]) {
    push_list(q, values, |q, v| DB::bind_str(q, v));
}
