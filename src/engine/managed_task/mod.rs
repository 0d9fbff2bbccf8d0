//! One managed task: the sans-I/O state machine that owns a task's statuses (`machine`), and the
//! thread that feeds it inputs and performs its effects (`driver`). The messages it exchanges
//! with the other threads live in `engine::messages`.

mod calls;
mod driver;
mod machine;
#[cfg(test)]
mod tests;

pub use crate::engine::messages::{
    DesiredCommand, DockerCall, Effect, Input, OwnerCommand, Reported, TaskRoute, TimerKind,
    TransitionOutput,
};
pub use crate::engine::transition::classify_error;
pub(crate) use driver::run_managed_task;
#[cfg(test)]
pub(crate) use driver::test_hooks;
pub use driver::TaskInboxes;
pub use machine::{
    parse_docker_time, parse_docker_time_nanos, status_from_inspect, ManagedTask,
    ManagedTaskSettings, Phase, CANNOT_START_EXIT_CODE, DOCKER_EVENT_INBOX_CAPACITY,
};
