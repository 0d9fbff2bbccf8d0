//! The durable state store under `ECS_DATADIR` (docs/ENGINE.md §11): what survives `kill -9`,
//! a power cut or an upgrade.
//!
//! Layout:
//!
//! ```text
//! ECS_DATADIR/
//!   events.log        the state log (event_log.rs): the events, one JSON line each, and between
//!                     them the store's records (task checkpoints, tasks forgotten, the agent
//!                     record) not yet folded into the files below
//!   agent.json        {"schema": 1, "agent": {next_sequence, next_event_seq, images_pulled}}
//!   images.json       {"schema": 1, "images": {"images": [...]}}: images tasks used (images.rs)
//!   tasks/<id>.json   {"schema": 1, "task": {...}}, one file per task, as of the last compaction
//!   quarantine/       files that could not be loaded, kept for a human to look at
//! ```
//!
//! Why a log in front of the files: every change a task makes is one line appended to the
//! state log without a sync, and one fdatasync makes it durable together with the events it
//! caused and with every other task's changes written meanwhile (group commit). A checkpoint
//! no longer costs a file, its fsync, a rename and a directory fsync. Syncs happen where a
//! promise needs them: a submitted task and an owner's stop are durable before they are
//! acknowledged ([`StateStore::save_task`], [`StateStore::sync`]), an event before a reader
//! sees it (the event append), and a container's name, fixed at submit, before its create.
//! The log's compaction folds its records into the per-task files and `agent.json` on a thread
//! of its own (event_log.rs); loading reads the files, then replays the log's records over them.
//! Every file write is atomic (fsio.rs): a crash leaves the old file or the new one, and a failed
//! write (disk full, read-only) returns an error naming the file and the OS error while what
//! was on disk stays intact.
//!
//! Loading refuses a file (or a record) from a newer schema ([`StateError::FutureSchema`],
//! which the agent maps to exit 78: an older binary must not silently drop what a newer one
//! wrote) and moves a corrupt file to `quarantine/`, reporting it, so that one bad file does not
//! keep every other task from being restored.

pub mod event_log;
pub mod fsio;
pub mod images;
mod log_format;
mod records;
#[cfg(test)]
pub(crate) mod scratch;

pub use event_log::{
    EventLogFile, EventLogReplay, LogRecord, RecordKind, DEFAULT_RETAIN_EVENTS,
    RECORD_COMPACT_BYTES,
};
pub use fsio::{io_counts, FaultInjector, FsStep, IoCounts};
pub use images::{ImagesRecord, TrackedImage};
pub use records::read_saved_tasks;
pub(crate) use records::replay_records;
use records::{fold_records, note_logged_events};

use crate::task::{Millis, Task};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The schema version this build writes and the newest it reads.
pub const SCHEMA_VERSION: u64 = 1;

/// The largest sequence or event number accepted from disk: more than an agent hands out in
/// centuries, and far enough below `u64::MAX` that counting on from it cannot overflow. A file
/// holding a larger one is damaged, not trusted.
pub const MAX_STORED_NUMBER: u64 = 1 << 53;

/// How many sequence numbers one agent record reserves.
///
/// Why blocks: a sequence number must be durable before the command that carries it is
/// acknowledged, and must never be handed out twice, even across a crash. Recording the
/// high-water mark of a reserved block (rather than every number) makes most `next_sequence`
/// calls free; a restart continues after the whole block, so it may skip up to 63 numbers but
/// never reuses one. Gaps are harmless: the numbers only order stops before later starts (§9).
/// The reservation is a record in the state log, written before the number is handed out: the
/// command's own sync, which comes after it in the log, makes both durable.
pub const SEQUENCE_BLOCK: u64 = 64;

