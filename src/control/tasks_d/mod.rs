//! `tasks.d`: declarative tasks, the default control source of a host with no control plane.
//! Each `*.json` file in the directory is a task that should run, and so is each Compose file
//! (`*.yaml`, `*.yml`, or a subdirectory holding `compose.yaml` and its `.env`; see `scan.rs`):
//!
//! - a new file starts its task;
//! - a removed file stops its task;
//! - a changed file (its content hash differs) stops the old task, then starts the new one;
//! - an invalid file is logged with its name and every error, and changes nothing: the task it
//!   would replace keeps running.
//! - a valid file's warnings (a Compose file's conversion warnings, a definition's ignored keys)
//!   are logged with its name once per content, when that version is loaded.
//!
//! Order matters for replacements that reuse a host port: every stop of a rescan is sent to the
//! engine before any start, so each start's sequence number is higher than every stop's and the
//! engine's wait group creates the new containers only after the old ones have stopped.
//!
//! The decision is the pure [`diff`] (`plan.rs`); `scan.rs` reads the directory and names the
//! files in source marks; [`TasksDirWatcher`] (`watcher.rs`) is a thin thread that rescans on
//! demand (SIGHUP, wired by the agent), at a fixed interval, and ends on shutdown. Which task
//! came from which file is recorded in the task itself, and nowhere else: the watcher submits
//! with a source mark (`tasks.d:<file>:<content hash>`, [`source_mark`]) that the engine saves in
//! the same checkpoint that accepts the task. At start, and before any scan starts a file's
//! task, the watcher matches files to the engine's tasks by that mark ([`tracked_from_engine`]),
//! so a crash between a submit and anything the watcher keeps in memory can never start a file's
//! task twice.
//!
//! A file is a task that should be *running*: when its task stops by itself (an essential
//! container exited, a pull or create failed) and the file is unchanged, a fresh task is started
//! from it after a pause that doubles from 10 s up to 5 min, and falls back to 10 s once a task
//! ran for 10 min, so a crashing task does not hot-loop ([`restart_delay`]). A task stopped by
//! request (`deckhand stop`) stays stopped until its file changes or the agent restarts.
//!
//! Hidden files (`.name.json`, editors' lock files) and files that are not regular files are
//! ignored. A missing directory changes nothing (it may be an unmounted volume); an existing,

mod plan;
mod scan;
#[cfg(test)]
mod tests;
mod watcher;

pub use plan::{
    diff, restart_delay, stopped_by_itself, task_run_time, tracked_from_engine, Action,
    RestartBackoff, ScannedFile, TrackedFile,
};
pub use scan::{
    content_hash, declared_images, images_named_in, is_task_file_name, parse_source_mark,
    read_directory, source_mark, FileContent, COMPOSE_FILE_NAMES,
};
pub use watcher::{RescanTrigger, ScanSummary, TasksDirWatcher};

use std::time::Duration;

/// The rescan interval when nothing asks for one sooner.
pub const DEFAULT_RESCAN_INTERVAL: Duration = Duration::from_secs(5);
