//! Desired-state sources other than the local API: the `tasks.d` directory today, a remote
//! control plane later. Each maps its input onto the engine's two commands (submit, stop).

pub mod aws;
pub mod ecs;
pub mod task_roles;
pub mod tasks_d;
