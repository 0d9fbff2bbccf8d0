//! The store's versioned JSON files, `{"schema": N, "<key>": {...}}`: reading one with the schema
//! check (a newer schema is fatal, damage is for quarantine), the bytes of a task checkpoint, of
//! `agent.json` and of `images.json`, a control source's own record, and the task ids that may
//! name a checkpoint file.

use super::{fsio, AgentRecord, ImagesRecord, StateError};
use crate::task::Task;
use serde::Serialize;
use std::fs;
use std::path::Path;

/// The schema version this build writes and the newest it reads.
pub const SCHEMA_VERSION: u64 = 1;

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
pub(crate) fn read_versioned<T: serde::de::DeserializeOwned>(
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

/// The bytes of a task's checkpoint file (`tasks/<id>.json`), exactly as
/// [`StateStore::save_task`](super::StateStore::save_task) writes them.
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

/// Reads a task's checkpoint file from its bytes, with the checks
/// [`StateStore::open`](super::StateStore::open) applies (schema version, shape); the error says
/// why the file would be refused or quarantined. The simulator restores tasks through this, so
/// every crash it simulates round-trips the schema.
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

/// The bytes of `images.json` for `record`.
pub(super) fn encode_images_file(record: &ImagesRecord) -> Result<Vec<u8>, StateError> {
    serde_json::to_vec(&ImagesFileOut {
        schema: SCHEMA_VERSION,
        images: record,
    })
    .map_err(|e| StateError::Encode {
        what: "image record".to_string(),
        message: e.to_string(),
    })
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
