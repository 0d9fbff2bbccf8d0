//! Reading the `tasks.d` directory: which entries are task files, each file's content hash and
//! parsed definition (or every error), and the source mark that names a file and its content
//! in the task started from it.
//!
//! Compose files are tasks too: a `*.yaml`/`*.yml` file (its project name defaults to the file's
//! name without the extension, and its `.env` is the directory's, hashed with it), and a subdirectory holding
//! `compose.yaml`, `compose.yml`, `docker-compose.yaml` or `docker-compose.yml` with its own
//! `.env` (its project name defaults to the subdirectory's name). A subdirectory's hash covers
//! the Compose file and its `.env`, so editing either replaces the task.

use crate::task::compose::{convert_compose, ComposeContext};
use crate::task::{
    check_task_definition, parse_task_definition, TaskDefinition, MAX_TASK_DEFINITION_BYTES,
};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::Path;

/// The names of a subdirectory's Compose file, in the order Compose looks for them.
pub const COMPOSE_FILE_NAMES: [&str; 4] = [
    "compose.yaml",
    "compose.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
];

/// Whether a `tasks.d` file name is a task file: `*.json`, `*.yaml` or `*.yml`, not hidden.
pub fn is_task_file_name(name: &str) -> bool {
    !name.starts_with('.')
        && (name.ends_with(".json") || name.ends_with(".yaml") || name.ends_with(".yml"))
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

/// One file as read from the directory: its hash, its definition or every error, and the
/// warnings of a definition that was accepted (a Compose file's conversion warnings, then the
/// task definition's), which the watcher logs once per content.
#[derive(Debug, Clone)]
pub struct FileContent {
    pub hash: u64,
    pub definition: Result<TaskDefinition, Vec<String>>,
    pub warnings: Vec<String>,
}

impl FileContent {
    fn new(hash: u64, read: Result<(TaskDefinition, Vec<String>), Vec<String>>) -> FileContent {
        match read {
            Ok((definition, warnings)) => FileContent {
                hash,
                definition: Ok(definition),
                warnings,
            },
            Err(errors) => FileContent {
                hash,
                definition: Err(errors),
                warnings: Vec::new(),
            },
        }
    }
}

/// Reads every task file (`*.json`, `*.yaml`, `*.yml`) that is a regular, non-hidden file of
/// `directory`, and every non-hidden subdirectory holding a Compose file (named `NAME/`).
/// `Ok(None)`: the directory does not exist.
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
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // Follow symlinks: a link to a definition elsewhere is a task too.
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_file() && is_task_file_name(&name) => {
                files.insert(name, read_file(&path));
            }
            Ok(metadata) if metadata.is_dir() => {
                if let Some(content) = read_compose_directory(&path, &name) {
                    files.insert(format!("{name}/"), content);
                }
            }
            _ => {}
        }
    }
    Ok(Some(files))
}

/// A subdirectory with a Compose file: `None` when it has none (it is not a task).
fn read_compose_directory(path: &Path, name: &str) -> Option<FileContent> {
    let compose = COMPOSE_FILE_NAMES
        .iter()
        .map(|file| path.join(file))
        .find(|file| file.is_file())?;
    let mut bytes = match read_limited(&compose) {
        Ok(bytes) => bytes,
        Err(error) => {
            return Some(FileContent::new(
                0,
                Err(vec![format!("cannot read {}: {error}", compose.display())]),
            ))
        }
    };
    let compose_length = bytes.len();
    // The `.env` is part of what the task is: hash it with the file.
    if let Ok(dot_env) = read_limited(&path.join(".env")) {
        bytes.push(0);
        bytes.extend_from_slice(&dot_env);
    }
    let hash = content_hash(&bytes);
    let bytes = bytes.get(..compose_length).unwrap_or_default();
    Some(FileContent::new(
        hash,
        compose_definition(path, name, bytes),
    ))
}

/// Converts a Compose file found in `directory` into its task definition and warnings;
/// `project` is the project name when the file has no `name:`.
fn compose_definition(
    directory: &Path,
    project: &str,
    bytes: &[u8],
) -> Result<(TaskDefinition, Vec<String>), Vec<String>> {
    let read = |path: &Path| -> io::Result<String> {
        String::from_utf8(read_limited(path)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    };
    // The agent's own COMPOSE_PROJECT_NAME would give every file's project the same name (and
    // the same `<project>_<volume>` volumes): only `name:` or the `.env` beside the file name a
    // project here.
    let environment = crate::sorting::map_of(
        std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .filter(|(name, _)| name != "COMPOSE_PROJECT_NAME"),
    );
    let mut context =
        ComposeContext::in_directory(directory, environment, &read).map_err(|error| vec![error])?;
    context.directory_name = Some(project.to_string());
    convert_compose(bytes, &context)
        .map(|converted| (converted.parsed.definition, converted.parsed.warnings))
        .map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

fn read_limited(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_TASK_DEFINITION_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_TASK_DEFINITION_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than the {MAX_TASK_DEFINITION_BYTES} bytes a task definition may have"),
        ));
    }
    Ok(bytes)
}

fn read_file(path: &Path) -> FileContent {
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|file| {
        file.take(MAX_TASK_DEFINITION_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
    });
    let is_compose = path.extension().is_none_or(|extension| extension != "json");
    let hash = if is_compose {
        // The directory's `.env` is part of what a Compose file's task is: hash it too.
        let mut hashed = bytes.clone();
        if let Ok(dot_env) = read_limited(&path.with_file_name(".env")) {
            hashed.push(0);
            hashed.extend_from_slice(&dot_env);
        }
        content_hash(&hashed)
    } else {
        content_hash(&bytes)
    };
    let definition = match read {
        Err(error) => Err(vec![format!("cannot read the file: {error}")]),
        Ok(_) if bytes.len() > MAX_TASK_DEFINITION_BYTES => Err(vec![format!(
            "larger than the {MAX_TASK_DEFINITION_BYTES} bytes a task definition may have"
        )]),
        Ok(_) if is_compose => {
            // A Compose file: its project name defaults to the file's name.
            let directory = path.parent().unwrap_or(Path::new("/"));
            let project = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            compose_definition(directory, &project, &bytes)
        }
        // An invalid file's log lists the errors, then the warnings, which help fixing it too;
        // a valid one's warnings are logged once per content.
        Ok(_) => check_task_definition(&bytes)
            .map(|parsed| (parsed.definition, parsed.warnings))
            .map_err(|invalid| {
                let errors = invalid.errors.iter().map(ToString::to_string);
                let warnings = invalid
                    .warnings
                    .iter()
                    .map(|warning| format!("warning: {warning}"));
                errors.chain(warnings).collect()
            }),
    };
    FileContent::new(hash, definition)
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
    // Compose files and directories: the images of those that convert (a Compose file being
    // fixed protects nothing until it converts again).
    if let Ok(Some(files)) = read_directory(directory) {
        for (name, content) in files {
            if name.ends_with(".json") {
                continue;
            }
            if let Ok(definition) = content.definition {
                images.extend(definition.containers.iter().map(|c| c.image.clone()));
            }
        }
    }
    crate::sorting::sort(&mut images);
    images.dedup();
    Ok(images)
}
