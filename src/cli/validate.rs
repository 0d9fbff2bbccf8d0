//! `deckhand validate FILE` (or `-` for stdin): check a task definition offline, exactly as the
//! agent would on submit, without needing a running agent or Docker.
//!
//! Exit 0 with a one-line summary on stdout and any warnings on stderr; exit 2 with every error on
//! stderr, one per line, each with its JSON path; exit 1 when the file cannot be read.
//!
//! A Compose file is accepted too (by its `.yaml`/`.yml` name or its content), converted as
//! `deckhand convert FILE` prints it; this file also holds that command and the reading of a
//! Compose file's surroundings (its `.env`, its `env_file`s, the environment).

use crate::task::compose::{convert_compose, looks_like_compose, ComposeContext};
use crate::task::{
    check_task_definition, parse_task_definition, start_order, InvalidDefinition, ParsedDefinition,
    ValidationError, MAX_TASK_DEFINITION_BYTES,
};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const USAGE: &str = "usage: deckhand validate FILE   (FILE may be - for standard input)";

/// Exit code for an invalid definition or a usage error.
pub const EXIT_INVALID: u8 = 2;
/// Exit code when the input cannot be read.
pub const EXIT_UNREADABLE: u8 = 1;

/// Runs the command; `args` are the arguments after `validate`.
pub fn run(args: &[String]) -> ExitCode {
    let [source] = args else {
        eprintln!("{USAGE}");
        return ExitCode::from(EXIT_INVALID);
    };
    let input = match read_input(source) {
        Ok(input) => input,
        Err(error) => {
            let name = if source == "-" {
                "standard input"
            } else {
                source
            };
            eprintln!("deckhand validate: cannot read {name}: {error}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    // Write failures (a closed pipe) must not panic the way println! would.
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    match check_input(source, &input).map(|input| input.parsed) {
        Ok(parsed) => {
            for warning in &parsed.warnings {
                let _ = writeln!(stderr, "warning: {warning}");
            }
            let _ = writeln!(stdout, "{}", summary(&parsed));
            ExitCode::SUCCESS
        }
        // The warnings too: an ignored key is worth knowing while the errors are fixed.
        Err(invalid) => {
            for error in &invalid.errors {
                let _ = writeln!(stderr, "error: {error}");
            }
            for warning in &invalid.warnings {
                let _ = writeln!(stderr, "warning: {warning}");
            }
            ExitCode::from(EXIT_INVALID)
        }
    }
}

fn read_input(source: &str) -> std::io::Result<Vec<u8>> {
    if source == "-" {
        let mut input = Vec::new();
        std::io::stdin().lock().read_to_end(&mut input)?;
        Ok(input)
    } else {
        std::fs::read(source)
    }
}

/// `valid: family "web" revision 3, 2 containers, start order: db, web`
pub fn summary(parsed: &ParsedDefinition) -> String {
    let definition = &parsed.definition;
    let revision = if definition.revision == 0 {
        String::new()
    } else {
        format!(" revision {}", definition.revision)
    };
    let count = definition.containers.len();
    let noun = if count == 1 {
        "container"
    } else {
        "containers"
    };
    format!(
        "valid: family {:?}{revision}, {count} {noun}, start order: {}",
        definition.family,
        start_order(definition).join(", ")
    )
}

/// A definition as the agent receives it: task-definition JSON (a Compose file converted) and
/// what it parses to.
#[derive(Debug)]
pub struct Input {
    pub json: Vec<u8>,
    pub parsed: ParsedDefinition,
}

/// [`parse_input`], keeping a task definition's warnings when it also has errors.
pub fn check_input(source: &str, bytes: &[u8]) -> Result<Input, InvalidDefinition> {
    if !looks_like_compose(source, bytes) {
        let parsed = check_task_definition(bytes)?;
        return Ok(Input {
            json: bytes.to_vec(),
            parsed,
        });
    }
    parse_input(source, bytes).map_err(|errors| InvalidDefinition {
        errors,
        warnings: Vec::new(),
    })
}

/// Reads `bytes` (from `source`, a path or `-`) as task-definition JSON or, when it looks like
/// one, as a Compose file in `source`'s directory (the current one for `-`).
pub fn parse_input(source: &str, bytes: &[u8]) -> Result<Input, Vec<ValidationError>> {
    if !looks_like_compose(source, bytes) {
        let parsed = parse_task_definition(bytes)?;
        return Ok(Input {
            json: bytes.to_vec(),
            parsed,
        });
    }
    let current = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let directory = if source == "-" {
        current
    } else {
        match Path::new(source).parent() {
            Some(parent) if !parent.as_os_str().is_empty() => current.join(parent),
            _ => current,
        }
    };
    let context =
        ComposeContext::in_directory(&directory, environment(), &read_text).map_err(|message| {
            vec![ValidationError {
                path: ".env".to_string(),
                message,
            }]
        })?;
    let converted = convert_compose(bytes, &context)?;
    let mut json = serde_json::to_vec_pretty(&converted.json).unwrap_or_default();
    json.push(b'\n');
    Ok(Input {
        json,
        parsed: converted.parsed,
    })
}

/// The process environment; variables whose name or value is not UTF-8 are left out (Compose
/// files are text).
pub fn environment() -> BTreeMap<String, String> {
    crate::sorting::map_of(
        std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        }),
    )
}

/// Reads a text file of at most [`MAX_TASK_DEFINITION_BYTES`] (a `.env` or an `env_file`).
pub fn read_text(path: &Path) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_TASK_DEFINITION_BYTES as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > MAX_TASK_DEFINITION_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_TASK_DEFINITION_BYTES} bytes"),
        ));
    }
    Ok(text)
}

/// `deckhand convert FILE`: the task-definition JSON on stdout, warnings on stderr; exit 2 with
/// every error, exit 1 when FILE cannot be read.
pub fn convert(source: &str) -> ExitCode {
    let input = match read_input(source) {
        Ok(input) => input,
        Err(error) => {
            eprintln!("deckhand convert: cannot read {source}: {error}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    if !looks_like_compose(source, &input) {
        let _ = writeln!(
            stderr,
            "error: {source} is task-definition JSON already (convert reads Compose files)"
        );
        return ExitCode::from(EXIT_INVALID);
    }
    match parse_input(source, &input) {
        Ok(converted) => {
            for warning in &converted.parsed.warnings {
                let _ = writeln!(stderr, "warning: {warning}");
            }
            for container in &converted.parsed.definition.containers {
                if let Some(signal) = &container.stop_signal {
                    let _ = writeln!(
                        stderr,
                        "warning: container {:?}: its stop signal {signal} cannot be written in \
                         an ECS task definition, so this JSON stops it with the image's \
                         STOPSIGNAL; deckhand keeps the signal when it runs the Compose file \
                         itself (tasks.d, deckhand submit)",
                        container.name
                    );
                }
            }
            let _ = stdout.write_all(&converted.json);
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for error in &errors {
                let _ = writeln!(stderr, "error: {error}");
            }
            ExitCode::from(EXIT_INVALID)
        }
    }
}
