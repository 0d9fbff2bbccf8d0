//! deckhand: a small, synchronous host agent that runs Amazon ECS task definitions on one host
//! through the Docker Engine and keeps them at the status their owner asked for.

pub mod agent;
pub mod api;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod docker;
pub mod encoding;
pub mod engine;
pub mod event;
/// Entry points of the fuzz targets in `fuzz/`; not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod metrics;
pub mod net;
pub mod ports;
pub mod registry;
pub mod report;
pub mod role_credentials;
pub mod runtime;
pub mod secrets;
pub mod sorting;
pub mod state;
pub mod task;
pub mod text;
pub mod worker_threads;

/// The agent's version, as `deckhand --version` prints it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
