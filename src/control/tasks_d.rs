//! `tasks.d`: declarative tasks, the default control source of a host with no control plane.
//! Each `*.json` file in the directory is a task that should run:
//!
//! - a new file starts its task;
//! - a removed file stops its task;
//! - a changed file (its content hash differs) stops the old task, then starts the new one;
//! - an invalid file is logged with its name and every error, and changes nothing: the task it
//!   would replace keeps running.
//!
//! Order matters for replacements that reuse a host port: every stop of a rescan is sent to the
//! engine before any start, so each start's sequence number is higher than every stop's and the
//! engine's wait group creates the new containers only after the old ones have stopped.
//!
//! The decision is the pure [`diff`]; [`TasksDirWatcher`] is a thin thread that rescans on demand
//! (SIGHUP, wired by the agent), at a fixed interval, and ends on shutdown. Which task came from
//! which file is recorded in the task itself: the watcher submits with a source mark
//! (`tasks.d:<file>:<content hash>`, [`source_mark`]) that the engine saves in the same checkpoint
//! that accepts the task. At start, and before any scan starts a file's task, the watcher matches
//! files to the engine's tasks by that mark ([`tracked_from_engine`]), so a crash between a submit
//! and anything the watcher writes can never start a file's task twice. The small state file
//! (`tasks-d.json`) is still written, but only read for tasks accepted before source marks
//! existed.
//!
//! A file is a task that should be *running*: when its task stops by itself (an essential
//! container exited, a pull or create failed) and the file is unchanged, a fresh task is started
//! from it after a pause that doubles from 10 s up to 5 min, and falls back to 10 s once a task
//! ran for 10 min, so a crashing task does not hot-loop ([`restart_delay`]). A task stopped by
//! request (`deckhand stop`) stays stopped until its file changes or the agent restarts.
//!
//! Hidden files (`.name.json`, editors' lock files) and files that are not regular files are
//! ignored. A missing directory changes nothing (it may be an unmounted volume); an existing,
//! empty directory stops every task that came from it.

use crate::api::http::MAX_REQUEST_BODY_BYTES;
use crate::engine::{EngineError, EngineHandle};
use crate::task::{parse_task_definition, Millis, Task, TaskDefinition, TaskStatus};
use crossbeam_channel::{at, bounded, never, select, tick, unbounded, Receiver, Sender};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The rescan interval when nothing asks for one sooner.
pub const DEFAULT_RESCAN_INTERVAL: Duration = Duration::from_secs(5);
/// Version of the state file's format.
const STATE_VERSION: u32 = 1;

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

/// FNV-1a, 64 bits: a content hash that is stable across builds (it is persisted).
pub fn content_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The source mark of a task started from `file` with content hash `hash`.
pub fn source_mark(file: &str, hash: u64) -> String {
    format!("tasks.d:{file}:{hash:016x}")
}

/// The file and content hash a source mark names; `None` for any other source (the API's
/// tasks have none). File names may contain `:`; the hash is after the last one.
pub fn parse_source_mark(source: &str) -> Option<(String, u64)> {
    let rest = source.strip_prefix("tasks.d:")?;
    let (file, hash) = rest.rsplit_once(':')?;
    if file.is_empty() || hash.len() != 16 {
        return None;
    }
    Some((file.to_string(), u64::from_str_radix(hash, 16).ok()?))
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
    best.into_iter()
        .map(|(file, (_, _, tracked))| (file, tracked))
        .collect()
}

/// A file whose task deckhand started: its content hash and the task's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// One file as read from the directory: its hash and its definition or every error.
#[derive(Debug, Clone)]
pub struct FileContent {
    pub hash: u64,
    pub definition: Result<TaskDefinition, Vec<String>>,
}

/// Reads every `*.json` regular, non-hidden file of `directory`. `Ok(None)`: the directory
/// does not exist.
pub fn read_directory(directory: &Path) -> io::Result<Option<BTreeMap<String, FileContent>>> {
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut files = BTreeMap::new();
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let path = entry.path();
        // Follow symlinks: a link to a definition elsewhere is a task too.
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_file() => {}
            _ => continue,
        }
        files.insert(name, read_file(&path));
    }
    Ok(Some(files))
}

fn read_file(path: &Path) -> FileContent {
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|file| {
        file.take(MAX_REQUEST_BODY_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
    });
    let hash = content_hash(&bytes);
    let definition = match read {
        Err(error) => Err(vec![format!("cannot read the file: {error}")]),
        Ok(_) if bytes.len() > MAX_REQUEST_BODY_BYTES => Err(vec![format!(
            "larger than the {MAX_REQUEST_BODY_BYTES} bytes a task definition may have"
        )]),
        Ok(_) => parse_task_definition(&bytes)
            .map(|parsed| parsed.definition)
            .map_err(|errors| errors.iter().map(ToString::to_string).collect()),
    };
    FileContent { hash, definition }
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    files: BTreeMap<String, TrackedFile>,
}

