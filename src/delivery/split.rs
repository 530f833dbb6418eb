//! A message IM refused for its content, split (SPEC §13.1, "a pack shares no fate over
//! content"): the one bisection both publishers run — a room's lane and the outbox worker —
//! after a message of theirs came back refused.
//!
//! A refusal of the content (`classify::is_content_refusal`: 80001 moderation, 80002/93000
//! too long, 9000x a body IM cannot take) of a message of several events may hold one culprit
//! only: the message is split in halves, sent in order — the second half only once the first
//! went through or was refused for its own content — until each refused event stands alone.
//! An event refused alone puts its sender (and the seated users it names) in [`Quarantine`] (its later events then go alone,
//! so they never split a pack again) and is handed to its publisher ([`Resend::refused_alone`]:
//! the worker parks it with its marks, the lane parks it at once, in order, before sending what
//! follows). Any other failure is the failure of every event from there on: they wait behind
//! it, in room order.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::quarantine::Quarantine;
use crate::publish::classify::is_content_refusal;
use crate::publish::{BoxError, Event, Path};

/// What became of one event of a refused message.
#[derive(Clone, Debug)]
pub enum Fate {
    /// IM took it in a part of the message.
    Delivered,
    /// IM refused it alone for its content; its publisher took it out of the room's way.
    RefusedAlone(SharedError),
    /// It was not delivered, nor refused alone: it and every later event wait behind this.
    Failed(SharedError),
}

/// How a publisher sends the parts of a refused message, and takes an event refused alone.
pub trait Resend: Sync {
    /// Sends `events` (consecutive events of the refused message, in order) as one message.
    fn send(&self, events: Vec<Event>) -> BoxFuture<'_, Result<(), BoxError>>;

    /// IM refused `event` alone for its content, with `error`: true once the publisher has
    /// taken it out of its room's way (the events after it may go), false when it could not
    /// (they wait behind it).
    fn refused_alone<'a>(&'a self, event: &'a Event, error: &'a SharedError) -> BoxFuture<'a, bool>;
}

/// What became of `events` (one room's, in order), which IM refused as one message with
/// `error`: one [`Fate`] per event, in order. Not a content refusal: every event failed with
/// it. `path` labels the quarantine's counters.
pub async fn after_refusal<R: Resend>(
    resend: &R,
    quarantine: &Quarantine,
    path: Path,
    events: Vec<Event>,
    error: BoxError,
) -> Vec<Fate> {
    Splitter { resend, quarantine, path }.refused(events, SharedError::new(error)).await
}

struct Splitter<'a, R> {
    resend: &'a R,
    quarantine: &'a Quarantine,
    path: Path,
}

impl<R: Resend> Splitter<'_, R> {
    /// `events` were refused as one message with `error`.
    fn refused(&self, mut events: Vec<Event>, error: SharedError) -> BoxFuture<'_, Vec<Fate>> {
        Box::pin(async move {
            let n = events.len();
            if !is_content_refusal(&error) {
                return vec![Fate::Failed(error); n];
            }
            if n == 1 {
                let event = &events[0];
                self.quarantine.hold_refused(event, self.path);
                let fate = if self.resend.refused_alone(event, &error).await {
                    Fate::RefusedAlone(error)
                } else {
                    Fate::Failed(error)
                };
                return vec![fate];
            }
            let second = events.split_off(n / 2);
            let mut fates = self.part(events).await;
            let blocking = fates.iter().find_map(|fate| match fate {
                Fate::Failed(error) => Some(error.clone()),
                Fate::Delivered | Fate::RefusedAlone(_) => None,
            });
            match blocking {
                Some(error) => fates.extend(vec![Fate::Failed(error); second.len()]),
                None => fates.extend(self.part(second).await),
            }
            fates
        })
    }

    /// Sends `events` as one message, and splits it again when IM refuses it.
    async fn part(&self, events: Vec<Event>) -> Vec<Fate> {
        match self.resend.send(events.clone()).await {
            Ok(()) => vec![Fate::Delivered; events.len()],
            Err(error) => self.refused(events, SharedError::new(error)).await,
        }
    }
}

/// A message's failure as seen by each of its events: it displays as the failure and has it as
/// its source, so each event's mark classifies it and records its reason as if it were its own.
#[derive(Debug, Clone)]
pub struct SharedError(Arc<BoxError>);

