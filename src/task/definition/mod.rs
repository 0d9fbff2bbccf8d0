//! Parsing and validating Amazon ECS task-definition JSON into the [`TaskDefinition`] model.
//!
//! Accepts what users already have: the `register-task-definition --cli-input-json` shape and the
//! output of `describe-task-definition` (`{"taskDefinition": {...}}`). The JSON is walked by hand
//! (not derived) so that every problem is reported at once, each with its JSON path, and so that
//! each key falls in exactly one of three classes:
//! - supported: parsed into the model;
//! - ignored: AWS-only keys that do not change how a container runs on this host (a warning);
//! - unsupported: keys that would change how a container runs but deckhand cannot honour yet. These
//!   are errors, because running a container differently from what was asked is worse than
//!   refusing it. An unsupported key whose value is empty (`null`, `false`, `""`, `[]`, `{}`) asks
//!   for nothing and is only a warning, so CLI skeletons load.
//!
//! Anything else is an unknown key (usually a typo) and an error naming its path.
//!
//! One concern per file: `json.rs` reads typed values with their paths, `keys.rs` holds the key
//! tables, `document.rs` the document and task level, `container.rs` one container,
//! `linux.rs` a container's Linux settings (`ulimits`, `linuxParameters`, DNS, sysctls, …),
//! `firelens.rs` a FireLens router's `firelensConfiguration` and the rules of `awsfirelens`
//! across containers, `resources.rs` a container's `resourceRequirements` (GPUs), `checks.rs`
//! the rules across containers, `order.rs` the start and stop order, `names.rs` names and image
//! references.
//!
//! Kept apart from the model so that other input formats can map onto the same types.

mod checks;
mod container;
mod document;
mod firelens;
mod json;
mod keys;
mod linux;
mod names;
mod order;
mod resources;

pub use container::{
    HealthCheckDefaults, CONTAINER_MEMORY_MIN_MIB, HEALTH_DEFAULTS, HEALTH_INTERVAL_RANGE,
    HEALTH_RETRIES_RANGE, HEALTH_START_PERIOD_RANGE, HEALTH_TIMEOUT_RANGE,
    RESTART_ATTEMPT_PERIOD_DEFAULT, RESTART_ATTEMPT_PERIOD_RANGE, RESTART_MAX_IGNORED_EXIT_CODES,
};
pub use linux::{
    check_security_option, check_system_control, CAPABILITY_NAMES, TMPFS_MOUNT_OPTIONS,
    ULIMIT_NAMES,
};
pub use names::{check_container_name, check_image_reference, template_placeholder};
pub use order::{shutdown_order, start_order};
pub use resources::{parse_gpu_count, MAX_GPUS_PER_CONTAINER};

use crate::task::TaskDefinition;
use json::Parser;
use serde_json::Value;
use std::fmt;

/// Largest task definition deckhand reads, in bytes: the local API's request body limit and the
/// size past which a `tasks.d` file (or a file the CLI submits) is refused unread.
pub const MAX_TASK_DEFINITION_BYTES: usize = 1024 * 1024;

/// A parsed, validated definition plus the warnings (ignored keys) met on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDefinition {
    pub definition: TaskDefinition,
    pub warnings: Vec<String>,
}

/// One problem in a task definition, with the JSON path it was found at (`$` for the document).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for ValidationError {}

/// A definition that does not validate: every error, and the warnings met on the way (an
/// ignored key is still worth knowing about while the errors are being fixed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDefinition {
    pub errors: Vec<ValidationError>,
    pub warnings: Vec<String>,
}

/// Parse and validate a task definition, reporting every error at once.
pub fn parse_task_definition(json: &[u8]) -> Result<ParsedDefinition, Vec<ValidationError>> {
    check_task_definition(json).map_err(|invalid| invalid.errors)
}

/// [`parse_task_definition`], keeping the warnings when there are errors too: what `deckhand
/// validate`, the API's 400 answer and the `tasks.d` log show.
pub fn check_task_definition(json: &[u8]) -> Result<ParsedDefinition, InvalidDefinition> {
    let document: Value = match serde_json::from_slice(json) {
        Ok(document) => document,
        Err(error) => {
            return Err(InvalidDefinition {
                errors: vec![ValidationError {
                    path: "$".to_string(),
                    message: format!("not valid JSON: {error}"),
                }],
                warnings: Vec::new(),
            })
        }
    };
    check_task_definition_document(&document)
}

/// [`check_task_definition`] over a document already read: how another input format (an ECS
/// control-plane task, `task::acs`) mapped onto the `register-task-definition` shape meets the
/// same acceptance rules.
pub fn check_task_definition_document(
    document: &Value,
) -> Result<ParsedDefinition, InvalidDefinition> {
    let mut parser = Parser::default();
    let definition = parser.document(document);
    if parser.errors.is_empty() {
        if let Some(definition) = definition {
            return Ok(ParsedDefinition {
                definition,
                warnings: parser.warnings,
            });
        }
    }
    if parser.errors.is_empty() {
        parser.error("$", "no task definition found");
    }
    Err(InvalidDefinition {
        errors: parser.errors,
        warnings: parser.warnings,
    })
}

#[cfg(test)]
#[rustfmt::skip] // The tables read best one case per line.
mod tests;
