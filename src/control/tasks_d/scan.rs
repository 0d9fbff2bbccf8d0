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

/// The image names a task file declares, for image cleanup, which never removes them (so the
/// host can restart its declared tasks with no registry): a valid definition's container
/// images; from a file that does not parse as a task (mid-edit, or refused) every string under
/// an `image` key of whatever JSON it holds — a file being fixed still protects its images.
pub fn images_named_in(bytes: &[u8]) -> Vec<String> {
    if let Ok(parsed) = parse_task_definition(bytes) {
        return parsed
            .definition
            .containers
            .iter()
            .map(|container| container.image.clone())
            .collect();
    }
    fn collect(value: &serde_json::Value, images: &mut Vec<String>, depth: usize) {
        if depth > 64 {
            return;
        }
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    match inner {
                        serde_json::Value::String(image) if key == "image" => {
                            images.push(image.clone())
                        }
                        other => collect(other, images, depth + 1),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    collect(item, images, depth + 1);
                }
            }
            _ => {}
        }
    }
    let mut images = Vec::new();
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        collect(&value, &mut images, 0);
    }
    images
}

/// Every image the task files of `directory` declare ([`images_named_in`]), hidden and other
/// files skipped as the scan skips them. A missing directory declares nothing; one that cannot
/// be read is an error (image cleanup then skips its cycle).
pub fn declared_images(directory: &Path) -> Result<Vec<String>, String> {
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(format!("cannot read {}: {error}", directory.display())),
    };
    let mut images = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|error| format!("cannot read {}: {error}", directory.display()))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let path = entry.path();
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&path).and_then(|file| {
            file.take(MAX_TASK_DEFINITION_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
        });
        match read {
            Ok(_) => images.extend(images_named_in(&bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            // Not a file (a directory named *.json) declares nothing.
            Err(_) if !path.is_file() => {}
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        }
    }
    images.sort();
    images.dedup();
    Ok(images)
}