impl SharedError {
    /// Shares `error`.
    pub fn new(error: BoxError) -> Self {
        Self(Arc::new(error))
    }
}

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref().as_ref())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::publish::Priority;
    use crate::publish::tencent::ImError;

    /// IM refusing (80001) any message holding an event of a bad sender; records each call.
    struct Im {
        bad: &'static str,
        calls: Mutex<Vec<Vec<String>>>,
        park: bool,
        parked: Mutex<Vec<String>>,
        /// Fails every call after this many with a transient error.
        fail_after: Option<usize>,
    }

    impl Im {
        fn new(bad: &'static str) -> Self {
            Self { bad, calls: Mutex::default(), park: true, parked: Mutex::default(), fail_after: None }
        }
    }

    impl Resend for Im {
        fn send(&self, events: Vec<Event>) -> BoxFuture<'_, Result<(), BoxError>> {
            Box::pin(async move {
                let mut calls = self.calls.lock().unwrap();
                calls.push(events.iter().map(|e| e.event_id.clone()).collect());
                if self.fail_after.is_some_and(|n| calls.len() > n) {
                    return Err(ImError::im(90994, "busy").into());
                }
                if events.iter().any(|e| e.sender.as_deref() == Some(self.bad)) {
                    return Err(ImError::im(80001, "sensitive").into());
                }
                Ok(())
            })
        }

        fn refused_alone<'a>(&'a self, event: &'a Event, _: &'a SharedError) -> BoxFuture<'a, bool> {
            self.parked.lock().unwrap().push(event.event_id.clone());
            Box::pin(std::future::ready(self.park))
        }
    }

    fn events(senders: &[&str]) -> Vec<Event> {
        senders
            .iter()
            .enumerate()
            .map(|(i, sender)| Event {
                event_id: format!("e{i}"),
                event_type: "RoomGiftSent",
                priority: Priority::High,
                body: "{}".into(),
                sender: Some((*sender).into()),
                seated: Default::default(),
                trace: None,
                admin: None,
            })
            .collect()
    }

    fn refusal() -> BoxError {
        ImError::im(80001, "sensitive").into()
    }

    fn names(fates: &[Fate]) -> Vec<&'static str> {
        fates
            .iter()
            .map(|f| match f {
                Fate::Delivered => "delivered",
                Fate::RefusedAlone(_) => "refused",
                Fate::Failed(_) => "failed",
            })
            .collect()
    }

    #[tokio::test]
    async fn only_the_culprit_is_refused_and_its_sender_quarantined() {
        let im = Im::new("mallory");
        let quarantine = Quarantine::default();
        let pack = events(&["a", "b", "c", "mallory", "d", "e", "f", "g"]);
        let fates = after_refusal(&im, &quarantine, Path::Sync, pack, refusal()).await;
        assert_eq!(
            names(&fates),
            [
                "delivered",
                "delivered",
                "delivered",
                "refused",
                "delivered",
                "delivered",
                "delivered",
                "delivered"
            ]
        );
        assert_eq!(*im.parked.lock().unwrap(), ["e3"]);
        assert!(quarantine.holds("mallory") && !quarantine.holds("a"));
        let calls = im.calls.lock().unwrap();
        let ids: Vec<&String> =
            calls.iter().filter(|c| c.len() == 1 || !c.contains(&"e3".to_owned())).flatten().collect();
        let mut in_order = ids.clone();
        in_order.sort();
        assert_eq!(ids, in_order, "the parts were sent in room order: {calls:?}");
    }

    #[tokio::test]
    async fn a_culprit_that_cannot_be_taken_out_holds_back_what_follows() {
        let mut im = Im::new("mallory");
        im.park = false;
        let quarantine = Quarantine::default();
        let fates =
            after_refusal(&im, &quarantine, Path::Sync, events(&["a", "mallory", "b", "c"]), refusal()).await;
        assert_eq!(names(&fates), ["delivered", "failed", "failed", "failed"]);
        let calls = im.calls.lock().unwrap().clone();
        assert_eq!(calls, [vec!["e0", "e1"], vec!["e0"], vec!["e1"]], "nothing after the culprit was sent");
    }

    #[tokio::test]
    async fn another_failure_on_the_way_fails_the_rest() {
        let mut im = Im::new("mallory");
        im.fail_after = Some(1);
        let quarantine = Quarantine::default();
        let fates =
            after_refusal(&im, &quarantine, Path::Worker, events(&["a", "b", "mallory", "c"]), refusal())
                .await;
        assert_eq!(names(&fates), ["delivered", "delivered", "failed", "failed"]);
        assert!(!quarantine.holds("mallory"), "never refused alone");
    }

    #[tokio::test]
    async fn an_error_that_is_not_the_contents_fails_every_event_without_a_call() {
        let im = Im::new("mallory");
        let error: BoxError = ImError::im(10010, "group dissolved").into();
        let fates =
            after_refusal(&im, &Quarantine::default(), Path::Worker, events(&["a", "b"]), error).await;
        assert_eq!(names(&fates), ["failed", "failed"]);
        assert!(im.calls.lock().unwrap().is_empty());
    }
}
