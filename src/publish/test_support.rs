//! Helpers shared by the publish layer tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use metrics_util::debugging::{DebugValue, Snapshotter};

use super::{Message, Path, Priority};

/// The body every test message carries; tests assert it never shows up in logs.
pub(crate) const SECRET_BODY: &str = r#"{"payload":"body-must-not-be-logged"}"#;

/// A message of the given type, published on the given path.
pub(crate) fn message(event_type: &'static str, path: Path) -> Message {
    let event = super::Event {
        event_id: "0190f5c2-7b1e-7cc0-8000-000000000001".to_owned(),
        event_type,
        priority: Priority::Normal,
        body: Arc::from(SECRET_BODY),
        sender: None,
        seated: Default::default(),
        trace: None,
        admin: None,
    };
    Message::new("room-1".to_owned(), path, vec![event])
}

/// One metric as seen by a `DebuggingRecorder`: name, labels sorted by key, value.
pub(crate) type Recorded = (String, Vec<(String, String)>, DebugValue);

/// Everything the recorder behind `snapshotter` holds, labels sorted by key.
pub(crate) fn recorded(snapshotter: &Snapshotter) -> Vec<Recorded> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            let mut labels: Vec<(String, String)> =
                key.labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
            labels.sort();
            (key.name().to_owned(), labels, value)
        })
        .collect()
}

/// The metrics named `name`, with their labels and values.
pub(crate) fn named<'a>(
    recorded: &'a [Recorded],
    name: &str,
) -> Vec<(&'a [(String, String)], &'a DebugValue)> {
    recorded
        .iter()
        .filter(|(n, _, _)| n == name)
        .map(|(_, labels, value)| (labels.as_slice(), value))
        .collect()
}

/// Labels from `(key, value)` pairs, sorted by key like [`recorded`] does.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> =
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    labels.sort();
    labels
}

/// Fields of a span or an event, values as text (strings unquoted).
pub(crate) type Fields = BTreeMap<String, String>;

/// A closed span: its name and final fields.
#[derive(Clone, Debug)]
pub(crate) struct ClosedSpan {
    pub(crate) name: &'static str,
    pub(crate) fields: Fields,
}

/// A log event: its level, fields (the message under `message`) and enclosing span name.
#[derive(Clone, Debug)]
pub(crate) struct CapturedEvent {
    pub(crate) level: Level,
    pub(crate) fields: Fields,
    pub(crate) span: Option<&'static str>,
}

/// A `tracing_subscriber` layer that keeps closed spans and events for assertions.
#[derive(Clone, Debug, Default)]
pub(crate) struct Capture {
    spans: Arc<Mutex<Vec<ClosedSpan>>>,
    events: Arc<Mutex<Vec<CapturedEvent>>>,
}

impl Capture {
    /// Installs a subscriber made of this layer as the thread's default until the guard drops.
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    /// Spans closed so far.
    pub(crate) fn spans(&self) -> Vec<ClosedSpan> {
        self.spans.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Events seen so far.
    pub(crate) fn events(&self) -> Vec<CapturedEvent> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for Capture
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Visitor(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(&mut Visitor(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let captured = CapturedEvent {
            level: *event.metadata().level(),
            fields,
            span: ctx.event_span(event).map(|s| s.name()),
        };
        if let Ok(mut events) = self.events.lock() {
            events.push(captured);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span.extensions().get::<Fields>().cloned().unwrap_or_default();
            if let Ok(mut spans) = self.spans.lock() {
                spans.push(ClosedSpan { name: span.name(), fields });
            }
        }
    }
}