/// Loads the file → task map; a missing file is an empty map.
pub fn load_state(path: &Path) -> Result<BTreeMap<String, TrackedFile>, String> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    parse_state(&text, path)
}

/// [`load_state`]'s parsing of the bytes read from `path`.
pub fn parse_state(text: &[u8], path: &Path) -> Result<BTreeMap<String, TrackedFile>, String> {
    let state: StateFile = serde_json::from_slice(text)
        .map_err(|error| format!("{} is not a tasks.d state file: {error}", path.display()))?;
    if state.version > STATE_VERSION {
        return Err(format!(
            "{} has format version {}, newer than this deckhand understands ({STATE_VERSION})",
            path.display(),
            state.version
        ));
    }
    Ok(state.files)
}

/// Writes the map atomically: temp file, fsync, rename, fsync the directory.
pub fn save_state(path: &Path, files: &BTreeMap<String, TrackedFile>) -> io::Result<()> {
    let directory = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(directory)?;
    let temporary = path.with_extension("json.tmp");
    let state = StateFile {
        version: STATE_VERSION,
        files: files.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&state).map_err(io::Error::other)?;
    {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)?;
    std::fs::File::open(directory)?.sync_all()
}

/// What one rescan did, by file name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanSummary {
    pub started: Vec<String>,
    pub stopped: Vec<String>,
    pub replaced: Vec<String>,
    /// Files with errors (logged once per content).
    pub invalid: Vec<String>,
    /// Files whose command the engine refused or could not take (retried at the next scan).
    pub failed: Vec<String>,
    /// Files whose task had stopped by itself and was started afresh.
    pub restarted: Vec<String>,
    /// The directory does not exist: nothing was changed.
    pub directory_missing: bool,
}

/// The watcher's state between scans.
struct Watcher {
    engine: Arc<dyn EngineHandle>,
    directory: PathBuf,
    state_path: Option<PathBuf>,
    tracked: BTreeMap<String, TrackedFile>,
    /// (file, hash) of invalid files already logged, so each bad version is logged once.
    reported_invalid: BTreeMap<String, u64>,
    missing_directory_logged: bool,
    /// The directory existed at some scan.
    directory_seen: bool,
    backoff: RestartBackoff,
    /// Restart bookkeeping of files whose task stopped by itself (in memory: an agent restart
    /// starts such a file's task at once).
    restarts: BTreeMap<String, PendingRestart>,
}

/// A file's restart history: the pause used before its current task, and when the next start
/// is due once its task stopped by itself.
#[derive(Debug, Clone, Default)]
struct PendingRestart {
    previous_pause: Option<Duration>,
    due: Option<Instant>,
    restarts: u32,
}

fn now_millis() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis() as Millis)
        .unwrap_or(0)
}

impl Watcher {
    fn persist(&self) {
        if let Some(path) = &self.state_path {
            if let Err(error) = save_state(path, &self.tracked) {
                log::error!(
                    "tasks.d: cannot save {}: {error}; after a restart its tasks may start twice",
                    path.display()
                );
            }
        }
    }

    fn submit(&mut self, file: &str, content: &FileContent, summary: &mut ScanSummary) -> bool {
        let Ok(definition) = &content.definition else {
            return false;
        };
        let source = source_mark(file, content.hash);
        match self.engine.submit_from_source(definition.clone(), source) {
            Ok(task) => {
                log::info!("tasks.d: {file}: started task {}", task.id);
                self.tracked.insert(
                    file.to_string(),
                    TrackedFile {
                        hash: content.hash,
                        task_id: task.id,
                    },
                );
                true
            }
            Err(error) => {
                log::error!("tasks.d: {file}: cannot start its task: {error}");
                summary.failed.push(file.to_string());
                false
            }
        }
    }

    /// Stops a task; a task the engine no longer has counts as stopped.
    fn stop(&mut self, file: &str, task_id: &str, summary: &mut ScanSummary) -> bool {
        match self.engine.stop(task_id) {
            Ok(()) | Err(EngineError::NotFound { .. }) => {
                log::info!("tasks.d: {file}: stopping task {task_id}");
                true
            }
            Err(error) => {
                log::error!("tasks.d: {file}: cannot stop task {task_id}: {error}");
                summary.failed.push(file.to_string());
                false
            }
        }
    }

