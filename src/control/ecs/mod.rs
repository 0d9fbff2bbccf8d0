//! The ECS control plane as a desired-state source: the ACS session (`session`, sans-I/O, its
//! messages in `messages`) that turns ECS's websocket messages into tasks to apply and stop.

pub mod messages;
pub mod session;
pub mod session_driver;
