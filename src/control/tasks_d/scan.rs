//! Reading the `tasks.d` directory: which entries are task files, each file's content hash and
//! parsed definition (or every error), and the source mark that names a file and its content
//! in the task started from it.

use crate::task::{parse_task_definition, TaskDefinition, MAX_TASK_DEFINITION_BYTES};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::Path;

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
        file.take(MAX_TASK_DEFINITION_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
    });
    let hash = content_hash(&bytes);
    let definition = match read {
        Err(error) => Err(vec![format!("cannot read the file: {error}")]),
        Ok(_) if bytes.len() > MAX_TASK_DEFINITION_BYTES => Err(vec![format!(
            "larger than the {MAX_TASK_DEFINITION_BYTES} bytes a task definition may have"
        )]),
        Ok(_) => parse_task_definition(&bytes)
            .map(|parsed| parsed.definition)
            .map_err(|errors| errors.iter().map(ToString::to_string).collect()),
    };
    FileContent { hash, definition }
}