/// Errors of the state store. Each names the file it concerns.
#[derive(Debug)]
pub enum StateError {
    /// A file-system call failed: `step` is what was being done (`write`, `fsync`, `rename`, …).
    Io {
        path: PathBuf,
        step: &'static str,
        source: io::Error,
    },
    /// A file written by a newer deckhand. Start-up must stop (exit 78): reading it with this
    /// binary would silently drop what the newer one recorded.
    FutureSchema {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    /// A file deckhand cannot read (only reported for reads after start-up; at start-up such a
    /// file is quarantined instead).
    Corrupt { path: PathBuf, message: String },
    /// A task id that cannot be a file name.
    InvalidTaskId { id: String },
    /// Serialising a record failed (cannot happen for the model's types; kept for honesty).
    Encode { what: String, message: String },
    /// An event appended out of order: the log is gap-free.
    EventSequence { expected: u64, found: u64 },
    /// A control source's record that does not parse.
    Damaged { path: PathBuf, message: String },
}

impl StateError {
    pub(crate) fn io(path: &Path, step: &'static str, source: io::Error) -> StateError {
        StateError::Io {
            path: path.to_path_buf(),
            step,
            source,
        }
    }

    /// True for the error that must stop start-up as a configuration problem (exit 78), rather
    /// than a failure worth restarting for.
    pub fn is_future_schema(&self) -> bool {
        matches!(self, StateError::FutureSchema { .. })
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Io { path, step, source } => {
                write!(f, "state file {}: {step} failed: {source}", path.display())
            }
            StateError::FutureSchema {
                path,
                found,
                supported,
            } => write!(
                f,
                "state file {} has schema version {found}, but this deckhand reads versions up to \
                 {supported}: it was written by a newer deckhand; run that version, or move the \
                 file away to discard what it holds",
                path.display()
            ),
            StateError::Corrupt { path, message } => {
                write!(f, "state file {} is unreadable: {message}", path.display())
            }
            StateError::InvalidTaskId { id } => write!(
                f,
                "task id {id:?} cannot name a state file (expected 1-128 characters from \
                 [A-Za-z0-9_-])"
            ),
            StateError::Encode { what, message } => {
                write!(f, "cannot serialise {what}: {message}")
            }
            StateError::Damaged { path, message } => write!(
                f,
                "{} is damaged ({message}); move it aside to start afresh",
                path.display()
            ),
            StateError::EventSequence { expected, found } => write!(
                f,
                "event log is gap-free: expected event {expected}, got {found}"
            ),
        }
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StateError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The agent's own durable record (`agent.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AgentRecord {
    /// Every sequence number below this may have been handed out; numbering resumes here.
    #[serde(default)]
    pub next_sequence: u64,
    /// The lowest number the next event may carry (a floor in case the event log is lost).
    #[serde(default)]
    pub next_event_seq: u64,
    /// Images this agent pulled successfully, with the time (for pull behaviour `once`).
    #[serde(default)]
    pub images_pulled: BTreeMap<String, Millis>,
}

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

struct AgentState {
    /// As last written to `agent.json`.
    record: AgentRecord,
    /// The next sequence number to hand out; `< record.next_sequence` while a block lasts.
    next_to_hand_out: u64,
}

/// The durable state store. Share it between threads behind an `Arc`.
pub struct StateStore {
    datadir: PathBuf,
    tasks_dir: PathBuf,
    quarantine_dir: PathBuf,
    images_path: PathBuf,
    faults: Arc<FaultInjector>,
    agent: Mutex<AgentState>,
    /// `images.json` as loaded or last written.
    images: Mutex<ImagesRecord>,
    event_log: Arc<EventLogFile>,
}

impl fmt::Debug for StateStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateStore")
            .field("datadir", &self.datadir)
            .finish()
    }
}

#[derive(Serialize)]
struct TaskFileOut<'a> {
    schema: u64,
    task: &'a Task,
}

#[derive(Serialize)]
struct ImagesFileOut<'a> {
    schema: u64,
    images: &'a ImagesRecord,
}

#[derive(Serialize)]
struct AgentFileOut<'a> {
    schema: u64,
    agent: &'a AgentRecord,
}

/// Why a file could not be loaded: either it must stop start-up, or it goes to quarantine.
pub(crate) enum LoadProblem {
    Fatal(StateError),
    Quarantine(String),
}

/// Read a `{"schema": N, "<key>": {...}}` file.
fn read_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    key: &str,
) -> Result<T, LoadProblem> {
    let bytes = fs::read(path).map_err(|e| LoadProblem::Fatal(StateError::io(path, "read", e)))?;
    parse_versioned(path, &bytes, key)
}

