//! The state-change event (docs/ENGINE.md §10), as data: what a managed task hands over
//! ([`NewEvent`]) and what is recorded, numbered and read back ([`Event`]). It sits below both the
//! store that writes events to disk (`state::event_log`) and the log that numbers them and serves
//! subscribers (`report`), so neither imports the other for it.

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

/// What a managed task hands over; the log fills in `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub time: Millis,
    pub task: String,
    pub container: Option<String>,
    pub status: String,
    pub exit_code: Option<i64>,
    pub reason: Option<String>,
}
