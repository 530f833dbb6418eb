//! Unit tests of the [`DeliveryMarker`] over a recording flush function.

use std::sync::Mutex;
use std::time::Duration;

use super::*;

/// A flush function that records every batch and takes `delay` per statement; fails when
/// `fail` is set.
fn recorder(delay: Duration, fail: bool) -> (FlushFn, Arc<Mutex<Vec<Vec<String>>>>) {
    let batches = Arc::new(Mutex::new(Vec::new()));
    let seen = batches.clone();
    let flush: FlushFn = Arc::new(move |ids: Vec<String>| {
        let seen = seen.clone();
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            let n = ids.len() as u64;
            seen.lock().unwrap().push(ids);
            if fail { Err(StoreError::Config("database down".into())) } else { Ok(n) }
        })
    });
    (flush, batches)
}

/// A marker over a [`recorder`], and the batches it records.
fn recording_marker(delay: Duration, fail: bool) -> (DeliveryMarker, Arc<Mutex<Vec<Vec<String>>>>) {
    let (flush, batches) = recorder(delay, fail);
    (DeliveryMarker::spawn_with(flush), batches)
}

fn ids(command: usize, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ev-{command}-{i}")).collect()
}

/// Submits the events of each of `commands`, `events_each` per command.
fn submit_commands(marker: &DeliveryMarker, commands: impl IntoIterator<Item = usize>, events_each: usize) {
    for command in commands {
        marker.submit(ids(command, events_each));
    }
}

#[tokio::test]
async fn concurrent_submits_are_coalesced_into_fewer_statements() {
    let (marker, batches) = recording_marker(Duration::from_millis(20), false);
    submit_commands(&marker, 0..50, 2);
    marker.flush().await;
    let batches = batches.lock().unwrap().clone();
    let written: usize = batches.iter().map(Vec::len).sum();
    assert_eq!(written, 100, "every id is written once");
    assert!(batches.len() < 50, "{} statements for 50 commands", batches.len());
    let stats = marker.stats();
    assert_eq!((stats.submitted, stats.statements as usize, stats.dropped), (100, batches.len(), 0));
}

#[tokio::test]
async fn ids_submitted_while_a_flush_runs_go_out_together_in_the_next() {
    let (marker, batches) = recording_marker(Duration::from_millis(50), false);
    marker.submit(ids(0, 1));
    tokio::time::sleep(Duration::from_millis(10)).await; // the first flush is now running
    submit_commands(&marker, 1..=10, 1);
    marker.flush().await;
    let sizes: Vec<usize> = batches.lock().unwrap().iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 10]);
}

#[tokio::test]
async fn a_batch_never_exceeds_the_maximum() {
    let (marker, batches) = recording_marker(Duration::from_millis(5), false);
    submit_commands(&marker, 0..(MAX_BATCH * 3 / 2), 1);
    marker.flush().await;
    let sizes: Vec<usize> = batches.lock().unwrap().iter().map(Vec::len).collect();
    assert!(sizes.iter().all(|&n| n <= MAX_BATCH), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), MAX_BATCH * 3 / 2);
}

#[tokio::test]
async fn a_failed_flush_is_counted_and_the_marker_goes_on() {
    let (marker, batches) = recording_marker(Duration::ZERO, true);
    marker.submit(ids(0, 3));
    marker.flush().await;
    marker.submit(ids(1, 1));
    marker.flush().await;
    assert_eq!(batches.lock().unwrap().len(), 2);
    let stats = marker.stats();
    assert_eq!((stats.statements, stats.failed_statements), (2, 2));
}

#[tokio::test]
async fn shutdown_flushes_what_is_queued_and_later_submits_are_dropped() {
    let (marker, batches) = recording_marker(Duration::from_millis(10), false);
    submit_commands(&marker, 0..5, 1);
    marker.shutdown().await;
    assert_eq!(batches.lock().unwrap().iter().map(Vec::len).sum::<usize>(), 5);
    marker.submit(ids(9, 2));
    marker.flush().await; // returns at once
    marker.shutdown().await; // idempotent
    let stats = marker.stats();
    assert_eq!((stats.submitted, stats.dropped), (7, 2));
}
