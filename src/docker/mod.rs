//! The blocking Docker Engine client over the Unix socket. It knows nothing of tasks: it speaks
//! containers, images and events, and implements `ContainerRuntime` for the engine.
//!
//! - `transport`: `DOCKER_HOST`, connecting, per-call deadlines;
//! - HTTP/1.1 framing (request, head, bodies, JSON lines) is `net::http1`, shared with the ECS
//!   client; this client sends `Host: docker`;
//! - `negotiation`: which API version to speak;
//! - `wire`: Docker's JSON and its mapping to the runtime types; `create_body` the create
//!   request's, overlays included;
//! - `progress`: whether a pull or import stream succeeded;
//! - `client`: the endpoints, their accepted statuses and their errors.

pub mod client;
pub mod create_body;
pub mod negotiation;
pub mod progress;
pub mod transport;
pub mod wire;

pub use client::DockerClient;
pub use negotiation::{ApiVersion, MAX_API_VERSION, MIN_API_VERSION};
pub use transport::{DockerHost, DEFAULT_DOCKER_HOST};
pub use wire::{EngineVersion, VolumeSummary};