    /// Restarts, when due, the tasks of unchanged valid files that stopped by themselves, and
    /// schedules the restart of those that just did.
    fn restart_stopped_tasks(
        &mut self,
        files: &BTreeMap<String, FileContent>,
        current: &BTreeMap<String, ScannedFile>,
        summary: &mut ScanSummary,
    ) {
        let unchanged: Vec<(String, String)> = self
            .tracked
            .iter()
            .filter(|(file, tracked)| {
                current
                    .get(*file)
                    .is_some_and(|scanned| scanned.valid && scanned.hash == tracked.hash)
            })
            .map(|(file, tracked)| (file.clone(), tracked.task_id.clone()))
            .collect();
        // History of files no longer tracked is dropped.
        self.restarts.retain(|file, _| {
            unchanged
                .iter()
                .any(|(unchanged_file, _)| unchanged_file == file)
        });
        if unchanged.is_empty() {
            return;
        }
        let stopped: BTreeMap<String, Task> = self
            .engine
            .tasks()
            .into_iter()
            .filter(stopped_by_itself)
            .map(|task| (task.id.clone(), task))
            .collect();
        let now = Instant::now();
        let now_wall = now_millis();
        for (file, task_id) in unchanged {
            let Some(task) = stopped.get(&task_id) else {
                // Running again, stopped by request, or cleaned up: nothing is due (a due time
                // left in the past would wake the loop at once, forever).
                if let Some(pending) = self.restarts.get_mut(&file) {
                    pending.due = None;
                }
                continue;
            };
            let pending = self.restarts.entry(file.clone()).or_default();
            match pending.due {
                None => {
                    let ran_for = task_run_time(task, now_wall);
                    let pause = restart_delay(pending.previous_pause, ran_for, &self.backoff);
                    pending.previous_pause = Some(pause);
                    // The pause counts from the stop, not from when a scan noticed it.
                    let stopped_at = task
                        .execution_stopped_at
                        .or(task.known_status_time)
                        .unwrap_or(now_wall);
                    let since_stop = Duration::from_millis(now_wall.saturating_sub(stopped_at));
                    pending.due = Some(now + pause.saturating_sub(since_stop));
                    log::warn!(
                        "tasks.d: {file}: task {task_id} stopped by itself after {}s ({}); \
                         starting a new one from the file in {}s",
                        ran_for.as_secs(),
                        task.stopped_reason
                            .as_deref()
                            .unwrap_or("no reason recorded"),
                        pause.as_secs_f64()
                    );
                }
                Some(due) if due <= now => {
                    pending.due = None;
                    let Some(content) = files.get(&file) else {
                        continue;
                    };
                    pending.restarts += 1;
                    let restarts = pending.restarts;
                    if self.submit(&file, content, summary) {
                        let new_task = self
                            .tracked
                            .get(&file)
                            .map(|tracked| tracked.task_id.clone())
                            .unwrap_or_default();
                        log::info!(
                            "tasks.d: {file}: restarted: task {new_task} replaces {task_id}, \
                             which stopped by itself (restart {restarts} in a row)"
                        );
                        summary.restarted.push(file.clone());
                    } else if let Some(pending) = self.restarts.get_mut(&file) {
                        // Refused (shutting down, disk full): try again after the same pause.
                        pending.due = pending.previous_pause.map(|pause| now + pause);
                    }
                }
                Some(_) => {}
            }
        }
        if !summary.restarted.is_empty() {
            self.persist();
        }
    }

    /// When the earliest scheduled restart is due.
    fn next_restart_due(&self) -> Option<Instant> {
        self.restarts
            .values()
            .filter_map(|pending| pending.due)
            .min()
    }

    fn scan(&mut self) -> ScanSummary {
        #[cfg(test)]
        test_hooks::panic_if_asked(&self.directory);
        let mut summary = ScanSummary::default();
        let files = match read_directory(&self.directory) {
            Ok(Some(files)) => {
                self.missing_directory_logged = false;
                self.directory_seen = true;
                files
            }
            Ok(None) => {
                if !self.missing_directory_logged {
                    // A directory that never existed is the normal state of a fresh install
                    // (info); one that disappeared may be an unmounted volume (warn).
                    if self.directory_seen {
                        log::warn!(
                            "tasks.d: {} disappeared; its tasks are left as they are",
                            self.directory.display()
                        );
                    } else {
                        log::info!(
                            "tasks.d: {} does not exist; create it and put task definition \
                             files (*.json) there to have them started",
                            self.directory.display()
                        );
                    }
                    self.missing_directory_logged = true;
                }
                summary.directory_missing = true;
                return summary;
            }
            Err(error) => {
                log::error!(
                    "tasks.d: cannot read {}: {error}; its tasks are left as they are",
                    self.directory.display()
                );
                summary.directory_missing = true;
                return summary;
            }
        };
        let current: BTreeMap<String, ScannedFile> = files
            .iter()
            .map(|(file, content)| {
                (
                    file.clone(),
                    ScannedFile {
                        hash: content.hash,
                        valid: content.definition.is_ok(),
                    },
                )
            })
            .collect();
        for (file, content) in &files {
            if let Err(errors) = &content.definition {
                summary.invalid.push(file.clone());
                if self.reported_invalid.get(file) != Some(&content.hash) {
                    let keeps = match self.tracked.get(file) {
                        Some(tracked) => format!("; task {} keeps running", tracked.task_id),
                        None => String::new(),
                    };
                    log::error!(
                        "tasks.d: {file} is not a valid task definition{keeps}:\n  {}",
                        errors.join("\n  ")
                    );
                    self.reported_invalid.insert(file.clone(), content.hash);
                }
            }
        }
        self.reported_invalid
            .retain(|file, hash| files.get(file).is_some_and(|content| content.hash == *hash));

        let mut actions = diff(&self.tracked, &current);
        if actions
            .iter()
            .any(|action| matches!(action, Action::Start { .. }))
        {
            // Before starting anything, look for the file's task in the engine: one accepted
            // whose submit's answer this watcher never recorded is adopted, not duplicated.
            let held = tracked_from_engine(&self.engine.tasks(), false);
            let mut adopted = false;
            for action in &actions {
                if let Action::Start { file } = action {
                    if let Some(found) = held.get(file) {
                        log::info!(
                            "tasks.d: {file}: task {} already runs from it; not starting another",
                            found.task_id
                        );
                        self.tracked.insert(file.clone(), found.clone());
                        adopted = true;
                    }
                }
            }
            if adopted {
                actions = diff(&self.tracked, &current);
                self.persist();
            }
        }
        // A file acted on below starts its restart history afresh.
        for action in &actions {
            let (Action::Start { file } | Action::Stop { file, .. } | Action::Replace { file, .. }) =
                action;
            self.restarts.remove(file);
        }
        self.restart_stopped_tasks(&files, &current, &mut summary);
        if actions.is_empty() {
            return summary;
        }
        // Phase 1: every stop, so that each start below gets a later sequence number.
        let mut replace_ready = Vec::new();
        for action in &actions {
            match action {
                Action::Stop { file, task_id } => {
                    if self.stop(file, task_id, &mut summary) {
                        self.tracked.remove(file);
                        summary.stopped.push(file.clone());
                    }
                }
                Action::Replace { file, old_task_id } => {
                    if self.stop(file, old_task_id, &mut summary) {
                        self.tracked.remove(file);
                        replace_ready.push(file.clone());
                    }
                }
                Action::Start { .. } => {}
            }
        }
        self.persist();
        // Phase 2: every start.
        for action in &actions {
            let (file, replacing) = match action {
                Action::Start { file } => (file, false),
                Action::Replace { file, .. } if replace_ready.contains(file) => (file, true),
                _ => continue,
            };
            if let Some(content) = files.get(file) {
                if self.submit(file, content, &mut summary) {
                    if replacing {
                        summary.replaced.push(file.clone());
                    } else {
                        summary.started.push(file.clone());
                    }
                }
            }
        }
        self.persist();
        summary
    }
}