/// Parse the bytes of a `{"schema": N, "<key>": {...}}` file (`path` only names it in errors).
pub(crate) fn parse_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
    key: &str,
) -> Result<T, LoadProblem> {
    let mut document: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| LoadProblem::Quarantine(format!("not valid JSON: {e}")))?;
    let schema = match document.get("schema") {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| LoadProblem::Quarantine("no numeric \"schema\" field".to_string()))?;
    // Checked before anything else about the content: a newer layout must stop start-up, not
    // be mistaken for damage and moved aside.
    if schema > SCHEMA_VERSION {
        return Err(LoadProblem::Fatal(StateError::FutureSchema {
            path: path.to_path_buf(),
            found: schema,
            supported: SCHEMA_VERSION,
        }));
    }
    if schema == 0 {
        return Err(LoadProblem::Quarantine(
            "schema version 0 was never written by deckhand".to_string(),
        ));
    }
    let body = document
        .get_mut(key)
        .map(serde_json::Value::take)
        .ok_or_else(|| LoadProblem::Quarantine(format!("no \"{key}\" field")))?;
    serde_json::from_value(body).map_err(|e| {
        LoadProblem::Quarantine(format!("\"{key}\" does not match schema {schema}: {e}"))
    })
}

/// A control source's own record (`ECS_DATADIR/<name>.json`, e.g. the ECS connection's
/// `ecs.json`), as `{"schema": N, "<key>": value}`, written atomically and durably. Control
/// sources own their records; the store only gives them the same file discipline as its own.
pub fn save_record<T: Serialize>(path: &Path, key: &str, value: &T) -> Result<(), StateError> {
    let mut document = serde_json::Map::new();
    document.insert("schema".to_string(), SCHEMA_VERSION.into());
    let body = serde_json::to_value(value).map_err(|e| StateError::Encode {
        what: key.to_string(),
        message: e.to_string(),
    })?;
    document.insert(key.to_string(), body);
    let bytes = serde_json::to_vec_pretty(&document).map_err(|e| StateError::Encode {
        what: key.to_string(),
        message: e.to_string(),
    })?;
    fsio::write_atomic(&fsio::FaultInjector::new(), path, &bytes)?;
    Ok(())
}

/// The record [`save_record`] wrote at `path`; `None` when there is none yet. A file that is
/// damaged is an error naming it (never mistaken for "no record": a control source that lost
/// its record could repeat what it already did).
pub fn load_record<T: serde::de::DeserializeOwned>(
    path: &Path,
    key: &str,
) -> Result<Option<T>, StateError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(StateError::io(path, "read", error)),
    };
    match parse_versioned(path, &bytes, key) {
        Ok(value) => Ok(Some(value)),
        Err(LoadProblem::Fatal(error)) => Err(error),
        Err(LoadProblem::Quarantine(message)) => Err(StateError::Damaged {
            path: path.to_path_buf(),
            message,
        }),
    }
}

/// The bytes of a task's checkpoint file (`tasks/<id>.json`), exactly as [`StateStore::save_task`]
/// writes them.
pub fn encode_task_file(task: &Task) -> Result<Vec<u8>, StateError> {
    serde_json::to_vec(&TaskFileOut {
        schema: SCHEMA_VERSION,
        task,
    })
    .map_err(|e| StateError::Encode {
        what: format!("task {}", task.id),
        message: e.to_string(),
    })
}

/// Reads a task's checkpoint file from its bytes, with the checks [`StateStore::open`] applies
/// (schema version, shape); the error says why the file would be refused or quarantined. The
/// simulator restores tasks through this, so every crash it simulates round-trips the schema.
pub fn decode_task_file(bytes: &[u8]) -> Result<Task, String> {
    parse_versioned(Path::new("task checkpoint"), bytes, "task").map_err(|problem| match problem {
        LoadProblem::Fatal(error) => error.to_string(),
        LoadProblem::Quarantine(reason) => reason,
    })
}

