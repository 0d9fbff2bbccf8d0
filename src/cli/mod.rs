//! The `deckhand` command line: argument parsing, the client commands that talk to the local API
//! (`submit`, `stop`, `ps`, `inspect`, `events`), and offline `validate`.

pub mod args;
pub mod client;
pub mod commands;
pub mod validate;
