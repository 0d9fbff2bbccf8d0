//! The task engine: managed tasks, transition rules, the sequential wait group.

pub mod handle;

pub use handle::{EngineError, EngineHandle};
