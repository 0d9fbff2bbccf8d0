//! The state log's records seen from the store: replaying them over the task files at load
//! (a checkpoint replaces its task, a forget removes it, the newest agent record wins, and an
//! event in the log counts as sent), and folding them into the files when the log is compacted.
//! The log itself (event_log.rs) only knows record lines; what a record means is here.

use crate::state::event_log::{self, EventLogFile, LogRecord, RecordKind};
use crate::state::fsio::{self, FaultInjector};
use crate::state::{
    encode_agent_file, parse_versioned, read_versioned, validate_task_id, AgentRecord, LoadProblem,
    StateError, MAX_STORED_NUMBER,
};
use crate::task::{ContainerStatus, Task, TaskStatus};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

/// Just the id of a checkpoint (compaction needs no more of it).
#[derive(Deserialize)]
struct CheckpointId {
    task: TaskIdOnly,
}

#[derive(Deserialize)]
struct TaskIdOnly {
    id: String,
}

/// The state log's compaction: the newest record of each task becomes its file (or removes it,
/// once forgotten), the newest agent record becomes `agent.json`; one directory fsync for all
/// the task files. A record that cannot name its task was reported when the store loaded and is
/// left out here.
pub(super) fn fold_records(
    faults: &FaultInjector,
    tasks_dir: &Path,
    agent_path: &Path,
    records: &[LogRecord],
    next_event_seq: u64,
) -> Result<(), StateError> {
    let mut newest: BTreeMap<String, Option<&[u8]>> = BTreeMap::new();
    let mut agent: Option<&[u8]> = None;
    for record in records {
        match record.kind {
            RecordKind::Checkpoint => {
                if let Ok(checkpoint) = serde_json::from_slice::<CheckpointId>(&record.body) {
                    if validate_task_id(&checkpoint.task.id).is_ok() {
                        newest.insert(checkpoint.task.id, Some(&record.body));
                    }
                }
            }
            RecordKind::Forget => {
                if let Ok(id) = serde_json::from_slice::<String>(&record.body) {
                    if validate_task_id(&id).is_ok() {
                        newest.insert(id, None);
                    }
                }
            }
            RecordKind::Agent => agent = Some(&record.body),
        }
    }
    for (id, body) in &newest {
        let path = tasks_dir.join(format!("{id}.json"));
        match body {
            Some(body) => fsio::write_replacing(faults, &path, body)?,
            None => match fsio::remove_file(faults, &path) {
                Err(error) if error.source.kind() == io::ErrorKind::NotFound => {}
                other => other?,
            },
        }
    }
    if !newest.is_empty() {
        fsio::sync_dir(faults, tasks_dir)?;
    }
    if let Some(body) = agent {
        let path = agent_path;
        let mut record = match parse_versioned::<AgentRecord>(path, body, "agent") {
            Ok(record) => record,
            Err(LoadProblem::Fatal(error)) => return Err(error),
            Err(LoadProblem::Quarantine(message)) => {
                return Err(StateError::Corrupt {
                    path: path.to_path_buf(),
                    message: format!("its record in the state log: {message}"),
                })
            }
        };
        record.next_event_seq = record.next_event_seq.max(next_event_seq);
        fsio::write_atomic(faults, path, &encode_agent_file(&record)?)?;
    }
    Ok(())
}

