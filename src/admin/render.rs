//! Human renderings of the outbox commands' results: aligned plain-text tables, times in
//! RFC 3339 (UTC). Text from the database (errors, ids) is cleaned of control characters so a
//! row cannot garble the terminal.

use std::fmt::Write;
use std::time::{Duration, UNIX_EPOCH};

use super::ops::{PurgeReport, RequeueReport};
use crate::store::{OutboxRow, OutboxStats};

/// Longest `last_error` shown in a table cell.
pub(super) const ERROR_CELL: usize = 60;

pub(super) fn stats(s: &OutboxStats) -> String {
    let age = |ms: Option<i64>| ms.map_or("-".to_owned(), format_age);
    let mut statuses = vec![
        vec!["pending".into(), s.pending.to_string()],
        vec!["delivering".into(), s.delivering.to_string()],
        vec!["retryable".into(), s.retryable.to_string()],
        vec!["failed".into(), s.failed.to_string()],
    ];
    // Parked rows by why they were parked, under `failed`.
    statuses.extend(
        s.parked_by_reason.iter().map(|(reason, n)| vec![format!("  {}", clean(reason, 32)), n.to_string()]),
    );
    table(&["STATUS", "ROWS"], &statuses)
        + &format!(
            "\noldest undelivered: {}\noldest retryable:   {}\nmax retry count:    {}\n",
            age(s.oldest_pending_age_ms),
            age(s.oldest_retryable_age_ms),
            s.max_retry_count
        )
}

pub(super) fn rows(rows: &[OutboxRow], next_after_id: Option<i64>) -> String {
    let header = ["ID", "EVENT_ID", "STATUS", "RETRIES", "TYPE", "ROOM", "CREATED", "LAST_ERROR"];
    let mut out = listing(rows, "no rows", &header, |r| {
        vec![
            r.id.to_string(),
            clean(&r.event_id, 64),
            clean(&r.status, 16),
            r.retry_count.to_string(),
            clean(&r.event_type, 32),
            clean(&r.room_id, 64),
            time(r.created_at_ms),
            r.last_error.as_deref().map_or("-".into(), |e| clean(e, ERROR_CELL)),
        ]
    });
    if let Some(next) = next_after_id {
        let _ = writeln!(out, "\nmore rows: --after-id {next}");
    }
    out
}

pub(super) fn row(r: &OutboxRow) -> String {
    let opt = |v: Option<i64>| v.map_or("-".to_owned(), time);
    let envelope = serde_json::from_str::<serde_json::Value>(&r.envelope)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|_| format!("(not JSON) {}", clean(&r.envelope, 4096)));
    let mut out = String::new();
    let fields: [(&str, String); 13] = [
        ("id", r.id.to_string()),
        ("event_id", clean(&r.event_id, 64)),
        ("room_id", clean(&r.room_id, 64)),
        ("event_type", clean(&r.event_type, 64)),
        ("status", clean(&r.status, 16)),
        ("retry_count", r.retry_count.to_string()),
        ("last_error", r.last_error.as_deref().map_or("-".into(), |e| clean(e, 512))),
        ("worker_id", r.worker_id.as_deref().map_or("-".into(), |w| clean(w, 128))),
        ("lock_until", opt(r.lock_until_ms)),
        ("created_at", time(r.created_at_ms)),
        ("updated_at", time(r.updated_at_ms)),
        ("delivered_at", opt(r.delivered_at_ms)),
        ("trace_context", r.trace_context.as_deref().map_or("-".into(), |t| clean(t, 64))),
    ];
    for (name, value) in fields {
        let _ = writeln!(out, "{name:<13} {value}");
    }
    let _ = writeln!(out, "envelope:\n{envelope}");
    out
}

pub(super) fn requeue(report: &RequeueReport) -> String {
    let mut out = format!("requeued {} row(s) to pending\n", report.requeued.len());
    for r in &report.requeued {
        let _ = writeln!(out, "  {} (id {})", clean(&r.event_id, 64), r.id);
    }
    if !report.skipped.is_empty() {
        let _ = writeln!(
            out,
            "skipped {} row(s) (only retryable and failed rows are requeued):",
            report.skipped.len()
        );
        for s in &report.skipped {
            let _ = writeln!(out, "  {} ({})", clean(&s.event_id, 64), clean(&s.status, 16));
        }
    }
    out
}

pub(super) fn purge(dry_run: bool, older_than: Duration, report: PurgeReport) -> String {
    let age = humantime::format_duration(older_than);
    if dry_run {
        format!("dry run: {} delivered row(s) older than {age} would be deleted\n", report.rows)
    } else {
        format!("deleted {} delivered row(s) older than {age} in {} batch(es)\n", report.rows, report.batches)
    }
}

/// `consumers reset`.
pub(super) fn reset(name: &str, report: &crate::store::ResetReport) -> String {
    let before = report.before.map_or("no row".to_owned(), |p| p.to_string());
    format!(
        "{name}: position {before} -> {}; it resumes with the first event after it (a running instance \
         loses its lease and takes it again)\n",
        report.after
    )
}

/// A [`table`] of `items`, one line each, or the line `empty` when there is none.
pub(super) fn listing<T>(
    items: &[T],
    empty: &str,
    header: &[&str],
    cells: impl Fn(&T) -> Vec<String>,
) -> String {
    if items.is_empty() {
        return format!("{empty}\n");
    }
    table(header, &items.iter().map(cells).collect::<Vec<_>>())
}

/// Left-aligned columns separated by two spaces.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// Milliseconds since the epoch (database clock) as RFC 3339.
pub(super) fn time(ms: i64) -> String {
    let since_epoch = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(UNIX_EPOCH + since_epoch).to_string()
}

/// An age in milliseconds as "1h 2m 3s".
pub(super) fn format_age(ms: i64) -> String {
    let secs = u64::try_from(ms).unwrap_or(0) / 1000;
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// Control characters become spaces; text longer than `max` characters is cut with "...".
pub(super) fn clean(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if text.chars().count() > max {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_cells_lose_control_characters() {
        let out = table(&["A", "LONGER"], &[vec!["wide cell".into(), "x".into()]]);
        assert_eq!(out, "A          LONGER\nwide cell  x\n");
        assert_eq!(clean("bad\nline\x1b[31m", 100), "bad line [31m");
        assert_eq!(clean("abcdef", 3), "abc...");
    }

    #[test]
    fn times_render_in_utc() {
        assert_eq!(time(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(format_age(3_723_000), "1h 2m 3s");
    }
}
