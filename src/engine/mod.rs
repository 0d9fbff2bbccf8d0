//! The task engine: the `TaskEngine` that accepts commands, one managed-task thread per task,
//! the pure transition rules, the sequential wait group, the host-resource queue, the Docker events thread, the worker
//! pool that makes Docker calls, and the create requests.

mod accept;
pub mod container_spec;
pub mod docker_events;
pub mod environment_files;
pub mod firelens;
pub mod handle;
pub mod host_resources;
pub mod image_cleanup;
pub mod log_driver;
pub mod managed_task;
pub mod messages;
pub mod reconcile;
pub mod restore;
pub mod sandbox_image;
pub(crate) mod shared;
#[cfg(test)]
mod simulation;
pub mod task_engine;
#[cfg(test)]
pub(crate) mod test_support;
pub mod transition;
pub mod wait_group;
pub mod worker_pool;
pub mod workers;

pub use handle::{EngineError, EngineHandle};
pub use task_engine::{EngineConfig, EngineStartError, TaskEngine};
