//! Opening the store: creating its layout under `ECS_DATADIR`, sweeping the temp files a crash
//! left, loading `agent.json`, `images.json` and every task file, replaying the state log over
//! them, and moving whatever cannot be loaded to `quarantine/` ([`QuarantinedFile`]).

use super::event_log::{self, EventLogFile, EventLogReplay, DEFAULT_RETAIN_EVENTS};
use super::file_format::{read_versioned, LoadProblem};
use super::fsio::{self, FaultInjector};
use super::images::ImagesRecord;
use super::records::{fold_records, note_logged_events, replay_records};
use super::{AgentRecord, AgentState, StateError, StateStore, MAX_STORED_NUMBER};
use crate::task::Task;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A file that could not be loaded and was moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedFile {
    pub original: PathBuf,
    pub moved_to: PathBuf,
    /// Why it could not be loaded.
    pub error: String,
}

impl fmt::Display for QuarantinedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} could not be loaded ({}); moved to {}",
            self.original.display(),
            self.error,
            self.moved_to.display()
        )
    }
}

/// Everything `StateStore::open` found on disk.
#[derive(Debug)]
pub struct LoadedState {
    /// The agent record; `next_sequence` is where numbering resumes.
    pub agent: AgentRecord,
    /// Every task that loaded, ordered by start sequence number, then id.
    pub tasks: Vec<Task>,
    /// Files moved to `quarantine/` (corrupt tasks, a corrupt agent record, a damaged event
    /// log); each was logged once as a warning.
    pub quarantined: Vec<QuarantinedFile>,
    /// What replaying the event log found.
    pub events: EventLogReplay,
    /// The images deckhand's tasks used (`images.json`; empty when missing or quarantined).
    pub images: ImagesRecord,
    /// Temp files a crash left behind, removed at open.
    pub temp_files_removed: usize,
}

/// A free name in `quarantine_dir` for `original`: its file name plus the current time, so that
/// repeated quarantines of the same name never overwrite each other.
pub(crate) fn quarantine_path(quarantine_dir: &Path, original: &Path) -> PathBuf {
    let name = original
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string());
    let stamp = crate::clock::now_millis();
    let mut candidate = quarantine_dir.join(format!("{name}.{stamp}"));
    let mut counter = 1;
    while candidate.exists() {
        candidate = quarantine_dir.join(format!("{name}.{stamp}.{counter}"));
        counter += 1;
    }
    candidate
}

fn create_dir(path: &Path) -> Result<(), StateError> {
    fs::create_dir_all(path).map_err(|e| StateError::io(path, "create directory", e))
}

/// Remove `*.tmp.*` files in `dir` (left by a crash between create and rename).
fn sweep_temp_files(dir: &Path) -> Result<usize, StateError> {
    let mut removed = 0;
    let entries = fs::read_dir(dir).map_err(|e| StateError::io(dir, "list", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| StateError::io(dir, "list", e))?;
        let name = entry.file_name();
        if name.to_string_lossy().contains(fsio::TEMP_MARKER) {
            let path = entry.path();
            match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StateError::io(&path, "remove", e)),
            }
        }
    }
    Ok(removed)
}

impl StateStore {
    /// Open the store under `datadir`, creating its layout, and load everything in it.
    pub fn open(datadir: &Path) -> Result<(StateStore, LoadedState), StateError> {
        StateStore::open_with(
            datadir,
            Arc::new(FaultInjector::new()),
            DEFAULT_RETAIN_EVENTS,
        )
    }

    /// Test hook: open with a fault injector (to make chosen file-system steps fail) and a
    /// chosen event-log bound. Production code calls [`StateStore::open`].
    pub fn open_with_faults(
        datadir: &Path,
        faults: Arc<FaultInjector>,
        retain_events: usize,
    ) -> Result<(StateStore, LoadedState), StateError> {
        StateStore::open_with(datadir, faults, retain_events)
    }

    fn open_with(
        datadir: &Path,
        faults: Arc<FaultInjector>,
        retain_events: usize,
    ) -> Result<(StateStore, LoadedState), StateError> {
        let tasks_dir = datadir.join("tasks");
        let quarantine_dir = datadir.join("quarantine");
        let agent_path = datadir.join("agent.json");
        let fresh = !tasks_dir.is_dir() || !quarantine_dir.is_dir();
        create_dir(datadir)?;
        create_dir(&tasks_dir)?;
        create_dir(&quarantine_dir)?;
        if fresh {
            // Make the new directories themselves durable, or a power cut could lose the
            // first task file together with the directory entry of `tasks/`.
            fsio::sync_dir(&faults, datadir)?;
            if let Some(parent) = datadir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fsio::sync_dir(&faults, parent)?;
            }
        }
        let temp_files_removed = sweep_temp_files(datadir)? + sweep_temp_files(&tasks_dir)?;

        let mut quarantined = Vec::new();
        let mut quarantine = |path: &Path, error: String| -> Result<(), StateError> {
            let moved_to = quarantine_path(&quarantine_dir, path);
            fsio::rename(&faults, path, &moved_to)?;
            fsio::sync_dir(&faults, &quarantine_dir)?;
            fsio::sync_parent_dir(&faults, path)?;
            let file = QuarantinedFile {
                original: path.to_path_buf(),
                moved_to,
                error,
            };
            log::warn!("{file}");
            quarantined.push(file);
            Ok(())
        };

