//! State-change events (docs/ENGINE.md §10): container and task RUNNING/STOPPED events, each
//! with a global, gap-free sequence number, kept in order per task; subscribers read events after
//! a given number and may wait for new ones. The event itself is data of its own
//! (`crate::event`), re-exported here; the durable file behind the log is
//! `state::EventLogFile`.

pub mod event_log;

pub use crate::event::{Event, NewEvent};
pub use event_log::{EventLog, DEFAULT_EVENT_CAPACITY};
