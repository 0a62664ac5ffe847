//! A `tracing` subscriber that keeps every span (with the fields recorded into it later) and
//! every event, for tests that assert on them (included with `#[path]`).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span as the subscriber saw it: name, target, and its fields' last values.
#[derive(Debug, Clone)]
pub struct SpanSeen {
    pub name: &'static str,
    pub target: String,
    pub fields: BTreeMap<String, String>,
}

impl SpanSeen {
    /// The value of `field`, or "" when it was never recorded.
    pub fn get(&self, field: &str) -> &str {
        self.fields.get(field).map_or("", String::as_str)
    }
}

/// An event: target, level, fields (the message under `message`), and the name of the span
/// it was in.
#[derive(Debug, Clone)]
pub struct EventSeen {
    pub target: String,
    pub level: tracing::Level,
    pub fields: BTreeMap<String, String>,
    pub span: Option<&'static str>,
}

impl EventSeen {
    /// The value of `field`, or "".
    pub fn get(&self, field: &str) -> &str {
        self.fields.get(field).map_or("", String::as_str)
    }
}

/// Everything captured so far.
#[derive(Debug, Default)]
pub struct Seen {
    /// Spans in the order they were made (by id while open: index in `spans`).
    pub spans: Vec<SpanSeen>,
    pub events: Vec<EventSeen>,
    by_id: BTreeMap<u64, usize>,
}

/// The capturing layer; clones share what they saw.
#[derive(Clone, Default)]
pub struct Capture(pub Arc<Mutex<Seen>>);

impl Capture {
    /// A subscriber made of this layer on a registry, to install with `set_default`.
    pub fn subscriber(&self) -> impl Subscriber + Send + Sync {
        tracing_subscriber::registry().with(self.clone())
    }

    /// The spans named `name`.
    pub fn spans(&self, name: &str) -> Vec<SpanSeen> {
        let seen = self.0.lock().unwrap();
        seen.spans
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }

    /// The connection events (target `rpcrdma::conn`) whose `event` field is `event`.
    pub fn conn_events(&self, event: &str) -> Vec<EventSeen> {
        let seen = self.0.lock().unwrap();
        seen.events
            .iter()
            .filter(|e| e.target == "rpcrdma::conn" && e.get("event") == event)
            .cloned()
            .collect()
    }

    /// Every event.
    pub fn events(&self) -> Vec<EventSeen> {
        self.0.lock().unwrap().events.clone()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut seen = self.0.lock().unwrap();
        let index = seen.spans.len();
        seen.spans.push(SpanSeen {
            name: attrs.metadata().name(),
            target: attrs.metadata().target().to_string(),
            fields,
        });
        seen.by_id.insert(id.into_u64(), index);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut seen = self.0.lock().unwrap();
        if let Some(&index) = seen.by_id.get(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.spans[index].fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let span = ctx.event_span(event).map(|s| s.name());
        self.0.lock().unwrap().events.push(EventSeen {
            target: event.metadata().target().to_string(),
            level: *event.metadata().level(),
            fields,
            span,
        });
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        // Ids are reused once a span closes: a later span with the same id is another one.
        self.0.lock().unwrap().by_id.remove(&id.into_u64());
    }
}
