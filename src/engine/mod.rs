//! The task engine: managed tasks, transition rules, the sequential wait group.

pub mod handle;
pub mod transition;

pub use handle::{EngineError, EngineHandle};
