//! The `tasks.d` thread: scans the directory at start, at a fixed interval, on request (SIGHUP)
//! and when a restart of a task that stopped by itself is due; performs what the pure plan
//! decides through the engine's two commands; survives its own panics.

use super::plan::{
    diff, restart_delay, stopped_by_itself, task_run_time, tracked_from_engine, Action,
    RestartBackoff, ScannedFile, TrackedFile,
};
use super::scan::{read_directory, source_mark, FileContent};
use crate::clock::now_millis;
use crate::engine::{EngineError, EngineHandle};
use crate::task::Task;
use crossbeam_channel::{at, bounded, never, select, tick, unbounded, Receiver, Sender};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What one rescan did, by file name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanSummary {
    pub started: Vec<String>,
    pub stopped: Vec<String>,
    pub replaced: Vec<String>,
    /// Files with errors (logged once per content).
    pub invalid: Vec<String>,
    /// Files whose warnings (a Compose file's conversion warnings, a definition's ignored keys)
    /// were logged at this scan: once per content, when it is first read.
    pub warned: Vec<String>,
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
    tracked: BTreeMap<String, TrackedFile>,
    /// (file, hash) of invalid files already logged, so each bad version is logged once.
    reported_invalid: BTreeMap<String, u64>,
    /// (file, hash) of valid files whose warnings are logged, so each version warns once.
    reported_warnings: BTreeMap<String, u64>,
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

impl Watcher {
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
        let stopped: BTreeMap<String, Task> = crate::sorting::map_of(
            self.engine
                .tasks()
                .into_iter()
                .filter(stopped_by_itself)
                .map(|task| (task.id.clone(), task)),
        );
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
                             files (*.json, or Compose files *.yaml) there to have them started",
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
        let current: BTreeMap<String, ScannedFile> =
            crate::sorting::map_of(files.iter().map(|(file, content)| {
                (
                    file.clone(),
                    ScannedFile {
                        hash: content.hash,
                        valid: content.definition.is_ok(),
                    },
                )
            }));
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
        for (file, content) in &files {
            if content.definition.is_err() || content.warnings.is_empty() {
                continue;
            }
            if self.reported_warnings.get(file) != Some(&content.hash) {
                log::warn!(
                    "tasks.d: {file}: {}:\n  {}",
                    if content.warnings.len() == 1 {
                        "a warning"
                    } else {
                        "warnings"
                    },
                    content.warnings.join("\n  ")
                );
                self.reported_warnings.insert(file.clone(), content.hash);
                summary.warned.push(file.clone());
            }
        }
        self.reported_warnings.retain(|file, hash| {
            files
                .get(file)
                .is_some_and(|content| content.hash == *hash && !content.warnings.is_empty())
        });

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
    /// Starts watching `directory`. Which task came from which file is read from the engine's
    /// tasks (their source marks). The first scan runs at once.
    pub fn start(
        engine: Arc<dyn EngineHandle>,
        directory: PathBuf,
        interval: Duration,
    ) -> io::Result<TasksDirWatcher> {
        TasksDirWatcher::start_with_backoff(engine, directory, interval, RestartBackoff::default())
    }

    /// [`TasksDirWatcher::start`] with another pacing of the restarts of tasks that stop by
    /// themselves.
    pub fn start_with_backoff(
        engine: Arc<dyn EngineHandle>,
        directory: PathBuf,
        interval: Duration,
        backoff: RestartBackoff,
    ) -> io::Result<TasksDirWatcher> {
        // The engine's tasks say which file each came from: that is the truth.
        let tracked = tracked_from_engine(&engine.tasks(), true);
        let mut watcher = Watcher {
            engine,
            directory,
            tracked,
            reported_invalid: BTreeMap::new(),
            reported_warnings: BTreeMap::new(),
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
            watcher.scan();
            run(watcher, requests, shutdown, interval);
        }));
        let Err(panic) = outcome else {
            return;
        };
        if started.elapsed() > PANIC_PAUSE_MAXIMUM {
            pause = PANIC_PAUSE_INITIAL;
        }
        let message = crate::text::panic_message(panic.as_ref());
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
pub(super) mod test_hooks {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    /// Directories whose next scans panic, once per entry, as a bug would. Unit tests run in
    /// parallel: each uses a directory of its own.
    pub(in crate::control::tasks_d) static PANIC_ON_SCAN_OF: Mutex<Vec<PathBuf>> =
        Mutex::new(Vec::new());

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
