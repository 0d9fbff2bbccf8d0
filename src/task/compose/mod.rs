//! Compose files as tasks: one Compose project becomes one ECS task definition.
//!
//! The Compose file is read into a tree of YAML nodes with their lines (`node.rs`, serde-saphyr),
//! interpolated (`${VAR}` from the environment and the `.env` beside the file, `values.rs`), its
//! services' `extends` resolved (`extends.rs`), and mapped key by key onto the ECS task-definition JSON (`service/`, one file per key family). That JSON then goes through
//! [`parse_task_definition`](super::parse_task_definition) like any other definition, so a
//! converted file obeys every rule a hand-written one does, and `deckhand convert` prints exactly
//! what the agent runs.
//!
//! Each Compose key is mapped, ignored with a warning (it changes nothing on this host), or
//! refused with an error naming its YAML path and line: running a service differently from what
//! its file asks is worse than refusing it. Every error is reported at once.
//!
//! No I/O here: the caller supplies the variables, the `.env` text and a reader for `env_file`.

mod extends;
mod node;
mod service;
mod values;

#[cfg(test)]
#[rustfmt::skip]
mod tests;

use super::definition::{parse_task_definition, ParsedDefinition, ValidationError};
use node::{Node, Value};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Reads a file (the caller's I/O: this module does none).
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

/// What a Compose file needs from outside itself.
pub struct ComposeContext<'a> {
    /// The process environment (it wins over `.env`, as in Compose).
    pub environment: BTreeMap<String, String>,
    /// The text of the `.env` file beside the Compose file, if there is one.
    pub dot_env: Option<String>,
    /// The name of the directory holding the Compose file: the family when there is no `name:`.
    pub directory_name: Option<String>,
    /// The absolute directory holding the Compose file: relative bind mounts and `env_file`s
    /// are resolved against it. `None` refuses relative bind mounts.
    pub directory: Option<PathBuf>,
    /// Reads an `env_file` (given its path joined to `directory`).
    pub read_file: ReadFile<'a>,
}

impl<'a> ComposeContext<'a> {
    /// The context of a Compose file in `directory` (absolute): its `.env`, read with `read_file`
    /// (a missing one is no `.env`), and the directory's name.
    pub fn in_directory(
        directory: &Path,
        environment: BTreeMap<String, String>,
        read_file: ReadFile<'a>,
    ) -> Result<Self, String> {
        let dot_env = match read_file(&directory.join(".env")) {
            Ok(text) => Some(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => {
                return Err(format!(
                    "cannot read {}: {error}",
                    directory.join(".env").display()
                ))
            }
        };
        Ok(ComposeContext {
            environment,
            dot_env,
            directory_name: directory
                .file_name()
                .map(|name| name.to_string_lossy().into_owned()),
            directory: Some(directory.to_path_buf()),
            read_file,
        })
    }
}

/// A Compose file converted: the ECS task-definition JSON, the parsed definition, and the
/// warnings of both steps. The parsed definition may carry more than the JSON can say: a
/// container's stop signal (`stop_signal`), which ECS task definitions have no field for.
#[derive(Debug, Clone)]
pub struct ConvertedCompose {
    pub json: Json,
    pub parsed: ParsedDefinition,
}

/// Whether `name` and `bytes` look like a Compose file rather than task-definition JSON: a
/// `.yaml`/`.yml` name, or content that does not start with `{`.
pub fn looks_like_compose(name: &str, bytes: &[u8]) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".yaml") || lower.ends_with(".yml") {
        return true;
    }
    if lower.ends_with(".json") {
        return false;
    }
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    match text.iter().find(|byte| !byte.is_ascii_whitespace()) {
        Some(b'{') | None => false,
        Some(_) => true,
    }
}

/// Converts a Compose file into an ECS task definition, reporting every problem at once.
pub fn convert_compose(
    bytes: &[u8],
    context: &ComposeContext<'_>,
) -> Result<ConvertedCompose, Vec<ValidationError>> {
    let mut mapper = Mapper::new(context);
    let json = mapper.convert(bytes);
    if !mapper.errors.is_empty() {
        return Err(mapper.errors);
    }
    let Some(json) = json else {
        return Err(vec![ValidationError {
            path: "$".to_string(),
            message: "no services".to_string(),
        }]);
    };
    let text = serde_json::to_vec(&json).unwrap_or_default();
    match parse_task_definition(&text) {
        Ok(mut parsed) => {
            for (name, signal) in mapper.stop_signals {
                if let Some(container) = parsed
                    .definition
                    .containers
                    .iter_mut()
                    .find(|container| container.name == name)
                {
                    container.stop_signal = Some(signal);
                }
            }
            let mut warnings = mapper.warnings;
            warnings.append(&mut parsed.warnings);
            parsed.warnings = warnings;
            Ok(ConvertedCompose { json, parsed })
        }
        // A rule of the task definition this mapping did not foresee: name the ECS path, and say
        // that it is about the converted definition.
        Err(errors) => Err(errors
            .into_iter()
            .map(|error| ValidationError {
                path: format!("converted task definition {}", error.path),
                message: error.message,
            })
            .collect()),
    }
}