/// The bytes of `agent.json` for `record`.
pub(crate) fn encode_agent_file(record: &AgentRecord) -> Result<Vec<u8>, StateError> {
    serde_json::to_vec(&AgentFileOut {
        schema: SCHEMA_VERSION,
        agent: record,
    })
    .map_err(|e| StateError::Encode {
        what: "agent record".to_string(),
        message: e.to_string(),
    })
}

/// The state-log line of a task's checkpoint: its checkpoint file's bytes as a record.
fn checkpoint_line(task: &Task) -> Result<Vec<u8>, StateError> {
    validate_task_id(&task.id)?;
    let body = encode_task_file(task)?;
    Ok(event_log::record_line(RecordKind::Checkpoint, &body))
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

/// A task id is used as a file name: refuse anything that could escape `tasks/` or clash with a
/// temp file.
pub fn validate_task_id(id: &str) -> Result<(), StateError> {
    let valid = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(StateError::InvalidTaskId { id: id.to_string() })
    }
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

    pub fn datadir(&self) -> &Path {
        &self.datadir
    }

    pub fn quarantine_dir(&self) -> &Path {
        &self.quarantine_dir
    }

    /// The durable event log (the reporter thread appends to it; subscribers read it).
    pub fn event_log(&self) -> Arc<EventLogFile> {
        Arc::clone(&self.event_log)
    }

    /// The path of a task's checkpoint file.
    pub fn task_path(&self, task_id: &str) -> Result<PathBuf, StateError> {
        validate_task_id(task_id)?;
        Ok(self.tasks_dir.join(format!("{task_id}.json")))
    }

    /// Writes a task's checkpoint durably: the record, then one sync of the state log (shared
    /// with every other writer waiting meanwhile). For what must be on disk before it is
    /// acknowledged: a submitted task. How long it took goes to
    /// `deckhand_checkpoint_duration_seconds`, failed writes included.
    pub fn save_task(&self, task: &Task) -> Result<(), StateError> {
        let started = Instant::now();
        let written =
            checkpoint_line(task).and_then(|line| self.event_log.append_record_durably(&line));
        crate::metrics::global().observe_checkpoint(started.elapsed());
        written
    }

    /// Writes a task's checkpoint as a record of the state log without a sync: it survives the
    /// process being killed, and becomes durable with the next sync or event (the managed
    /// task's checkpoint after each change).
    pub fn record_task(&self, task: &Task) -> Result<(), StateError> {
        let started = Instant::now();
        let written = checkpoint_line(task).and_then(|line| self.event_log.append_record(&line));
        crate::metrics::global().observe_checkpoint(started.elapsed());
        written
    }

    /// Makes every record written so far durable (one fdatasync of the state log at most).
    pub fn sync(&self) -> Result<(), StateError> {
        self.event_log.sync()
    }

    /// Forgets a task (after its cleanup): a record in the state log; compaction removes its
    /// file. Forgetting a task that has no checkpoint is not an error. Not synced: a forget that
    /// a power cut loses restores a task whose containers are gone, which cleans up again.
    pub fn delete_task(&self, task_id: &str) -> Result<(), StateError> {
        validate_task_id(task_id)?;
        let body = serde_json::to_vec(task_id).map_err(|e| StateError::Encode {
            what: format!("task {task_id}"),
            message: e.to_string(),
        })?;
        self.event_log
            .append_record(&event_log::record_line(RecordKind::Forget, &body))
    }

    /// Folds the state log's records into the task files and `agent.json` now (a clean shutdown
    /// does this, so the files alone hold the whole state afterwards).
    pub fn compact(&self) -> Result<(), StateError> {
        self.event_log.sync()?;
        self.event_log.compact()
    }

    fn lock_agent(&self) -> MutexGuard<'_, AgentState> {
        // `record` changes only after its write succeeded, so a poisoned lock is consistent.
        self.agent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes the agent record as a record of the state log (no sync of its own: what depends
    /// on it is synced after it).
    fn write_agent(&self, record: &AgentRecord) -> Result<(), StateError> {
        let body = encode_agent_file(record)?;
        self.event_log
            .append_record(&event_log::record_line(RecordKind::Agent, &body))
    }

    /// The next command sequence number, durable before it is returned: no later start of
    /// deckhand hands it out again. Starts at 1 (0 means "none").
    pub fn next_sequence(&self) -> Result<u64, StateError> {
        let mut agent = self.lock_agent();
        if agent.next_to_hand_out >= agent.record.next_sequence {
            let mut record = agent.record.clone();
            record.next_sequence = agent.next_to_hand_out + SEQUENCE_BLOCK;
            self.write_agent(&record)?;
            agent.record = record;
        }
        let number = agent.next_to_hand_out;
        agent.next_to_hand_out += 1;
        Ok(number)
    }

    /// The agent record as last written.
    pub fn agent(&self) -> AgentRecord {
        self.lock_agent().record.clone()
    }

    /// Write the agent record. `next_sequence` and `next_event_seq` only ever rise: a value
    /// below what the store already reserved is raised to it, so a caller holding an old copy
    /// cannot make numbers be reused. `images_pulled` is replaced.
    pub fn save_agent(&self, record: &AgentRecord) -> Result<(), StateError> {
        let mut agent = self.lock_agent();
        self.save_agent_locked(&mut agent, record)
    }

    fn save_agent_locked(
        &self,
        agent: &mut AgentState,
        record: &AgentRecord,
    ) -> Result<(), StateError> {
        let next_to_hand_out = agent.next_to_hand_out.max(record.next_sequence);
        let merged = AgentRecord {
            next_sequence: agent.record.next_sequence.max(next_to_hand_out),
            next_event_seq: agent
                .record
                .next_event_seq
                .max(record.next_event_seq)
                .max(self.event_log.next_seq()),
            images_pulled: record.images_pulled.clone(),
        };
        self.write_agent(&merged)?;
        agent.record = merged;
        agent.next_to_hand_out = next_to_hand_out;
        Ok(())
    }

    /// Record that `image` was pulled successfully at `at` (pull behaviour `once`), as a record
    /// of the state log, durable with the next sync (a power cut before it makes `once` pull
    /// the image one more time).
    pub fn record_image_pulled(&self, image: &str, at: Millis) -> Result<(), StateError> {
        let mut agent = self.lock_agent();
        let mut record = agent.record.clone();
        record.images_pulled.insert(image.to_string(), at);
        self.save_images_pulled_locked(&mut agent, record)
    }

    /// Writes the agent record with new `images_pulled` and the counters as they are: the
    /// numbers left in the reserved block stay available (going through
    /// [`StateStore::save_agent`] would treat the block's end as handed out and spend it).
    fn save_images_pulled_locked(
        &self,
        agent: &mut AgentState,
        mut record: AgentRecord,
    ) -> Result<(), StateError> {
        record.next_event_seq = record.next_event_seq.max(self.event_log.next_seq());
        self.write_agent(&record)?;
        agent.record = record;
        Ok(())
    }

    /// Whether this agent ever pulled `image` successfully.
    pub fn image_pulled(&self, image: &str) -> bool {
        self.lock_agent().record.images_pulled.contains_key(image)
    }

    /// Forgets that `images` were pulled (image cleanup removed them), durably, so pull
    /// behaviour `once` pulls them again. Nothing is written when none was recorded.
    pub fn forget_images_pulled(&self, images: &[String]) -> Result<(), StateError> {
        let mut agent = self.lock_agent();
        if !images
            .iter()
            .any(|image| agent.record.images_pulled.contains_key(image))
        {
            return Ok(());
        }
        let mut record = agent.record.clone();
        for image in images {
            record.images_pulled.remove(image);
        }
        self.save_images_pulled_locked(&mut agent, record)
    }

    /// Writes `images.json` atomically. The caller orders its writes (image tracking holds its
    /// own lock across this call).
    pub fn save_images(&self, record: &ImagesRecord) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(&ImagesFileOut {
            schema: SCHEMA_VERSION,
            images: record,
        })
        .map_err(|e| StateError::Encode {
            what: "image record".to_string(),
            message: e.to_string(),
        })?;
        fsio::write_atomic(&self.faults, &self.images_path, &bytes)?;
        *self
            .images
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = record.clone();
        Ok(())
    }

    /// `images.json` as loaded at open or last written.
    pub fn images(&self) -> ImagesRecord {
        self.images
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}
