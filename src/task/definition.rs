//! Parsing and validating Amazon ECS task-definition JSON into the [`TaskDefinition`] model.
//!
//! Kept apart from the model so that other input formats can map onto the same types.

use crate::task::TaskDefinition;
use std::fmt;

/// A parsed, validated definition plus the warnings (ignored AWS-only keys) met on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDefinition {
    pub definition: TaskDefinition,
    pub warnings: Vec<String>,
}

/// One problem in a task definition, with the JSON path it was found at.
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

/// Parse and validate a task definition, reporting every error at once.
pub fn parse_task_definition(json: &[u8]) -> Result<ParsedDefinition, Vec<ValidationError>> {
    let _ = json;
    todo!()
}

/// Containers in a valid start order (dependencies first), by name.
pub fn start_order(definition: &TaskDefinition) -> Vec<String> {
    let _ = definition;
    todo!()
}