/// Walks the Compose document, collecting the JSON, warnings and errors.
struct Mapper<'a> {
    context: &'a ComposeContext<'a>,
    variables: BTreeMap<String, String>,
    errors: Vec<ValidationError>,
    warnings: Vec<String>,
    /// `(container name, signal)` of each service with a `stop_signal` other than SIGTERM:
    /// set on the parsed definition, since ECS's JSON has no field for it.
    stop_signals: Vec<(String, String)>,
}

/// A YAML path plus the line, as errors print it: `services.web.build (line 4)`.
fn at(path: &str, line: u64) -> String {
    if line == 0 {
        path.to_string()
    } else {
        format!("{path} (line {line})")
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The top-level keys and what becomes of them.
const TOP_LEVEL_KEYS: &[&str] = &[
    "name", "version", "services", "volumes", "networks", "secrets", "configs", "include",
];

impl<'a> Mapper<'a> {
    fn new(context: &'a ComposeContext<'a>) -> Self {
        Mapper {
            context,
            variables: BTreeMap::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            stop_signals: Vec::new(),
        }
    }

    fn error(&mut self, path: &str, line: u64, message: impl Into<String>) {
        self.errors.push(ValidationError {
            path: at(path, line),
            message: message.into(),
        });
    }

    fn warn(&mut self, path: &str, line: u64, message: impl AsRef<str>) {
        self.warnings
            .push(format!("{}: {}", at(path, line), message.as_ref()));
    }

    fn convert(&mut self, bytes: &[u8]) -> Option<Json> {
        let Ok(text) = std::str::from_utf8(bytes) else {
            self.error("$", 0, "not UTF-8 text");
            return None;
        };
        let mut document = match node::parse_document(text) {
            Ok(document) => document,
            Err((message, line)) => {
                self.error("$", line, format!("not valid YAML: {message}"));
                return None;
            }
        };
        self.load_variables();
        self.interpolate_tree(&mut document, "");
        let Value::Mapping(entries) = &document.value else {
            self.error(
                "$",
                document.line,
                "a Compose file is a mapping with services:",
            );
            return None;
        };
        for (key, line, value) in entries {
            if key.starts_with("x-") || key == "version" || key == "name" || key == "services" {
                continue;
            }
            match key.as_str() {
                "volumes" => {} // Read with the services that use them.
                "networks" => self.check_networks(value),
                "secrets" | "configs" => self.refuse_if_set(
                    key,
                    *line,
                    value,
                    "ECS secrets and configs come from AWS services deckhand does not use; \
                     mount the file with a bind volume instead",
                ),
                "include" => self.error(
                    key,
                    *line,
                    "include is not supported: deckhand reads one Compose file",
                ),
                _ => self.error(
                    key,
                    *line,
                    format!(
                        "unknown top-level key (expected one of {})",
                        TOP_LEVEL_KEYS.join(", ")
                    ),
                ),
            }
        }
        let family = self.family(&document);
        let mut services = match document.get("services") {
            Some(Node {
                value: Value::Mapping(services),
                ..
            }) if !services.is_empty() => services.clone(),
            Some(other) => {
                self.error(
                    "services",
                    other.line,
                    "must be a mapping of at least one service",
                );
                return None;
            }
            None => {
                self.error("services", document.line, "required");
                return None;
            }
        };
        let failed = extends::resolve(self, &mut services);
        let top_volumes = document.get("volumes").cloned();
        let mut task = service::TaskBuilder::new(&family, top_volumes);
        task.map_services(self, &services, &failed);
        let mut object = Map::new();
        object.insert("family".to_string(), json!(family));
        object.insert("networkMode".to_string(), json!(task.network_mode));
        if !task.volumes.is_empty() {
            object.insert("volumes".to_string(), Json::Array(task.volumes.clone()));
        }
        if let Some(pid) = &task.pid_mode {
            object.insert("pidMode".to_string(), json!(pid));
        }
        if let Some(ipc) = &task.ipc_mode {
            object.insert("ipcMode".to_string(), json!(ipc));
        }
        object.insert(
            "containerDefinitions".to_string(),
            Json::Array(task.containers.clone()),
        );
        Some(Json::Object(object))
    }

    /// The environment wins over `.env`, as in Compose.
    fn load_variables(&mut self) {
        if let Some(text) = &self.context.dot_env {
            // `.env` values may refer to the environment and to the lines above.
            match values::parse_env_file(text, &self.context.environment) {
                Ok(file) => {
                    for name in file.unset {
                        self.warn(
                            ".env",
                            0,
                            format!("variable {name} is not set; using an empty string"),
                        );
                    }
                    for (key, value) in file.entries {
                        if let Some(value) = value {
                            self.variables.insert(key, value);
                        }
                    }
                }
                Err(error) => self.error(".env", 0, error),
            }
        }
        for (key, value) in &self.context.environment {
            self.variables.insert(key.clone(), value.clone());
        }
    }

    /// Interpolates every string of the document in place (not keys, not `x-` extensions).
    fn interpolate_tree(&mut self, node: &mut Node, path: &str) {
        let line = node.line;
        match &mut node.value {
            Value::String(text) => match values::interpolate(text, &self.variables) {
                Ok(done) => {
                    for name in done.unset {
                        self.warn(
                            path,
                            line,
                            format!("variable {name} is not set; using an empty string"),
                        );
                    }
                    *text = done.text;
                }
                Err(message) => self.error(path, line, message),
            },
            Value::Sequence(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    self.interpolate_tree(item, &format!("{path}[{index}]"));
                }
            }
            Value::Mapping(entries) => {
                for (key, _, value) in entries.iter_mut() {
                    if key.starts_with("x-") {
                        continue;
                    }
                    let child = join(path, key);
                    self.interpolate_tree(value, &child);
                }
            }
            _ => {}
        }
    }

    /// The project name, in Compose's order: `COMPOSE_PROJECT_NAME` (the environment, else the
    /// `.env`), else `name:`, else the directory's name; normalised as Compose does.
    fn family(&mut self, document: &Node) -> String {
        let from_variable = self
            .variable("COMPOSE_PROJECT_NAME")
            .filter(|name| !name.is_empty())
            .map(str::to_string);
        let (source, path, line, what) = match (from_variable, document.get("name")) {
            (Some(name), _) => (name, "COMPOSE_PROJECT_NAME", 0, "COMPOSE_PROJECT_NAME"),
            (None, Some(node)) => (
                node.scalar_text().unwrap_or_default(),
                "name",
                node.line,
                "the project name",
            ),
            (None, None) => (
                self.context.directory_name.clone().unwrap_or_default(),
                "name",
                0,
                "",
            ),
        };
        let family = values::normalise_project_name(&source);
        if family.is_empty() {
            if what.is_empty() {
                self.error(
                    path,
                    line,
                    "no project name: give name: (the directory's name is not usable)",
                );
            } else {
                self.error(path, line, format!("{what} has no letter or digit"));
            }
        }
        crate::text::truncate_chars(&family, 255).to_string()
    }

    fn check_networks(&mut self, networks: &Node) {
        let Value::Mapping(entries) = &networks.value else {
            if networks.value != Value::Null {
                self.error("networks", networks.line, "must be a mapping");
            }
            return;
        };
        for (name, line, value) in entries {
            let empty = matches!(&value.value, Value::Null)
                || matches!(&value.value, Value::Mapping(m) if m.is_empty());
            if name != "default" || !empty {
                self.error(
                    &join("networks", name),
                    *line,
                    "user-defined networks are not supported: a task's services share Docker's \
                     bridge and reach the services they depend on by name",
                );
            }
        }
    }

    fn refuse_if_set(&mut self, path: &str, line: u64, value: &Node, message: &str) {
        let empty = match &value.value {
            Value::Null => true,
            Value::Sequence(items) => items.is_empty(),
            Value::Mapping(entries) => entries.is_empty(),
            _ => false,
        };
        if !empty {
            self.error(path, line, message);
        }
    }

    /// An `env_file`, relative to the Compose file's directory.
    fn read_env_file(&mut self, file: &str, path: &str, line: u64) -> Option<String> {
        let full = match &self.context.directory {
            Some(directory) => directory.join(file),
            None => PathBuf::from(file),
        };
        match (self.context.read_file)(&full) {
            Ok(text) => Some(text),
            Err(error) => {
                self.error(
                    path,
                    line,
                    format!("cannot read env_file {file:?}: {error}"),
                );
                None
            }
        }
    }

    fn directory(&self) -> Option<String> {
        self.context
            .directory
            .as_ref()
            .map(|directory| directory.to_string_lossy().into_owned())
    }

    fn variable(&self, name: &str) -> Option<&str> {
        self.variables.get(name).map(String::as_str)
    }
}