/// Replays the state log's records over the tasks loaded from their files, in log order: a
/// checkpoint replaces its task, a forget removes it. Returns the newest agent record. A record
/// from a newer schema stops start-up like a file would; one that does not read is reported and
/// skipped (the task keeps its older state, which restore reconciles with Docker).
pub(crate) fn replay_records(
    log_path: &Path,
    records: &[LogRecord],
    tasks: &mut BTreeMap<String, Task>,
) -> Result<Option<AgentRecord>, StateError> {
    let mut agent = None;
    for record in records {
        match record.kind {
            RecordKind::Checkpoint => {
                match parse_versioned::<Task>(log_path, &record.body, "task") {
                    Ok(task)
                        if validate_task_id(&task.id).is_ok()
                            && task.start_sequence.max(task.stop_sequence) <= MAX_STORED_NUMBER =>
                    {
                        tasks.insert(task.id.clone(), task);
                    }
                    Ok(task) => log::warn!(
                        "{}: a checkpoint of task {:?} with an id or a sequence number deckhand \
                         never writes was skipped",
                        log_path.display(),
                        task.id
                    ),
                    Err(LoadProblem::Fatal(error)) => return Err(error),
                    Err(LoadProblem::Quarantine(reason)) => log::warn!(
                        "{}: a task checkpoint that does not read was skipped: {reason}",
                        log_path.display()
                    ),
                }
            }
            RecordKind::Forget => match serde_json::from_slice::<String>(&record.body) {
                Ok(id) => {
                    tasks.remove(&id);
                }
                Err(error) => log::warn!(
                    "{}: a forgotten task's record that does not read was skipped: {error}",
                    log_path.display()
                ),
            },
            RecordKind::Agent => {
                match parse_versioned::<AgentRecord>(log_path, &record.body, "agent") {
                    Ok(logged)
                        if logged.next_sequence.max(logged.next_event_seq) <= MAX_STORED_NUMBER =>
                    {
                        agent = Some(logged)
                    }
                    Ok(_) => log::warn!(
                        "{}: an agent record holding a sequence number past {MAX_STORED_NUMBER} \
                         was skipped",
                        log_path.display()
                    ),
                    Err(LoadProblem::Fatal(error)) => return Err(error),
                    Err(LoadProblem::Quarantine(reason)) => log::warn!(
                        "{}: an agent record that does not read was skipped: {reason}",
                        log_path.display()
                    ),
                }
            }
        }
    }
    Ok(agent)
}

/// An event in the log was recorded, whatever checkpoint followed it: a task's `sent` status is
/// raised to what its events in the log say, so a power cut between an event's sync and the
/// checkpoint that noted it never makes a restored task record that event again.
pub(super) fn note_logged_events(
    log: &EventLogFile,
    tasks: &mut BTreeMap<String, Task>,
) -> Result<(), StateError> {
    if tasks.is_empty() {
        return Ok(());
    }
    for event in log.read_since(0, usize::MAX)? {
        let Some(task) = tasks.get_mut(&event.task) else {
            continue;
        };
        let status = serde_json::Value::String(event.status.clone());
        match &event.container {
            None => {
                if let Ok(status) = serde_json::from_value::<TaskStatus>(status) {
                    task.sent_status = task.sent_status.max(status);
                }
            }
            Some(name) => {
                let container = task.containers.iter_mut().find(|c| c.name() == name);
                if let (Some(container), Ok(status)) =
                    (container, serde_json::from_value::<ContainerStatus>(status))
                {
                    container.sent_status = container.sent_status.max(status);
                }
            }
        }
    }
    Ok(())
}

/// The tasks saved under `datadir` as a restart would load them — their files, then the state
/// log's records over them — read without changing anything (for tools and tests that look at
/// a data directory an agent may be using).
pub fn read_saved_tasks(datadir: &Path) -> Result<BTreeMap<String, Task>, StateError> {
    let mut tasks = BTreeMap::new();
    let tasks_dir = datadir.join("tasks");
    if tasks_dir.is_dir() {
        for entry in fs::read_dir(&tasks_dir).map_err(|e| StateError::io(&tasks_dir, "list", e))? {
            let path = entry
                .map_err(|e| StateError::io(&tasks_dir, "list", e))?
                .path();
            if path.extension().is_some_and(|ext| ext == "json")
                && !path.to_string_lossy().contains(fsio::TEMP_MARKER)
            {
                if let Ok(task) = read_versioned::<Task>(&path, "task") {
                    tasks.insert(task.id.clone(), task);
                }
            }
        }
    }
    let log_path = datadir.join("events.log");
    let bytes = match fs::read(&log_path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(StateError::io(&log_path, "read", error)),
    };
    let parsed = event_log::parse_log(&bytes);
    replay_records(&log_path, &parsed.records(&bytes), &mut tasks)?;
    Ok(tasks)
}