        // The agent record first: a future schema there stops start-up before anything moves.
        let mut agent_damaged = false;
        let mut agent = if agent_path.exists() {
            match read_versioned::<AgentRecord>(&agent_path, "agent") {
                Ok(record)
                    if record.next_sequence.max(record.next_event_seq) > MAX_STORED_NUMBER =>
                {
                    quarantine(
                        &agent_path,
                        format!("holds a sequence number past {MAX_STORED_NUMBER}"),
                    )?;
                    agent_damaged = true;
                    AgentRecord::default()
                }
                Ok(record) => record,
                Err(LoadProblem::Fatal(error)) => return Err(error),
                Err(LoadProblem::Quarantine(reason)) => {
                    quarantine(&agent_path, reason)?;
                    agent_damaged = true;
                    AgentRecord::default()
                }
            }
        } else {
            AgentRecord::default()
        };

        let images_path = datadir.join("images.json");
        let images = if images_path.exists() {
            match read_versioned::<ImagesRecord>(&images_path, "images") {
                Ok(record) => record,
                Err(LoadProblem::Fatal(error)) => return Err(error),
                Err(LoadProblem::Quarantine(reason)) => {
                    quarantine(&images_path, reason)?;
                    ImagesRecord::default()
                }
            }
        } else {
            ImagesRecord::default()
        };

        let mut tasks = BTreeMap::new();
        let entries =
            fs::read_dir(&tasks_dir).map_err(|e| StateError::io(&tasks_dir, "list", e))?;
        let mut task_paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StateError::io(&tasks_dir, "list", e))?;
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "json") {
                task_paths.push(path);
            }
        }
        crate::sorting::sort(&mut task_paths);
        // Every file is checked for a future schema before any is quarantined, so that a
        // refused start-up leaves the directory exactly as it found it.
        let mut loaded = Vec::with_capacity(task_paths.len());
        for path in task_paths {
            let outcome = read_versioned::<Task>(&path, "task");
            match outcome {
                Err(LoadProblem::Fatal(error)) => return Err(error),
                other => loaded.push((path, other)),
            }
        }
        for (path, outcome) in loaded {
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            match outcome {
                Ok(task) if task.start_sequence.max(task.stop_sequence) > MAX_STORED_NUMBER => {
                    quarantine(
                        &path,
                        format!("holds a sequence number past {MAX_STORED_NUMBER}"),
                    )?
                }
                Ok(task) if task.id == stem => {
                    tasks.insert(task.id.clone(), task);
                }
                Ok(task) => quarantine(
                    &path,
                    format!("holds task {:?}, not the task its name says", task.id),
                )?,
                Err(LoadProblem::Quarantine(reason)) => quarantine(&path, reason)?,
                Err(LoadProblem::Fatal(error)) => return Err(error),
            }
        }

        let log_path = datadir.join("events.log");
        let folder: event_log::RecordFolder = {
            let faults = Arc::clone(&faults);
            let tasks_dir = tasks_dir.clone();
            let agent_path = agent_path.clone();
            Box::new(move |records, next_event_seq| {
                fold_records(&faults, &tasks_dir, &agent_path, records, next_event_seq)
            })
        };
        let (event_log, events, records) = EventLogFile::open(
            &log_path,
            &quarantine_dir,
            Arc::clone(&faults),
            agent.next_event_seq,
            retain_events,
            Some(folder),
        )?;
        if let Some(file) = &events.quarantined {
            log::warn!("{file}");
            quarantined.push(file.clone());
        }
        // The log's records are newer than the files: replayed over them, in order.
        let logged_agent = replay_records(&log_path, &records, &mut tasks)?;
        if let Some(logged) = logged_agent {
            // Newer than `agent.json` (or all there is of it, when that file was damaged).
            agent.next_sequence = agent.next_sequence.max(logged.next_sequence);
            agent.next_event_seq = agent.next_event_seq.max(logged.next_event_seq);
            agent.images_pulled = logged.images_pulled;
        }
        note_logged_events(&event_log, &mut tasks)?;
        let mut tasks: Vec<Task> = tasks.into_values().collect();
        crate::sorting::sort_by(&mut tasks, |a, b| {
            (a.start_sequence, &a.id).cmp(&(b.start_sequence, &b.id))
        });

        if agent_damaged {
            // Rebuild the counter from what the tasks carry: numbers of tasks that no longer
            // exist order nothing any more, so only these must stay below the new start.
            let highest = tasks
                .iter()
                .map(|t| t.start_sequence.max(t.stop_sequence))
                .max()
                .unwrap_or(0);
            agent.next_sequence = agent.next_sequence.max(highest + 1);
        }
        agent.next_sequence = agent.next_sequence.max(1);
        agent.next_event_seq = events.next_seq;

        let event_log = Arc::new(event_log);
        EventLogFile::start_compaction_thread(&event_log)
            .map_err(|error| StateError::io(&log_path, "start its compaction thread", error))?;
        let store = StateStore {
            datadir: datadir.to_path_buf(),
            tasks_dir,
            quarantine_dir,
            images_path,
            faults,
            agent: Mutex::new(AgentState {
                // Resume after the reserved block: the numbers in it may have been handed out
                // before the restart; the next call reserves (and records) a new block.
                next_to_hand_out: agent.next_sequence,
                record: agent.clone(),
            }),
            images: Mutex::new(images.clone()),
            event_log,
        };
        let loaded = LoadedState {
            agent,
            tasks,
            quarantined,
            events,
            images,
            temp_files_removed,
        };
        Ok((store, loaded))
    }
}
