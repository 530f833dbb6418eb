//! The webhook consumer in process, on both backends.

use std::collections::HashSet;
use std::time::Duration;

use super::receiver::Receiver;
use super::{outbox_event_ids, position, start_webhook, traffic, wait_received};
use crate::delivery::eventually;
use crate::support::backends;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_delivers_every_event_once_in_commit_order_with_valid_signatures() {
    for db in backends().await {
        let receiver = Receiver::start().await;
        let app = start_webhook(&db, &receiver, &[("consumers.webhook.batch_size", "7")]).await;
        for room in ["wh-a", "wh-b", "wh-c"] {
            traffic(&app, room, 4).await;
        }
        let expected = outbox_event_ids(&db).await;
        assert!(expected.len() >= 18, "{db}: traffic made {} events", expected.len());
        wait_received(&receiver, expected.len(), Duration::from_secs(20)).await;
        // Settle: nothing more arrives.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(receiver.event_ids(), expected, "{db}: every event once, in outbox (commit) order");
        assert_eq!(receiver.bad_signatures(), 0, "{db}: every signature verifies");
        for body in receiver.ok_bodies() {
            let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let n = parsed["events"].as_array().unwrap().len();
            assert!((1..=7).contains(&n), "{db}: batches of 1 to 7 events, got {n}");
        }
        let last_id = db.outbox().await.last().map(|r| r.id).unwrap();
        eventually("the position reaches the last event", Duration::from_secs(5), || async {
            position(&db, "webhook").await == last_id
        })
        .await;
        // The recorder is the process's (tests run side by side): check the series exist.
        let metrics =
            reqwest::get(format!("{}/metrics", app.admin_base)).await.unwrap().text().await.unwrap();
        for series in [
            "room_consumer_position{consumer=\"webhook\"}",
            "room_consumer_lag_seconds{consumer=\"webhook\"}",
        ] {
            assert!(metrics.contains(series), "{db}: {series} exported");
        }
        assert!(
            // Its series exist at 0 from startup: one of them must have counted.
            metrics.lines().any(|l| l.starts_with("room_outbox_publish_success_total")
                && l.contains("path=\"webhook\"")
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v > 0.0)),
            "{db}: the shared metrics layer counts the webhook's publishes"
        );
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_event_filter_sends_only_the_configured_types_and_still_moves_past_the_rest() {
    for db in backends().await {
        let receiver = Receiver::start().await;
        let app = start_webhook(&db, &receiver, &[("consumers.webhook.event_types", "[RoomGiftSent]")]).await;
        traffic(&app, "wh-filter", 3).await;
        let gifts: Vec<String> = db
            .outbox()
            .await
            .into_iter()
            .filter(|r| r.event_type == "RoomGiftSent")
            .map(|r| r.event_id)
            .collect();
        assert_eq!(gifts.len(), 1, "{db}");
        let last_id = db.outbox().await.last().map(|r| r.id).unwrap();
        eventually("the position passes every event", Duration::from_secs(10), || async {
            position(&db, "webhook").await == last_id
        })
        .await;
        assert_eq!(receiver.event_ids(), gifts, "{db}: only the gift");
        assert!(receiver.events().iter().all(|e| e.event_type == "RoomGiftSent" && e.room_id == "wh-filter"));
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_gets_the_same_body_again_and_nothing_is_skipped() {
    for db in backends().await {
        let receiver = Receiver::start().await;
        receiver.fail_next(3);
        let app = start_webhook(&db, &receiver, &[]).await;
        traffic(&app, "wh-retry", 2).await;
        let expected = outbox_event_ids(&db).await;
        wait_received(&receiver, expected.len(), Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(receiver.event_ids(), expected, "{db}: in order, none skipped, none twice");
        let failed = receiver.failed_bodies();
        assert_eq!(failed.len(), 3, "{db}");
        // Events committed after the first failure may join a later batch; the first failed
        // body is a prefix of what was finally acknowledged.
        let first_ok = &receiver.ok_bodies()[0];
        assert!(failed.iter().all(|b| b == &failed[0]), "{db}: the retries repeat the body byte for byte");
        assert_eq!(&failed[0], first_ok, "{db}: the acknowledged body is the one that failed");
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_consume_the_webhook_at_once_and_the_second_takes_over() {
    let db = crate::support::TestDb::mysql().await;
    let receiver = Receiver::start().await;
    receiver.set_latency(Duration::from_millis(30));
    let small = [("consumers.webhook.batch_size", "3")];
    let first = start_webhook(&db, &receiver, &small).await;
    traffic(&first, "two-first", 1).await;
    let n = outbox_event_ids(&db).await.len();
    wait_received(&receiver, n, Duration::from_secs(20)).await;
    // `first` holds the lease now; `second` starts beside it.
    let second = start_webhook(&db, &receiver, &small).await;
    for room in ["two-a", "two-b"] {
        traffic(&first, room, 5).await;
        traffic(&second, &format!("{room}-2"), 5).await;
    }
    let expected = outbox_event_ids(&db).await;
    wait_received(&receiver, expected.len(), Duration::from_secs(30)).await;
    assert_eq!(receiver.max_in_flight(), 1, "one instance at a time posts");
    let ids = receiver.event_ids();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "no event twice");
    assert_eq!(ids, expected);
    // The holder stops (releasing its lease): the other carries on.
    first.stop().await;
    traffic(&second, "two-after", 2).await;
    let expected = outbox_event_ids(&db).await;
    wait_received(&receiver, expected.len(), Duration::from_secs(30)).await;
    assert_eq!(receiver.event_ids(), expected, "the survivor delivers what came after");
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_stuck_on_its_receiver_records_why_and_retention_keeps_what_it_has_not_passed() {
    use room_service::admin::{RetentionOptions, RetentionRound, run_retention_once};
    use tokio_util::sync::CancellationToken;

    for db in backends().await {
        let receiver = Receiver::start().await;
        receiver.fail_all(true);
        let app = start_webhook(&db, &receiver, &[]).await;
        traffic(&app, "stuck", 2).await;
        app.settle().await;
        let total = db.outbox().await.len();
        eventually("the failure is on the consumer's row", Duration::from_secs(10), || async {
            db.repo
                .list_consumers()
                .await
                .unwrap()
                .iter()
                .any(|c| c.name == "webhook" && c.last_error.is_some())
        })
        .await;
        let row = db.repo.list_consumers().await.unwrap().into_iter().find(|c| c.name == "webhook").unwrap();
        assert!(row.last_error.as_deref().unwrap().contains("503"), "{db}: {row:?}");
        eventually("the batch is sent again", Duration::from_secs(10), || async { receiver.requests() >= 3 })
            .await;

        // IM has every event (the log sink acknowledged them), the webhook none: nothing goes.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let options = RetentionOptions {
            consumers: vec!["webhook"],
            ..RetentionOptions::new(Duration::from_millis(1), "test")
        };
        let round = run_retention_once(db.repo.as_ref(), &options, &CancellationToken::new()).await.unwrap();
        assert!(matches!(round, RetentionRound::Purged(r) if r.rows == 0), "{db}: {round:?}");
        assert_eq!(db.outbox().await.len(), total, "{db}");

        receiver.fail_all(false);
        wait_received(&receiver, total, Duration::from_secs(20)).await;
        let last = db.outbox().await.last().map(|r| r.id).unwrap();
        eventually("the position passes every event", Duration::from_secs(5), || async {
            position(&db, "webhook").await == last
        })
        .await;
        let round = run_retention_once(db.repo.as_ref(), &options, &CancellationToken::new()).await.unwrap();
        assert!(matches!(round, RetentionRound::Purged(r) if r.rows == total as u64), "{db}: {round:?}");
        assert!(
            db.repo.list_consumers().await.unwrap().iter().all(|c| c.last_error.is_none()),
            "{db}: a success clears the error"
        );
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_while_the_consumer_retries_a_batch_moves_it_past_the_batch() {
    use room_service::store::ResetTo;
    for db in backends().await {
        let receiver = Receiver::start().await;
        receiver.fail_all(true);
        let app = start_webhook(&db, &receiver, &[]).await;
        traffic(&app, "reset-stuck", 2).await;
        let stuck = db.outbox().await.last().map(|r| r.id).unwrap();
        eventually("the consumer retries", Duration::from_secs(10), || async { receiver.requests() >= 2 })
            .await;
        // The operator skips the batch the receiver refuses.
        db.repo.reset_consumer("webhook", ResetTo::Id(stuck)).await.expect("reset");
        traffic(&app, "reset-after", 1).await;
        let after: Vec<String> =
            db.outbox().await.into_iter().filter(|r| r.id > stuck).map(|r| r.event_id).collect();
        receiver.fail_all(false);
        wait_received(&receiver, after.len(), Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            receiver.event_ids(),
            after,
            "{db}: only what came after the reset; the skipped batch never"
        );
        let last = db.outbox().await.last().map(|r| r.id).unwrap();
        eventually("the position follows", Duration::from_secs(5), || async {
            position(&db, "webhook").await == last
        })
        .await;
        app.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_never_taken_for_an_acknowledgement() {
    let db = crate::support::TestDb::sqlite().await;
    let receiver = Receiver::start().await;
    // An endpoint that redirects to the real receiver with a 307, which keeps the method and the
    // body: followed, the receiver would take the batch and the position would move.
    let app = axum::Router::new().route(
        "/moved",
        axum::routing::post({
            let target = receiver.url.clone();
            move || async move { axum::response::Redirect::temporary(&target) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let moved = format!("http://{}/moved", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let service = start_webhook(&db, &receiver, &[("consumers.webhook.url", moved.as_str())]).await;
    traffic(&service, "redirected", 1).await;
    eventually("the redirect is recorded as the error", Duration::from_secs(10), || async {
        db.repo
            .list_consumers()
            .await
            .unwrap()
            .iter()
            .any(|c| c.last_error.as_deref().is_some_and(|e| e.contains("307")))
    })
    .await;
    assert_eq!(position(&db, "webhook").await, 0, "nothing acknowledged");
    assert_eq!(receiver.requests(), 0, "the redirect was not followed");
    service.stop().await;
}
