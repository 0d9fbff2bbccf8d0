//! The task model (pure): statuses, task and container types, parsing and validating ECS
//! task-definition JSON, dependency rules and status derivation. No I/O here.

pub mod acs;
pub mod compose;
pub mod definition;
pub mod definition_model;
pub mod environment_files;
pub mod firelens;
pub mod labels;
pub mod metadata_endpoint;
pub mod model;
pub mod reason;
pub mod sandbox;
pub mod settings;
pub mod status;
pub mod time;
pub mod volumes;

pub use definition::{
    check_task_definition, parse_task_definition, shutdown_order, start_order, InvalidDefinition,
    ParsedDefinition, ValidationError, MAX_TASK_DEFINITION_BYTES,
};
pub use model::*;
pub use status::{ContainerStatus, TaskStatus};