enum Request {
    Rescan(Option<Sender<ScanSummary>>),
}

/// The `tasks.d` thread. Dropping it without [`TasksDirWatcher::shutdown`] also ends the thread.
pub struct TasksDirWatcher {
    requests: Sender<Request>,
    shutdown: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TasksDirWatcher {
    /// Starts watching `directory`. `state_path` keeps which task came from which file (use a
    /// file in the agent's data directory); entries whose task the engine does not hold are
    /// dropped now. The first scan runs at once.
    pub fn start(
        engine: Arc<dyn EngineHandle>,
        directory: PathBuf,
        state_path: Option<PathBuf>,
        interval: Duration,
    ) -> io::Result<TasksDirWatcher> {
        TasksDirWatcher::start_with_backoff(
            engine,
            directory,
            state_path,
            interval,
            RestartBackoff::default(),
        )
    }

    /// [`TasksDirWatcher::start`] with another pacing of the restarts of tasks that stop by
    /// themselves.
    pub fn start_with_backoff(
        engine: Arc<dyn EngineHandle>,
        directory: PathBuf,
        state_path: Option<PathBuf>,
        interval: Duration,
        backoff: RestartBackoff,
    ) -> io::Result<TasksDirWatcher> {
        let mut legacy = match &state_path {
            Some(path) => load_state(path).unwrap_or_else(|error| {
                log::error!("tasks.d: {error}; starting from an empty map");
                BTreeMap::new()
            }),
            None => BTreeMap::new(),
        };
        let tasks = engine.tasks();
        // The engine's tasks say which file each came from: that is the truth.
        let mut tracked = tracked_from_engine(&tasks, true);
        // The state file only speaks for tasks accepted before source marks existed.
        let unmarked_running: BTreeMap<&str, ()> = tasks
            .iter()
            .filter(|task| task.source.is_none() && task.desired_status != TaskStatus::Stopped)
            .map(|task| (task.id.as_str(), ()))
            .collect();
        legacy.retain(|file, entry| {
            let keep = !tracked.contains_key(file)
                && unmarked_running.contains_key(entry.task_id.as_str());
            if !keep && !tracked.contains_key(file) {
                log::info!(
                    "tasks.d: {file}: task {} is no longer running; the file will start a new one",
                    entry.task_id
                );
            }
            keep
        });
        tracked.extend(legacy);
        let mut watcher = Watcher {
            engine,
            directory,
            state_path,
            tracked,
            reported_invalid: BTreeMap::new(),
            missing_directory_logged: false,
            directory_seen: false,
            backoff,
            restarts: BTreeMap::new(),
        };
        let (requests, request_receiver) = unbounded::<Request>();
        let (shutdown, shutdown_receiver) = bounded::<()>(1);
        let thread = thread::Builder::new()
            .name("tasks.d".into())
            .spawn(move || {
                watch_surviving_panics(
                    &mut watcher,
                    &request_receiver,
                    &shutdown_receiver,
                    interval,
                )
            })?;
        Ok(TasksDirWatcher {
            requests,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// Asks for a rescan (SIGHUP) without waiting for it.
    pub fn rescan(&self) {
        let _ = self.requests.send(Request::Rescan(None));
    }

    /// A handle that asks for rescans from another thread (the signal thread).
    pub fn rescan_trigger(&self) -> RescanTrigger {
        RescanTrigger(self.requests.clone())
    }

    /// Rescans now and returns what the scan did, or `None` if it did not finish in `timeout`.
    pub fn rescan_and_wait(&self, timeout: Duration) -> Option<ScanSummary> {
        let (reply, summary) = bounded(1);
        self.requests.send(Request::Rescan(Some(reply))).ok()?;
        summary.recv_timeout(timeout).ok()
    }

    /// Ends the thread (after a scan in progress) and joins it. Tasks keep running.
    pub fn shutdown(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TasksDirWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Asks a [`TasksDirWatcher`] to rescan; cheap to clone, usable from any thread.
#[derive(Clone)]
pub struct RescanTrigger(Sender<Request>);

impl RescanTrigger {
    pub fn rescan(&self) {
        let _ = self.0.send(Request::Rescan(None));
    }
}

/// The pause before the watcher scans again after a panic; it doubles (up to
/// [`PANIC_PAUSE_MAXIMUM`]) while scans keep panicking, so a file that makes the scan panic every
/// time does not spin the thread.
const PANIC_PAUSE_INITIAL: Duration = Duration::from_secs(1);
const PANIC_PAUSE_MAXIMUM: Duration = Duration::from_secs(60);

/// The thread body: the first scan, then [`run`]. A panic (deckhand choking on a file, a bug) is
/// logged and the watcher carries on after a pause: its tasks keep running, and the next scan
/// looks at the directory afresh. Which file started which task is recorded in the engine's
/// tasks (source marks), so a scan cut short by a panic never starts a file's task twice.
fn watch_surviving_panics(
    watcher: &mut Watcher,
    requests: &Receiver<Request>,
    shutdown: &Receiver<()>,
    interval: Duration,
) {
    let mut pause = PANIC_PAUSE_INITIAL;
    loop {
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            watcher.persist();
            watcher.scan();
            run(watcher, requests, shutdown, interval);
        }));
        let Err(panic) = outcome else {
            return;
        };
        if started.elapsed() > PANIC_PAUSE_MAXIMUM {
            pause = PANIC_PAUSE_INITIAL;
        }
        let message = panic
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        log::error!(
            "tasks.d: the watcher panicked ({message}); scanning {} again in {}s",
            watcher.directory.display(),
            pause.as_secs_f64()
        );
        select! {
            recv(shutdown) -> _ => return,
            recv(at(Instant::now() + pause)) -> _ => {}
        }
        pause = (pause * 2).min(PANIC_PAUSE_MAXIMUM);
    }
}

fn run(
    watcher: &mut Watcher,
    requests: &Receiver<Request>,
    shutdown: &Receiver<()>,
    interval: Duration,
) {
    let ticker = tick(interval);
    loop {
        // A due restart wakes the loop on time rather than at the next tick.
        let restart_due = match watcher.next_restart_due() {
            Some(due) => at(due),
            None => never(),
        };
        select! {
            recv(shutdown) -> _ => return,
            recv(requests) -> request => match request {
                Ok(Request::Rescan(reply)) => {
                    let summary = watcher.scan();
                    if let Some(reply) = reply {
                        let _ = reply.send(summary);
                    }
                }
                Err(_) => return,
            },
            recv(ticker) -> _ => {
                watcher.scan();
            }
            recv(restart_due) -> _ => {
                watcher.scan();
            }
        }
    }
}

/// Test-only hooks into the watcher thread (never compiled into the binary).
#[cfg(test)]
mod test_hooks {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    /// Directories whose next scans panic, once per entry, as a bug would. Unit tests run in
    /// parallel: each uses a directory of its own.
    pub(super) static PANIC_ON_SCAN_OF: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    pub(super) fn panic_if_asked(directory: &Path) {
        let mut asked = PANIC_ON_SCAN_OF
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(position) = asked.iter().position(|entry| entry == directory) {
            asked.remove(position);
            drop(asked);
            panic!("test hook: the scan of {} panics", directory.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(entries: &[(&str, u64, &str)]) -> BTreeMap<String, TrackedFile> {
        entries
            .iter()
            .map(|(file, hash, task_id)| {
                (
                    file.to_string(),
                    TrackedFile {
                        hash: *hash,
                        task_id: task_id.to_string(),
                    },
                )
            })
            .collect()
    }

    fn scanned(entries: &[(&str, u64, bool)]) -> BTreeMap<String, ScannedFile> {
        entries
            .iter()
            .map(|(file, hash, valid)| {
                (
                    file.to_string(),
                    ScannedFile {
                        hash: *hash,
                        valid: *valid,
                    },
                )
            })
            .collect()
    }

    fn start(file: &str) -> Action {
        Action::Start { file: file.into() }
    }
    fn stop(file: &str, task_id: &str) -> Action {
        Action::Stop {
            file: file.into(),
            task_id: task_id.into(),
        }
    }
    fn replace(file: &str, old: &str) -> Action {
        Action::Replace {
            file: file.into(),
            old_task_id: old.into(),
        }
    }

    type DiffCase = (
        &'static str,
        BTreeMap<String, TrackedFile>,
        BTreeMap<String, ScannedFile>,
        Vec<Action>,
    );

    #[test]
    fn diff_table() {
        let table: Vec<DiffCase> = vec![
            ("nothing at all", tracked(&[]), scanned(&[]), vec![]),
            (
                "new valid file starts",
                tracked(&[]),
                scanned(&[("a.json", 1, true)]),
                vec![start("a.json")],
            ),
            (
                "new invalid file does nothing",
                tracked(&[]),
                scanned(&[("a.json", 1, false)]),
                vec![],
            ),
            (
                "unchanged file does nothing",
                tracked(&[("a.json", 1, "t1")]),
                scanned(&[("a.json", 1, true)]),
                vec![],
            ),
            (
                "removed file stops",
                tracked(&[("a.json", 1, "t1")]),
                scanned(&[]),
                vec![stop("a.json", "t1")],
            ),
            (
                "changed valid file replaces",
                tracked(&[("a.json", 1, "t1")]),
                scanned(&[("a.json", 2, true)]),
                vec![replace("a.json", "t1")],
            ),
            (
                "changed invalid file keeps the old task",
                tracked(&[("a.json", 1, "t1")]),
                scanned(&[("a.json", 2, false)]),
                vec![],
            ),
            (
                "stops come before starts and replaces",
                tracked(&[("b.json", 1, "t1"), ("z.json", 5, "t5")]),
                scanned(&[("a.json", 3, true), ("b.json", 2, true)]),
                vec![
                    stop("z.json", "t5"),
                    start("a.json"),
                    replace("b.json", "t1"),
                ],
            ),
            (
                "a mix leaves the untouched alone",
                tracked(&[("keep.json", 1, "t1"), ("gone.json", 2, "t2")]),
                scanned(&[
                    ("keep.json", 1, true),
                    ("bad.json", 9, false),
                    ("new.json", 4, true),
                ]),
                vec![stop("gone.json", "t2"), start("new.json")],
            ),
        ];
        for (name, previous, current, expected) in table {
            assert_eq!(diff(&previous, &current), expected, "{name}");
        }
    }

    #[test]
    fn restart_pause_doubles_to_the_maximum_and_resets_after_a_long_run() {
        let backoff = RestartBackoff::default();
        let seconds = Duration::from_secs;
        let minutes = |m: u64| Duration::from_secs(60 * m);
        // (pause before the current task, how long it ran, expected pause)
        let table = [
            (None, seconds(1), seconds(10)),
            (None, minutes(60), seconds(10)),
            (Some(seconds(10)), seconds(1), seconds(20)),
            (Some(seconds(20)), seconds(3), seconds(40)),
            (Some(seconds(160)), seconds(3), seconds(300)),
            (Some(seconds(300)), seconds(3), seconds(300)),
            (Some(seconds(300)), minutes(9), seconds(300)),
            (Some(seconds(300)), minutes(10), seconds(10)),
            (Some(seconds(40)), minutes(11), seconds(10)),
        ];
        for (previous, ran_for, expected) in table {
            assert_eq!(
                restart_delay(previous, ran_for, &backoff),
                expected,
                "previous {previous:?}, ran {ran_for:?}"
            );
        }
        let quick = RestartBackoff {
            initial: Duration::from_millis(100),
            maximum: Duration::from_millis(250),
            reset_after_running: Duration::from_secs(1),
        };
        assert_eq!(
            restart_delay(Some(Duration::from_millis(200)), Duration::ZERO, &quick),
            Duration::from_millis(250)
        );
    }

    /// An engine that accepts every command and only records the tasks submitted.
    #[derive(Default)]
    struct RecordingEngine {
        tasks: std::sync::Mutex<Vec<Task>>,
        submitted: std::sync::Condvar,
    }

    impl RecordingEngine {
        fn wait_for_submits(&self, count: usize, timeout: Duration) -> Vec<Task> {
            let deadline = Instant::now() + timeout;
            let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            while tasks.len() < count && Instant::now() < deadline {
                tasks = self
                    .submitted
                    .wait_timeout(tasks, deadline - Instant::now())
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            tasks.clone()
        }
    }

    impl EngineHandle for RecordingEngine {
        fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError> {
            let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            let task = Task::new(format!("t{}", tasks.len() + 1), "default", definition, 1, 0);
            tasks.push(task.clone());
            self.submitted.notify_all();
            Ok(task)
        }
        fn submit_from_source(
            &self,
            definition: TaskDefinition,
            source: String,
        ) -> Result<Task, EngineError> {
            let mut task = self.submit(definition)?;
            task.source = Some(source);
            let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(last) = tasks.last_mut() {
                last.source = task.source.clone();
            }
            Ok(task)
        }
        fn stop(&self, _task_id: &str) -> Result<(), EngineError> {
            Ok(())
        }
        fn tasks(&self) -> Vec<Task> {
            self.tasks.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
        fn events_since(&self, _after: u64, _wait: Duration) -> Vec<crate::report::Event> {
            Vec::new()
        }
        fn cluster(&self) -> String {
            "default".to_string()
        }
    }

    #[test]
    fn a_scan_that_panics_is_logged_and_the_watcher_carries_on() {
        let directory = std::env::temp_dir().join(format!(
            "deckhand-tasks-d-panic-{}-{}",
            std::process::id(),
            now_millis()
        ));
        std::fs::create_dir_all(&directory).expect("a scratch directory");
        std::fs::write(
            directory.join("web.json"),
            br#"{"family": "web", "containerDefinitions": [{"name": "app", "image": "busybox", "essential": true}]}"#,
        )
        .expect("a task file");
        test_hooks::PANIC_ON_SCAN_OF
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(directory.clone());
        let engine = Arc::new(RecordingEngine::default());
        // No periodic scan within the test: only the restart after the panic scans.
        let mut watcher = TasksDirWatcher::start(
            engine.clone(),
            directory.clone(),
            None,
            Duration::from_secs(3600),
        )
        .expect("the watcher starts");
        let deadline = Duration::from_secs(20);
        let submitted = engine.wait_for_submits(1, deadline);
        assert_eq!(
            submitted.len(),
            1,
            "the scan after the panic starts the file's task"
        );
        let summary = watcher
            .rescan_and_wait(deadline)
            .expect("the watcher still answers");
        assert!(summary.failed.is_empty(), "{summary:?}");
        assert_eq!(engine.tasks().len(), 1, "the file's task is started once");
        watcher.shutdown();
        let _ = std::fs::remove_dir_all(&directory);
    }

    fn task_with(known: TaskStatus, stop_sequence: u64) -> Task {
        let definition = parse_task_definition(
            br#"{"family": "f", "containerDefinitions": [{"name": "c", "image": "i", "essential": true}]}"#,
        )
        .expect("valid definition")
        .definition;
        let mut task = Task::new("t1".into(), "default", definition, 1, 1_000_000);
        task.known_status = known;
        task.stop_sequence = stop_sequence;
        task
    }

    #[test]
    fn only_a_task_stopped_without_a_stop_command_stopped_by_itself() {
        // (known status, stop sequence, stopped by itself)
        let table = [
            (TaskStatus::Stopped, 0, true),
            (TaskStatus::Stopped, 7, false),
            (TaskStatus::Running, 0, false),
            (TaskStatus::Running, 7, false),
            (TaskStatus::None, 0, false),
        ];
        for (known, stop_sequence, expected) in table {
            assert_eq!(
                stopped_by_itself(&task_with(known, stop_sequence)),
                expected,
                "{known:?} stop {stop_sequence}"
            );
        }
    }

    #[test]
    fn run_time_is_from_acceptance_to_the_stop() {
        let mut task = task_with(TaskStatus::Stopped, 0);
        assert_eq!(
            task_run_time(&task, 1_005_000),
            Duration::from_secs(5),
            "no stop time recorded: until now"
        );
        task.known_status_time = Some(1_003_000);
        assert_eq!(task_run_time(&task, 1_005_000), Duration::from_secs(3));
        task.execution_stopped_at = Some(1_002_000);
        assert_eq!(task_run_time(&task, 1_005_000), Duration::from_secs(2));
        task.execution_stopped_at = Some(10);
        assert_eq!(
            task_run_time(&task, 1_005_000),
            Duration::ZERO,
            "clock went back"
        );
    }

    #[test]
    fn content_hash_is_fnv1a_and_stable() {
        // Published FNV-1a 64 test vectors: the hash is persisted, so it must never change.
        assert_eq!(content_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(content_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(content_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn state_file_round_trips_and_refuses_the_future() {
        let directory = std::env::temp_dir().join(format!(
            "deckhand-tasks-d-state-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&directory);
        let path = directory.join("tasks-d.json");
        assert_eq!(
            load_state(&path),
            Ok(BTreeMap::new()),
            "missing file = empty"
        );
        let files = tracked(&[("a.json", 7, "t1"), ("b.json", 8, "t2")]);
        save_state(&path, &files).expect("save");
        assert_eq!(load_state(&path), Ok(files));
        std::fs::write(&path, br#"{"version": 99, "files": {}}"#).expect("write");
        let error = load_state(&path).expect_err("future version");
        assert!(error.contains("version 99"), "{error}");
        std::fs::write(&path, b"garbage").expect("write");
        assert!(load_state(&path).is_err());
        let _ = std::fs::remove_dir_all(&directory);
    }

    #[test]
    fn source_marks_round_trip_and_other_sources_are_not_marks() {
        let mark = source_mark("web:v2.json", 0x00ab_cdef_0123_4567);
        assert_eq!(mark, "tasks.d:web:v2.json:00abcdef01234567");
        assert_eq!(
            parse_source_mark(&mark),
            Some(("web:v2.json".to_string(), 0x00ab_cdef_0123_4567))
        );
        // A checkpoint written before tasks recorded a source still loads, with none.
        let mut marked = task_with(TaskStatus::Running, 0);
        marked.source = Some(mark.clone());
        let mut saved = serde_json::to_value(&marked).expect("serialize");
        assert_eq!(saved["source"], mark.as_str());
        saved.as_object_mut().expect("object").remove("source");
        let loaded: Task = serde_json::from_value(saved).expect("an old checkpoint loads");
        assert_eq!(loaded.source, None);
        for other in [
            "",
            "api",
            "tasks.d:",
            "tasks.d:web.json",
            "tasks.d::00abcdef01234567",
            "tasks.d:web.json:xyz",
            "tasks.d:web.json:abc",
            "other:web.json:00abcdef01234567",
        ] {
            assert_eq!(parse_source_mark(other), None, "{other:?}");
        }
    }

    /// A task for the tracking table: (id, source file and hash, desired, known, start and stop
    /// sequence numbers).
    fn sourced(
        id: &str,
        source: Option<(&str, u64)>,
        desired: TaskStatus,
        known: TaskStatus,
        start_sequence: u64,
        stop_sequence: u64,
    ) -> Task {
        let mut task = task_with(known, stop_sequence);
        task.id = id.to_string();
        task.source = source.map(|(file, hash)| source_mark(file, hash));
        task.desired_status = desired;
        task.start_sequence = start_sequence;
        task
    }

    type TrackingCase = (&'static str, Vec<Task>, bool, BTreeMap<String, TrackedFile>);

    #[test]
    fn files_are_matched_to_the_engines_tasks_by_source_mark() {
        use TaskStatus::{Running, Stopped};
        let table: Vec<TrackingCase> = vec![
            ("no tasks", vec![], true, tracked(&[])),
            (
                "a running task is its file's",
                vec![sourced("t1", Some(("a.json", 1)), Running, Running, 1, 0)],
                true,
                tracked(&[("a.json", 1, "t1")]),
            ),
            (
                "a task accepted but not yet running counts",
                vec![sourced(
                    "t1",
                    Some(("a.json", 1)),
                    Running,
                    TaskStatus::None,
                    1,
                    0,
                )],
                false,
                tracked(&[("a.json", 1, "t1")]),
            ),
            (
                "API tasks have no file",
                vec![sourced("t1", None, Running, Running, 1, 0)],
                true,
                tracked(&[]),
            ),
            (
                "stopped by itself: the file starts a new one",
                vec![sourced("t1", Some(("a.json", 1)), Stopped, Stopped, 1, 0)],
                true,
                tracked(&[]),
            ),
            (
                "stopping by itself: likewise",
                vec![sourced("t1", Some(("a.json", 1)), Stopped, Running, 1, 0)],
                true,
                tracked(&[]),
            ),
            (
                "stopped by request counts at start",
                vec![sourced("t1", Some(("a.json", 1)), Stopped, Stopped, 1, 2)],
                true,
                tracked(&[("a.json", 1, "t1")]),
            ),
            (
                "stopped by request does not count at a scan",
                vec![sourced("t1", Some(("a.json", 1)), Stopped, Stopped, 1, 2)],
                false,
                tracked(&[]),
            ),
            (
                "a replacement wins over the task it replaced",
                vec![
                    sourced("new", Some(("a.json", 2)), Running, Running, 4, 0),
                    sourced("old", Some(("a.json", 1)), Stopped, Stopped, 1, 3),
                ],
                true,
                tracked(&[("a.json", 2, "new")]),
            ),
            (
                "a restart wins over the task that stopped by itself",
                vec![
                    sourced("first", Some(("a.json", 1)), Stopped, Stopped, 1, 0),
                    sourced("again", Some(("a.json", 1)), Running, Running, 2, 0),
                ],
                true,
                tracked(&[("a.json", 1, "again")]),
            ),
            (
                "of two running tasks the latest accepted",
                vec![
                    sourced("later", Some(("a.json", 1)), Running, Running, 7, 0),
                    sourced("earlier", Some(("a.json", 1)), Running, Running, 5, 0),
                ],
                true,
                tracked(&[("a.json", 1, "later")]),
            ),
            (
                "files are matched independently",
                vec![
                    sourced("ta", Some(("a.json", 1)), Running, Running, 1, 0),
                    sourced("tb", Some(("b.json", 9)), Running, Running, 2, 0),
                ],
                false,
                tracked(&[("a.json", 1, "ta"), ("b.json", 9, "tb")]),
            ),
        ];
        for (case, tasks, include_stopped_by_request, expected) in table {
            assert_eq!(
                tracked_from_engine(&tasks, include_stopped_by_request),
                expected,
                "{case}"
            );
        }
    }
}
