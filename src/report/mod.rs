//! State-change events (ENGINE-SEMANTICS §10): container and task RUNNING/STOPPED events, each
//! with a global, gap-free sequence number, kept in order per task; subscribers read events after
//! a given number and may wait for new ones.

pub mod event_log;

pub use event_log::{EventLog, NewEvent, DEFAULT_EVENT_CAPACITY};

use crate::task::Millis;
use serde::{Deserialize, Serialize};

/// One state-change event, as `deckhand events` prints it (one JSON object per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Global, gap-free, starting at 1.
    pub seq: u64,
    /// Milliseconds since the epoch when the change was recorded.
    pub time: Millis,
    /// Task id (32 hex characters).
    pub task: String,
    /// Container name; absent for task events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// `RUNNING` or `STOPPED`.
    pub status: String,
    #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
