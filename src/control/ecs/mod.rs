//! Amazon ECS as a desired-state source: deckhand registered as an external container instance
//! (`ECS_EXTERNAL=true`). This module holds the pieces of that connection; each request ECS gets
//! is built by a pure function here, so its shape is table-tested against ECS's model.

pub mod register;
pub mod report;
