//! The pure planning of `tasks.d`: which files start, stop or replace which tasks ([`diff`]),
//! which file each of the engine's tasks came from ([`tracked_from_engine`]), and the pacing of
//! restarts of a task that stops by itself ([`restart_delay`]). No I/O, no clock: table-tested in
//! `tests.rs`.

use super::scan::parse_source_mark;
use crate::task::{Millis, Task, TaskStatus};
use std::collections::BTreeMap;
use std::time::Duration;

/// How `tasks.d` paces the restarts of a file's task that keeps stopping by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartBackoff {
    /// The pause before the first restart.
    pub initial: Duration,
    /// The pause doubles up to this.
    pub maximum: Duration,
    /// A task that ran at least this long before it stopped resets the pause to `initial`.
    pub reset_after_running: Duration,
}

impl Default for RestartBackoff {
    fn default() -> RestartBackoff {
        RestartBackoff {
            initial: Duration::from_secs(10),
            maximum: Duration::from_secs(5 * 60),
            reset_after_running: Duration::from_secs(10 * 60),
        }
    }
}

/// The pause before restarting a file's task that stopped by itself after running `ran_for`.
/// `previous` is the pause before the restart that started this task (`None`: the file itself
/// started it). Pure.
pub fn restart_delay(
    previous: Option<Duration>,
    ran_for: Duration,
    backoff: &RestartBackoff,
) -> Duration {
    match previous {
        Some(pause) if ran_for < backoff.reset_after_running => pause
            .saturating_mul(2)
            .clamp(backoff.initial, backoff.maximum),
        _ => backoff.initial.min(backoff.maximum),
    }
}

/// Whether a task ended on its own (an essential container exited, a transition failed) rather
/// than by a stop command: it is known STOPPED and no stop was ever registered for it.
pub fn stopped_by_itself(task: &Task) -> bool {
    task.known_status == TaskStatus::Stopped && task.stop_sequence == 0
}

/// How long a task ran: from its acceptance to when it stopped (`now` if that is not recorded).
pub fn task_run_time(task: &Task, now: Millis) -> Duration {
    let stopped = task
        .execution_stopped_at
        .or(task.known_status_time)
        .unwrap_or(now);
    Duration::from_millis(stopped.saturating_sub(task.created_at))
}

/// Which task the engine holds for each `tasks.d` file, from the tasks' source marks. A task
/// counts while it should run (desired status not STOPPED); with `include_stopped_by_request`,
/// also one stopped by a command (so a `deckhand stop` is not undone by an agent restart). A
/// task that stopped by itself does not count: its file starts a new one. When several tasks
/// count for one file, a running one wins over a stopped one, then the latest accepted.
pub fn tracked_from_engine(
    tasks: &[Task],
    include_stopped_by_request: bool,
) -> BTreeMap<String, TrackedFile> {
    let mut best: BTreeMap<String, (u8, u64, TrackedFile)> = BTreeMap::new();
    for task in tasks {
        let Some((file, hash)) = task.source.as_deref().and_then(parse_source_mark) else {
            continue;
        };
        let rank = if task.desired_status != TaskStatus::Stopped {
            2
        } else if include_stopped_by_request && task.stop_sequence > 0 {
            1
        } else {
            continue;
        };
        let candidate = (
            rank,
            task.start_sequence,
            TrackedFile {
                hash,
                task_id: task.id.clone(),
            },
        );
        match best.get(&file) {
            Some((held_rank, held_sequence, _))
                if (*held_rank, *held_sequence) >= (rank, task.start_sequence) => {}
            _ => {
                best.insert(file, candidate);
            }
        }
    }
    crate::sorting::map_of(
        best.into_iter()
            .map(|(file, (_, _, tracked))| (file, tracked)),
    )
}

/// A file whose task deckhand started: its content hash and the task's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedFile {
    pub hash: u64,
    pub task_id: String,
}

/// What a scan found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedFile {
    pub hash: u64,
    /// Whether the file holds a valid task definition.
    pub valid: bool,
}

/// What to do about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A new valid file: start its task.
    Start { file: String },
    /// The file is gone: stop its task.
    Stop { file: String, task_id: String },
    /// The file changed and is valid: stop the old task, then start the new one.
    Replace { file: String, old_task_id: String },
}

/// Compares the files deckhand started tasks from with the files present now. Invalid files
/// never cause an action: a new invalid file starts nothing, a changed invalid file leaves the
/// old task running. Actions come sorted by file name, stops first.
pub fn diff(
    previous: &BTreeMap<String, TrackedFile>,
    current: &BTreeMap<String, ScannedFile>,
) -> Vec<Action> {
    let mut stops = Vec::new();
    let mut others = Vec::new();
    for (file, tracked) in previous {
        if !current.contains_key(file) {
            stops.push(Action::Stop {
                file: file.clone(),
                task_id: tracked.task_id.clone(),
            });
        }
    }
    for (file, scanned) in current {
        if !scanned.valid {
            continue;
        }
        match previous.get(file) {
            None => others.push(Action::Start { file: file.clone() }),
            Some(tracked) if tracked.hash != scanned.hash => others.push(Action::Replace {
                file: file.clone(),
                old_task_id: tracked.task_id.clone(),
            }),
            Some(_) => {}
        }
    }
    stops.extend(others);
    stops
}
